//! The daemon's control socket (`<state dir>/serve.sock`): attach hands
//! the daemon a packet socket per served TAP, opened and bound in the pod
//! netns before attach returns, so the guest's first request is queued on
//! a socket the daemon reads, however soon the VMM starts.
//!
//! One connection, one message: a JSON line `{"id":…,"taps":[[name,
//! ifindex],…]}` with one descriptor per TAP (SCM_RIGHTS), then the
//! daemon's answer `ok N\n` once it serves them. Only root may connect
//! (the socket is 0600 in the 0700 state dir, and SO_PEERCRED is checked).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
use serde::{Deserialize, Serialize};

/// The control socket's name in the state dir.
pub const CONTROL_SOCKET: &str = "serve.sock";

/// The most TAPs one message hands over (an attachment's NICs).
pub const MAX_TAPS: usize = 64;

/// The longest message read (a sandbox id and 64 TAP names fit).
const MAX_MESSAGE: usize = 8 * 1024;

/// How long either side waits for the other.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// What attach hands over: the attachment and its served TAPs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handed {
    /// The sandbox id.
    pub id: String,
    /// Each TAP's name and ifindex, in the order of the descriptors.
    pub taps: Vec<(String, u32)>,
}

/// Send `handed` with one socket per TAP to the daemon listening in
/// `state`; `Ok(false)` when no daemon listens there.
pub fn send(state: &Path, handed: &Handed, sockets: &[OwnedFd]) -> io::Result<bool> {
    let stream = match UnixStream::connect(state.join(CONTROL_SOCKET)) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let mut line = serde_json::to_vec(handed).map_err(io::Error::other)?;
    line.push(b'\n');
    let fds: Vec<RawFd> = sockets.iter().map(AsRawFd::as_raw_fd).collect();
    crate::handover::send_with_fds(&stream, &line, &fds, None)?;
    let mut answer = [0u8; 32];
    let n = (&stream).read(&mut answer)?;
    match answer.get(..n) {
        Some(a) if a.starts_with(b"ok ") => Ok(true),
        _ => Err(io::Error::other(format!(
            "the serve daemon answered {:?}",
            String::from_utf8_lossy(answer.get(..n).unwrap_or_default())
        ))),
    }
}

/// Read one hand-over from `stream` (a connection the daemon accepted):
/// the message and its descriptors, after checking the peer is root.
pub fn receive(stream: &UnixStream) -> io::Result<(Handed, Vec<OwnedFd>)> {
    crate::handover::check_root_peer(stream)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut cmsg = nix::cmsg_space!([RawFd; MAX_TAPS]);
    let (n, fds) = {
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        let msg = recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let mut fds = Vec::new();
        for c in msg.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(received) = c {
                // SAFETY: the kernel just installed these descriptors in
                // this process for this message; nothing else owns them.
                fds.extend(
                    received
                        .into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        (msg.bytes, fds)
    };
    let line = buf.get(..n).unwrap_or_default();
    let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
    let handed: Handed = serde_json::from_slice(line).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a hand-over that does not parse: {e}"),
        )
    })?;
    if handed.taps.len() != fds.len() || fds.len() > MAX_TAPS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} TAPs named, {} sockets sent",
                handed.taps.len(),
                fds.len()
            ),
        ));
    }
    Ok((handed, fds))
}

/// Answer a hand-over: `ok N` (N sockets served).
pub fn answer(mut stream: &UnixStream, served: usize) {
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    let _ = writeln!(stream, "ok {served}");
}

/// Hand the daemon listening in `state` a packet socket on each served TAP
/// of `desc` (attachment `id`, netns `ns`), opened and bound before this
/// returns: `Some(true)` when a daemon took them, `Some(false)` when none
/// listens (or it failed: said in the log), `None` when no TAP is served.
pub(crate) fn hand_over(
    state: &crate::state::StateDir,
    id: &crate::state::SandboxId,
    ns: &crate::kernel::netns::NetNs,
    desc: &crate::model::Description,
) -> Option<bool> {
    let taps: Vec<(String, u32)> = desc
        .interfaces
        .iter()
        .filter_map(|i| i.tap.as_ref())
        .filter(|t| t.served)
        .map(|t| (t.name.clone(), t.ifindex))
        .collect();
    if taps.is_empty() {
        return None;
    }
    if !state.path().join(CONTROL_SOCKET).exists() {
        return Some(false);
    }
    let opened = {
        let taps = taps.clone();
        ns.run(move || super::daemon::open_in_netns(&taps))
    };
    let handed = Handed {
        id: id.to_string(),
        taps,
    };
    let sent = opened
        .map_err(|e| io::Error::other(e.to_string()))
        .and_then(|socks| {
            let fds: Vec<OwnedFd> = socks
                .into_iter()
                .map(super::socket::PacketSocket::into_fd)
                .collect();
            send(state.path(), &handed, &fds)
        });
    match sent {
        Ok(taken) => Some(taken),
        Err(e) => {
            tracing::warn!("sandbox {id}: could not hand the served TAPs to podtap serve: {e}");
            Some(false)
        }
    }
}
