//! libvirt end to end (root + libvirt + QEMU/TCG), as KubeVirt runs it: a
//! system-mode libvirtd with its QEMU driver runs inside the pod netns
//! (tests/libvirt/libvirtd.sh: private mount namespace, every libvirt
//! directory private to the test), and a domain whose NICs are exactly the
//! `<interface>` elements of `podtap render libvirt` boots the test guest
//! (tests/guest/README.md) from its kernel and initramfs, configured from
//! `podtap render guest-args`.
//!
//! In tc mode (one queue) and bridge mode (two queues), pod veth MTU 9000:
//! the guest pings the pod's peer over IPv4 and IPv6, and with 8000-byte
//! IPv4 echoes (`<mtu>` reaches QEMU as the NIC's host_mtu); the peer
//! reaches the guest on both families (its neighbour entry must hold the
//! guest's MAC); `podtap check` passes
//! while libvirt holds the TAP, `virsh destroy` leaves the TAP in place
//! (`managed='no'`), and `podtap detach` then leaves the pod netns exactly
//! as it was before the attach, libvirtd still running in it.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use podtap_testkit::vm::{address_of, guest, reach_in, QEMU};
use podtap_testkit::{
    iface, podtap_cmd, podtap_ok, root_or_skip, settled_snapshot, stderr, stdout, tool_or_skip,
    unique, Netns, Pod, StateDir, TempDir,
};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// The pod veth's MTU: jumbo, so that `<mtu>` matters.
const MTU: u32 = 9000;

fn prerequisites(test: &str) -> bool {
    root_or_skip(test)
        && tool_or_skip(test, "libvirtd")
        && tool_or_skip(test, "virsh")
        && tool_or_skip(test, QEMU)
        && tool_or_skip(test, "unshare")
        && tool_or_skip(test, "nsenter")
        && tool_or_skip(test, "ping")
}

/// A libvirtd of the test's own, running in a pod netns (tests/libvirt/libvirtd.sh).
/// Dropping it destroys its running domains, then stops it.
struct Libvirtd {
    child: Child,
    work: TempDir,
    uri: String,
}

impl Libvirtd {
    fn start(pod: &Netns) -> Self {
        let work = TempDir::new();
        let log = std::fs::File::create(work.path().join("libvirtd.log")).expect("libvirtd log");
        let child = Command::new(podtap_testkit::repo().join("tests/libvirt/libvirtd.sh"))
            .arg(work.path())
            .arg(pod.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("start libvirtd.sh");
        let uri = format!(
            "qemu:///system?socket={}",
            work.path().join("run/libvirt-sock").display()
        );
        let mut daemon = Libvirtd { child, work, uri };
        // The first connection waits for the QEMU driver to probe the
        // emulator (seconds under TCG on a busy machine).
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Ok(Some(status)) = daemon.child.try_wait() {
                panic!("libvirtd exited ({status}):\n{}", daemon.log());
            }
            if daemon.virsh(&["version"]).status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "libvirtd did not answer within 180 s:\n{}",
                daemon.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        daemon
    }

    fn virsh(&self, args: &[&str]) -> Output {
        Command::new("timeout")
            .args(["120", "virsh", "-q", "-c", &self.uri])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run virsh")
    }

    fn virsh_ok(&self, args: &[&str]) -> String {
        let out = self.virsh(args);
        assert!(
            out.status.success(),
            "virsh {args:?} failed: {}{}\nlibvirtd log:\n{}",
            stdout(&out),
            stderr(&out),
            self.log()
        );
        stdout(&out)
    }

    /// Names of the domains libvirtd runs.
    fn running(&self) -> Vec<String> {
        stdout(&self.virsh(&["list", "--name"]))
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.work.path().join("libvirtd.log")).unwrap_or_default()
    }

    /// QEMU's command line and messages for domain `name`.
    fn qemu_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.work.path().join(format!("log/qemu/{name}.log")))
            .unwrap_or_default()
    }
}

