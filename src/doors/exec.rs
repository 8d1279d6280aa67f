//! `podtap exec`: hand TAP fds to a VMM, or run a command inside the pod netns.
//!
//! Two ways to start a VMM on the TAPs `attach` built for sandbox `ID`:
//!
//! - `--vmm qemu|cloud-hypervisor` (fd handover): podtap opens every queue of
//!   every TAP inside the pod netns (a TAP fd keeps its netns for life; a
//!   macvtap's queues are opens of its `tap.device` node), plus
//!   one `/dev/vhost-net` fd per queue with `--vhost` (QEMU only), leaves those
//!   fds open across exec, appends the matching fd arguments to `argv`
//!   (`-netdev tap,fds=…[,vhostfds=…]` + `-device …` for QEMU, `--net fd=[…],…`
//!   for Cloud Hypervisor) and execs `argv` in the caller's own netns. The
//!   VMM then needs neither the pod netns nor the right to open
//!   `/dev/net/tun`.
//! - `--enter-netns`: exec `argv` unchanged inside the pod netns, for VMMs
//!   that open TAPs by name (Firecracker and its jailer, QEMU `ifname=`).
//!
//! Either way the command inherits stdio and the handed-over fds only
//! (everything else podtap inherited is closed across the exec), and with
//! `--user UID[:GID]` it runs as that user with no capabilities
//! ([`exec_confine`](super::exec_confine)).
//!
//! Exit codes: on success the process *is* the VMM, so its exit status is the
//! VMM's. Before the exec, podtap's documented codes apply (14 no checkpoint,
//! 3 netns gone, 12 the netns path now names another netns (or a TAP or
//! macvtap node is not the recorded one any more), 13 invalid
//! options such as `--vhost` without `/dev/vhost-net`, 10 a TAP queue could
//! not be opened, 15 the renderer refused). If the exec itself fails (command
//! not found, not executable), podtap prints one line and exits 1.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::sched::{setns, CloneFlags};

use super::exec_confine::{confine, RunAs};
use crate::error::{Error, Result};
use crate::kernel::macvtap;
use crate::kernel::netns::NetNs;
use crate::kernel::tap::{open_queues, TapFlags};
use crate::model::Description;
use crate::render::{cloud_hypervisor_net_args, qemu_args, QemuTapSource};
use crate::state::{SandboxId, StateDir};

/// The vhost-net character device QEMU's `vhostfds=` wants.
pub const VHOST_NET: &str = "/dev/vhost-net";

/// Which VMM's fd arguments to append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Vmm {
    Qemu,
    CloudHypervisor,
}

/// Run `argv` per the options, as `user` when given
/// ([`confine`](super::exec_confine::confine)); returns only on error (exec
/// replaces the process).
pub fn exec(
    id: &SandboxId,
    state: &StateDir,
    (vmm, vhost, enter_netns): (Option<Vmm>, bool, bool),
    user: Option<RunAs>,
    argv: &[String],
) -> Result<i32> {
    if argv.is_empty() {
        return Err(Error::Invalid("exec: no command given after --".into()));
    }
    let desc = state.description(id)?;
    // The cookie too (issue 28): (dev, inode) alone can name a newer netns.
    state.prove_netns(id)?;
    let id = id.as_str();
    if enter_netns {
        if vmm.is_some() || vhost {
            return Err(Error::Invalid(
                "exec: --enter-netns runs the command unchanged; it takes no --vmm or --vhost"
                    .into(),
            ));
        }
        enter_pod_netns(id, &desc)?;
        confine(&[], user)?;
        return Err(exec_argv(argv, &[]));
    }
    let vmm = vmm.ok_or_else(|| {
        Error::Invalid("exec: give --vmm qemu|cloud-hypervisor, or --enter-netns".into())
    })?;
    let handover = open_handover(id, &desc, vmm, vhost)?;
    let keep: Vec<_> = handover.fds.iter().map(AsFd::as_fd).collect();
    confine(&keep, user)?;
    // The fds stay open (owned by `handover`) until the exec replaces the
    // process; if the exec fails they close when this function returns.
    Err(exec_argv(argv, &handover.args))
}

/// TAP queue fds (and `/dev/vhost-net` fds) opened for a VMM, without
/// close-on-exec, and the VMM arguments that name them.
#[derive(Debug)]
pub struct Handover {
    /// Append these to the VMM's argv.
    pub args: Vec<String>,
    /// Kept open for the child; closed on drop.
    fds: Vec<OwnedFd>,
}

impl Handover {
    /// Close the fds in this process (after the VMM was spawned).
    pub fn close(self) {
        drop(self.fds);
    }
}

