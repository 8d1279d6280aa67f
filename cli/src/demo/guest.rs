//! The demo's guest: the test guest (tests/guest/) booted under QEMU on the
//! demo pod's TAP. It configures itself from podtap's answers (DHCPv4,
//! DHCPv6, router advertisements), pings the peer, and is pinged back.

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::demo::pod::{DEMO_PEER_V4, DEMO_PEER_V6, DEMO_POD_V4, DEMO_POD_V6};
use crate::error::{Error, Result};
use podtap::handover::Handover;
use podtap::state::{SandboxId, StateDir};

/// The QEMU binary the demo runs (`PODTAP_QEMU` overrides it).
const QEMU: &str = "qemu-system-x86_64";
/// Where tests/guest/build-guest.sh caches the guest by default.
const GUEST_CACHE: &str = "/var/cache/podtap-test-guest";
/// QEMU is killed if the guest has not powered off by then.
const BOOT_TIMEOUT: Duration = Duration::from_secs(150);
/// How long the guest stays up after its own pings, for the peer's.
const HOLD_SECONDS: u32 = 12;
/// How long the peer waits for each echo reply from the guest.
const PEER_PING_WAIT: Duration = Duration::from_secs(4);

/// What booting needs: QEMU and the test guest's kernel and initramfs.
#[derive(Debug)]
pub struct Guest {
    qemu: PathBuf,
    kernel: PathBuf,
    initrd: PathBuf,
}

/// QEMU and the guest images, or `None` after saying which is missing and
/// how to get it.
pub fn find() -> Option<Guest> {
    let skip = |why: String| {
        eprintln!("podtap demo: not booting a guest: {why}");
        eprintln!(
            "podtap demo: with both, the demo boots a guest that configures itself from \
             podtap's DHCP and router advertisements and pings the peer both ways"
        );
        None
    };
    let qemu = std::env::var("PODTAP_QEMU").unwrap_or_else(|_| QEMU.to_string());
    let Some(qemu) = find_program(&qemu) else {
        return skip(format!(
            "{qemu} is not installed (Debian: apt-get install qemu-system-x86)"
        ));
    };
    match images() {
        Ok((kernel, initrd)) => Some(Guest {
            qemu,
            kernel,
            initrd,
        }),
        Err(why) => skip(why),
    }
}

impl Guest {
    /// Serve the attachment, boot the guest, ping it from the peer, and
    /// return a problem for the exit code when any step failed.
    pub fn boot(&self, id: &SandboxId, state: &StateDir, peer: &Path) -> Option<String> {
        let _serving =
            match podtap::serve::Serving::start(state, id, podtap::attach::TABLE_ANSWER_LIMIT) {
                Ok(s) => s,
                Err(e) => return Some(format!("serving the demo guest: {e}")),
            };
        let lines = match self.run(id, state, peer) {
            Ok(lines) => lines,
            Err(e) => return Some(format!("booting the demo guest: {e}")),
        };
        verdict(&lines)
    }

    /// Start QEMU on the TAP fds (it runs in podtap's own netns, no `ip
    /// netns exec`), echo what the guest reports, ping it from the peer once
    /// it is ready, and return the guest's and the peer's result lines.
    fn run(&self, id: &SandboxId, state: &StateDir, peer: &Path) -> Result<Vec<String>> {
        let handover = podtap::handover::open(id, state, &Default::default())?;
        let mut child = self.spawn(&handover)?;
        // QEMU holds its own copies now.
        drop(handover);
        let (done, wait_done) = mpsc::channel::<()>();
        let pid = child.id();
        let watchdog = std::thread::spawn(move || {
            if wait_done.recv_timeout(BOOT_TIMEOUT).is_err() {
                if let Ok(pid) = i32::try_from(pid) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        });
        let lines = follow(&mut child, peer);
        let _ = done.send(());
        let _ = watchdog.join();
        let status = child
            .wait()
            .map_err(|e| Error::io("wait for", &self.qemu, e))?;
        if !status.success() {
            eprintln!("podtap demo: {} exited with {status}", self.qemu.display());
        }
        Ok(lines)
    }

    fn spawn(&self, handover: &Handover) -> Result<Child> {
        let macs: Vec<String> = handover
            .taps
            .iter()
            .filter_map(|t| t.guest_mac.as_ref())
            .map(|mac| format!("podtap.nic={mac},0"))
            .collect();
        let append = format!(
            "console=ttyS0 quiet panic=-1 podtap.timeout=120 {} podtap.dhcp=dhcpcd \
             podtap.ping={DEMO_PEER_V4},{DEMO_PEER_V6} podtap.hold={HOLD_SECONDS}",
            macs.join(" ")
        );
        let fd_args = handover.qemu_args()?;
        crate::exec::inheritable(handover.fds())?;
        eprintln!(
            "podtap demo: booting the test guest under {} (TCG, about 20 s); \
             it asks podtap for its addresses by DHCP and router solicitation...",
            self.qemu.display()
        );
        Command::new(&self.qemu)
            .args(["-accel", "tcg", "-m", "256", "-smp", "1"])
            .args(["-nographic", "-no-reboot"])
            .arg("-kernel")
            .arg(&self.kernel)
            .arg("-initrd")
            .arg(&self.initrd)
            .args(["-append", &append])
            .args(&fd_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::io("run", &self.qemu, e))
    }
}

/// Read the guest's console to its end: print what it reports and what it
/// was given, and ping it from the peer when it says it is ready.
fn follow(child: &mut Child, peer: &Path) -> Vec<String> {
    let mut results = Vec::new();
    let Some(stdout) = child.stdout.take() else {
        return results;
    };
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let line = line.trim();
        if line.starts_with("PODTAP-") {
            println!("guest: {line}");
            results.push(line.to_string());
        } else if is_configuration(line) {
            println!("guest:   {line}");
        }
        if line == "PODTAP-READY" {
            results.extend(ping_guest(peer));
        }
    }
    results
}

