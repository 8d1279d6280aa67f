//! Opening the queues of the TAPs (and macvtaps) attach built, inside their
//! pod netns, each proven to be the recorded link; and vhost-net fds.

use std::fs::OpenOptions;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Input, Result};
use crate::kernel::macvtap;
use crate::kernel::netns::NetNs;
use crate::kernel::tap::{open_queues, TapFlags};
use crate::model::Description;

/// The vhost-net character device QEMU's `vhostfds=` wants.
const VHOST_NET: &str = "/dev/vhost-net";

/// One list of open queue fds per attached interface, in description order.
pub(crate) fn open_tap_fds(id: &str, ns: &NetNs, desc: &Description) -> Result<Vec<Vec<OwnedFd>>> {
    let taps: Vec<Queues> = desc
        .attached()
        .map(|(_, tap)| Queues {
            name: tap.name.clone(),
            flags: TapFlags {
                vnet_hdr: tap.vnet_hdr,
                multi_queue: tap.multi_queue,
            },
            queues: tap.queues,
            ifindex: tap.ifindex,
            device: tap.device.clone(),
        })
        .collect();
    if taps.is_empty() {
        return Err(crate::render::RenderError::NoAttachedInterfaces.into());
    }
    // The netns thread reports which TAP failed next to the errno.
    let opened = ns.run(|| Ok(open_all(&taps)))?;
    opened.map_err(|failure| failure.into_error(id, ns))
}

/// On the netns thread: open every queue of every TAP, each proven to be
/// the recorded link.
fn open_all(taps: &[Queues]) -> std::result::Result<Vec<Vec<OwnedFd>>, Opened> {
    let mut all = Vec::with_capacity(taps.len());
    // A macvtap's node is checked against its live device number in sysfs.
    if taps.iter().any(|q| q.device.is_some()) {
        if let Err(e) = macvtap::private_sysfs() {
            return Err(Opened::Failed("(sysfs)".into(), 0, e));
        }
    }
    for q in taps {
        match q.open() {
            Ok((fds, owner)) => {
                // A link of that name made by someone else since attach is not ours.
                let now = nix::net::if_::if_nametoindex(owner.as_str()).ok();
                if owner != q.name || now != Some(q.ifindex) {
                    return Err(Opened::Replaced(q.name.clone(), q.ifindex, now));
                }
                all.push(fds);
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return Err(Opened::Stale(e)),
            Err(e) => return Err(Opened::Failed(q.name.clone(), q.queues, e)),
        }
    }
    Ok(all)
}

/// The queues to open of one attached interface's TAP or macvtap.
struct Queues {
    name: String,
    flags: TapFlags,
    queues: u32,
    ifindex: u32,
    /// A macvtap's device node; `None` for a TAP (opened by name).
    device: Option<String>,
}

impl Queues {
    /// Open every queue; also return the link name the kernel says they belong to.
    fn open(&self) -> std::io::Result<(Vec<OwnedFd>, String)> {
        match &self.device {
            Some(node) => macvtap::open_queues(
                Path::new(node),
                (&self.name, self.ifindex),
                self.flags,
                self.queues,
            ),
            None => {
                open_queues(&self.name, self.flags, self.queues).map(|f| (f, self.name.clone()))
            }
        }
    }
}

/// Why a TAP could not be handed over.
enum Opened {
    /// Opening its queues failed.
    Failed(String, u32, std::io::Error),
    /// The name now belongs to another link than the recorded TAP.
    Replaced(String, u32, Option<u32>),
    /// A macvtap's node is not its device (any more).
    Stale(std::io::Error),
}

impl Opened {
    fn into_error(self, id: &str, ns: &NetNs) -> Error {
        match self {
            Opened::Failed(name, queues, e) => Error::kernel(
                &ns.display(),
                "open the queues of TAP",
                format!("{name} ({queues} queue(s))"),
                e,
            ),
            Opened::Stale(e) => Error::CheckFailed {
                id: id.into(),
                problems: vec![e.to_string()],
            },
            Opened::Replaced(name, recorded, now) => Error::CheckFailed {
                id: id.into(),
                problems: vec![format!(
                    "TAP {name} is now ifindex {}, but attach recorded {recorded} (it was replaced; detach and attach again)",
                    now.map_or_else(|| "none".into(), |i| i.to_string())
                )],
            },
        }
    }
}

/// One `/dev/vhost-net` fd per TAP queue.
pub(super) fn open_vhost_fds(taps: &[Vec<OwnedFd>]) -> Result<Vec<Vec<OwnedFd>>> {
    if !Path::new(VHOST_NET).exists() {
        return Err(Error::invalid(
            Input::VhostNet,
            format!("{VHOST_NET} does not exist here (the vhost_net module is not loaded)"),
        ));
    }
    taps.iter()
        .map(|queues| {
            queues
                .iter()
                .map(|_| {
                    OpenOptions::new()
                        .read(true)
                        .write(true)
                        .custom_flags(libc::O_CLOEXEC)
                        .open(VHOST_NET)
                        .map(OwnedFd::from)
                        .map_err(|e| Error::io("open", VHOST_NET, e))
                })
                .collect()
        })
        .collect()
}