/// Open every TAP queue of `desc` inside its (verified) pod netns, plus one
/// `/dev/vhost-net` fd per queue when `vhost`, clear FD_CLOEXEC on them and
/// render the matching `vmm` arguments.
pub fn open_handover(id: &str, desc: &Description, vmm: Vmm, vhost: bool) -> Result<Handover> {
    if vhost && vmm != Vmm::Qemu {
        return Err(Error::Invalid(
            "exec: --vhost is for QEMU (Cloud Hypervisor runs its own virtio-net backend)".into(),
        ));
    }
    let ns = open_recorded_netns(id, desc)?;
    let taps = open_tap_fds(id, &ns, desc)?;
    let vhosts = if vhost {
        open_vhost_fds(&taps)?
    } else {
        Vec::new()
    };
    for fd in taps.iter().chain(&vhosts).flatten() {
        inherit_across_exec(fd)?;
    }
    let args = handover_args(desc, vmm, &raw(&taps), &raw(&vhosts))?;
    Ok(Handover {
        args,
        fds: taps.into_iter().chain(vhosts).flatten().collect(),
    })
}

/// The arguments to append for `vmm`, given the open fds (`taps[n]`: one fd per
/// queue of NIC n; `vhost` empty or one list per NIC).
pub fn handover_args(
    desc: &Description,
    vmm: Vmm,
    taps: &[Vec<i32>],
    vhost: &[Vec<i32>],
) -> Result<Vec<String>> {
    let render_err = Error::Render;
    match vmm {
        Vmm::Qemu => qemu_args(
            desc,
            &QemuTapSource::Fds {
                taps: taps.to_vec(),
                vhost: vhost.to_vec(),
            },
        )
        .map_err(render_err),
        Vmm::CloudHypervisor => Ok(cloud_hypervisor_net_args(desc, Some(taps))
            .map_err(render_err)?
            .into_iter()
            .flat_map(|value| ["--net".to_string(), value])
            .collect()),
    }
}

/// Open the netns the description names and make sure it is still the one
/// attach recorded (a pod restart can reuse the path for a new netns).
fn open_recorded_netns(id: &str, desc: &Description) -> Result<NetNs> {
    let path = Path::new(&desc.netns.path);
    // attach already applied the host-netns rule; the recorded identity is checked below.
    let ns = NetNs::open(path, true)?;
    check_identity(id, desc, ns.identity())?;
    Ok(ns)
}

fn check_identity(id: &str, desc: &Description, (dev, inode): (u64, u64)) -> Result<()> {
    if (dev, inode) == (desc.netns.dev, desc.netns.inode) {
        return Ok(());
    }
    Err(Error::CheckFailed {
        id: id.into(),
        problems: format!(
            "netns {} is now inode {inode} dev {dev}, but attach recorded inode {} dev {} \
             (the pod netns was replaced; detach and attach again)",
            desc.netns.path, desc.netns.inode, desc.netns.dev
        ),
    })
}

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
        return Err(Error::Invalid(format!(
            "exec: the description of netns {} has no TAPs",
            desc.netns.path
        )));
    }
    // The netns thread reports which TAP failed next to the errno.
    let opened = ns.run(|| {
        let mut all = Vec::with_capacity(taps.len());
        // A macvtap's node is checked against its live device number in sysfs.
        if taps.iter().any(|q| q.device.is_some()) {
            if let Err(e) = macvtap::private_sysfs() {
                return Ok(Err(Opened::Failed("(sysfs)".into(), 0, e)));
            }
        }
        for q in &taps {
            match q.open() {
                Ok((fds, owner)) => {
                    // A link of that name made by someone else since attach is not ours.
                    let now = nix::net::if_::if_nametoindex(owner.as_str()).ok();
                    if owner != q.name || now != Some(q.ifindex) {
                        return Ok(Err(Opened::Replaced(q.name.clone(), q.ifindex, now)));
                    }
                    all.push(fds);
                }
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Ok(Err(Opened::Stale(e)))
                }
                Err(e) => return Ok(Err(Opened::Failed(q.name.clone(), q.queues, e))),
            }
        }
        Ok(Ok(all))
    })?;
    opened.map_err(|failure| match failure {
        Opened::Failed(name, queues, e) => Error::kernel(
            &ns.display(),
            format!("open {queues} queue(s) of TAP"),
            format!("{name} (is a VMM already holding it?)"),
            e,
        ),
        Opened::Stale(e) => Error::CheckFailed {
            id: id.into(),
            problems: e.to_string(),
        },
        Opened::Replaced(name, recorded, now) => Error::CheckFailed {
            id: id.into(),
            problems: format!(
                "TAP {name} is now ifindex {}, but attach recorded {recorded} (it was replaced; detach and attach again)",
                now.map_or_else(|| "none".into(), |i| i.to_string())
            ),
        },
    })
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