/// A line of the guest's `ip addr` / `ip route` listing worth showing: its
/// addresses and routes, not link details.
fn is_configuration(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or("");
    let shown = (line.starts_with("inet ") || line.starts_with("inet6 ") || first == "default")
        || (first.contains('/') && line.contains(" dev ") && !line.starts_with("link/"));
    shown && !line.contains("scope host")
}

/// The peer pings the guest at the pod's addresses (the guest holds them
/// now): one `PEER-PING OK|FAIL ADDR` line each.
fn ping_guest(peer: &Path) -> Vec<String> {
    [DEMO_POD_V4, DEMO_POD_V6]
        .iter()
        .filter_map(|cidr| cidr.split('/').next()?.parse::<IpAddr>().ok())
        .map(|addr| {
            let ok = super::ping::ping_from(peer, addr, PEER_PING_WAIT).unwrap_or_else(|e| {
                eprintln!("podtap demo: ping from the peer: {e}");
                false
            });
            let line = format!("PEER-PING {} {addr}", if ok { "OK" } else { "FAIL" });
            println!("peer:  {line}");
            line
        })
        .collect()
}

/// No problem when the guest finished, was configured, and both pings in
/// each direction came back; else which lines said otherwise.
fn verdict(lines: &[String]) -> Option<String> {
    if !lines.iter().any(|l| l == "PODTAP-DONE") {
        return Some("the demo guest did not finish (see its output above)".into());
    }
    if !lines.iter().any(|l| l.starts_with("PEER-PING")) {
        return Some("the demo guest never said it was ready for the peer's pings".into());
    }
    let failed: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|l| {
            l.starts_with("PODTAP-ERROR")
                || l.contains(" FAIL ")
                || (l.starts_with("PODTAP-DHCP ") && !l.ends_with(" ok"))
                || (l.starts_with("PODTAP-RA ") && !l.ends_with(" ok"))
        })
        .collect();
    if failed.is_empty() {
        eprintln!(
            "podtap demo: the guest configured itself from podtap's answers, \
             reached the peer and was reached back, both families"
        );
        return None;
    }
    Some(format!("the demo guest reported: {}", failed.join("; ")))
}

/// Kernel and initramfs: PODTAP_GUEST_KERNEL/PODTAP_GUEST_INITRD, else the
/// build-guest.sh cache (PODTAP_GUEST_CACHE or its default).
fn images() -> std::result::Result<(PathBuf, PathBuf), String> {
    let (kernel, initrd) = match (
        std::env::var_os("PODTAP_GUEST_KERNEL"),
        std::env::var_os("PODTAP_GUEST_INITRD"),
    ) {
        (Some(k), Some(i)) => (PathBuf::from(k), PathBuf::from(i)),
        _ => {
            let cache = std::env::var_os("PODTAP_GUEST_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(GUEST_CACHE));
            (cache.join("vmlinuz"), cache.join("initramfs.gz"))
        }
    };
    for path in [&kernel, &initrd] {
        if !path.is_file() {
            return Err(format!(
                "no test guest at {} (build it with tests/guest/build-guest.sh, \
                 or set PODTAP_GUEST_KERNEL and PODTAP_GUEST_INITRD)",
                path.display()
            ));
        }
    }
    Ok((kernel, initrd))
}

/// `name` itself if it contains a `/`, else the first executable on PATH.
fn find_program(name: &str) -> Option<PathBuf> {
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let path = PathBuf::from(name);
        return executable(&path).then_some(path);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| executable(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_configured_guest_reached_both_ways_passes() {
        let ok = lines(&[
            "PODTAP-DHCP dhcpcd eth0 ok",
            "PODTAP-RA eth0 ok",
            "PODTAP-PING OK 198.18.0.1",
            "PEER-PING OK 198.18.0.2",
            "PODTAP-DONE",
        ]);
        assert_eq!(verdict(&ok), None);
    }

    #[test]
    fn a_failed_step_is_named() {
        let bad = lines(&[
            "PODTAP-DHCP dhcpcd eth0 fail",
            "PEER-PING FAIL 2001:db8:0:1::2",
            "PODTAP-DONE",
        ]);
        let why = verdict(&bad).unwrap();
        assert!(why.contains("PODTAP-DHCP dhcpcd eth0 fail"), "{why}");
        assert!(why.contains("PEER-PING FAIL"), "{why}");
        assert!(verdict(&lines(&["PODTAP-READY"])).is_some());
    }

    #[test]
    fn only_addresses_and_routes_are_shown() {
        assert!(is_configuration(
            "inet 198.18.0.2/24 brd 198.18.0.255 scope global eth0"
        ));
        assert!(is_configuration("default via 198.18.0.1 dev eth0"));
        assert!(is_configuration("198.18.0.0/24 dev eth0 scope link"));
        assert!(!is_configuration(
            "link/ether 02:00:00:00:00:01 brd ff:ff:ff:ff:ff:ff"
        ));
        assert!(!is_configuration("podtap: dhcpcd: eth0: leased 198.18.0.2"));
        assert!(!is_configuration("inet 127.0.0.1/8 scope host lo"));
    }
}
