//! One round: unplug what left, bring the checkpoint up to date under the
//! locks (`sync.rs`), put the VMM in step (`hotplug.rs`), and announce what
//! changed as [`Event`]s.

use std::collections::BTreeSet;

use super::backoff::ROUND;
use super::hotplug::Synced;
use super::vmm::device_id;
use super::{revision, Event, Watcher};
use crate::apply::late::Change;
use crate::error::Result;
use crate::state::Checkpoint;

impl Watcher<'_> {
    /// One round; `false`: the attachment is gone.
    pub(super) fn round(&mut self, first: bool, emit: &mut dyn FnMut(&Event)) -> Result<bool> {
        let mut unplugged = self.unplug_departed(emit);
        let (cp, changes, others) = match self.reconcile(first) {
            Ok(Some(done)) => done,
            Ok(None) => return Ok(false),
            Err(e) if !first => {
                if self.backoff.due(ROUND) {
                    emit(&Event::Error {
                        interface: None,
                        error: e.to_string(),
                    });
                }
                self.backoff.failed(ROUND);
                // Only a checkpoint that is gone ends the watch; a lock held
                // long or a file unreadable just now is tried again.
                return Ok(self.state.file(self.id).exists());
            }
            Err(e) => return Err(e),
        };
        self.backoff.succeeded(ROUND);
        let removed: BTreeSet<String> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Removed(nic) => Some(device_id(&nic.tap.name)),
                _ => None,
            })
            .collect();
        let synced = self.sync(&cp, &others, &removed, emit);
        unplugged.extend(synced.unplugged.iter().cloned());
        self.report(&cp, changes, &synced, &unplugged, emit);
        self.last = Some(cp);
        Ok(true)
    }

    /// Announce the round's changes, then the NICs plugged without one.
    fn report(
        &mut self,
        cp: &Checkpoint,
        changes: Vec<Change>,
        synced: &Synced,
        unplugged: &BTreeSet<String>,
        emit: &mut dyn FnMut(&Event),
    ) {
        let replugged = self.replugged(cp, &changes, synced);
        let rev = revision(cp.description.as_ref());
        for change in changes {
            self.announce(cp, change, rev, synced, unplugged, emit);
        }
        for (id, interface, device) in replugged.into_iter().chain(synced.adopted.clone()) {
            emit(&Event::Plugged {
                id,
                interface,
                device,
            });
        }
    }

    /// Late NICs plugged now that no `added` announces (a restart after a
    /// watch died between building one and plugging it): (id, interface, device).
    fn replugged(
        &self,
        cp: &Checkpoint,
        changes: &[Change],
        synced: &Synced,
    ) -> Vec<(String, String, String)> {
        let reported: BTreeSet<&str> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Added(nic) => Some(nic.tap.name.as_str()),
                _ => None,
            })
            .collect();
        synced
            .plugged
            .iter()
            .filter(|(tap, _)| !reported.contains(tap.as_str()))
            .filter_map(|(tap, device)| {
                let nic = cp.plan.nics.iter().find(|n| n.tap.name == *tap)?;
                Some((self.id.to_string(), nic.pod.name.clone(), device.clone()))
            })
            .collect()
    }

    /// The event of one change (a refused interface is not tried again
    /// under its name).
    fn announce(
        &mut self,
        cp: &Checkpoint,
        change: Change,
        rev: u64,
        synced: &Synced,
        unplugged: &BTreeSet<String>,
        emit: &mut dyn FnMut(&Event),
    ) {
        match change {
            Change::Added(nic) => {
                let Some(iface) = cp
                    .description
                    .as_ref()
                    .and_then(|d| d.interfaces.iter().find(|i| i.ifindex == nic.pod.ifindex))
                else {
                    return;
                };
                emit(&Event::Added {
                    interface: iface.name.clone(),
                    ifindex: nic.pod.ifindex,
                    tap: nic.tap.name.clone(),
                    wiring: nic.wiring,
                    device: synced.plugged.get(&nic.tap.name).cloned(),
                    revision: rev,
                    nic: Box::new(iface.clone()),
                });
            }
            Change::Removed(nic) => {
                let device = device_id(&nic.tap.name);
                let device = unplugged.contains(&device).then_some(device);
                emit(&Event::Removed {
                    interface: nic.pod.name.clone(),
                    ifindex: nic.pod.ifindex,
                    tap: nic.tap.name.clone(),
                    device,
                    revision: rev,
                });
            }
            Change::Refused {
                interface,
                ifindex,
                why,
            } => {
                self.refused.insert(ifindex, interface.clone());
                emit(&Event::Refused {
                    interface,
                    ifindex,
                    error: why,
                });
            }
            Change::Revised(interfaces) => emit(&Event::Changed {
                interfaces,
                revision: rev,
            }),
        }
    }
}
