//! macvtap links and their character devices.
//!
//! A macvtap is a macvlan whose packets go to a character device instead of
//! the stack. The kernel names that device `/dev/tap<ifindex>`, but an
//! ifindex is only unique within one netns: two pods whose macvtaps share an
//! ifindex would share one devtmpfs name, and whichever came second gets no
//! node at all. podtap therefore reads the device number from the macvtap's
//! sysfs entry (as seen from the pod netns) and makes its own node,
//! `/dev/podtap/<id>/<name>`, owned by the TAP owner, in directories only
//! root may enter (0700, proven by fstat; [`private_dir`](super::private_dir)).
//!
//! A node is a device number, and a number is reused: once a macvtap is
//! gone, the next macvtap made anywhere on the node may get its minor. So a
//! node is proven again right before every open: a character device whose
//! number is the one the live macvtap (recorded name and ifindex, read from
//! sysfs inside the pod netns) has now; a stale node is refused, never
//! opened.
//!
//! Every open of the node is one queue (up to 256), and a new queue starts
//! with `IFF_TAP | IFF_NO_PI | IFF_VNET_HDR`; `TUNSETIFF` on the fd sets the
//! vnet_hdr and multi-queue flags (the name in the request is ignored).

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{open, openat, AtFlags, OFlag};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::{fchmodat, fstat, fstatat, makedev, mknodat, FchmodatFlags, Mode, SFlag};
use nix::unistd::{fchownat, unlinkat, Gid, Uid, UnlinkatFlags};
use rtnetlink::packet_route::link::MacVtapMode;
use rtnetlink::LinkMacVtap;

use super::batch::Batch;
use super::errno::syscall;
use super::private_dir;
use super::tap::{self, TapFlags};
use crate::error::KernelError;

/// Where podtap makes the character device nodes of its macvtaps.
pub const DEV_DIR: &str = "/dev/podtap";

/// The node of macvtap `name` of sandbox `id`.
pub fn node_path(id: &str, name: &str) -> PathBuf {
    Path::new(DEV_DIR).join(id).join(name)
}

/// Create a passthru macvtap `name` on `lower` with `mtu`, in `group`. It
/// stays down and unmarked; [`configure_tap`](super::links::configure_tap)
/// marks it and brings it up.
///
/// Passthru: the macvtap takes the lower's MAC (so the guest keeps the pod's
/// address) and every frame the lower receives. Bringing it up makes the
/// kernel set the lower promiscuous; deleting it undoes that.
pub fn create(
    batch: &Batch,
    name: &str,
    lower: u32,
    mtu: u32,
    group: u32,
) -> Result<(), KernelError> {
    let msg = LinkMacVtap::new(name, lower, MacVtapMode::Passthrough)
        .mtu(mtu)
        .link_group(group)
        .build();
    super::links::add(batch, msg)
}

/// The `(major, minor)` of each macvtap's character device, by
/// `(name, ifindex)`. Must run on a thread inside the macvtaps' netns
/// ([`NetNs::run`](super::netns::NetNs::run)).
pub fn device_numbers(links: &[(String, u32)]) -> io::Result<Vec<(u64, u64)>> {
    private_sysfs()?;
    links
        .iter()
        .map(|(name, ifindex)| live_device(name, *ifindex))
        .collect()
}

/// Give the calling thread a sysfs of its netns: sysfs shows the net devices
/// of the netns that mounted it, so the thread takes a private mount
/// namespace and mounts a sysfs of its own on `/sys` (as `ip netns exec`
/// does). The mount goes away with the thread.
pub fn private_sysfs() -> io::Result<()> {
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| syscall("unshare(CLONE_NEWNS)", e))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| syscall("make / private", e))?;
    // Lazily: the old sysfs may be busy in this mount namespace.
    umount2("/sys", MntFlags::MNT_DETACH).map_err(|e| syscall("umount /sys", e))?;
    mount(
        Some("sysfs"),
        "/sys",
        Some("sysfs"),
        MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|e| syscall("mount sysfs", e))
}

