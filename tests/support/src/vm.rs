//! VMs: the test guest (tests/guest/README.md) booted by the VMM launchers of
//! vmm-examples/ (`bin`: the podtap under test), its console, and reaching into it from outside.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::cni::PLUGINS;
use crate::netns::Netns;
use crate::podtap::iface;
use crate::run::{root_or_skip, sh, sh_ok, stderr, stdout, tool_or_skip};

/// The QEMU the VM tests boot (TCG).
pub const QEMU: &str = "qemu-system-x86_64";

/// Kernel and initramfs of the test guest, built once per test binary
/// (build-guest.sh caches them across runs; PODTAP_GUEST_KERNEL and
/// PODTAP_GUEST_INITRD name others).
pub fn guest() -> &'static (String, String) {
    static GUEST: OnceLock<(String, String)> = OnceLock::new();
    GUEST.get_or_init(|| {
        if let (Ok(k), Ok(i)) = (
            std::env::var("PODTAP_GUEST_KERNEL"),
            std::env::var("PODTAP_GUEST_INITRD"),
        ) {
            return (k, i);
        }
        let out = sh(&format!(
            "{}/tests/guest/build-guest.sh",
            crate::repo().display()
        ));
        let value = |key: &str| {
            out.lines()
                .rev()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("build-guest.sh printed no {key}: {out}"))
                .to_string()
        };
        (value("KERNEL="), value("INITRD="))
    })
}

/// From `node`, reach `ip` (in the guest) `rounds` times over, each time
/// resolving it afresh: every answer must come from the guest's MAC. (In
/// bridge mode the pod netns once answered ARP first, with the bridge's MAC.)
pub fn reach_in(node: &Netns, ip: &str, guest_mac: &str, rounds: u32) {
    let ping = if ip.contains(':') { "ping -6" } else { "ping" };
    for round in 0..rounds {
        node.ip(&format!("neigh flush to {ip}"));
        let ok = (0..3).any(|_| sh_ok(&format!("ip netns exec {} {ping} -c1 -W2 {ip}", node.name)));
        assert!(
            ok,
            "round {round}: {ip} is not reachable from the pod's peer"
        );
        let neigh = node.ip(&format!("neigh show {ip}"));
        assert!(
            neigh.to_lowercase().contains(&guest_mac.to_lowercase()),
            "round {round}: the peer resolved {ip} to {neigh:?}, not the guest's {guest_mac}"
        );
    }
}

/// A VMM launcher script of vmm-examples/.
pub fn example(name: &str) -> String {
    crate::repo()
        .join("vmm-examples")
        .join(name)
        .display()
        .to_string()
}

/// Whether this machine can run the VM tests (skip, or fail under CI=true).
pub fn vm_prerequisites(test: &str) -> bool {
    root_or_skip(test)
        && tool_or_skip(test, QEMU)
        && tool_or_skip(test, "jq")
        && tool_or_skip(test, "ping")
        && tool_or_skip(test, &format!("{PLUGINS}/bridge"))
        && tool_or_skip(test, &format!("{PLUGINS}/macvlan"))
        && tool_or_skip(test, &format!("{PLUGINS}/host-local"))
}

/// Run a VMM launcher script under `timeout 120` and return the guest's console.
pub fn boot(bin: &str, script: &str, state: &Path, id: &str, append: &str) -> String {
    let (kernel, initrd) = guest();
    let started = std::time::Instant::now();
    let out = Command::new("timeout")
        .args(["120", script, id, kernel, initrd])
        .env("PODTAP", bin)
        .env("PODTAP_STATE_DIR", state)
        .env("GUEST_APPEND", append)
        .stdin(Stdio::null())
        .output()
        .expect("run the VMM launcher");
    let console = stdout(&out).replace('\r', "");
    eprintln!(
        "--- {script} {id}: exit {:?} after {:.1}s\n{console}\n--- stderr:\n{}",
        out.status.code(),
        started.elapsed().as_secs_f64(),
        stderr(&out)
    );
    assert!(
        console.contains("PODTAP-DONE"),
        "the guest did not finish (exit {:?})",
        out.status.code()
    );
    console
}

/// Like [`boot`], for a guest started with `podtap.hold=SECONDS`: once it
/// prints `PODTAP-READY`, run `during` (which reaches into the guest from
/// outside) while the guest stays up, then wait for it to finish.
pub fn boot_reachable(
    bin: &str,
    script: &str,
    state: &Path,
    id: &str,
    append: &str,
    during: impl FnOnce(),
) -> String {
    boot_live(bin, script, state, id, append, &[], |_| during())
}