/// One `/dev/vhost-net` fd per TAP queue.
fn open_vhost_fds(taps: &[Vec<OwnedFd>]) -> Result<Vec<Vec<OwnedFd>>> {
    if !Path::new(VHOST_NET).exists() {
        return Err(Error::Invalid(format!(
            "exec: --vhost needs {VHOST_NET}, which does not exist here \
             (load the vhost_net module, or drop --vhost)"
        )));
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

/// Clear FD_CLOEXEC so the fd survives the exec into the VMM.
fn inherit_across_exec(fd: &OwnedFd) -> Result<()> {
    fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::empty()))
        .map(drop)
        .map_err(|e| {
            Error::io(
                "clear FD_CLOEXEC on",
                PathBuf::from(format!("fd {}", fd.as_raw_fd())),
                e.into(),
            )
        })
}

fn raw(lists: &[Vec<OwnedFd>]) -> Vec<Vec<i32>> {
    lists
        .iter()
        .map(|fds| fds.iter().map(AsRawFd::as_raw_fd).collect())
        .collect()
}

/// Move this process into the pod netns before exec.
///
/// `NetNs::run` (a fresh thread) is the rule everywhere else, because
/// `setns(2)` changes only the calling thread. Here the calling thread is
/// the one about to exec: `podtap exec` starts no tokio runtime and no other
/// thread before this point, and the exec replaces the whole process with
/// the command, which then runs entirely in the pod netns.
fn enter_pod_netns(id: &str, desc: &Description) -> Result<()> {
    let ns = open_recorded_netns(id, desc)?;
    let file = File::open(ns.path()).map_err(|e| Error::io("netns", ns.path(), e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io("netns", ns.path(), e))?;
    // The path could have been re-pointed between the two opens.
    check_identity(id, desc, (meta.dev(), meta.ino()))?;
    setns(file.as_fd(), CloneFlags::CLONE_NEWNET)
        .map_err(|e| Error::kernel(&ns.display(), "enter netns", "", e))
}

/// execvp `argv` + `extra`; returns only the error (exit code 1).
fn exec_argv(argv: &[String], extra: &[String]) -> Error {
    let Some((program, args)) = argv.split_first() else {
        return Error::Invalid("exec: no command given after --".into());
    };
    let e = std::process::Command::new(program)
        .args(args)
        .args(extra)
        .exec();
    // Not Error::io: a permission error here is still "exec failed" (exit 1).
    Error::Io {
        what: "exec",
        path: PathBuf::from(program),
        source: io::Error::new(e.kind(), e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixture;

    /// eth0: 1 queue, net1: 2 queues (MTU 9000, so Cloud Hypervisor accepts both).
    fn desc_with_taps() -> Description {
        let mut desc = fixture::pod();
        fixture::set_queues(&mut desc, "net1", 2);
        fixture::interface_mut(&mut desc, "eth0").mtu = 1500;
        desc
    }

    #[test]
    fn qemu_gets_fds_and_vhostfds() {
        let desc = desc_with_taps();
        let args = handover_args(
            &desc,
            Vmm::Qemu,
            &[vec![3], vec![4, 5]],
            &[vec![6], vec![7, 8]],
        )
        .unwrap();
        assert_eq!(args[0], "-netdev");
        assert_eq!(args[1], "tap,id=net0,fd=3,vhostfd=6");
        assert_eq!(args[5], "tap,id=net1,fds=4:5,vhostfds=7:8");
        assert!(args[7].contains("mq=on,vectors=6"));
    }

    #[test]
    fn cloud_hypervisor_gets_one_net_flag_per_value() {
        let desc = desc_with_taps();
        let args = handover_args(&desc, Vmm::CloudHypervisor, &[vec![3], vec![4, 5]], &[]).unwrap();
        assert_eq!(args.len(), 4);
        assert_eq!(args[0], "--net");
        assert!(args[1].starts_with("fd=[3],"), "{}", args[1]);
        assert_eq!(args[2], "--net");
        assert!(args[3].starts_with("fd=[4,5],"), "{}", args[3]);
        assert!(args[3].contains("num_queues=4"), "{}", args[3]);
    }

    #[test]
    fn wrong_fd_counts_are_render_errors() {
        let desc = desc_with_taps();
        let err = handover_args(&desc, Vmm::Qemu, &[vec![3], vec![4]], &[]).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::RENDER);
    }

    #[test]
    fn a_replaced_netns_is_refused() {
        let desc = desc_with_taps();
        assert!(check_identity("x", &desc, (4, 4026532000)).is_ok());
        let err = check_identity("x", &desc, (4, 4026532001)).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::CHECK_FAILED);
        assert!(err.to_string().contains("replaced"), "{err}");
    }

    #[test]
    fn a_missing_command_exits_1() {
        let err = exec_argv(&["/nonexistent/podtap-no-such-vmm".into()], &[]);
        assert_eq!(err.exit_code(), crate::error::exit::FAILURE);
        assert!(err.to_string().starts_with("exec /nonexistent/"), "{err}");
    }
}