/// The device number macvtap `name` with `ifindex` has now, read from the
/// thread's own sysfs ([`private_sysfs`]): the `tap<ifindex>` entry exists
/// only under the macvtap of that name and ifindex.
pub fn live_device(name: &str, ifindex: u32) -> io::Result<(u64, u64)> {
    let file = format!("/sys/class/net/{name}/macvtap/tap{ifindex}/dev");
    // A sysfs attribute is one page at most.
    let text =
        fs::read_to_string(&file).map_err(|e| io::Error::new(e.kind(), format!("{file}: {e}")))?;
    parse_dev(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{file}: {text:?} is not MAJOR:MINOR"),
        )
    })
}

/// `"246:1\n"` → `(246, 1)`.
fn parse_dev(text: &str) -> Option<(u64, u64)> {
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The sandbox id and file name of a node podtap names
/// (`/dev/podtap/<id>/<name>`); any other path is refused.
fn split_node(path: &Path) -> io::Result<(String, String)> {
    let parts: Option<Vec<&str>> = path
        .strip_prefix(DEV_DIR)
        .ok()
        .map(|rest| {
            rest.components()
                .map(|c| match c {
                    Component::Normal(s) => s.to_str(),
                    _ => None,
                })
                .collect::<Option<Vec<&str>>>()
        })
        .unwrap_or_default();
    match parts.as_deref() {
        Some([id, name]) => Ok(((*id).to_string(), (*name).to_string())),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a node podtap makes ({DEV_DIR}/<id>/<name>)",
                path.display()
            ),
        )),
    }
}

/// `/dev/podtap/<id>`, opened and proven root-only (made when `create`).
fn sandbox_dir(id: &str, create: bool) -> io::Result<Option<(OwnedFd, OwnedFd)>> {
    let (parent, top) = DEV_DIR.rsplit_once('/').unwrap_or(("/dev", "podtap"));
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let dev = open(parent, flags, Mode::empty())
        .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("open {parent}: {e}")))?;
    let Some(top) = private_dir::open(&dev, top, create)? else {
        return Ok(None);
    };
    Ok(private_dir::open(&top, id, create)?.map(|dir| (top, dir)))
}

