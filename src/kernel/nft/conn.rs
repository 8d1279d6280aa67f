//! The socket: one blocking `NETLINK_NETFILTER` socket in one netns, the
//! one place that reads the kernel's answers ([`Nft::talk`]), and on it
//! batches ([`Nft::run`]), requests and dumps.
//!
//! The kernel handles a whole `sendmsg` inside that call, batch and commit
//! included, and queues every answer before it returns; a read waits
//! (bounded by [`REPLY_TIMEOUT`]) only for a kernel that misbehaves.
//! Sequence numbers never repeat over a socket's life, so an answer left
//! over from an earlier exchange is skipped, never taken for another's.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use rtnetlink::packet_core::{NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_DUMP_INTR};
use rtnetlink::sys::{Socket, SocketAddr};

use super::attr::{align, attributes, frames, Frame};
use super::error::Error;
use super::msg::{Batch, Op};
use super::sys::{NETLINK_NETFILTER, NLMSG_DONE, NLMSG_ERROR, NLMSG_HDRLEN};

/// How long an answer may take.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// The receive buffer: more than the kernel puts in one datagram (a dump
/// fills at most 32 KiB unless one message is longer).
const DATAGRAM: usize = 1 << 16;
/// Sequence numbers start here, apart from the kernel's own (0).
const SEQ_BASE: u32 = 0x4000_0000;
/// `NLMSGERR_ATTR_MSG`, `NLMSGERR_ATTR_OFFS`: an extended ack's message and
/// the offset of the attribute it is about.
const NLMSGERR_ATTR_MSG: u16 = 1;
const NLMSGERR_ATTR_OFFS: u16 = 2;

/// A blocking nfnetlink socket in one netns.
#[derive(Debug)]
pub struct Nft {
    socket: Socket,
    /// The next sequence number's index.
    sent: AtomicU32,
}

/// What [`Nft::talk`]'s reader wants after a message.
pub(crate) enum Flow {
    More,
    Done,
}

/// The kernel's answer in an `NLMSG_ERROR`: its code and extended ack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// 0 (success) or a negative errno.
    pub code: i32,
    /// The extended ack's message and the offset of the attribute it
    /// names, when the kernel gave them.
    pub message: Option<String>,
}

impl Nft {
    /// A socket in the calling thread's netns: bound, connected to the
    /// kernel (no other sender's datagram is queued), with extended acks
    /// (the kernel's message for an error) and capped acks (an error
    /// carries the failed message's header, not the whole message).
    pub fn open() -> io::Result<Nft> {
        let mut socket = Socket::new(NETLINK_NETFILTER)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        socket.set_ext_ack(true)?;
        socket.set_cap_ack(true)?;
        Ok(Nft {
            socket,
            sent: AtomicU32::new(0),
        })
    }

    /// Take `n` consecutive sequence numbers for a batch of `n` messages
    /// (as [`super::msg::create_len`] counts them); the first. They never
    /// repeat over the socket's life.
    pub fn seqs(&self, n: u32) -> u32 {
        SEQ_BASE.wrapping_add(self.sent.fetch_add(n, Ordering::Relaxed))
    }

    /// Send `batch` and read its acks. `Ok` when every message was acked
    /// with 0 and the batch not refused: the kernel committed it. Otherwise
    /// the first failure (by sequence number); nothing was applied.
    pub fn run(&self, batch: &Batch) -> Result<(), Error> {
        batch_result(batch, self.acks(batch)?)
    }

    /// Send `batch` and return every answer it got, in the order the
    /// kernel sent them: the acks of its messages, or first of all (and
    /// then alone, or before the messages' acks when its commit failed)
    /// an error under the begin message's sequence number.
    pub fn acks(&self, batch: &Batch) -> Result<Vec<(u32, Ack)>, Error> {
        let mut got: Vec<(u32, Ack)> = Vec::new();
        let mut waiting: Vec<u32> = batch.acked.iter().map(|(seq, _)| *seq).collect();
        self.talk(&batch.bytes, |frame| {
            let Some(ack) = (frame.kind == NLMSG_ERROR).then(|| ack(&frame)).flatten() else {
                return Ok(Flow::More);
            };
            if frame.seq == batch.begin && ack.code != 0 {
                // Refused whole, or its commit failed: said before the
                // messages' acks (all 0 then), and nothing else matters.
                got.push((frame.seq, ack));
                return Ok(Flow::Done);
            }
            if !waiting.contains(&frame.seq) {
                // Another exchange's, or a second answer: not this batch's.
                return Ok(Flow::More);
            }
            waiting.retain(|s| *s != frame.seq);
            got.push((frame.seq, ack));
            Ok(if waiting.is_empty() {
                Flow::Done
            } else {
                Flow::More
            })
        })?;
        Ok(got)
    }

