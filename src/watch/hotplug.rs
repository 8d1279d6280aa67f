//! Hotplug: put the VMM in step with the checkpoint. Plug every wanted NIC
//! it lacks (or whose TAP was replaced), unplug the podtap devices nothing
//! wants any more, and unplug departed NICs before their TAPs are undone.
//! The VMM's devices are read afresh each time. Level-triggered: what fails
//! is tried again after a backoff (`backoff.rs`), whatever wakes the rounds
//! in between.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::backoff::{Backoff, VMM};
use super::event::Event;
use super::vmm::{device_id, tap_of, VmmClient};
use super::wanted::{plug, wanted, Wanted};
use crate::error::Error;
use crate::kernel::netns::NetNs;
use crate::state::{Checkpoint, SandboxId, StateDir};

/// The VMM of one watch, and what that watch plugged into it.
pub(super) struct Hotplug {
    vmm: Box<dyn VmmClient>,
    /// The attachment watched.
    id: SandboxId,
    /// The TAP ifindex each device was plugged with by this watch (a TAP
    /// replaced under the same name needs its device plugged again).
    plugged_at: BTreeMap<String, u32>,
    /// What failed (listing the devices, a device), and when to try it again.
    pub(super) backoff: Backoff,
}

/// What [`Hotplug::sync`] did.
#[derive(Default)]
pub(super) struct Synced {
    /// This attachment's TAPs plugged now, with their device ids.
    pub(super) plugged: BTreeMap<String, String>,
    /// Other attachments' NICs plugged now: (id, interface, device).
    pub(super) adopted: Vec<(String, String, String)>,
    /// Devices unplugged now.
    pub(super) unplugged: BTreeSet<String>,
}

impl Hotplug {
    /// Drive `vmm` for the watch of `id`.
    pub(super) fn new(vmm: Box<dyn VmmClient>, id: &SandboxId) -> Self {
        Hotplug {
            vmm,
            id: id.clone(),
            plugged_at: BTreeMap::new(),
            backoff: Backoff::default(),
        }
    }

    /// Put the VMM in step (see the module): `cp`'s TAPs live in `ns`.
    /// `removed`: the devices of NICs this round removed (announced by
    /// their `removed`).
    pub(super) fn sync(
        &mut self,
        ns: &NetNs,
        cp: &Checkpoint,
        others: &[(SandboxId, Checkpoint)],
        removed: &BTreeSet<String>,
        emit: &mut dyn FnMut(&Event),
    ) -> Synced {
        let mut synced = Synced::default();
        if let Some(present) = self.present(emit) {
            let wanted = wanted(&self.id, cp, others);
            for w in &wanted {
                self.plug_wanted(ns, w, &present, emit, &mut synced);
            }
            let keep = keep(&wanted, cp, others);
            for device in present.difference(&keep) {
                self.unplug_unwanted(device, removed, emit, &mut synced);
            }
        }
        synced
    }

    /// The podtap devices the VMM has now; `None` when it cannot be asked
    /// (now, or yet).
    fn present(&mut self, emit: &mut dyn FnMut(&Event)) -> Option<BTreeSet<String>> {
        if !self.backoff.due(VMM) {
            return None;
        }
        match self.vmm.devices() {
            Ok(d) => {
                self.backoff.succeeded(VMM);
                Some(d.into_iter().filter(|d| tap_of(d).is_some()).collect())
            }
            Err(e) => {
                emit(&Event::Error {
                    interface: None,
                    error: format!("list the VMM's devices: {e}"),
                });
                self.backoff.failed(VMM);
                None
            }
        }
    }

