//! Dumps that are consistent or retried, over a batch socket.
//!
//! The kernel answers a dump in several datagrams, filling the next one as
//! the reader takes the one before (inside that `recvmsg`), so the netns can
//! change between two of them. Dumps that keep a generation number (links:
//! `dev_base_seq`; addresses) then flag the messages after the change
//! `NLM_F_DUMP_INTR`: the answer as a whole may miss objects or hold ones
//! already gone (a veth without its peer). podtap never uses such an
//! answer: it reads the dump to its end and asks again, up to [`ATTEMPTS`]
//! times, then fails naming the dump. Route, rule, tc and neighbour dumps
//! keep no generation and are never flagged (not one of 300 route dumps
//! taken while routes changed under them was): a route dump read during
//! changes is a picture of no single instant, which `podtap watch` (woken
//! by every route change) reads again. Teardown reads tc dumps only for
//! links it has already proven.
//!
//! A datagram is read into a buffer of [`nlrecv::DATAGRAM`] bytes, more than
//! the kernel puts in one (32 KiB, unless a single link message is longer). A
//! datagram longer than the buffer is never used cut: the answer is thrown
//! away and the dump asked again with a buffer that fits it (the kernel says
//! how long it was). A dump is always read to its `NLMSG_DONE` (or error):
//! the kernel runs one dump per socket and answers EBUSY to the next until
//! the reader has taken the last datagram; one left half-read (a timeout)
//! is read out before the next dump starts ([`Batch::open_dump`]).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
use rtnetlink::packet_route::RouteNetlinkMessage;

use super::batch::{seq_of, Batch, REPLY_TIMEOUT};
use super::errno;
use super::nlrecv::{self, DATAGRAM};
use super::wire::{self, code, flags, frames, push, NLMSG_DONE, NLMSG_ERROR, NLM_F_DUMP_INTR};

/// How many times a dump is asked for before an interrupted answer is an
/// error. A stranger adding and deleting links as fast as `ip -batch` goes
/// (about 100 link changes a second, beside a pod's 64 NICs) interrupted
/// five link dumps of one detach in a row once in a few thousand attaches
/// and detaches on a busy 2-CPU machine (tests/kernel_truth.rs); sixteen
/// in a row are far rarer, and a netns that changes faster still gets a
/// clear error rather than a wrong answer.
pub const ATTEMPTS: u32 = 16;

/// The most podtap reads, by default, of one answer to a dump of a table the
/// pod fills (routes, rules, neighbours, addresses, next-hop objects; a
/// caller may pass another bound: `AttachOptions::table_answer_limit`): 16
/// MiB, about 280 000 IPv4 routes (120 000 routes take 7.2 MB;
/// `docs/benchmarks.md`, "Routing size"). Whoever holds CAP_NET_ADMIN in a
/// pod can add routes until its memory limit; podtap, root on the node,
/// would hold several hundred bytes for each. Beyond this the dump fails,
/// naming itself and the bound: scan and attach, and check and show where
/// they read a bridged NIC's neighbours. Links, qdiscs and filters have no
/// bound: detach reads only those, to prove what it deletes, and it must
/// not fail.
pub const TABLE_ANSWER_LIMIT: usize = 16 << 20;

/// Dump answers thrown away because the kernel flagged them interrupted.
static INTERRUPTED: AtomicU64 = AtomicU64::new(0);

/// How one asking of a dump ended.
enum Answered {
    /// Read to its end: how it ended, and whether a change interrupted it.
    Whole {
        done: Result<(), Errno>,
        interrupted: bool,
    },
    /// A datagram did not fit the buffer, which now does: ask again.
    Cut,
}

/// What a streamed dump ([`Batch::dump_streamed`]) hands its reader while
/// the answer comes in.
pub enum Piece<'a> {
    /// The messages of dump's answer one datagram held (each whole, 4-byte
    /// aligned), before the kernel says whether the answer is whole.
    Messages(&'a [u8]),
    /// What was handed so far is void: the dump is asked again.
    Again,
}

/// Where a dump's answer got to after one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// More datagrams follow.
    More,
    /// The dump ended: 0, or the negative errno it ended with.
    Done(i32),
}

