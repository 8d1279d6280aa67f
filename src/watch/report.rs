//! What a round announces: one [`Event`] per change the round made to the
//! checkpoint, then the NICs plugged without one.

use std::collections::{BTreeMap, BTreeSet};

use super::event::Event;
use super::hotplug::Synced;
use super::vmm::device_id;
use crate::apply::late::Change;
use crate::model::Description;
use crate::state::{Checkpoint, SandboxId};

/// What a round ended with.
pub(super) struct Outcome<'a> {
    /// The attachment watched.
    pub(super) id: &'a SandboxId,
    /// Its checkpoint after the round.
    pub(super) cp: &'a Checkpoint,
    /// What the VMM was asked.
    pub(super) synced: &'a Synced,
    /// Every device unplugged this round.
    pub(super) unplugged: &'a BTreeSet<String>,
}

impl Outcome<'_> {
    /// Announce the round's changes, then the NICs plugged without one. A
    /// refused interface goes into `refused` (not tried again under its name).
    pub(super) fn report(
        &self,
        changes: Vec<Change>,
        refused: &mut BTreeMap<u32, String>,
        emit: &mut dyn FnMut(&Event),
    ) {
        let replugged = self.replugged(&changes);
        let rev = revision(self.cp.description());
        for change in changes {
            self.announce(change, rev, refused, emit);
        }
        let adopted = self.synced.adopted.iter().cloned();
        for (id, interface, device) in replugged.into_iter().chain(adopted) {
            emit(&Event::Plugged {
                id,
                interface,
                device,
            });
        }
    }

    /// Late NICs plugged now that no `added` announces (a restart after a
    /// watch died between building one and plugging it): (id, interface, device).
    fn replugged(&self, changes: &[Change]) -> Vec<(String, String, String)> {
        let reported: BTreeSet<&str> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Added(nic) => Some(nic.tap.name.as_str()),
                _ => None,
            })
            .collect();
        self.synced
            .plugged
            .iter()
            .filter(|(tap, _)| !reported.contains(tap.as_str()))
            .filter_map(|(tap, device)| {
                let nic = self.cp.plan.nics.iter().find(|n| n.tap.name == *tap)?;
                Some((self.id.to_string(), nic.pod.name.clone(), device.clone()))
            })
            .collect()
    }

    /// The event of one change.
    fn announce(
        &self,
        change: Change,
        rev: u64,
        refused: &mut BTreeMap<u32, String>,
        emit: &mut dyn FnMut(&Event),
    ) {
        match change {
            Change::Added(nic) => {
                let Some(iface) = self
                    .cp
                    .description()
                    .and_then(|d| d.interfaces.iter().find(|i| i.ifindex == nic.pod.ifindex))
                else {
                    return;
                };
                emit(&Event::Added {
                    interface: iface.name.clone(),
                    ifindex: nic.pod.ifindex,
                    tap: nic.tap.name.clone(),
                    wiring: nic.wiring,
                    device: self.synced.plugged.get(&nic.tap.name).cloned(),
                    revision: rev,
                    nic: Box::new(iface.clone()),
                });
            }
            Change::Removed(nic) => {
                let device = device_id(&nic.tap.name);
                let device = self.unplugged.contains(&device).then_some(device);
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
                refused.insert(ifindex, interface.clone());
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
            Change::Repaired {
                interface,
                problems,
            } => emit(&Event::Repaired {
                interface,
                problems,
            }),
        }
    }
}

/// The attachment's revision in `desc` (0 before the first).
pub(super) fn revision(desc: Option<&Description>) -> u64 {
    desc.and_then(|d| d.attachment.as_ref())
        .map_or(0, |a| a.revision)
}