    /// Plug `w` unless the VMM has it (with the same TAP) or it waits out a backoff.
    fn plug_wanted(
        &mut self,
        ns: &NetNs,
        w: &Wanted,
        present: &BTreeSet<String>,
        emit: &mut dyn FnMut(&Event),
        synced: &mut Synced,
    ) {
        let device = device_id(&w.tap);
        let replaced = self
            .plugged_at
            .get(&device)
            .is_some_and(|at| *at != w.tap_ifindex);
        if present.contains(&device) && !replaced {
            self.plugged_at.entry(device).or_insert(w.tap_ifindex);
            return;
        }
        if !self.backoff.due(&device) {
            return;
        }
        let vmm = self.vmm.as_ref();
        let result = if present.contains(&device) {
            vmm.unplug(&device)
                .map_err(|e| Error::io("unplug", PathBuf::from(&device), e))
                .and_then(|()| plug(vmm, ns, w, &device))
        } else {
            plug(vmm, ns, w, &device)
        };
        match result {
            Ok(()) => {
                self.backoff.succeeded(&device);
                self.plugged_at.insert(device.clone(), w.tap_ifindex);
                if w.id == self.id {
                    synced.plugged.insert(w.tap.clone(), device);
                } else {
                    synced
                        .adopted
                        .push((w.id.to_string(), w.interface(), device));
                }
            }
            Err(e) => {
                emit(&Event::Error {
                    interface: None,
                    error: e.to_string(),
                });
                self.backoff.failed(&device);
            }
        }
    }

    /// Unplug `device`, which no attachment wants any more.
    fn unplug_unwanted(
        &mut self,
        device: &String,
        removed: &BTreeSet<String>,
        emit: &mut dyn FnMut(&Event),
        synced: &mut Synced,
    ) {
        if !self.backoff.due(device) {
            return;
        }
        match self.vmm.unplug(device) {
            Ok(()) => {
                self.backoff.succeeded(device);
                self.plugged_at.remove(device);
                synced.unplugged.insert(device.clone());
                if !removed.contains(device) {
                    emit(&Event::Unplugged {
                        device: device.clone(),
                    });
                }
            }
            Err(e) => {
                emit(&Event::Error {
                    interface: None,
                    error: format!("unplug {device}: {e}"),
                });
                self.backoff.failed(device);
            }
        }
    }

    /// Unplug the hotplugged NICs whose pod interface has left, before their
    /// TAPs are undone. Returns the devices unplugged.
    pub(super) fn unplug_departed(
        &mut self,
        state: &StateDir,
        ns: &NetNs,
        emit: &mut dyn FnMut(&Event),
    ) -> BTreeSet<String> {
        let mut done = BTreeSet::new();
        let Ok(Some(cp)) = state.load(&self.id) else {
            return done;
        };
        let Ok(present) = ns.run(|| {
            Ok(nix::net::if_::if_nameindex()
                .map(|list| list.iter().map(|i| i.index()).collect::<BTreeSet<u32>>())
                .unwrap_or_default())
        }) else {
            return done;
        };
        let departed: Vec<_> = cp
            .plan
            .nics
            .iter()
            .filter(|n| !present.contains(&n.pod.ifindex) && cp.late.contains(&n.tap.name))
            .collect();
        if departed.is_empty() {
            return done;
        }
        let devices = self.vmm.devices().ok();
        for nic in departed {
            let device = device_id(&nic.tap.name);
            if devices.as_ref().is_some_and(|d| !d.contains(&device)) {
                continue;
            }
            match self.vmm.unplug(&device) {
                Ok(()) => {
                    self.plugged_at.remove(&device);
                    done.insert(device);
                }
                Err(e) => emit(&Event::Error {
                    interface: Some(nic.pod.name.clone()),
                    error: format!("unplug {device}: {e}"),
                }),
            }
        }
        done
    }
}

/// The devices to keep: what is wanted, and every TAP any attachment in
/// this netns still has (a device of a TAP that still exists may be
/// another watch's).
fn keep(
    wanted: &[Wanted],
    cp: &Checkpoint,
    others: &[(SandboxId, Checkpoint)],
) -> BTreeSet<String> {
    let mut keep: BTreeSet<String> = wanted.iter().map(|w| device_id(&w.tap)).collect();
    let all = others
        .iter()
        .filter_map(|(_, other)| other.description())
        .chain(cp.description());
    for desc in all {
        keep.extend(desc.attached().map(|(_, tap)| device_id(&tap.name)));
    }
    keep
}