/// Pure: append the messages of dump `seq` in `datagram` to `out` (each
/// whole, 4-byte aligned), set `interrupted` when any message (its
/// `NLMSG_DONE` included) carries `NLM_F_DUMP_INTR`, and say whether the
/// dump ended. Messages of other sequence numbers (answers left over from
/// an earlier request) are skipped.
pub(super) fn take(datagram: &[u8], seq: u32, out: &mut Vec<u8>, interrupted: &mut bool) -> Step {
    for (kind, got, frame) in frames(datagram) {
        if got != seq {
            continue;
        }
        if flags(frame) & NLM_F_DUMP_INTR != 0 {
            *interrupted = true;
        }
        match kind {
            NLMSG_DONE => return Step::Done(code(frame).min(0)),
            NLMSG_ERROR if code(frame) < 0 => return Step::Done(code(frame)),
            // An ack (code 0): nothing to take.
            NLMSG_ERROR => {}
            _ => {
                out.extend_from_slice(frame);
                out.resize((out.len() + 3) & !3, 0);
            }
        }
    }
    Step::More
}

/// What a dump is of, for messages.
fn what(request: &RouteNetlinkMessage) -> &'static str {
    match request {
        RouteNetlinkMessage::GetLink(_) => "link",
        RouteNetlinkMessage::GetAddress(_) => "address",
        RouteNetlinkMessage::GetRoute(_) => "route",
        RouteNetlinkMessage::GetRule(_) => "rule",
        RouteNetlinkMessage::GetNeighbour(_) => "neighbour",
        RouteNetlinkMessage::GetQueueDiscipline(_) => "qdisc",
        RouteNetlinkMessage::GetTrafficFilter(_) => "tc filter",
        _ => "netlink",
    }
}

/// A dump request: a typed one, or the bytes of one rtnetlink's types do
/// not cover (the pod's next-hop objects, read up to the table bound).
enum Ask<'a> {
    Typed(&'a RouteNetlinkMessage),
    Raw {
        what: &'static str,
        kind: u16,
        body: &'a [u8],
    },
}

impl Ask<'_> {
    fn what(&self) -> &'static str {
        match self {
            Ask::Typed(r) => what(r),
            Ask::Raw { what, .. } => what,
        }
    }

    /// How much of its answer is read, with `table` the bound on a pod's table.
    fn limit(&self, table: usize) -> usize {
        match self {
            Ask::Typed(r) => limit_of(r, table),
            Ask::Raw { .. } => table,
        }
    }

    /// The request as dump `seq`, at the end of `buf`.
    fn write(&self, buf: &mut Vec<u8>, seq: u32) {
        match self {
            Ask::Typed(r) => push(buf, (*r).clone(), NLM_F_REQUEST | NLM_F_DUMP, seq),
            Ask::Raw { kind, body, .. } => {
                wire::push_raw(buf, *kind, NLM_F_REQUEST | NLM_F_DUMP, seq, body)
            }
        }
    }
}

