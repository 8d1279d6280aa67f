//! The fd arguments a VMM gets for the handed-over fds (pure).

use crate::error::{Error, Result};
use crate::model::Description;
use crate::render::{cloud_hypervisor_net_args, qemu_args, QemuTapSource};

/// Whose fd argument layout to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// QEMU: `-netdev tap,fds=…[,vhostfds=…]` + `-device …`.
    Qemu,
    /// Cloud Hypervisor: `--net fd=[…],…`.
    CloudHypervisor,
}

/// The arguments to append for `layout`, given the open fds (`taps[n]`: one
/// fd per queue of NIC n; `vhost` empty or one list per NIC).
pub(crate) fn handover_args(
    desc: &Description,
    layout: Layout,
    taps: &[Vec<i32>],
    vhost: &[Vec<i32>],
) -> Result<Vec<String>> {
    let render_err = Error::Render;
    match layout {
        Layout::Qemu => qemu_args(
            desc,
            &QemuTapSource::Fds {
                taps: taps.to_vec(),
                vhost: vhost.to_vec(),
            },
        )
        .map_err(render_err),
        Layout::CloudHypervisor => Ok(cloud_hypervisor_net_args(desc, Some(taps))
            .map_err(render_err)?
            .into_iter()
            .flat_map(|value| ["--net".to_string(), value])
            .collect()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::render::samples;

    /// eth0: 1 queue, net1: 2 queues (MTU 9000, so Cloud Hypervisor accepts both).
    pub(crate) fn desc_with_taps() -> Description {
        let mut desc = samples::pod();
        samples::set_queues(&mut desc, "net1", 2);
        samples::interface_mut(&mut desc, "eth0").mtu = 1500;
        desc
    }

    #[test]
    fn qemu_gets_fds_and_vhostfds() {
        let desc = desc_with_taps();
        let args = handover_args(
            &desc,
            Layout::Qemu,
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
        let args =
            handover_args(&desc, Layout::CloudHypervisor, &[vec![3], vec![4, 5]], &[]).unwrap();
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
        let err = handover_args(&desc, Layout::Qemu, &[vec![3], vec![4]], &[]).unwrap_err();
        assert!(matches!(err, Error::Render(_)), "{err}");
    }
}
