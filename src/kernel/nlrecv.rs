//! Reading a netlink socket: bounded, whole, and only the kernel's word.
//!
//! Three things the kernel does not do for a reader:
//! - it cuts a datagram longer than the buffer and says so only through
//!   `MSG_TRUNC` (`recv` with that flag returns the datagram's real length);
//! - it lets any process with `CAP_NET_ADMIN` over the netns's user
//!   namespace (a pod's root, in a pod with its own user namespace) send a
//!   unicast to podtap's port: only datagrams whose sender port (`nl_pid`) is
//!   0 come from the kernel, and a socket connected to port 0
//!   ([`from_kernel_only`]) gets no other unicast at all, so a flood cannot
//!   take the room in its buffer that the kernel's answers need;
//! - it never wakes a reader that waits for an answer that will not come.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use rtnetlink::sys::{Socket, SocketAddr};

/// The buffer a datagram is read into: more than the kernel puts in one
/// (a dump fills at most 32 KiB, unless a single message is longer).
pub const DATAGRAM: usize = 1 << 16;

/// Datagrams dropped because a process, not the kernel, sent them.
static FOREIGN: AtomicU64 = AtomicU64::new(0);

/// Wait up to `timeout` for the next datagram from the kernel and read it
/// into the spare capacity of `buf` (cleared first), so that
/// nothing is zeroed beforehand and only the pages the kernel writes are
/// touched (a 64 KiB buffer zeroed per batch cost a process 16 page faults).
/// `buf` then holds the datagram, cut at its capacity; returns the whole length.
///
/// The kernel answers a request inside the `sendmsg` that carried it, and
/// fills a dump's next datagram inside the `recvmsg` that took the one
/// before: the answer is nearly always queued already. So the read comes
/// first and `poll` only when nothing is there: one system call per
/// datagram, not three (poll, a peek for the size, the read). A 64-NIC
/// detach reads about 130 datagrams.
pub fn receive_spare(socket: &Socket, buf: &mut Vec<u8>, timeout: Duration) -> io::Result<usize> {
    let deadline = Instant::now() + timeout;
    loop {
        buf.clear();
        match socket.recv_from(buf, libc::MSG_TRUNC | libc::MSG_DONTWAIT) {
            Ok((n, from)) if from.port_number() == 0 => return Ok(n),
            Ok(_) => {
                foreign();
                if Instant::now() >= deadline {
                    return Err(timed_out(timeout));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait(socket, deadline, timeout)?,
            Err(e) => return Err(e),
        }
    }
}

/// Make `socket` take datagrams from the kernel only. Any process in the
/// netns may send to a netlink port it reads in `/proc/net/netlink`; one
/// with CAP_NET_ADMIN in a pod could fill podtap's receive buffer until the
/// kernel drops its answers (ENOBUFS) or stalls a read. Connected to the
/// kernel's port 0, the socket gets no other sender's unicast: the kernel
/// refuses it (ECONNREFUSED). Multicast is not affected.
pub fn from_kernel_only(socket: &Socket) -> io::Result<()> {
    socket.connect(&SocketAddr::new(0, 0))
}

/// How many datagrams from a sender other than the kernel were dropped.
#[cfg(test)]
fn foreign_dropped() -> u64 {
    FOREIGN.load(Ordering::Relaxed)
}

fn foreign() {
    let so_far = FOREIGN.fetch_add(1, Ordering::Relaxed) + 1;
    tracing::debug!(
        "dropped a netlink datagram that did not come from the kernel ({so_far} so far)"
    );
}

/// Wait until `socket` is readable, or fail with `TimedOut` at `deadline`.
fn wait(socket: &Socket, deadline: Instant, timeout: Duration) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r > 0 {
            return Ok(());
        }
        if r == 0 {
            return Err(timed_out(timeout));
        }
        if Errno::last() != Errno::EINTR {
            return Err(io::Error::last_os_error());
        }
    }
}

fn timed_out(timeout: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no netlink answer within {} s", timeout.as_secs_f32()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_core::NLM_F_REQUEST;
    use rtnetlink::packet_route::link::LinkMessage;
    use rtnetlink::packet_route::RouteNetlinkMessage;
    use rtnetlink::sys::{protocols::NETLINK_ROUTE, SocketAddr};

    fn message(seq: u32) -> Vec<u8> {
        let mut link = LinkMessage::default();
        link.header.index = 1;
        let mut buf = Vec::new();
        crate::kernel::wire::push(
            &mut buf,
            RouteNetlinkMessage::GetLink(link),
            NLM_F_REQUEST,
            seq,
        );
        buf
    }

    /// A process that sends to podtap's port is not the kernel: its
    /// datagram is dropped and the kernel's answer behind it is taken.
    /// In a netns of this thread's own (unshared; gone with the thread).
    #[test]
    fn datagrams_from_a_process_are_dropped() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP datagrams_from_a_process_are_dropped: needs root (a private netns)");
            return;
        }
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("private netns");
            let mut ours = Socket::new(NETLINK_ROUTE).expect("socket");
            ours.bind_auto().expect("bind");
            let mut addr = SocketAddr::new(0, 0);
            ours.get_address(&mut addr).expect("address");
            let port = addr.port_number();
            let mut stranger = Socket::new(NETLINK_ROUTE).expect("socket");
            stranger.bind_auto().expect("bind");
            // A forged answer to our request 7, sent to our port.
            let forged = message(7);
            stranger
                .send_to(&forged, &SocketAddr::new(port, 0), 0)
                .expect("a root process may send to another port");
            // Our request 7 to the kernel: the link at index 1 (lo).
            ours.send(&message(7), 0).expect("request");
            let mut buf = Vec::with_capacity(1 << 16);
            let n =
                receive_spare(&ours, &mut buf, Duration::from_secs(5)).expect("the kernel answers");
            // The kernel's answer is an RTM_NEWLINK (16), not the forged RTM_GETLINK (18).
            assert_eq!(u16::from_ne_bytes([buf[4], buf[5]]), 16);
            assert!(n > forged.len());
            assert!(foreign_dropped() >= 1);
        })
        .join()
        .expect("test thread");
    }

    /// Connected to the kernel's port, a socket refuses a process's
    /// datagram outright (it never takes room in the buffer) and still gets
    /// the kernel's answers.
    #[test]
    fn a_socket_for_the_kernel_only_refuses_a_process() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!(
                "SKIP a_socket_for_the_kernel_only_refuses_a_process: needs root (a private netns)"
            );
            return;
        }
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("private netns");
            let mut ours = Socket::new(NETLINK_ROUTE).expect("socket");
            ours.bind_auto().expect("bind");
            from_kernel_only(&ours).expect("connect");
            let mut addr = SocketAddr::new(0, 0);
            ours.get_address(&mut addr).expect("address");
            let mut stranger = Socket::new(NETLINK_ROUTE).expect("socket");
            stranger.bind_auto().expect("bind");
            let refused = stranger.send_to(&message(7), &SocketAddr::new(addr.port_number(), 0), 0);
            assert_eq!(
                refused.map_err(|e| e.raw_os_error()),
                Err(Some(libc::ECONNREFUSED))
            );
            ours.send(&message(8), 0).expect("request");
            let mut buf = Vec::with_capacity(1 << 16);
            receive_spare(&ours, &mut buf, Duration::from_secs(5)).expect("the kernel answers");
            assert_eq!(u16::from_ne_bytes([buf[4], buf[5]]), 16, "RTM_NEWLINK");
        })
        .join()
        .expect("test thread");
    }
}