impl Batch {
    /// Run dump requests one after another (the kernel allows one dump in
    /// flight per socket) and return each one's messages, or the errno it
    /// was answered with. Link messages come without their `IFLA_AF_SPEC`
    /// ([`wire::link::without_af_spec`]).
    pub fn dumps(
        &self,
        requests: &[RouteNetlinkMessage],
    ) -> io::Result<Vec<Result<Vec<RouteNetlinkMessage>, Errno>>> {
        let (mut answer, mut reply) = (Vec::new(), Vec::new());
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            if let Err(e) = self.consistent(&Ask::Typed(r), &mut reply, &mut answer, None)? {
                out.push(Err(e));
                continue;
            }
            out.push(typed(&answer));
        }
        Ok(out)
    }

    /// Run one dump and hand `each` every message of its (consistent)
    /// answer, header included, unparsed: for dumps large enough that
    /// parsing every attribute into typed messages would cost more than the
    /// kernel's work.
    pub fn dump_raw(
        &self,
        request: RouteNetlinkMessage,
        mut each: impl FnMut(&[u8]),
    ) -> io::Result<Result<(), Errno>> {
        self.dump_asked(&Ask::Typed(&request), &mut each)
    }

    /// [`Self::dump_raw`] for a table of the pod's that rtnetlink's types do
    /// not cover: message type `kind` with `body` (the family header and any
    /// attributes), named `what` in errors, its answer read up to
    /// the table bound ([`Batch::set_table_answer_limit`]).
    pub fn dump_raw_bytes(
        &self,
        what: &'static str,
        kind: u16,
        body: &[u8],
        mut each: impl FnMut(&[u8]),
    ) -> io::Result<Result<(), Errno>> {
        self.dump_asked(&Ask::Raw { what, kind, body }, &mut each)
    }

    /// Run one dump and hand `sink` the messages of each datagram as it is
    /// read, so that the reader works while the kernel fills the next one.
    /// [`Piece::Again`] voids what was handed before (the answer was
    /// interrupted or a datagram did not fit, and the dump is asked again);
    /// an error voids it all.
    pub fn dump_streamed(
        &self,
        request: RouteNetlinkMessage,
        mut sink: impl FnMut(Piece),
    ) -> io::Result<Result<(), Errno>> {
        let (mut answer, mut reply) = (Vec::new(), Vec::new());
        self.consistent(
            &Ask::Typed(&request),
            &mut reply,
            &mut answer,
            Some(&mut sink),
        )
    }

    fn dump_asked(&self, ask: &Ask, each: &mut dyn FnMut(&[u8])) -> io::Result<Result<(), Errno>> {
        let (mut answer, mut reply) = (Vec::new(), Vec::new());
        let done = self.consistent(ask, &mut reply, &mut answer, None)?;
        if done.is_ok() {
            frames(&answer).for_each(|(_, _, frame)| each(frame));
        }
        Ok(done)
    }

    /// The messages of one answer to `request` that no change interrupted,
    /// in `answer`; asked up to [`ATTEMPTS`] times. `reply` is the datagram
    /// buffer, grown to the largest datagram read (kept from dump to dump:
    /// a buffer made and zeroed at full size for every dump cost a process
    /// a page fault per page of it, on each of its threads). With a `sink`,
    /// each datagram's messages are handed to it as they are read instead
    /// (`answer` stays empty).
    fn consistent(
        &self,
        request: &Ask,
        reply: &mut Vec<u8>,
        answer: &mut Vec<u8>,
        mut sink: Option<&mut dyn FnMut(Piece)>,
    ) -> io::Result<Result<(), Errno>> {
        if reply.capacity() < DATAGRAM {
            reply.clear();
            reply.reserve(DATAGRAM);
        }
        for attempt in 1..=ATTEMPTS {
            if let Some(sink) = sink.as_mut().filter(|_| attempt > 1) {
                sink(Piece::Again);
            }
            answer.clear();
            let limit = request.limit(self.table_limit);
            // A reborrow for this asking only (`as_deref_mut` would keep
            // `sink` borrowed for as long as the closure lives).
            #[allow(clippy::option_as_ref_deref)]
            let this_time = sink.as_mut().map(|s| -> &mut dyn FnMut(Piece) { &mut **s });
            match self.dump_once_within(request, reply, answer, limit, this_time)? {
                Answered::Whole { done, interrupted } if !interrupted || done.is_err() => {
                    return Ok(done)
                }
                Answered::Whole { .. } => {}
                Answered::Cut => {
                    tracing::debug!(
                        "a {} dump datagram was longer than {} bytes; asking again with a buffer that fits it",
                        request.what(),
                        DATAGRAM
                    );
                    continue;
                }
            }
            let so_far = INTERRUPTED.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::debug!(
                "the {} dump was interrupted by a change (attempt {attempt} of {ATTEMPTS}, {so_far} in this process); asking again",
                request.what()
            );
        }
        answer.clear();
        Err(io::Error::other(format!(
            "the {} dump was interrupted by changes in the netns {ATTEMPTS} times in a row; gave up",
            request.what()
        )))
    }

    /// Ask once and read the whole answer into `answer`: how it ended, and
    /// whether the kernel flagged it interrupted; or [`Answered::Cut`],
    /// with `reply` grown to the datagram that did not fit (the rest of
    /// that answer is read out before the next dump).
    #[cfg(test)]
    fn dump_once(
        &self,
        request: &Ask,
        reply: &mut Vec<u8>,
        answer: &mut Vec<u8>,
    ) -> io::Result<Answered> {
        self.dump_once_within(
            request,
            reply,
            answer,
            request.limit(self.table_limit),
            None,
        )
    }

    /// Ask once and read the whole answer into `answer` (as
    /// `dump_once` says), or hand each datagram's messages to `sink`,
    /// failing once the answer holds more than `limit` bytes (the rest of
    /// it is read out before the next dump).
    fn dump_once_within(
        &self,
        request: &Ask,
        reply: &mut Vec<u8>,
        answer: &mut Vec<u8>,
        limit: usize,
        mut sink: Option<&mut dyn FnMut(Piece)>,
    ) -> io::Result<Answered> {
        self.finish_open_dump(reply)?;
        let seq = seq_of(self.sent.fetch_add(1, Ordering::Relaxed));
        let mut buf = Vec::new();
        request.write(&mut buf, seq);
        self.socket.send(&buf, 0)?;
        self.open_dump.store(seq, Ordering::Relaxed);
        let (mut interrupted, mut handed) = (false, 0);
        loop {
            let n = nlrecv::receive_spare(&self.socket, reply, REPLY_TIMEOUT)?;
            if n > reply.len() {
                reply.clear();
                reply.reserve(n.max(DATAGRAM));
                return Ok(Answered::Cut);
            }
            let step = take(&reply[..n], seq, answer, &mut interrupted);
            if let Some(sink) = sink.as_mut().filter(|_| !answer.is_empty()) {
                sink(Piece::Messages(answer));
                handed += answer.len();
                answer.clear();
            }
            if let Step::Done(code) = step {
                self.open_dump.store(0, Ordering::Relaxed);
                return Ok(Answered::Whole {
                    done: errno::reply(code),
                    interrupted,
                });
            }
            if handed + answer.len() > limit {
                answer.clear();
                let most = match limit % (1 << 20) {
                    0 => format!("{} MiB", limit >> 20),
                    _ => format!("{limit} bytes"),
                };
                return Err(io::Error::other(format!(
                    "the {} dump holds more than {most}, the most podtap reads of one",
                    request.what()
                )));
            }
        }
    }

    /// Read out the answer of a dump left half-read, so that the kernel
    /// takes the next one (rather than answering EBUSY).
    fn finish_open_dump(&self, reply: &mut Vec<u8>) -> io::Result<()> {
        let seq = self.open_dump.load(Ordering::Relaxed);
        if seq == 0 {
            return Ok(());
        }
        let mut ignored = Vec::new();
        loop {
            // A datagram cut here is only looked through for the end.
            let n = nlrecv::receive_spare(&self.socket, reply, REPLY_TIMEOUT)?;
            ignored.clear();
            let datagram = reply.get(..n).unwrap_or(reply);
            if take(datagram, seq, &mut ignored, &mut false) != Step::More {
                self.open_dump.store(0, Ordering::Relaxed);
                return Ok(());
            }
        }
    }
}

