//! QEMU: `-netdev tap` + `-device virtio-net-pci` argv fragments.

use super::fds::{check_tap_fd_lists, check_usable_and_distinct, join_fds};
use super::nic::{attached_nics, Nic};
use super::RenderError;
use crate::model::Description;

/// MTU QEMU assumes when `host_mtu` is absent.
const DEFAULT_MTU: u32 = 1500;

/// How QEMU gets hold of the TAPs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QemuTapSource {
    /// QEMU opens each TAP by name (it must run in the pod netns);
    /// `vhost` adds `vhost=on` (QEMU then needs /dev/vhost-net).
    ByName {
        /// Add `vhost=on` to every `-netdev`.
        vhost: bool,
    },
    /// QEMU inherits open fds: `taps[n]` holds one fd per queue of NIC n,
    /// `vhost[n]` is empty or holds one /dev/vhost-net fd per queue.
    /// `vhost` may also be empty as a whole (no vhost for any NIC).
    Fds {
        /// One list per NIC, in NIC order: one TAP fd per queue.
        taps: Vec<Vec<i32>>,
        /// One list per NIC (each empty or one vhost-net fd per queue), or empty.
        vhost: Vec<Vec<i32>>,
    },
}

/// The argv elements for every NIC: `-netdev`, its value, `-device`, its value.
pub fn qemu_args(desc: &Description, source: &QemuTapSource) -> Result<Vec<String>, RenderError> {
    let nics = attached_nics(desc)?;
    let netdevs = match source {
        QemuTapSource::ByName { vhost } => netdevs_by_name(&nics, *vhost)?,
        QemuTapSource::Fds { taps, vhost } => netdevs_with_fds(&nics, taps, vhost)?,
    };
    let mut args = Vec::with_capacity(nics.len() * 4);
    for (nic, netdev) in nics.iter().zip(netdevs) {
        args.push("-netdev".to_string());
        args.push(netdev.value);
        args.push("-device".to_string());
        args.push(device(nic, netdev.queues));
    }
    Ok(args)
}

/// Text form: one argv element per line (`mapfile -t args` reads it back).
pub(crate) fn render_qemu(desc: &Description) -> Result<String, RenderError> {
    let args = qemu_args(desc, &QemuTapSource::ByName { vhost: false })?;
    Ok(args.iter().map(|arg| format!("{arg}\n")).collect())
}

struct Netdev {
    value: String,
    queues: usize,
}

