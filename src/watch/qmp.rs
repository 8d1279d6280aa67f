//! QEMU's machine protocol (QMP), as much as NIC hotplug needs.
//!
//! One connection per operation: QMP serves one client at a time, so watch
//! does not keep it. Fds handed over with `getfd` live on in the monitor
//! until a `netdev_add` takes them or `closefd` drops them: every failure
//! path drops them, and [`QmpVmm::prepare`] clears what a killed watch left.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::qmp_session::Session;
use super::vmm::{HotNic, VmmClient};

/// How long the guest may take to let go of an unplugged NIC (ACPI hotplug
/// needs the guest's cooperation; a TCG guest is slow).
const UNPLUG_TIMEOUT: Duration = Duration::from_secs(30);
/// MTU QEMU assumes when `host_mtu` is absent.
const DEFAULT_MTU: u32 = 1500;

/// A QEMU reached through its QMP socket.
#[derive(Debug, Clone)]
pub struct QmpVmm {
    path: PathBuf,
    /// Besides root, the uid TAP fds may be sent to.
    vmm_uid: Option<u32>,
}

impl QmpVmm {
    /// The QEMU listening on `path` (`-qmp unix:PATH,server=on,wait=off`),
    /// which gets TAP fds only if it runs as root or `vmm_uid`.
    pub fn new(path: &Path, vmm_uid: Option<u32>) -> Self {
        QmpVmm {
            path: path.into(),
            vmm_uid,
        }
    }
}

impl VmmClient for QmpVmm {
    /// The ids of the user-created devices (`/machine/peripheral`).
    fn devices(&self) -> io::Result<BTreeSet<String>> {
        let mut qmp = Session::connect(&self.path, self.vmm_uid)?;
        let list = qmp.execute(
            json!({"execute": "qom-list", "arguments": {"path": "/machine/peripheral"}}),
            &[],
        )?;
        Ok(list
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["type"].as_str().is_some_and(|t| t.starts_with("child<")))
            .filter_map(|p| p["name"].as_str().map(str::to_string))
            .collect())
    }

    /// Drop a backend of `nic`'s (and fds handed over for it) that an
    /// earlier plug left without a device: they would hold the TAP's queue.
    fn prepare(&self, nic: &HotNic) -> io::Result<()> {
        let mut qmp = Session::connect(&self.path, self.vmm_uid)?;
        let netdev = netdev_id(&nic.device);
        let _ = qmp.execute(netdev_del(&netdev), &[]);
        close_fds(&mut qmp, &fd_names(&netdev, nic.queues as usize));
        Ok(())
    }

    /// Hand over `fds` (`getfd`), make the backend (`netdev_add`) and the
    /// virtio-net device (`device_add`) the way `render qemu` would at boot.
    fn plug(&self, nic: &HotNic, fds: &[OwnedFd]) -> io::Result<()> {
        let mut qmp = Session::connect(&self.path, self.vmm_uid)?;
        let netdev = netdev_id(&nic.device);
        let names = fd_names(&netdev, fds.len());
        for (name, fd) in names.iter().zip(fds) {
            let sent = qmp.execute(
                json!({"execute": "getfd", "arguments": {"fdname": name}}),
                &[fd.as_raw_fd()],
            );
            if let Err(e) = sent {
                close_fds(&mut qmp, &names);
                return Err(e);
            }
        }
        if let Err(e) = qmp.execute(netdev_add(&netdev, &names), &[]) {
            close_fds(&mut qmp, &names);
            return Err(e);
        }
        if let Err(e) = qmp.execute(device_add(nic, &netdev, fds.len()), &[]) {
            let _ = qmp.execute(netdev_del(&netdev), &[]);
            return Err(e);
        }
        Ok(())
    }

    /// `device_del`, wait for the guest to release it (`DEVICE_DELETED`),
    /// then `netdev_del` its backend (which closes QEMU's TAP fds).
    fn unplug(&self, device: &str) -> io::Result<()> {
        let mut qmp = Session::connect(&self.path, self.vmm_uid)?;
        match qmp.execute(
            json!({"execute": "device_del", "arguments": {"id": device}}),
            &[],
        ) {
            Ok(_) => {
                if !qmp.wait_event("DEVICE_DELETED", device, UNPLUG_TIMEOUT)? {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the guest did not release {device} within {}s",
                            UNPLUG_TIMEOUT.as_secs()
                        ),
                    ));
                }
            }
            Err(e) if e.to_string().contains("not found") => {}
            Err(e) => return Err(e),
        }
        match qmp.execute(netdev_del(&netdev_id(device)), &[]) {
            Err(e) if !e.to_string().contains("not found") => Err(e),
            _ => Ok(()),
        }
    }
}

