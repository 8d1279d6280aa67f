//! One poll loop for every served NIC: reads what each packet socket
//! queued (a token bucket per socket), answers, and sends the periodic
//! router advertisements. Memory is fixed: one receive and one send buffer
//! for the whole loop, no state per client. At rest it sleeps until a
//! socket is readable, one of the caller's descriptors is, or the next
//! router advertisement is due (minutes apart once the first three went).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::socket::PacketSocket;
use super::timing::{RaSchedule, TokenBucket};
use super::{Responder, MAX_FRAME};

/// Packets a second one guest may make the responder answer, and the burst.
pub const RATE_PER_SEC: u32 = 20;
/// The burst of [`RATE_PER_SEC`].
pub const BURST: u32 = 40;
/// Frames read from one socket per wake-up before the others get a turn.
const READS_PER_WAKE: usize = 64;

/// Which NIC of which attachment a served NIC is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NicKey {
    /// The attachment (sandbox id).
    pub id: String,
    /// Its TAP.
    pub tap: String,
}

/// Counters for one NIC.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Frames the socket filter let through.
    pub received: u64,
    /// Answers sent.
    pub answered: u64,
    /// Frames read and dropped unparsed past the rate limit.
    pub rate_limited: u64,
    /// Router advertisements sent unsolicited.
    pub ras_sent: u64,
    /// ENETDOWN reports: the link went down (or was down at bind).
    pub link_down: u64,
    /// Other socket errors.
    pub errors: u64,
    /// The errno of the last error counted in `errors`.
    pub last_errno: Option<i32>,
}

impl Stats {
    fn error(&mut self, e: &io::Error) {
        self.errors += 1;
        self.last_errno = e.raw_os_error();
    }
}

/// One served NIC: its socket, what it answers, its limits and RA timer.
#[derive(Debug)]
pub struct Nic {
    /// Which NIC it is.
    pub key: NicKey,
    sock: PacketSocket,
    responder: Responder,
    bucket: TokenBucket,
    ra: Option<RaSchedule>,
    /// What it did so far.
    pub stats: Stats,
    /// Set when the socket failed (its TAP is gone): no longer polled.
    pub failed: Option<io::ErrorKind>,
}

/// The poll loop for every NIC.
#[derive(Debug)]
pub struct Server {
    nics: Vec<Nic>,
    start: Instant,
    rx: Box<[u8; 2048]>,
    tx: Box<[u8; MAX_FRAME]>,
    random: RandomState,
}

impl Default for Server {
    fn default() -> Self {
        Server::new()
    }
}