/// Make the node `path` for device `(major, minor)`, mode 0600 (0660 with a
/// group), owned by `owner` (root when none), in root-only directories.
pub fn make_node(
    path: &Path,
    (major, minor): (u64, u64),
    owner: Option<u32>,
    group: Option<u32>,
) -> io::Result<()> {
    let (id, name) = split_node(path)?;
    let Some((_, dir)) = sandbox_dir(&id, true)? else {
        return Err(io::Error::other(format!("{DEV_DIR}/{id} was not made")));
    };
    let mode = Mode::from_bits_truncate(if group.is_some() { 0o660 } else { 0o600 });
    let step =
        |what: &str, e: Errno| io::Error::new(io::Error::from(e).kind(), format!("{what}: {e}"));
    // A node left by an attach that died before recording is replaced.
    match unlinkat(&dir, name.as_str(), UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => {}
        Err(e) => return Err(step("unlink the old node", e)),
    }
    mknodat(
        &dir,
        name.as_str(),
        SFlag::S_IFCHR,
        mode,
        makedev(major, minor),
    )
    .map_err(|e| step("mknod", e))?;
    // mknod(2) applies the umask: set the mode exactly. Only root can
    // change the directory, so the name is still the node just made.
    fchmodat(&dir, name.as_str(), mode, FchmodatFlags::FollowSymlink)
        .map_err(|e| step("chmod", e))?;
    fchownat(
        &dir,
        name.as_str(),
        owner.map(Uid::from_raw),
        group.map(Gid::from_raw),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(|e| step("chown", e))
}

/// Remove sandbox `id`'s node directory: only character devices in it, then
/// the directory (left in place if something else is in it). Nothing there is
/// not an error; a directory that is not root's is refused, untouched.
pub fn remove_nodes(id: &str) -> io::Result<()> {
    let Some((top, dir)) = sandbox_dir(id, false)? else {
        return Ok(());
    };
    let listing = format!("/proc/self/fd/{}", dir.as_raw_fd());
    for entry in fs::read_dir(&listing)? {
        let entry = entry?;
        let name = entry.file_name();
        let st = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFCHR.bits() {
            unlinkat(&dir, name.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
        }
    }
    match unlinkat(&top, id, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOTEMPTY) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether `path` is a character device (not following symlinks).
pub fn is_node(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// Open `queues` queues of macvtap `name` (`ifindex`) through its node
/// `node` with `flags`, and return them with the name of the macvtap the
/// kernel says they belong to. Runs on a thread inside the macvtap's netns
/// that called [`private_sysfs`].
///
/// The node is proven first: its directories root's (0700), the node a
/// character device (`O_NOFOLLOW`, no symlink) whose number is the live
/// macvtap's; a stale node (its number now another macvtap's, or nobody's)
/// is an [`io::ErrorKind::InvalidData`] error and is never opened.
pub fn open_queues(
    node: &Path,
    (name, ifindex): (&str, u32),
    flags: TapFlags,
    queues: u32,
) -> io::Result<(Vec<OwnedFd>, String)> {
    let (id, file) = split_node(node)?;
    let Some((_, dir)) = sandbox_dir(&id, false)? else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{DEV_DIR}/{id} does not exist"),
        ));
    };
    let (major, minor) = live_device(name, ifindex)?;
    let want = makedev(major, minor);
    let st = fstatat(&dir, file.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
    let is_char = st.st_mode & SFlag::S_IFMT.bits() == SFlag::S_IFCHR.bits();
    if !is_char || st.st_rdev != want {
        return Err(stale(
            node,
            is_char.then_some(st.st_rdev),
            name,
            ifindex,
            (major, minor),
        ));
    }
    let mut kernel_name = String::new();
    let mut fds = Vec::new();
    for _ in 0..queues {
        let fd = openat(
            &dir,
            file.as_str(),
            OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        if fstat(&fd)?.st_rdev != want {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} changed while it was opened", node.display()),
            ));
        }
        tap::set_flags(fd.as_raw_fd(), flags)?;
        // Every queue is the same device (same rdev): ask its name once.
        if kernel_name.is_empty() {
            kernel_name = tap::name_of(fd.as_raw_fd())?;
        }
        fds.push(fd);
    }
    Ok((fds, kernel_name))
}

fn stale(node: &Path, has: Option<u64>, name: &str, ifindex: u32, live: (u64, u64)) -> io::Error {
    let has = has.map_or_else(
        || "not a character device".to_string(),
        |d| {
            format!(
                "device {}:{}",
                nix::sys::stat::major(d),
                nix::sys::stat::minor(d)
            )
        },
    );
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "stale device node {}: it is {has}, but macvtap {name} (ifindex {ifindex}) is {}:{}; \
             not opened (detach and attach again)",
            node.display(),
            live.0,
            live.1
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_are_parsed_from_sysfs_text() {
        assert_eq!(parse_dev("246:1\n"), Some((246, 1)));
        assert_eq!(parse_dev("246"), None);
        assert_eq!(parse_dev("a:1"), None);
    }

    #[test]
    fn only_podtap_node_paths_are_split() {
        let (id, name) = split_node(&node_path("pod-1", "tap0_eth0")).unwrap();
        assert_eq!((id.as_str(), name.as_str()), ("pod-1", "tap0_eth0"));
        for bad in [
            "/dev/podtap/a",
            "/dev/podtap/a/../b",
            "/tmp/a/b",
            "/dev/podtap/a/b/c",
        ] {
            assert!(split_node(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn nodes_live_in_the_sandbox_directory() {
        assert_eq!(
            node_path("pod-1", "tap0_eth0"),
            Path::new("/dev/podtap/pod-1/tap0_eth0")
        );
    }
}
