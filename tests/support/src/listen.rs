//! TCP listeners inside a pod netns, standing in for what a service mesh
//! runs there: one that answers with the connection's original destination
//! (Istio's outbound capture, `SO_ORIGINAL_DST` after a REDIRECT) and a
//! transparent one that answers with the address it was reached at (an
//! inbound TPROXY). Each answers one line and closes; both families.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::socket::{
    bind, getsockopt, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag,
    SockType, SockaddrIn, SockaddrIn6,
};

/// What a listener answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `ORIGDST ip:port`: where the client meant to go (conntrack's original destination).
    OriginalDestination,
    /// `LOCAL ip:port`: the address the (transparent) listener was reached at.
    Local,
}

/// Listeners on `port` (IPv4 and IPv6) in the netns at `netns`, until dropped.
pub struct Listener {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Listener {
    /// Listen on `0.0.0.0:port` and `[::]:port` inside `netns`; `Answer::Local`
    /// listeners are transparent (`IP_TRANSPARENT`), as TPROXY needs.
    pub fn start(netns: &str, port: u16, answer: Answer) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = [false, true]
            .into_iter()
            .map(|v6| {
                let (path, stop) = (netns.to_string(), stop.clone());
                let (ready_tx, ready_rx) = std::sync::mpsc::channel();
                let t = std::thread::spawn(move || {
                    let ns = std::fs::File::open(&path).expect("open netns");
                    nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                    let l = bound(v6, port, answer == Answer::Local);
                    ready_tx.send(()).expect("ready");
                    serve(&l, v6, answer, &stop);
                });
                ready_rx.recv().expect("listener bound");
                t
            })
            .collect();
        Listener { stop, threads }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn bound(v6: bool, port: u16, transparent: bool) -> TcpListener {
    let family = if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).expect("socket");
    setsockopt(&fd, sockopt::ReuseAddr, &true).expect("SO_REUSEADDR");
    if transparent {
        // IP_TRANSPARENT also covers IPv6 sockets (the kernel reads one flag).
        setsockopt(&fd, sockopt::IpTransparent, &true).expect("IP_TRANSPARENT");
    }
    if v6 {
        setsockopt(&fd, sockopt::Ipv6V6Only, &true).expect("IPV6_V6ONLY");
        let addr = SockaddrIn6::from(std::net::SocketAddrV6::new(
            std::net::Ipv6Addr::UNSPECIFIED,
            port,
            0,
            0,
        ));
        bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr).expect("bind [::]");
    } else {
        let addr = SockaddrIn::new(0, 0, 0, 0, port);
        bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr).expect("bind 0.0.0.0");
    }
    listen(&fd, Backlog::new(16).expect("backlog")).expect("listen");
    // SAFETY: `fd` is a listening TCP socket this function owns.
    let l = unsafe { TcpListener::from_raw_fd(fd.into_raw_fd()) };
    l.set_nonblocking(true).expect("nonblocking");
    l
}

fn serve(l: &TcpListener, v6: bool, answer: Answer, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((conn, _)) => reply(conn, v6, answer),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

fn reply(mut conn: TcpStream, v6: bool, answer: Answer) {
    let _ = conn.set_nonblocking(false);
    let line = match answer {
        Answer::Local => format!(
            "LOCAL {}",
            conn.local_addr().map_or("?".into(), |a| a.to_string())
        ),
        Answer::OriginalDestination => format!("ORIGDST {}", original_destination(&conn, v6)),
    };
    // Let the client's request arrive first: an HTTP client reads the last line.
    std::thread::sleep(Duration::from_millis(100));
    let _ = conn.write_all(format!("HTTP/1.0 200 OK\r\n\r\n{line}\n").as_bytes());
}

fn original_destination(conn: &TcpStream, v6: bool) -> String {
    let addr: Option<SocketAddr> = if v6 {
        getsockopt(conn, sockopt::Ip6tOriginalDst)
            .ok()
            .map(|a| SocketAddr::from(SockaddrIn6::from(a)))
    } else {
        getsockopt(conn, sockopt::OriginalDst)
            .ok()
            .map(|a| SocketAddr::from(std::net::SocketAddrV4::from(SockaddrIn::from(a))))
    };
    addr.map_or("?".into(), |a| a.to_string())
}