impl Server {
    /// A loop serving nothing yet.
    pub fn new() -> Server {
        Server {
            nics: Vec::new(),
            start: Instant::now(),
            rx: Box::new([0; 2048]),
            tx: Box::new([0; MAX_FRAME]),
            random: RandomState::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn random(&self, salt: u64) -> u32 {
        let mut h = self.random.build_hasher();
        h.write_u64(salt);
        let [a, b, c, d, ..] = h.finish().to_le_bytes();
        u32::from_le_bytes([a, b, c, d])
    }

    /// The NICs served, in the order they were added.
    pub fn nics(&self) -> &[Nic] {
        &self.nics
    }

    /// Serve `responder`'s NIC on `sock`, replacing a NIC with the same key
    /// (its counters go on).
    pub fn add(&mut self, key: NicKey, sock: PacketSocket, responder: Responder) {
        let now = self.now_ms();
        let ra = responder.serves_v6().then(|| RaSchedule::new(now));
        let stats = self.remove(|k| *k == key).pop().unwrap_or_default();
        self.nics.push(Nic {
            key,
            sock,
            responder,
            bucket: TokenBucket::new(RATE_PER_SEC, BURST, now),
            ra,
            stats,
            failed: None,
        });
    }

    /// Stop serving the NICs `pick` chooses (their sockets close); their counters.
    pub fn remove(&mut self, pick: impl Fn(&NicKey) -> bool) -> Vec<Stats> {
        let (gone, kept): (Vec<Nic>, Vec<Nic>) = std::mem::take(&mut self.nics)
            .into_iter()
            .partition(|n| pick(&n.key));
        self.nics = kept;
        gone.into_iter().map(|n| n.stats).collect()
    }

    /// One wait and the work it found: due RAs, then readable sockets.
    /// Returns the indexes of `others` that are readable (the caller's
    /// descriptors, waited on in the same `poll`).
    pub fn turn(&mut self, others: &[BorrowedFd<'_>]) -> io::Result<Vec<usize>> {
        self.send_due_ras();
        let timeout = self.sleep();
        let (ready, theirs) = self.wait(timeout, others)?;
        for i in ready {
            self.drain(i);
        }
        Ok(theirs)
    }

    /// Until the next router advertisement is due; forever with none.
    fn sleep(&self) -> PollTimeout {
        let now = self.now_ms();
        let next = self
            .nics
            .iter()
            .filter(|n| n.failed.is_none())
            .filter_map(|n| n.ra.as_ref())
            .map(RaSchedule::next_ms)
            .min();
        match next {
            None => PollTimeout::NONE,
            Some(t) => {
                let ms = t
                    .saturating_sub(now)
                    .min(u64::from(i32::MAX.unsigned_abs()));
                PollTimeout::try_from(i32::try_from(ms).unwrap_or(i32::MAX))
                    .unwrap_or(PollTimeout::MAX)
            }
        }
    }

    /// Poll the live sockets and `others`: the readable (or failed) NICs,
    /// and the readable `others`.
    fn wait(
        &self,
        timeout: PollTimeout,
        others: &[BorrowedFd<'_>],
    ) -> io::Result<(Vec<usize>, Vec<usize>)> {
        let live: Vec<usize> = (0..self.nics.len())
            .filter(|&i| self.nics[i].failed.is_none())
            .collect();
        let mut fds: Vec<PollFd<'_>> = others
            .iter()
            .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
            .chain(
                live.iter()
                    .map(|&i| PollFd::new(self.nics[i].sock.fd(), PollFlags::POLLIN)),
            )
            .collect();
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let hit = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
        let theirs = (0..others.len())
            .filter(|&i| fds.get(i).is_some_and(hit))
            .collect();
        let ready = live
            .iter()
            .zip(&fds[others.len()..])
            .filter(|(_, fd)| hit(fd))
            .map(|(&i, _)| i)
            .collect();
        Ok((ready, theirs))
    }

    /// Read what one socket has queued (bounded per turn). Past the rate
    /// limit a frame is read and dropped without being parsed.
    fn drain(&mut self, i: usize) {
        let now = self.now_ms();
        let Some(nic) = self.nics.get_mut(i) else {
            return;
        };
        for _ in 0..READS_PER_WAKE {
            let n = match nic.sock.recv(&mut self.rx[..]) {
                Ok(Some(n)) => n,
                Ok(None) => return,
                // The TAP went down, or was down at bind (before its VMM
                // opens it): reported, and the socket works once it is up.
                Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => {
                    nic.stats.link_down += 1;
                    return;
                }
                Err(e) => {
                    nic.stats.error(&e);
                    nic.failed = Some(e.kind());
                    return;
                }
            };
            nic.stats.received += 1;
            if !nic.bucket.take(now) {
                nic.stats.rate_limited += 1;
                continue;
            }
            let Some(len) = self
                .rx
                .get(..n)
                .and_then(|f| nic.responder.handle(f, &mut self.tx[..]))
            else {
                continue;
            };
            match self.tx.get(..len).map(|f| nic.sock.send(f)) {
                Some(Ok(())) => nic.stats.answered += 1,
                Some(Err(e)) => nic.stats.error(&e),
                None => nic.stats.errors += 1,
            }
        }
    }

    fn send_due_ras(&mut self) {
        let now = self.now_ms();
        for i in 0..self.nics.len() {
            let random = self.random(now ^ u64::try_from(i).unwrap_or(0));
            let nic = &mut self.nics[i];
            let Some(ra) = nic.ra.as_mut().filter(|r| r.due(now)) else {
                continue;
            };
            if nic.failed.is_some() {
                ra.sent(now, random);
                continue;
            }
            let sent = nic
                .responder
                .unsolicited_ra(&mut self.tx[..])
                .and_then(|n| self.tx.get(..n))
                .map(|f| nic.sock.send(f));
            match sent {
                Some(Ok(())) => {
                    ra.sent(now, random);
                    nic.stats.ras_sent += 1;
                }
                // Down (a TAP before its VMM opens it): soon again, without
                // using up an initial fast RA.
                Some(Err(e)) if e.raw_os_error() == Some(libc::ENETDOWN) => ra.retry(now),
                Some(Err(e)) => {
                    ra.sent(now, random);
                    nic.stats.error(&e);
                }
                None => {
                    ra.sent(now, random);
                    nic.stats.errors += 1;
                }
            }
        }
    }
}
