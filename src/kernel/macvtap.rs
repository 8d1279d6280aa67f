//! macvtap links and their character devices.
//!
//! A macvtap is a macvlan whose packets go to a character device instead of
//! the stack. The kernel names that device `/dev/tap<ifindex>`, but an
//! ifindex is only unique within one netns: two pods whose macvtaps share an
//! ifindex would share one devtmpfs name, and whichever came second gets no
//! node at all. podtap therefore reads the device number from the macvtap's
//! sysfs entry (as seen from the pod netns) and makes its own node,
//! `/dev/podtap/<id>/<name>`, owned by the TAP owner.
//!
//! Every open of the node is one queue (up to 256), and a new queue starts
//! with `IFF_TAP | IFF_NO_PI | IFF_VNET_HDR`; `TUNSETIFF` on the fd sets the
//! vnet_hdr and multi-queue flags (the name in the request is ignored).

use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use nix::unistd::{chown, Gid, Uid};
use rtnetlink::packet_route::link::MacVtapMode;
use rtnetlink::{Handle, LinkMacVtap};

use super::errno::syscall;
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
pub async fn create(
    handle: &Handle,
    name: &str,
    lower: u32,
    mtu: u32,
    group: u32,
) -> Result<(), KernelError> {
    let msg = LinkMacVtap::new(name, lower, MacVtapMode::Passthrough)
        .mtu(mtu)
        .link_group(group)
        .build();
    Ok(handle.link().add(msg).execute().await?)
}

/// The `(major, minor)` of each macvtap's character device, by
/// `(name, ifindex)`. Must run on a thread inside the macvtaps' netns
/// ([`NetNs::run`](super::netns::NetNs::run)).
///
/// sysfs shows the net devices of the netns that mounted it, so the thread
/// takes a private mount namespace and mounts a sysfs of its own on `/sys`
/// (as `ip netns exec` does). The mount goes away with the thread.
pub fn device_numbers(links: &[(String, u32)]) -> io::Result<Vec<(u64, u64)>> {
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
    .map_err(|e| syscall("mount sysfs", e))?;
    links
        .iter()
        .map(|(name, ifindex)| {
            let file = format!("/sys/class/net/{name}/macvtap/tap{ifindex}/dev");
            let text = fs::read_to_string(&file)
                .map_err(|e| io::Error::new(e.kind(), format!("{file}: {e}")))?;
            parse_dev(&text).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{file}: {text:?} is not MAJOR:MINOR"),
                )
            })
        })
        .collect()
}

/// `"246:1\n"` → `(246, 1)`.
fn parse_dev(text: &str) -> Option<(u64, u64)> {
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Make the node `path` for device `(major, minor)`, mode 0600 (0660 with a
/// group), owned by `owner` (root when none). Its directory is made 0755.
pub fn make_node(
    path: &Path,
    (major, minor): (u64, u64),
    owner: Option<u32>,
    group: Option<u32>,
) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
    }
    let mode = if group.is_some() { 0o660 } else { 0o600 };
    // A node left by an attach that died before recording is replaced.
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    mknod(
        path,
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(mode),
        makedev(major, minor),
    )?;
    // mknod(2) applies the umask: set the mode exactly.
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    chown(path, owner.map(Uid::from_raw), group.map(Gid::from_raw))?;
    Ok(())
}

/// Remove sandbox `id`'s node directory: only character devices in it, then
/// the directory (left in place if something else is in it). Nothing there is
/// not an error.
pub fn remove_nodes(id: &str) -> io::Result<()> {
    let dir = Path::new(DEV_DIR).join(id);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_char_device() {
            fs::remove_file(entry.path())?;
        }
    }
    match fs::remove_dir(&dir) {
        Err(e) if e.kind() != io::ErrorKind::DirectoryNotEmpty => Err(e),
        _ => Ok(()),
    }
}

/// Whether `path` is a character device (not following symlinks).
pub fn is_node(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// Open `queues` queues of the macvtap behind `node` with `flags`, and
/// return them with the name of the macvtap the kernel says they belong to.
pub fn open_queues(
    node: &Path,
    flags: TapFlags,
    queues: u32,
) -> io::Result<(Vec<OwnedFd>, String)> {
    let meta = fs::symlink_metadata(node)?;
    if !meta.file_type().is_char_device() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a character device", node.display()),
        ));
    }
    let mut name = String::new();
    let mut fds = Vec::new();
    for _ in 0..queues {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(node)?;
        if file.metadata()?.rdev() != meta.rdev() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} changed while it was opened", node.display()),
            ));
        }
        tap::set_flags(file.as_raw_fd(), flags)?;
        // Every queue is the same device (same rdev): ask its name once.
        if name.is_empty() {
            name = tap::name_of(file.as_raw_fd())?;
        }
        fds.push(file.into());
    }
    Ok((fds, name))
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
    fn nodes_live_in_the_sandbox_directory() {
        assert_eq!(
            node_path("pod-1", "tap0_eth0"),
            Path::new("/dev/podtap/pod-1/tap0_eth0")
        );
    }
}