fn netdevs_by_name(nics: &[Nic<'_>], vhost: bool) -> Result<Vec<Netdev>, RenderError> {
    nics.iter()
        .map(|nic| {
            nic.opened_by_name("QEMU's ifname=", "open its queues and pass them as fds=")?;
            nic.check_multi_queue_agreement()?;
            let mut value = format!(
                "tap,id={},ifname={},script=no,downscript=no",
                nic.id, nic.tap.name
            );
            if nic.tap.queues > 1 {
                value.push_str(&format!(",queues={}", nic.tap.queues));
            }
            if vhost {
                value.push_str(",vhost=on");
            }
            Ok(Netdev {
                value,
                queues: nic.tap.queues as usize,
            })
        })
        .collect()
}

fn netdevs_with_fds(
    nics: &[Nic<'_>],
    taps: &[Vec<i32>],
    vhost: &[Vec<i32>],
) -> Result<Vec<Netdev>, RenderError> {
    check_tap_fd_lists(nics, taps)?;
    if !vhost.is_empty() && vhost.len() != nics.len() {
        return Err(RenderError::FdListCount {
            given: vhost.len(),
            attached: nics.len(),
        });
    }
    let no_vhost = Vec::new();
    let mut netdevs = Vec::with_capacity(nics.len());
    for (index, (nic, tap_fds)) in nics.iter().zip(taps).enumerate() {
        let vhost_fds = vhost.get(index).unwrap_or(&no_vhost);
        if !vhost_fds.is_empty() && vhost_fds.len() != tap_fds.len() {
            return Err(RenderError::VhostFdCount {
                nic: nic.id.clone(),
                taps: tap_fds.len(),
                vhost: vhost_fds.len(),
            });
        }
        let mut value = format!("tap,id={}", nic.id);
        value.push_str(&fd_option("fd", "fds", tap_fds));
        if !vhost_fds.is_empty() {
            value.push_str(&fd_option("vhostfd", "vhostfds", vhost_fds));
        }
        netdevs.push(Netdev {
            value,
            queues: tap_fds.len(),
        });
    }
    check_usable_and_distinct(taps.iter().chain(vhost).flatten())?;
    Ok(netdevs)
}

/// `,fd=3` for one fd, `,fds=3:4` for several.
fn fd_option(single: &str, several: &str, fds: &[i32]) -> String {
    match fds {
        [fd] => format!(",{single}={fd}"),
        _ => format!(",{several}={}", join_fds(fds, ":")),
    }
}

fn device(nic: &Nic<'_>, queues: usize) -> String {
    let mut value = format!("virtio-net-pci,netdev={},mac={}", nic.id, nic.mac);
    if queues > 1 {
        value.push_str(&format!(",mq=on,vectors={}", 2 * queues + 2));
    }
    if nic.interface.mtu != DEFAULT_MTU {
        value.push_str(&format!(",host_mtu={}", nic.interface.mtu));
    }
    value.push_str(",romfile=");
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    fn by_name(vhost: bool) -> QemuTapSource {
        QemuTapSource::ByName { vhost }
    }

    #[test]
    fn by_name_opens_each_tap_with_scripts_off() {
        let args = qemu_args(&samples::pod(), &by_name(false)).unwrap();
        assert_eq!(
            args,
            [
                "-netdev",
                "tap,id=net0,ifname=tap0,script=no,downscript=no",
                "-device",
                "virtio-net-pci,netdev=net0,mac=0a:58:0a:f4:01:05,host_mtu=1400,romfile=",
                "-netdev",
                "tap,id=net1,ifname=tap1,script=no,downscript=no,queues=4",
                "-device",
                "virtio-net-pci,netdev=net1,mac=52:54:00:12:34:04,mq=on,vectors=10,host_mtu=9000,romfile=",
            ]
        );
    }

    #[test]
    fn vhost_is_only_added_when_asked() {
        let args = qemu_args(&samples::pod(), &by_name(true)).unwrap();
        assert!(args[1].ends_with(",vhost=on"));
        assert!(args[5].ends_with(",queues=4,vhost=on"));
    }

    #[test]
    fn single_queue_has_no_mq_and_mtu_1500_no_host_mtu() {
        let args = qemu_args(&samples::single_ipv4(), &by_name(false)).unwrap();
        assert_eq!(
            args[3],
            "virtio-net-pci,netdev=net0,mac=52:54:00:12:34:01,romfile="
        );
        assert!(!args[1].contains("queues"));
    }

    #[test]
    fn fds_replace_ifname_script_and_queues() {
        let source = QemuTapSource::Fds {
            taps: vec![vec![3], vec![4, 5, 6, 7]],
            vhost: vec![vec![], vec![8, 9, 10, 11]],
        };
        let args = qemu_args(&samples::pod(), &source).unwrap();
        assert_eq!(args[1], "tap,id=net0,fd=3");
        assert_eq!(args[5], "tap,id=net1,fds=4:5:6:7,vhostfds=8:9:10:11");
        assert!(args[7].contains(",mq=on,vectors=10,"));
        for netdev in [&args[1], &args[5]] {
            for banned in ["ifname", "script", "queues", "vnet_hdr"] {
                assert!(!netdev.contains(banned), "{netdev}");
            }
        }
    }

    #[test]
    fn a_single_vhost_fd_uses_vhostfd() {
        let source = QemuTapSource::Fds {
            taps: vec![vec![3]],
            vhost: vec![vec![4]],
        };
        let args = qemu_args(&samples::single_ipv4(), &source).unwrap();
        assert_eq!(args[1], "tap,id=net0,fd=3,vhostfd=4");
    }

    #[test]
    fn vhost_fd_count_must_match_the_tap_fds() {
        let source = QemuTapSource::Fds {
            taps: vec![vec![3], vec![4, 5, 6, 7]],
            vhost: vec![vec![], vec![8, 9]],
        };
        assert_eq!(
            qemu_args(&samples::pod(), &source).unwrap_err(),
            RenderError::VhostFdCount {
                nic: "net1".into(),
                taps: 4,
                vhost: 2
            }
        );
    }

    #[test]
    fn fd_lists_must_match_nics_and_queues() {
        let one_list = QemuTapSource::Fds {
            taps: vec![vec![3]],
            vhost: vec![],
        };
        assert!(matches!(
            qemu_args(&samples::pod(), &one_list),
            Err(RenderError::FdListCount {
                given: 1,
                attached: 2
            })
        ));
        let too_few = QemuTapSource::Fds {
            taps: vec![vec![3], vec![4, 5]],
            vhost: vec![],
        };
        assert!(matches!(
            qemu_args(&samples::pod(), &too_few),
            Err(RenderError::QueueFdCount {
                queues: 4,
                fds: 2,
                ..
            })
        ));
    }

    #[test]
    fn stdio_and_repeated_fds_are_refused() {
        let stdio = QemuTapSource::Fds {
            taps: vec![vec![2]],
            vhost: vec![],
        };
        let desc = samples::single_ipv4();
        assert_eq!(
            qemu_args(&desc, &stdio).unwrap_err(),
            RenderError::ReservedFd { fd: 2 }
        );
        let repeated = QemuTapSource::Fds {
            taps: vec![vec![5]],
            vhost: vec![vec![5]],
        };
        assert_eq!(
            qemu_args(&desc, &repeated).unwrap_err(),
            RenderError::DuplicateFd { fd: 5 }
        );
    }

    #[test]
    fn by_name_needs_multiqueue_agreement() {
        let mut desc = samples::pod();
        samples::tap_mut(&mut desc, "net1").multi_queue = false;
        assert!(matches!(
            qemu_args(&desc, &by_name(false)),
            Err(RenderError::MultiQueueMismatch { .. })
        ));
    }

    #[test]
    fn text_form_is_one_element_per_line() {
        let text = render_qemu(&samples::single_ipv4()).unwrap();
        assert_eq!(
            text,
            "-netdev\ntap,id=net0,ifname=tap0,script=no,downscript=no\n\
             -device\nvirtio-net-pci,netdev=net0,mac=52:54:00:12:34:01,romfile=\n"
        );
    }
}