/// The console of a running guest, line by line.
pub struct Console {
    lines: std::sync::mpsc::Receiver<String>,
}

impl Console {
    /// The next console line starting with `prefix` within `timeout` (lines before it are skipped).
    pub fn wait_for(&self, prefix: &str, timeout: std::time::Duration) -> Option<String> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            if line.starts_with(prefix) {
                return Some(line);
            }
        }
    }
}

/// Run a launcher (with `extra` QEMU arguments) for a guest started with
/// `podtap.hold`: once it says `PODTAP-READY`, run `during` with its live
/// console, then wait for the guest to finish and return the whole console.
pub fn boot_live(
    bin: &str,
    script: &str,
    state: &Path,
    id: &str,
    append: &str,
    extra: &[&str],
    during: impl FnOnce(&Console),
) -> String {
    let (kernel, initrd) = guest();
    let mut cmd = Command::new("timeout");
    cmd.args(["150", script, id, kernel, initrd])
        .args(extra)
        .env("PODTAP", bin)
        .env("PODTAP_STATE_DIR", state)
        .env("GUEST_APPEND", append);
    boot_command(cmd, &format!("{script} {id}"), during)
}

/// Run `cmd`, which boots a guest started with `podtap.hold` and prints its
/// console on stdout (named `what` in messages): once it says
/// `PODTAP-READY`, run `during` with its live console, then wait for the
/// guest to finish and return the whole console.
pub fn boot_command(mut cmd: Command, what: &str, during: impl FnOnce(&Console)) -> String {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the VMM launcher");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut console = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let line = line.replace('\r', "");
            let _ = tx.send(line.trim().to_string());
            console.push_str(&line);
            console.push('\n');
        }
        console
    });
    let live = Console { lines: rx };
    let ready = live
        .wait_for("PODTAP-READY", std::time::Duration::from_secs(120))
        .is_some();
    // A failed check inside `during` still shows the console, and stops the VM.
    let checked =
        ready.then(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| during(&live))));
    if matches!(checked, Some(Err(_))) {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("wait for the VMM");
    let console = reader.join().expect("console reader");
    eprintln!(
        "--- {what}: exit {:?}\n{console}\n--- stderr:\n{}",
        out.status.code(),
        stderr(&out)
    );
    if let Some(Err(panic)) = checked {
        std::panic::resume_unwind(panic);
    }
    assert!(ready, "the guest never said PODTAP-READY");
    assert!(console.contains("PODTAP-DONE"), "the guest did not finish");
    console
}

/// The first non-link-local address of `family` ("inet"/"inet6") on interface `name`.
pub fn address_of(desc: &serde_json::Value, name: &str, family: &str) -> String {
    iface(desc, name)["address_details"]
        .as_array()
        .expect("address_details")
        .iter()
        .find(|a| a["family"] == family && a["link_local"] == false)
        .and_then(|a| a["cidr"].as_str())
        .and_then(|c| c.split('/').next())
        .unwrap_or_else(|| panic!("{name} has no {family} address"))
        .to_string()
}

/// The `PODTAP-` result lines of a console.
pub fn results(console: &str) -> Vec<&str> {
    console
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("PODTAP-"))
        .collect()
}

/// `line` is one of the guest's result lines.
pub fn assert_line(console: &str, line: &str) {
    assert!(
        results(console).contains(&line),
        "missing {line:?} in the guest's results: {:#?}",
        results(console)
    );
}

/// No result line of the guest is an error or a failure (big pings aside).
pub fn assert_no_errors(console: &str) {
    let errors: Vec<_> = results(console)
        .into_iter()
        .filter(|l| l.starts_with("PODTAP-ERROR") || l.contains(" FAIL ") && !l.contains("BIG"))
        .collect();
    assert!(errors.is_empty(), "guest errors: {errors:#?}");
}

/// `PODTAP-NIC <mac> <ifname> mtu=<mtu> queues=<q>` for `mac`.
pub fn nic_line<'a>(console: &'a str, mac: &str) -> &'a str {
    results(console)
        .into_iter()
        .find(|l| l.starts_with(&format!("PODTAP-NIC {}", mac.to_lowercase())))
        .unwrap_or_else(|| panic!("no PODTAP-NIC line for {mac}"))
}

/// The MAC the guest sees on interface `name` (its `guest_mac`, else `mac`).
pub fn mac_of(desc: &serde_json::Value, name: &str) -> String {
    let i = iface(desc, name);
    i["guest_mac"]
        .as_str()
        .or_else(|| i["mac"].as_str())
        .expect("mac")
        .to_string()
}