impl Drop for Libvirtd {
    fn drop(&mut self) {
        for name in self.running() {
            let _ = self.virsh(&["destroy", &name]);
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// A transient domain booting the test guest by direct kernel boot, its
/// serial console written to `console`, `interfaces` as its NICs.
fn domain_xml(name: &str, vcpus: u32, cmdline: &str, interfaces: &str, console: &Path) -> String {
    let (kernel, initrd) = guest();
    // <acpi/>: without it libvirt passes -no-acpi, the guest brings up one
    // vCPU only and `poweroff -f` halts instead of ending QEMU.
    format!(
        "<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>256</memory>
  <vcpu>{vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/{QEMU}</emulator>
{interfaces}    <serial type='file'><source path='{}'/><target port='0'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
",
        console.display()
    )
}

/// Wait until the console file has a line starting with `prefix`.
fn wait_for_console(console: &Path, prefix: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(console).unwrap_or_default();
        if text.lines().any(|l| l.trim().starts_with(prefix)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    false
}

/// The `PODTAP-` result lines of a console file.
fn results(console: &Path) -> Vec<String> {
    std::fs::read_to_string(console)
        .unwrap_or_default()
        .replace('\r', "")
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("PODTAP-"))
        .map(str::to_string)
        .collect()
}

/// One boot: attach in `mode` with `queues`, boot a domain on the rendered
/// NICs, check both directions, `virsh destroy`, detach.
fn boot_once(pod: &Pod, libvirtd: &Libvirtd, state: &StateDir, mode: &str, queues: u32) {
    let id = unique("lv");
    let q = queues.to_string();
    let netns = pod.pod.path_str();
    let args = [
        "attach", "--netns", &netns, "--id", &id, "--mode", mode, "--queues", &q,
    ];
    let desc: serde_json::Value =
        serde_json::from_str(&podtap_ok(BIN, &state.0, &args)).expect("attach prints JSON");
    let eth0 = iface(&desc, "eth0");
    assert_eq!(eth0["wiring"], mode);
    let mac = eth0["guest_mac"]
        .as_str()
        .or(eth0["mac"].as_str())
        .expect("mac")
        .to_string();
    let interfaces = podtap_ok(BIN, &state.0, &["render", "libvirt", "--id", &id]);
    let guest_net = podtap_ok(BIN, &state.0, &["render", "guest-args", "--id", &id]);
    let n = pod.net;
    let (peer4, peer6) = (format!("198.18.{n}.1"), format!("2001:db8:{n:x}::1"));
    // The guest stays up (hold) until `virsh destroy`; its watchdog powers
    // it off (and libvirt then ends the domain) should the test die first.
    let cmdline = format!(
        "console=ttyS0 quiet panic=-1 {} podtap.ping={peer4},{peer6} podtap.pingbig=8000:{peer4} podtap.hold=600 podtap.timeout=900",
        guest_net.trim()
    );
    let work = TempDir::new();
    let console = work.path().join("console.log");
    let name = format!("podtap-{id}");
    let xml = work.path().join("domain.xml");
    let vcpus = queues.max(1);
    std::fs::write(
        &xml,
        domain_xml(&name, vcpus, &cmdline, &interfaces, &console),
    )
    .expect("write domain XML");
    libvirtd.virsh_ok(&["create", &xml.display().to_string()]);

    let ready = wait_for_console(&console, "PODTAP-READY", Duration::from_secs(240));
    let lines = results(&console);
    eprintln!("--- {mode}/{queues}: guest results\n{}", lines.join("\n"));
    if !ready {
        panic!(
            "the guest never said PODTAP-READY\nconsole:\n{}\nQEMU log:\n{}",
            std::fs::read_to_string(&console).unwrap_or_default(),
            libvirtd.qemu_log(&name)
        );
    }
    let expected = [
        format!("PODTAP-PING OK {peer4}"),
        format!("PODTAP-PING OK {peer6}"),
        format!("PODTAP-PINGBIG OK 8000 {peer4}"),
        format!(
            "PODTAP-NIC {} eth0 mtu={MTU} queues={queues}",
            mac.to_lowercase()
        ),
    ];
    for line in &expected {
        assert!(lines.contains(line), "{mode}: no {line:?} in {lines:#?}");
    }
    let errors = lines.iter().any(|l| l.starts_with("PODTAP-ERROR"));
    assert!(!errors, "{lines:#?}");
    podtap_ok(BIN, &state.0, &["check", "--id", &id]);
    for family in ["inet", "inet6"] {
        reach_in(&pod.peer, &address_of(&desc, "eth0", family), &mac, 3);
    }
    check_qemu_command_line(&libvirtd.qemu_log(&name), queues);

    libvirtd.virsh_ok(&["destroy", &name]);
    assert!(!libvirtd.running().contains(&name), "{name} still runs");
    // managed='no': libvirt left the TAP podtap made, wired as recorded.
    podtap_ok(BIN, &state.0, &["check", "--id", &id]);
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
}

/// libvirt opened the TAP (one fd per queue) and gave its MTU to the NIC.
fn check_qemu_command_line(qemu: &str, queues: u32) {
    // <mtu size> became the virtio-net device's host_mtu.
    let host_mtu = format!("\"host_mtu\":{MTU}");
    assert!(
        qemu.contains(&host_mtu),
        "no {host_mtu} in QEMU's command line: {qemu}"
    );
    let tap_source = if queues > 1 { "\"fds\":" } else { "\"fd\":" };
    assert!(
        qemu.contains(tap_source),
        "QEMU did not get the TAP's fds: {qemu}"
    );
}

#[test]
fn libvirtd_in_the_pod_netns_boots_the_rendered_domain_in_tc_and_bridge_mode() {
    let test = "libvirtd_in_the_pod_netns_boots_the_rendered_domain_in_tc_and_bridge_mode";
    if !prerequisites(test) {
        return;
    }
    let _ = guest();
    let pod = Pod::dual_stack();
    for ns in [&pod.pod, &pod.peer] {
        ns.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    pod.peer.ip(&format!("link set veth0 mtu {MTU}"));
    pod.pod.ip(&format!("link set eth0 mtu {MTU}"));
    let state = StateDir::new();
    let before = settled_snapshot(&pod.pod);
    let libvirtd = Libvirtd::start(&pod.pod);
    for (mode, queues) in [("tc", 1), ("bridge", 2)] {
        boot_once(&pod, &libvirtd, &state, mode, queues);
        assert_eq!(
            before,
            settled_snapshot(&pod.pod),
            "{mode}: virsh destroy + podtap detach left the pod netns changed"
        );
    }
    drop(libvirtd);
    assert_eq!(
        before,
        settled_snapshot(&pod.pod),
        "libvirtd left the pod netns changed"
    );
}

/// libvirt opens a virtio NIC's TAP with IFF_VNET_HDR (and the kernel then
/// sets it on the TAP): a TAP made with --no-vnet-hdr is refused with one
/// line and exit 15, not rendered for libvirt to change.
#[test]
fn render_libvirt_refuses_a_tap_without_vnet_hdr() {
    let test = "render_libvirt_refuses_a_tap_without_vnet_hdr";
    if !root_or_skip(test) {
        return;
    }
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("lvnohdr");
    let netns = pod.pod.path_str();
    podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &netns, "--id", &id, "--no-vnet-hdr"],
    );
    let out = podtap_cmd(BIN, &state.0)
        .args(["render", "libvirt", "--id", &id])
        .output()
        .expect("run podtap");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(15), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("IFF_VNET_HDR") && err.contains("--no-vnet-hdr"),
        "{err}"
    );
    assert!(stdout(&out).is_empty());
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
}
