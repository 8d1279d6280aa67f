//! The one error type of the renderers.

use thiserror::Error;

/// Why a description cannot be rendered in the requested format.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RenderError {
    #[error("unknown format {name:?}; expected one of: {expected}")]
    UnknownFormat { name: String, expected: String },

    #[error("the description has no attached interfaces (no TAPs): run attach first")]
    NoAttachedInterfaces,

    #[error("interface {interface} has neither guest_mac nor mac")]
    MissingMac { interface: String },

    #[error("interface {interface}: {mac:?} is not a usable unicast MAC address")]
    InvalidMac { interface: String, mac: String },

    #[error(
        "TAP name {name:?} of interface {interface} is not 1-15 characters from [A-Za-z0-9_.-]"
    )]
    InvalidTapName { interface: String, name: String },

    #[error("interface {interface} has MTU {mtu}, outside 68..=65535")]
    InvalidMtu { interface: String, mtu: u32 },

    #[error("TAP {tap} of interface {interface} has {queues} queues, outside 1..={maximum}")]
    InvalidQueueCount {
        interface: String,
        tap: String,
        queues: u32,
        maximum: u32,
    },

    #[error(
        "TAP {tap} of interface {interface} has {queues} queue(s) but multi_queue={multi_queue}; \
         a multiqueue TAP must have more than one queue and the reverse"
    )]
    MultiQueueMismatch {
        interface: String,
        tap: String,
        queues: u32,
        multi_queue: bool,
    },

    #[error("interface {interface}: invalid address {value:?}")]
    InvalidAddress { interface: String, value: String },

    #[error("route to {destination}: {reason}")]
    InvalidRoute { destination: String, reason: String },

    #[error("neighbour {ip} on {interface}: {reason}")]
    InvalidNeighbour {
        ip: String,
        interface: String,
        reason: String,
    },

    #[error("got fd lists for {given} NIC(s) but the description attaches {attached}")]
    FdListCount { given: usize, attached: usize },

    #[error("NIC {nic} (TAP {tap}) has {queues} queue(s) but {fds} TAP fd(s) were given")]
    QueueFdCount {
        nic: String,
        tap: String,
        queues: u32,
        fds: usize,
    },

    #[error("NIC {nic}: {vhost} vhost fd(s) for {taps} TAP fd(s); give none or one per queue")]
    VhostFdCount {
        nic: String,
        taps: usize,
        vhost: usize,
    },

    #[error("fd {fd} is not usable: TAP and vhost fds must be > 2 (0-2 are stdio)")]
    ReservedFd { fd: i32 },

    #[error("fd {fd} is given more than once")]
    DuplicateFd { fd: i32 },

    #[error("Cloud Hypervisor requires mtu >= {minimum}, but interface {interface} has MTU {mtu}")]
    MtuBelowCloudHypervisorMinimum {
        interface: String,
        mtu: u32,
        minimum: u32,
    },

    #[error(
        "Firecracker NICs are single-queue, but TAP {tap} of interface {interface} has \
         {queues} queue(s) (multi_queue={multi_queue}); attach it with one queue"
    )]
    FirecrackerMultiQueue {
        interface: String,
        tap: String,
        queues: u32,
        multi_queue: bool,
    },

    #[error(
        "the kernel ip= parameter cannot describe this network: {reason}; \
         use the cloud-init or guest-args format instead"
    )]
    KernelCmdlineUnsupported { reason: String },

    #[error(
        "guest-args is {length} bytes, over the {limit}-byte budget for the kernel command line \
         (x86 COMMAND_LINE_SIZE is 2048); use the cloud-init format instead"
    )]
    CommandLineTooLong { length: usize, limit: usize },

    #[error("cannot serialise {what} to JSON: {message}")]
    Json { what: &'static str, message: String },
}
