//! Serve: answer a guest's DHCPv4, DHCPv6 and router solicitations on the
//! TAP of each NIC that asks for it, with exactly the pod's addresses,
//! routes, MTU and DNS, so a stock guest configures itself.
//!
//! Two layers. The protocol engine ([`Responder`], made from a
//! [`NicConfig`]) does no I/O and reads no clock: a frame goes in, at most
//! one frame comes out, written into the caller's buffer, and it keeps no
//! state per client (every answer follows from the NIC's configuration and
//! the request), so a restart mid-lease is harmless. The Linux layer is a
//! packet socket per TAP ([`PacketSocket`], filtered in the kernel) and one
//! poll loop for any number of NICs ([`Server`]). [`config_for`] derives a
//! NIC's configuration from an attachment's description, and [`daemon`]
//! follows a state dir and serves every NIC of every attachment that asked.
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | `NicConfig`, validated into a `Responder` (routes, names and the whole RA encoded once) |
//! | `dhcp4.rs`, `dhcp6.rs`, `ndp.rs` | each protocol: parse, decide, build |
//! | `wire.rs` | bounded reads, a writer over a fixed buffer, Ethernet/IP/UDP framing, checksums |
//! | `timing.rs` | the token bucket and the RA schedule, with time passed in |
//! | `socket.rs` | the packet socket and its BPF filter |
//! | `server.rs` | the poll loop |
//! | `from_description.rs` | a NIC's configuration from a description |
//! | `daemon.rs` | `podtap serve`: the state dir followed, every served NIC served |
//! | `control.rs` | the daemon's control socket: sockets attach hands over |
//!
//! The guest is a stranger: every read is bounded, every write goes through
//! a writer that fails instead of overrunning, a socket is rate limited
//! (past [`BURST`] frames at [`RATE_PER_SEC`] a second they
//! are dropped unparsed), and nothing a guest sends grows memory.

mod config;
mod control;
mod daemon;
mod dhcp4;
mod dhcp6;
mod from_description;
mod ndp;
mod server;
mod socket;
mod timing;
mod wire;

#[cfg(test)]
mod tests;

pub use config::{ConfigError, NicConfig, Responder, Route4, Route6};
pub(crate) use control::hand_over;
pub use control::{Handed, CONTROL_SOCKET};
pub use daemon::{daemon, DaemonOptions, ServeEvent, Serving};
pub use from_description::config_for;
pub use server::{NicKey, Server, Stats, BURST, RATE_PER_SEC};
pub use socket::PacketSocket;
pub use timing::{RaSchedule, TokenBucket};

/// A reply never exceeds this (an Ethernet frame at MTU 1500, no FCS);
/// pass a buffer at least this long.
pub const MAX_FRAME: usize = 1514;

impl Responder {
    /// The reply to one frame read from the TAP, written into `out`, or
    /// `None`: not from the guest's MAC, not a message it answers,
    /// malformed, or `out` too small. Work is bounded by the frame length.
    pub fn handle(&self, frame: &[u8], out: &mut [u8]) -> Option<usize> {
        let eth = wire::parse_eth(frame)?;
        let (src, ip) = (eth.src, eth.payload);
        if src != self.cfg.guest_mac {
            return None;
        }
        match eth.ethertype {
            wire::ETHERTYPE_IPV4 => dhcp4::handle(self, ip, out),
            wire::ETHERTYPE_IPV6 => {
                let pkt = wire::parse_ip6(ip)?;
                match pkt.next {
                    wire::PROTO_UDP => dhcp6::handle(self, src, &pkt, out),
                    wire::PROTO_ICMPV6 => ndp::handle(self, src, &pkt, out),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}
