//! Cloud Hypervisor: `--net` values, by TAP name or with inherited fds.

use super::fds::{check_tap_fd_lists, check_usable_and_distinct, join_fds};
use super::nic::{attached_nics, Nic};
use super::RenderError;
use crate::model::Description;

/// Cloud Hypervisor refuses a smaller `mtu` (virtio-net MIN_MTU).
pub(crate) const CLOUD_HYPERVISOR_MIN_MTU: u32 = 1280;

/// One `--net` value per NIC.
///
/// Without fds: `tap=NAME,mac=MAC,mtu=M,num_queues=2Q,id=netN`.
/// With fds (`fds[n]` = one fd per queue of NIC n):
/// `fd=[3,4],mac=MAC,num_queues=4,id=netN`. `mtu` is left out then: Cloud
/// Hypervisor would set it through a socket of its own netns by TAP name,
/// while podtap has already given the TAP the pod interface's MTU.
pub fn cloud_hypervisor_net_args(
    desc: &Description,
    fds: Option<&[Vec<i32>]>,
) -> Result<Vec<String>, RenderError> {
    let nics = attached_nics(desc)?;
    for nic in &nics {
        check_cloud_hypervisor_nic(nic)?;
    }
    match fds {
        None => nics
            .iter()
            .map(|nic| {
                nic.opened_by_name(
                    "Cloud Hypervisor's --net tap=",
                    "open its queues and pass them as fd=",
                )?;
                Ok(net_arg_by_name(nic))
            })
            .collect(),
        Some(fds) => {
            check_tap_fd_lists(&nics, fds)?;
            check_usable_and_distinct(fds.iter().flatten())?;
            Ok(nics
                .iter()
                .zip(fds)
                .map(|(nic, fds)| net_arg_with_fds(nic, fds))
                .collect())
        }
    }
}

/// Text form: one `--net` value per line.
pub(crate) fn render_cloud_hypervisor(desc: &Description) -> Result<String, RenderError> {
    let args = cloud_hypervisor_net_args(desc, None)?;
    Ok(args.iter().map(|arg| format!("{arg}\n")).collect())
}

/// The rules Cloud Hypervisor itself enforces on a NIC opened by name:
/// mtu >= 1280 and a TAP whose multiqueue flag matches the queue count.
pub(crate) fn check_cloud_hypervisor_nic(nic: &Nic<'_>) -> Result<(), RenderError> {
    if nic.interface.mtu < CLOUD_HYPERVISOR_MIN_MTU {
        return Err(RenderError::MtuBelowCloudHypervisorMinimum {
            interface: nic.interface.name.clone(),
            mtu: nic.interface.mtu,
            minimum: CLOUD_HYPERVISOR_MIN_MTU,
        });
    }
    nic.check_multi_queue_agreement()
}

/// Cloud Hypervisor counts rx and tx queues: two per TAP queue.
pub(crate) fn num_queues(tap_queues: usize) -> usize {
    2 * tap_queues
}

fn net_arg_by_name(nic: &Nic<'_>) -> String {
    format!(
        "tap={},mac={},mtu={},num_queues={},id={}",
        nic.tap.name,
        nic.mac,
        nic.interface.mtu,
        num_queues(nic.tap.queues as usize),
        nic.id
    )
}

fn net_arg_with_fds(nic: &Nic<'_>, fds: &[i32]) -> String {
    format!(
        "fd=[{}],mac={},num_queues={},id={}",
        join_fds(fds, ","),
        nic.mac,
        num_queues(fds.len()),
        nic.id
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    #[test]
    fn by_name_gives_tap_mac_mtu_and_rx_tx_queue_count() {
        let args = cloud_hypervisor_net_args(&samples::pod(), None).unwrap();
        assert_eq!(
            args,
            [
                "tap=tap0,mac=0a:58:0a:f4:01:05,mtu=1400,num_queues=2,id=net0",
                "tap=tap1,mac=52:54:00:12:34:04,mtu=9000,num_queues=8,id=net1",
            ]
        );
    }

    #[test]
    fn with_fds_num_queues_is_twice_the_fd_count() {
        let fds = vec![vec![3], vec![4, 5, 6, 7]];
        let args = cloud_hypervisor_net_args(&samples::pod(), Some(&fds)).unwrap();
        assert_eq!(
            args,
            [
                "fd=[3],mac=0a:58:0a:f4:01:05,num_queues=2,id=net0",
                "fd=[4,5,6,7],mac=52:54:00:12:34:04,num_queues=8,id=net1",
            ]
        );
        for (arg, fds) in args.iter().zip(&fds) {
            assert!(arg.contains(&format!("num_queues={}", 2 * fds.len())));
        }
    }

    #[test]
    fn fds_up_to_2_are_refused() {
        for fd in [-1, 0, 1, 2] {
            let fds = vec![vec![fd]];
            assert_eq!(
                cloud_hypervisor_net_args(&samples::single_ipv4(), Some(&fds)).unwrap_err(),
                RenderError::ReservedFd { fd }
            );
        }
    }

    #[test]
    fn fd_count_must_match_the_tap_queues() {
        let fds = vec![vec![3], vec![4, 5]];
        assert!(matches!(
            cloud_hypervisor_net_args(&samples::pod(), Some(&fds)),
            Err(RenderError::QueueFdCount {
                queues: 4,
                fds: 2,
                ..
            })
        ));
    }

    #[test]
    fn mtu_below_1280_is_refused_with_a_clear_message() {
        let mut desc = samples::pod();
        samples::interface_mut(&mut desc, "eth0").mtu = 1200;
        let error = cloud_hypervisor_net_args(&desc, None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "Cloud Hypervisor requires mtu >= 1280, but interface eth0 has MTU 1200"
        );
        let fds = vec![vec![3], vec![4, 5, 6, 7]];
        assert!(cloud_hypervisor_net_args(&desc, Some(&fds)).is_err());
    }

    #[test]
    fn multiqueue_flag_must_agree_with_queue_count() {
        let mut desc = samples::pod();
        samples::tap_mut(&mut desc, "eth0").multi_queue = true;
        assert!(matches!(
            cloud_hypervisor_net_args(&desc, None),
            Err(RenderError::MultiQueueMismatch {
                queues: 1,
                multi_queue: true,
                ..
            })
        ));
    }
}
