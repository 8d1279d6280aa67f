//! One ICMP echo from inside a netns (the demo's peer reaching the guest),
//! over a raw socket: the demo runs no `ping` program.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::socket::{
    self, sockopt, AddressFamily, SockFlag, SockProtocol, SockType, SockaddrIn, SockaddrIn6,
    SockaddrStorage,
};
use nix::sys::time::TimeVal;

/// Whether `target` answers an echo sent from the netns at `netns` within `wait`.
pub fn ping_from(netns: &Path, target: IpAddr, wait: Duration) -> io::Result<bool> {
    let ns = std::fs::File::open(netns)?;
    std::thread::scope(|s| {
        s.spawn(move || {
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(io::Error::from)?;
            echo(target, wait)
        })
        .join()
        .map_err(|_| io::Error::other("the ping thread panicked"))?
    })
}

/// The echo request for `target`, with identifier `id`.
fn request(target: IpAddr, id: u16) -> Vec<u8> {
    let kind = if target.is_ipv4() { 8u8 } else { 128 };
    let mut msg = vec![kind, 0, 0, 0];
    msg.extend_from_slice(&id.to_be_bytes());
    msg.extend_from_slice(&[0, 1]);
    msg.extend_from_slice(b"podtap demo");
    if target.is_ipv4() {
        // The kernel checksums ICMPv6 on raw sockets, not ICMP.
        let sum = checksum(&msg);
        msg[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    msg
}

/// Whether `got` (as a raw socket of `target`'s family hands it over) is
/// the reply to our echo `id`.
fn is_reply(target: IpAddr, got: &[u8], id: u16) -> bool {
    // An IPv4 raw socket hands over the IP header too.
    let icmp = if target.is_ipv4() {
        got.get(usize::from(got.first().map_or(0, |b| b & 0xf)) * 4..)
    } else {
        Some(got)
    };
    let reply = if target.is_ipv4() { 0u8 } else { 129 };
    icmp.is_some_and(|m| m.first() == Some(&reply) && m.get(4..6) == Some(&id.to_be_bytes()))
}

fn echo(target: IpAddr, wait: Duration) -> io::Result<bool> {
    let (family, protocol) = match target {
        IpAddr::V4(_) => (AddressFamily::Inet, SockProtocol::Icmp),
        IpAddr::V6(_) => (AddressFamily::Inet6, SockProtocol::IcmpV6),
    };
    let fd = socket::socket(family, SockType::Raw, SockFlag::SOCK_CLOEXEC, protocol)?;
    let id = u16::try_from(std::process::id() & 0xffff).unwrap_or(0);
    let msg = request(target, id);
    match target {
        IpAddr::V4(a) => socket::sendto(
            fd.as_raw_fd(),
            &msg,
            &SockaddrIn::from(std::net::SocketAddrV4::new(a, 0)),
            socket::MsgFlags::empty(),
        ),
        IpAddr::V6(a) => socket::sendto(
            fd.as_raw_fd(),
            &msg,
            &SockaddrIn6::from(std::net::SocketAddrV6::new(a, 0, 0, 0)),
            socket::MsgFlags::empty(),
        ),
    }?;
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 1500];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let left = left.max(Duration::from_millis(1));
        socket::setsockopt(
            &fd,
            sockopt::ReceiveTimeout,
            &TimeVal::from(libc::timeval {
                tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(1),
                tv_usec: libc::suseconds_t::from(left.subsec_micros()),
            }),
        )?;
        let (n, from) = match socket::recvfrom::<SockaddrStorage>(fd.as_raw_fd(), &mut buf) {
            Ok(r) => r,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let sender = from.and_then(|a| {
            a.as_sockaddr_in()
                .map(|s| IpAddr::from(s.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|s| IpAddr::from(s.ip())))
        });
        if sender == Some(target) && is_reply(target, &buf[..n], id) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !u16::try_from(sum).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_request_checksums_to_zero() {
        let msg = request(IpAddr::from([198, 18, 0, 1]), 0x1234);
        assert_eq!(checksum(&msg), 0);
        assert_eq!(&msg[4..6], &[0x12, 0x34]);
    }

    #[test]
    fn a_reply_is_matched_by_type_and_identifier() {
        let v4 = IpAddr::from([198, 18, 0, 1]);
        let mut got = vec![0x45u8; 20];
        got.extend_from_slice(&[0, 0, 0, 0, 0x12, 0x34, 0, 1]);
        assert!(is_reply(v4, &got, 0x1234));
        assert!(!is_reply(v4, &got, 0x4321));
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert!(is_reply(v6, &[129, 0, 0, 0, 0x12, 0x34], 0x1234));
        assert!(!is_reply(v6, &[128, 0, 0, 0, 0x12, 0x34], 0x1234));
    }
}
