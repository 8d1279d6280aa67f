//! The one error type of the renderers.

use thiserror::Error;

/// Why a description cannot be rendered in the requested format.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// A format name that is not one of [`Format::ALL`](super::Format::ALL).
    #[error("unknown format {name:?}; expected one of: {expected}")]
    UnknownFormat {
        /// The name that was given.
        name: String,
        /// The valid names, comma-separated.
        expected: String,
    },

    /// No interface of the description has a TAP: `attach` has not run.
    #[error("the description has no attached interfaces (no TAPs): run attach first")]
    NoAttachedInterfaces,

    /// An attached interface has neither `guest_mac` nor `mac`.
    #[error("interface {interface} has neither guest_mac nor mac")]
    MissingMac {
        /// The pod interface's name.
        interface: String,
    },

    /// The guest MAC is not six hex octets, or is multicast or all zeros.
    #[error("interface {interface}: {mac:?} is not a usable unicast MAC address")]
    InvalidMac {
        /// The pod interface's name.
        interface: String,
        /// The MAC as found in the description.
        mac: String,
    },

    /// A TAP name is empty, too long, or has characters a format cannot carry.
    #[error(
        "TAP name {name:?} of interface {interface} is not 1-15 characters from [A-Za-z0-9_.-]"
    )]
    InvalidTapName {
        /// The pod interface's name.
        interface: String,
        /// The offending TAP name.
        name: String,
    },

    /// An attached interface's MTU is outside 68..=65535 bytes.
    #[error("interface {interface} has MTU {mtu}, outside 68..=65535")]
    InvalidMtu {
        /// The pod interface's name.
        interface: String,
        /// The MTU in bytes.
        mtu: u32,
    },

    /// A TAP's queue count is 0 or above the kernel's maximum.
    #[error("TAP {tap} of interface {interface} has {queues} queues, outside 1..={maximum}")]
    InvalidQueueCount {
        /// The pod interface's name.
        interface: String,
        /// The TAP's name.
        tap: String,
        /// The TAP's queue count.
        queues: u32,
        /// The largest queue count allowed (the kernel's MAX_TAP_QUEUES, 256).
        maximum: u32,
    },

    /// A TAP's `multi_queue` flag does not agree with `queues > 1`.
    #[error(
        "TAP {tap} of interface {interface} has {queues} queue(s) but multi_queue={multi_queue}; \
         a multiqueue TAP must have more than one queue and the reverse"
    )]
    MultiQueueMismatch {
        /// The pod interface's name.
        interface: String,
        /// The TAP's name.
        tap: String,
        /// The TAP's queue count.
        queues: u32,
        /// The TAP's `multi_queue` flag.
        multi_queue: bool,
    },

    /// An interface address is not a valid CIDR.
    #[error("interface {interface}: invalid address {value:?}")]
    InvalidAddress {
        /// The pod interface's name.
        interface: String,
        /// The address as found in the description.
        value: String,
    },

    /// A route cannot be given to the guest (bad destination or gateway).
    #[error("route to {destination}: {reason}")]
    InvalidRoute {
        /// The route's destination as found in the description.
        destination: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A neighbour entry cannot be given to the guest.
    #[error("neighbour {ip} on {interface}: {reason}")]
    InvalidNeighbour {
        /// The neighbour's IP address as found in the description.
        ip: String,
        /// The interface the entry belongs to.
        interface: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A name server or search domain of the description's `dns` cannot be given to the guest.
    #[error("dns {value:?}: {reason}")]
    InvalidDns {
        /// The value as found in the description.
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The number of fd lists differs from the number of attached NICs.
    #[error("got fd lists for {given} NIC(s) but the description attaches {attached}")]
    FdListCount {
        /// How many fd lists were given.
        given: usize,
        /// How many NICs the description attaches.
        attached: usize,
    },

    /// A NIC was given a number of TAP fds other than its TAP's queue count.
    #[error("NIC {nic} (TAP {tap}) has {queues} queue(s) but {fds} TAP fd(s) were given")]
    QueueFdCount {
        /// The NIC id (`net{n}`).
        nic: String,
        /// The TAP's name.
        tap: String,
        /// The TAP's queue count.
        queues: u32,
        /// How many TAP fds were given for this NIC.
        fds: usize,
    },

    /// A NIC was given vhost fds, but not one per TAP fd.
    #[error("NIC {nic}: {vhost} vhost fd(s) for {taps} TAP fd(s); give none or one per queue")]
    VhostFdCount {
        /// The NIC id (`net{n}`).
        nic: String,
        /// How many TAP fds were given for this NIC.
        taps: usize,
        /// How many vhost fds were given for this NIC.
        vhost: usize,
    },

    /// A TAP or vhost fd is 2 or below (stdio, or negative).
    #[error("fd {fd} is not usable: TAP and vhost fds must be > 2 (0-2 are stdio)")]
    ReservedFd {
        /// The offending fd.
        fd: i32,
    },

    /// The same fd appears more than once among the TAP and vhost fds.
    #[error("fd {fd} is given more than once")]
    DuplicateFd {
        /// The repeated fd.
        fd: i32,
    },

    /// A format that opens TAPs by name was asked for a macvtap, which has no
    /// name to open: its character device must be opened and the fds handed over.
    #[error("interface {interface} is wired with macvtap {tap}, which {format} cannot open by name; {remedy}")]
    MacvtapByName {
        /// The pod interface's name.
        interface: String,
        /// The macvtap's name.
        tap: String,
        /// The format or VMM.
        format: &'static str,
        /// What to do instead.
        remedy: &'static str,
    },

    /// A TAP made without `IFF_VNET_HDR` for a format whose VMM opens it with
    /// the flag, which `TUNSETIFF` would then set on the TAP podtap made.
    #[error(
        "TAP {tap} of interface {interface} was made without IFF_VNET_HDR, but {format} \
         opens a virtio NIC's TAP with it (and so changes the TAP); attach without --no-vnet-hdr"
    )]
    NoVnetHdr {
        /// The pod interface's name.
        interface: String,
        /// The TAP's name.
        tap: String,
        /// The format or VMM.
        format: &'static str,
    },

    /// An interface's MTU is below the 1280 bytes Cloud Hypervisor accepts.
    #[error("Cloud Hypervisor requires mtu >= {minimum}, but interface {interface} has MTU {mtu}")]
    MtuBelowCloudHypervisorMinimum {
        /// The pod interface's name.
        interface: String,
        /// The interface's MTU in bytes.
        mtu: u32,
        /// The smallest MTU Cloud Hypervisor accepts, in bytes.
        minimum: u32,
    },

    /// A TAP has several queues or the multiqueue flag; Firecracker NICs are single-queue.
    #[error(
        "Firecracker NICs are single-queue, but TAP {tap} of interface {interface} has \
         {queues} queue(s) (multi_queue={multi_queue}); attach it with one queue"
    )]
    FirecrackerMultiQueue {
        /// The pod interface's name.
        interface: String,
        /// The TAP's name.
        tap: String,
        /// The TAP's queue count.
        queues: u32,
        /// The TAP's `multi_queue` flag.
        multi_queue: bool,
    },

    /// The network is beyond what the kernel `ip=` parameter can express.
    #[error(
        "the kernel ip= parameter cannot describe this network: {reason}; \
         use the cloud-init or guest-args format instead"
    )]
    KernelCmdlineUnsupported {
        /// Which part of the network `ip=` cannot describe.
        reason: String,
    },

    /// The network is beyond what the Kata agent's Interface / Route /
    /// ARPNeighbor messages can express.
    #[error("the Kata agent protocol cannot carry this network: {reason}")]
    KataAgentUnsupported {
        /// Which part of the network the messages cannot carry.
        reason: String,
    },

    /// The guest-args output is longer than its kernel command line budget.
    #[error(
        "guest-args is {length} bytes, over the {limit}-byte budget for the kernel command line \
         (x86 COMMAND_LINE_SIZE is 2048); use the cloud-init format instead"
    )]
    CommandLineTooLong {
        /// Length of the rendered guest-args, in bytes.
        length: usize,
        /// The budget, in bytes.
        limit: usize,
    },

    /// The format cannot carry policy routing, and dropping it would give
    /// the guest another network than the pod's.
    #[error(
        "{format} cannot carry policy routing ({what}); render cloud-init or guest-args instead"
    )]
    PolicyRoutingUnsupported {
        /// The format refusing.
        format: &'static str,
        /// What the description holds that it cannot say.
        what: String,
    },
    /// A renderer's output could not be serialised to JSON.
    #[error("cannot serialise {what} to JSON: {message}")]
    Json {
        /// What was being serialised.
        what: &'static str,
        /// The serializer's error message.
        message: String,
    },
}