/// The names the queue fds of backend `netdev` are handed over under.
fn fd_names(netdev: &str, queues: usize) -> Vec<String> {
    (0..queues).map(|i| format!("{netdev}-q{i}")).collect()
}

/// The backend id of device `device`.
fn netdev_id(device: &str) -> String {
    format!("{device}-net")
}

fn netdev_add(netdev: &str, fd_names: &[String]) -> Value {
    let mut args = json!({"type": "tap", "id": netdev});
    match fd_names {
        [one] => args["fd"] = json!(one),
        _ => args["fds"] = json!(fd_names.join(":")),
    }
    json!({"execute": "netdev_add", "arguments": args})
}

fn netdev_del(netdev: &str) -> Value {
    json!({"execute": "netdev_del", "arguments": {"id": netdev}})
}

/// The device `render qemu` gives a boot NIC, as typed QMP properties.
fn device_add(nic: &HotNic, netdev: &str, queues: usize) -> Value {
    let mut args = json!({
        "driver": "virtio-net-pci",
        "id": nic.device,
        "netdev": netdev,
        "mac": nic.mac,
        "romfile": "",
    });
    if queues > 1 {
        args["mq"] = json!(true);
        args["vectors"] = json!(2 * queues + 2);
    }
    if nic.mtu != DEFAULT_MTU {
        args["host_mtu"] = json!(nic.mtu);
    }
    json!({"execute": "device_add", "arguments": args})
}

/// Drop fds handed over with `getfd` that no backend took.
fn close_fds(qmp: &mut Session, names: &[String]) {
    for name in names {
        let _ = qmp.execute(
            json!({"execute": "closefd", "arguments": {"fdname": name}}),
            &[],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(mtu: u32, queues: u32) -> HotNic {
        HotNic {
            device: "podtap-tap_eth1".into(),
            mac: "02:00:00:00:00:01".into(),
            mtu,
            queues,
        }
    }

    #[test]
    fn one_queue_gets_fd_and_a_plain_device() {
        let names = vec!["podtap-tap_eth1-net-q0".to_string()];
        assert_eq!(
            netdev_add("podtap-tap_eth1-net", &names)["arguments"],
            json!({"type": "tap", "id": "podtap-tap_eth1-net", "fd": "podtap-tap_eth1-net-q0"})
        );
        assert_eq!(
            device_add(&nic(1500, 1), "podtap-tap_eth1-net", 1)["arguments"],
            json!({"driver": "virtio-net-pci", "id": "podtap-tap_eth1", "netdev": "podtap-tap_eth1-net",
                   "mac": "02:00:00:00:00:01", "romfile": ""})
        );
    }

    #[test]
    fn several_queues_and_a_big_mtu_match_the_boot_rendering() {
        let names: Vec<String> = (0..2).map(|i| format!("n-q{i}")).collect();
        assert_eq!(netdev_add("n", &names)["arguments"]["fds"], "n-q0:n-q1");
        let args = &device_add(&nic(9000, 2), "n", 2)["arguments"];
        assert_eq!(args["mq"], true);
        assert_eq!(args["vectors"], 6);
        assert_eq!(args["host_mtu"], 9000);
    }

    #[test]
    fn a_fake_qmp_server_sees_the_whole_exchange() {
        use std::io::{BufRead, BufReader, Write};
        use std::os::unix::net::UnixListener;
        let dir = std::env::temp_dir().join(format!("podtap-qmp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("qmp.sock");
        let _ = std::fs::remove_file(&sock);
        let listener = UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut w = conn.try_clone().unwrap();
            let mut r = BufReader::new(conn);
            writeln!(w, r#"{{"QMP": {{"version": {{}}, "capabilities": []}}}}"#).unwrap();
            let mut seen = Vec::new();
            let mut line = String::new();
            while r.read_line(&mut line).unwrap() > 0 {
                let cmd: Value = serde_json::from_str(&line).unwrap();
                line.clear();
                let name = cmd["execute"].as_str().unwrap().to_string();
                if name == "device_del" {
                    writeln!(w, r#"{{"return": {{}}}}"#).unwrap();
                    writeln!(
                        w,
                        r#"{{"event": "DEVICE_DELETED", "data": {{"device": "podtap-tap_eth1"}}}}"#
                    )
                    .unwrap();
                } else {
                    writeln!(w, r#"{{"return": {{}}}}"#).unwrap();
                }
                seen.push(name);
            }
            seen
        });
        QmpVmm::new(&sock, None).unplug("podtap-tap_eth1").unwrap();
        assert_eq!(
            server.join().unwrap(),
            ["qmp_capabilities", "device_del", "netdev_del"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
