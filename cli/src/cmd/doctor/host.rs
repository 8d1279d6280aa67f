//! Probes of the node outside any netns: privileges, device nodes, netns
//! cookies, the state dir, the CNI dirs. Each returns what it saw; the
//! judging is in [`super::checks`].

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use serde_json::Value;

use super::checks::Probe;
use podtap::state::StateDir;

/// `CapEff` of this process, from `/proc/self/status`.
pub fn cap_eff() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| v.trim().to_string())
}

/// Open a device node read-write (as a VMM or podtap would) and close it again.
pub fn open_device(path: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// `SO_NETNS_COOKIE` (Linux 5.14+) on a fresh socket.
pub fn netns_cookie() -> Probe {
    const SO_NETNS_COOKIE: libc::c_int = 71;
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a new socket this process owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut cookie: u64 = 0;
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<u64>()).unwrap_or(8);
    // SAFETY: cookie and len are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            std::ptr::addr_of_mut!(cookie).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(format!("SO_NETNS_COOKIE works (this netns: {cookie})"))
    } else {
        Err(format!(
            "SO_NETNS_COOKIE: {}; a reused netns is told apart by inode only",
            std::io::Error::last_os_error()
        ))
    }
}

/// podtap's links that no checkpoint in `dir` records, in every netns of
/// the node ([`podtap::check::orphans`]).
pub fn orphans(dir: &Path) -> Probe {
    let found = podtap::check::orphans(&StateDir::new(dir)).map_err(|e| e.to_string())?;
    if found.is_empty() {
        return Ok("no link of podtap's without a checkpoint on this node".into());
    }
    let list: Vec<String> = found
        .iter()
        .map(|o| format!("{} in {} (id {})", o.link, o.netns.display(), o.id))
        .collect();
    Err(format!(
        "{} orphan link(s): {}",
        found.len(),
        list.join(", ")
    ))
}

/// The state dir: the same trust rule every command applies (exit 16).
pub fn state_dir_trust(dir: &Path) -> Probe {
    match StateDir::new(dir).check() {
        Ok(true) => Ok(format!(
            "{}: owned by this user, not writable by group or others",
            dir.display()
        )),
        Ok(false) => Ok(format!(
            "{}: not there yet; attach creates it (mode 0700)",
            dir.display()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// The filesystem the state dir lives on (or would: its nearest existing parent).
pub fn state_dir_fs(dir: &Path) -> Probe {
    let mut at = dir;
    while !at.exists() {
        at = at.parent().unwrap_or(Path::new("/"));
    }
    let fs = nix::sys::statfs::statfs(at)
        .map_err(|e| format!("statfs {}: {e}", at.display()))?
        .filesystem_type();
    if fs == nix::sys::statfs::TMPFS_MAGIC {
        Ok(format!(
            "{}: tmpfs, like the netns it describes",
            at.display()
        ))
    } else {
        Err(format!(
            "{}: filesystem {:#x}, not tmpfs: checkpoints outlive a reboot that the netns do not",
            at.display(),
            fs.0
        ))
    }
}

/// The CNI bin dir, and whether podtap is installed in it.
pub fn cni_bin(dir: &Path) -> Probe {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("podtap");
    match std::fs::metadata(&bin) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => {
            Ok(format!("{} is installed", bin.display()))
        }
        Ok(_) => Err(format!("{} is not an executable file", bin.display())),
        Err(e) if dir.is_dir() => Err(format!("{}: {e}", bin.display())),
        Err(_) => Err(format!("{}: no such directory", dir.display())),
    }
}

/// Each network configuration of the CNI conf dir, and whether podtap is
/// chained in it; the one pods use decides (the first, or on a Multus node
/// the cluster network Multus delegates to).
pub fn cni_conf(dir: &Path) -> Probe {
    let primary = crate::cni_install::chain_target(dir).map_err(|e| e.to_string())?;
    let files =
        crate::cni_install::conf_files(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut seen = Vec::new();
    let mut primary_chained = false;
    for file in files.iter().take(32) {
        let chained = read_conf(file).map(|v| is_chained(&v));
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let said = match &chained {
            Ok(true) => "podtap chained".to_string(),
            Ok(false) => "podtap not chained".to_string(),
            Err(why) => why.clone(),
        };
        if *file == primary {
            primary_chained = chained == Ok(true);
            seen.push(format!("{name} (used): {said}"));
        } else {
            seen.push(format!("{name}: {said}"));
        }
    }
    let text = format!("{}: {}", dir.display(), seen.join("; "));
    if primary_chained {
        Ok(text)
    } else {
        Err(text)
    }
}

fn read_conf(file: &Path) -> Result<Value, String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(1 << 20).read_to_string(&mut text))
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("not JSON ({e})"))
}

/// Whether podtap is in `conf`'s chain: cni-install's own test (chaining
/// again would add nothing).
fn is_chained(conf: &Value) -> bool {
    let marker = serde_json::json!({ "type": "podtap" });
    matches!(crate::cni_install::chained(conf, &marker), Ok(None))
}
