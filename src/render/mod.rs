//! Renderers: turn a `Description` into what a VMM or a guest consumes.
//!
//! Pure functions: no I/O, no kernel calls. Only interfaces with a TAP
//! become VM NICs, in description order; NIC n has id `net{n}` and the
//! guest MAC (`guest_mac`, else `mac`). See `docs/render.md`.

mod cloud_hypervisor;
mod cloud_hypervisor_api;
mod cloud_init;
mod dns;
mod error;
mod fds;
mod firecracker;
mod format;
mod guest_args;
mod kata_agent;
mod kernel_cmdline;
mod libvirt;
mod nic;
mod qemu;
pub(crate) mod route;

#[cfg(test)]
mod policy_tests;
#[cfg(test)]
pub(crate) mod samples;

pub use cloud_hypervisor::cloud_hypervisor_net_args;
pub use cloud_hypervisor_api::{cloud_hypervisor_net_configs, CloudHypervisorNetConfig};
pub use error::RenderError;
pub use firecracker::{firecracker_config, firecracker_interfaces, FirecrackerInterface};
pub use format::Format;
pub use qemu::{qemu_args, QemuTapSource};

use crate::model::Description;

/// The text the CLI prints for `format`, ending with a newline.
pub fn render(format: Format, desc: &Description) -> Result<String, RenderError> {
    match format {
        Format::Qemu => qemu::render_qemu(desc),
        Format::CloudHypervisor => cloud_hypervisor::render_cloud_hypervisor(desc),
        Format::CloudHypervisorApi => cloud_hypervisor_api::render_cloud_hypervisor_api(desc),
        Format::Firecracker => firecracker::render_firecracker(desc),
        Format::Libvirt => libvirt::render_libvirt(desc),
        Format::CloudInit => cloud_init::render_cloud_init(desc),
        Format::KernelCmdline => kernel_cmdline::render_kernel_cmdline(desc),
        Format::GuestArgs => guest_args::render_guest_args(desc),
        Format::KataAgent => kata_agent::render_kata_agent(desc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single_queue_pod() -> Description {
        let mut desc = samples::pod();
        samples::set_queues(&mut desc, "net1", 1);
        desc
    }

    /// The single-queue pod, without its multipath route for kata-agent
    /// (Kata's Route has one next hop, so that format refuses it).
    fn pod_for(format: Format) -> Description {
        let mut desc = single_queue_pod();
        if format == Format::KataAgent {
            samples::drop_multipath_routes(&mut desc);
        }
        desc
    }

    #[test]
    fn every_format_is_deterministic_and_ends_with_a_newline() {
        for format in Format::ALL
            .into_iter()
            .filter(|f| *f != Format::KernelCmdline)
        {
            let desc = pod_for(format);
            let first = render(format, &desc).unwrap();
            assert_eq!(first, render(format, &desc.clone()).unwrap(), "{format}");
            assert!(first.ends_with('\n'), "{format}");
        }
        let single = samples::single_ipv4();
        assert!(render(Format::KernelCmdline, &single)
            .unwrap()
            .ends_with('\n'));
    }

    #[test]
    fn every_format_refuses_a_description_without_taps() {
        let mut desc = samples::pod();
        desc.interfaces.iter_mut().for_each(|i| i.tap = None);
        for format in Format::ALL {
            assert_eq!(
                render(format, &desc).unwrap_err(),
                RenderError::NoAttachedInterfaces,
                "{format}"
            );
        }
    }

    #[test]
    fn formats_that_open_taps_by_name_refuse_a_macvtap_and_the_rest_render_it() {
        for format in Format::ALL
            .into_iter()
            .filter(|f| *f != Format::KernelCmdline)
        {
            let mut desc = pod_for(format);
            for tap in desc.interfaces.iter_mut().filter_map(|i| i.tap.as_mut()) {
                tap.device = Some(format!("/dev/podtap/s/{}", tap.name));
            }
            let by_name = matches!(
                format,
                Format::Qemu
                    | Format::CloudHypervisor
                    | Format::CloudHypervisorApi
                    | Format::Firecracker
                    | Format::Libvirt
            );
            match render(format, &desc) {
                Err(RenderError::MacvtapByName { .. }) if by_name => {}
                Ok(_) if !by_name => {}
                other => panic!("{format}: {other:?}"),
            }
        }
        // With fds, QEMU and Cloud Hypervisor take the macvtap queues.
        let mut desc = single_queue_pod();
        for tap in desc.interfaces.iter_mut().filter_map(|i| i.tap.as_mut()) {
            tap.device = Some(format!("/dev/podtap/s/{}", tap.name));
        }
        let fds: Vec<Vec<i32>> = (0..desc.attached().count())
            .map(|n| vec![10 + i32::try_from(n).unwrap()])
            .collect();
        let source = QemuTapSource::Fds {
            taps: fds.clone(),
            vhost: vec![],
        };
        assert!(qemu_args(&desc, &source).is_ok());
        assert!(cloud_hypervisor_net_args(&desc, Some(&fds)).is_ok());
    }

    #[test]
    fn unattached_interfaces_never_appear() {
        for format in Format::ALL
            .into_iter()
            .filter(|f| *f != Format::KernelCmdline)
        {
            let text = render(format, &pod_for(format)).unwrap();
            for absent in ["eth9", "52:54:00:12:34:09", "10.9.0", "10.8.0.0", "lo\""] {
                assert!(!text.contains(absent), "{format}: {absent}");
            }
        }
    }

    #[test]
    fn survives_a_json_round_trip_of_the_description() {
        for format in Format::ALL
            .into_iter()
            .filter(|f| *f != Format::KernelCmdline)
        {
            let desc = pod_for(format);
            let json = serde_json::to_string(&desc).unwrap();
            let back: Description = serde_json::from_str(&json).unwrap();
            assert_eq!(render(format, &back), render(format, &desc), "{format}");
        }
    }
}