    /// Send a request (not a dump) and hand `each` every message of its
    /// answer up to its ack; the ack's error as an errno.
    pub(crate) fn request(
        &self,
        bytes: &[u8],
        seq: u32,
        mut each: impl FnMut(&Frame<'_>) -> Result<(), Error>,
    ) -> Result<Result<(), (Errno, Option<String>)>, Error> {
        let mut end = Ok(());
        self.talk(bytes, |frame| {
            if frame.seq != seq {
                return Ok(Flow::More);
            }
            if frame.kind != NLMSG_ERROR {
                each(&frame)?;
                return Ok(Flow::More);
            }
            let a = ack(&frame).ok_or_else(|| Error::Protocol("an ack cut short".into()))?;
            if a.code != 0 {
                end = Err((Errno::from_raw(-a.code), a.message));
            }
            Ok(Flow::Done)
        })?;
        Ok(end)
    }

    /// Send a dump request and hand `each` every message of its answer.
    /// Returns how it ended and whether the kernel flagged it interrupted
    /// (the ruleset changed while it was read).
    pub(crate) fn dump(
        &self,
        bytes: &[u8],
        seq: u32,
        mut each: impl FnMut(&Frame<'_>) -> Result<(), Error>,
    ) -> Result<(Result<(), Errno>, bool), Error> {
        let (mut end, mut interrupted) = (Ok(()), false);
        self.talk(bytes, |frame| {
            if frame.seq != seq {
                return Ok(Flow::More);
            }
            interrupted |= frame.flags & NLM_F_DUMP_INTR != 0;
            match frame.kind {
                NLMSG_DONE | NLMSG_ERROR => {
                    let code = ack(&frame).map_or(0, |a| a.code);
                    if code < 0 {
                        end = Err(Errno::from_raw(-code));
                    }
                    Ok(Flow::Done)
                }
                _ => each(&frame).map(|()| Flow::More),
            }
        })?;
        Ok((end, interrupted))
    }

    /// Send `bytes` and hand `take` each message from the kernel until it
    /// says [`Flow::Done`]: the one place that reads this socket.
    pub(crate) fn talk(
        &self,
        bytes: &[u8],
        mut take: impl FnMut(Frame<'_>) -> Result<Flow, Error>,
    ) -> Result<(), Error> {
        let sent = self
            .socket
            .send(bytes, 0)
            .map_err(Error::io("send to nfnetlink"))?;
        if sent != bytes.len() {
            return Err(Error::Protocol(format!(
                "sent {sent} of {} bytes",
                bytes.len()
            )));
        }
        let mut buf = Vec::with_capacity(DATAGRAM);
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            let n = self.receive(&mut buf, deadline)?;
            if n > buf.len() {
                return Err(Error::Protocol(format!(
                    "a datagram of {n} bytes did not fit {} bytes",
                    buf.len()
                )));
            }
            for frame in frames(&buf) {
                if let Flow::Done = take(frame)? {
                    return Ok(());
                }
            }
        }
    }

    /// The next datagram from the kernel into `buf` (cleared first, read
    /// into its spare capacity); its whole length (`MSG_TRUNC`).
    fn receive(&self, buf: &mut Vec<u8>, deadline: Instant) -> Result<usize, Error> {
        loop {
            buf.clear();
            match self
                .socket
                .recv_from(buf, libc::MSG_TRUNC | libc::MSG_DONTWAIT)
            {
                // Connected to port 0: only the kernel's datagrams arrive;
                // the check stays for a socket that is not.
                Ok((n, from)) if from.port_number() == 0 => return Ok(n),
                Ok(_) if Instant::now() >= deadline => {
                    return Err(Error::Protocol(
                        "only other senders' datagrams arrived".into(),
                    ))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait(&self.socket, deadline).map_err(Error::io("wait for nfnetlink"))?
                }
                Err(e) => return Err(Error::io("receive from nfnetlink")(e)),
            }
        }
    }
}

/// Wait until `socket` is readable, or fail with `TimedOut` at `deadline`.
fn wait(socket: &Socket, deadline: Instant) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pfd` is one valid pollfd that outlives the call, and
        // the count passed is 1.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        match r {
            1.. => return Ok(()),
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no nfnetlink answer within {} s", REPLY_TIMEOUT.as_secs()),
                ))
            }
            _ if Errno::last() == Errno::EINTR => {}
            _ => return Err(io::Error::last_os_error()),
        }
    }
}

/// The code and extended-ack message of an `NLMSG_ERROR` or `NLMSG_DONE`.
pub(crate) fn ack(frame: &Frame<'_>) -> Option<Ack> {
    let p = frame.payload();
    let code = i32::from_ne_bytes(p.get(..4)?.try_into().ok()?);
    if frame.kind != NLMSG_ERROR || frame.flags & NLM_F_ACK_TLVS == 0 {
        return Some(Ack {
            code,
            message: None,
        });
    }
    // The failed message's header, and its payload unless capped.
    let inner = usize::try_from(u32::from_ne_bytes(p.get(4..8)?.try_into().ok()?)).ok()?;
    let echoed = if frame.flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        align(inner)
    };
    let tlvs = p.get(4 + echoed..).unwrap_or_default();
    let mut message = None;
    let mut offset = None;
    for (kind, value) in attributes(tlvs) {
        match kind {
            NLMSGERR_ATTR_MSG => {
                message = Some(String::from_utf8_lossy(super::attr::string(value)).into_owned())
            }
            NLMSGERR_ATTR_OFFS => offset = value.try_into().ok().map(u32::from_ne_bytes),
            _ => {}
        }
    }
    let message = match (message, offset) {
        (Some(m), Some(o)) => Some(format!("{m}; attribute at byte {o}")),
        (None, Some(o)) => Some(format!("the attribute at byte {o} of the message")),
        (m, None) => m,
    };
    Some(Ack { code, message })
}

/// The outcome of a batch from its acks: the first error (the begin's
/// sequence number first, then by sequence number), with the others.
fn batch_result(batch: &Batch, mut acks: Vec<(u32, Ack)>) -> Result<(), Error> {
    acks.sort_by_key(|(seq, _)| (*seq != batch.begin, seq.wrapping_sub(batch.begin)));
    let mut failed: Vec<(u32, Ack)> = acks.into_iter().filter(|(_, a)| a.code != 0).collect();
    if failed.is_empty() {
        return Ok(());
    }
    let op_of = |seq: u32| {
        batch
            .acked
            .iter()
            .find(|(s, _)| *s == seq)
            .map_or(Op::Batch, |(_, op)| op.clone())
    };
    let (seq, first) = failed.remove(0);
    let also = failed
        .into_iter()
        .map(|(s, a)| (op_of(s), Errno::from_raw(-a.code)))
        .collect();
    Err(Error::Kernel {
        op: op_of(seq),
        errno: Errno::from_raw(-first.code),
        message: first.message,
        also,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::nft::attr::{Header, Writer};

    fn error_frame(code: i32, flags: u16, tlvs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut w = Writer::new();
        let h = Header {
            kind: NLMSG_ERROR,
            flags,
            seq: 9,
        };
        w.message(h, 0, 0, |w| {
            for (k, v) in tlvs {
                w.bytes(*k, v);
            }
        });
        let mut b = w.finish().unwrap();
        // Replace the nfgenmsg with the code and an echoed 16-byte header.
        let mut p = code.to_ne_bytes().to_vec();
        p.extend_from_slice(&16u32.to_ne_bytes());
        p.extend_from_slice(&[0; 12]);
        b.splice(16..20, p);
        let len = u32::try_from(b.len()).unwrap();
        b[..4].copy_from_slice(&len.to_ne_bytes());
        b
    }

    #[test]
    fn an_error_ack_gives_its_errno_and_message() {
        let b = error_frame(
            -libc::EEXIST,
            NLM_F_ACK_TLVS | NLM_F_CAPPED,
            &[(NLMSGERR_ATTR_MSG, b"exists\0")],
        );
        let f = frames(&b).next().unwrap();
        assert_eq!(
            ack(&f),
            Some(Ack {
                code: -libc::EEXIST,
                message: Some("exists".into())
            })
        );
        let plain = error_frame(0, NLM_F_CAPPED, &[]);
        assert_eq!(
            ack(&frames(&plain).next().unwrap()).map(|a| a.code),
            Some(0)
        );
    }

    #[test]
    fn a_batch_fails_with_its_first_error_and_lists_the_rest() {
        let batch = Batch {
            bytes: vec![],
            begin: 1,
            acked: vec![(2, Op::NewTable("t".into())), (3, Op::NewChain("c".into()))],
        };
        let a = |code| Ack {
            code,
            message: None,
        };
        let e = batch_result(&batch, vec![(2, a(-libc::EEXIST)), (3, a(-libc::EEXIST))]);
        match e {
            Err(Error::Kernel {
                op, errno, also, ..
            }) => {
                assert_eq!(op, Op::NewTable("t".into()));
                assert_eq!(errno, Errno::EEXIST);
                assert_eq!(also, vec![(Op::NewChain("c".into()), Errno::EEXIST)]);
            }
            other => panic!("{other:?}"),
        }
        assert!(batch_result(&batch, vec![]).is_ok());
        let refused = batch_result(&batch, vec![(1, a(-libc::ERESTART))]);
        assert!(matches!(refused, Err(Error::Kernel { op: Op::Batch, .. })));
    }
}
