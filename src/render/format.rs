//! The output formats and their command-line names.

use std::fmt;
use std::str::FromStr;

use super::RenderError;

/// What `render` can produce from a description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `qemu`: `-netdev tap` and `-device virtio-net-pci` arguments, one per line.
    Qemu,
    /// `cloud-hypervisor`: one `--net` value per line.
    CloudHypervisor,
    /// `cloud-hypervisor-api`: one `vm.add-net` JSON body per line.
    CloudHypervisorApi,
    /// `firecracker`: the `network-interfaces` part of a config file.
    Firecracker,
    /// `libvirt`: one `<interface>` element per line.
    Libvirt,
    /// `cloud-init`: a NoCloud `network-config` file (version 2).
    CloudInit,
    /// `kernel-cmdline`: the kernel `ip=` parameter (one NIC, IPv4 only).
    KernelCmdline,
    /// `guest-args`: `podtap.nic`/`route`/`neigh` kernel command line entries, on one line.
    GuestArgs,
    /// `kata-agent`: the Kata agent's `UpdateInterface`, `UpdateRoutes` and
    /// `AddARPNeighbors` requests, as one JSON object.
    KataAgent,
}

impl Format {
    /// Every format, in the order the documentation lists them.
    pub const ALL: [Format; 9] = [
        Format::Qemu,
        Format::CloudHypervisor,
        Format::CloudHypervisorApi,
        Format::Firecracker,
        Format::Libvirt,
        Format::CloudInit,
        Format::KernelCmdline,
        Format::GuestArgs,
        Format::KataAgent,
    ];

    /// Whether it reads the description's routes, neighbours or rules (the
    /// guest's configuration), not only its NICs.
    pub fn reads_tables(self) -> bool {
        matches!(
            self,
            Format::CloudInit | Format::KernelCmdline | Format::GuestArgs | Format::KataAgent
        )
    }

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Qemu => "qemu",
            Format::CloudHypervisor => "cloud-hypervisor",
            Format::CloudHypervisorApi => "cloud-hypervisor-api",
            Format::Firecracker => "firecracker",
            Format::Libvirt => "libvirt",
            Format::CloudInit => "cloud-init",
            Format::KernelCmdline => "kernel-cmdline",
            Format::GuestArgs => "guest-args",
            Format::KataAgent => "kata-agent",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = RenderError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| RenderError::UnknownFormat {
                name: name.to_string(),
                expected: Format::ALL.map(Format::as_str).join(", "),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for format in Format::ALL {
            assert_eq!(format.to_string().parse::<Format>(), Ok(format));
        }
    }

    #[test]
    fn names_are_the_documented_ones() {
        let names: Vec<String> = Format::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "qemu",
                "cloud-hypervisor",
                "cloud-hypervisor-api",
                "firecracker",
                "libvirt",
                "cloud-init",
                "kernel-cmdline",
                "guest-args",
                "kata-agent"
            ]
        );
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let error = "vmware".parse::<Format>().unwrap_err();
        let message = error.to_string();
        assert!(message.contains("\"vmware\""), "{message}");
        assert!(message.contains("cloud-hypervisor-api"), "{message}");
    }
}