/// How much of an answer to `request` podtap reads: `table` for the tables
/// a pod fills, all of it for the rest.
fn limit_of(request: &RouteNetlinkMessage, table: usize) -> usize {
    match request {
        RouteNetlinkMessage::GetRoute(_)
        | RouteNetlinkMessage::GetRule(_)
        | RouteNetlinkMessage::GetNeighbour(_)
        | RouteNetlinkMessage::GetAddress(_) => table,
        _ => usize::MAX,
    }
}

/// The typed messages of a dump's answer, or EBADMSG if one does not parse.
fn typed(answer: &[u8]) -> Result<Vec<RouteNetlinkMessage>, Errno> {
    // Sized up front: an answer can hold thousands of messages (a pod's
    // neighbours, a 64-NIC pod's filters), and a vector grown by doubling
    // copies them over and over into fresh pages.
    let mut msgs = Vec::with_capacity(frames(answer).count());
    for (kind, _, frame) in frames(answer) {
        let slim = match kind {
            wire::RTM_NEWLINK => wire::link::without_af_spec(frame),
            wire::RTM_NEWADDR => wire::address_without_label(frame),
            _ => None,
        };
        let frame = slim.as_deref().unwrap_or(frame);
        let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(frame).or_else(|e| {
            let readable = wire::made_readable(kind, frame).ok_or(e)?;
            NetlinkMessage::deserialize(&readable)
        });
        match parsed {
            Ok(NetlinkMessage {
                payload: NetlinkPayload::InnerMessage(m),
                ..
            }) => msgs.push(m),
            Ok(_) => {}
            Err(_) => return Err(Errno::EBADMSG),
        }
    }
    Ok(msgs)
}

#[cfg(test)]
#[path = "dump_tests.rs"]
mod tests;
