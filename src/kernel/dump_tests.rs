use super::*;
use crate::kernel::batch::Request;
use rtnetlink::packet_route::link::{LinkAttribute, LinkExtentMask, LinkMessage};

/// A netlink message of `kind` with `flags`, `seq` and a 4-byte body `code`.
fn message(kind: u16, flags: u16, seq: u32, code: i32) -> Vec<u8> {
    let mut m = Vec::new();
    wire::push_raw(&mut m, kind, flags, seq, &code.to_ne_bytes());
    m
}

const NEWLINK: u16 = wire::RTM_NEWLINK;
const MULTI: u16 = 0x2;

/// The request that dumps every link, without statistics (as `links::dump_request`).
fn link_dump() -> RouteNetlinkMessage {
    let mut msg = LinkMessage::default();
    msg.attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    RouteNetlinkMessage::GetLink(msg)
}

#[test]
fn a_clean_answer_is_taken_whole_and_ends_at_done() {
    let seq = seq_of(9);
    let mut first = message(NEWLINK, MULTI, seq, 1);
    first.extend(message(NEWLINK, MULTI, seq, 2));
    let done = message(NLMSG_DONE, MULTI, seq, 0);
    let (mut out, mut intr) = (Vec::new(), false);
    assert_eq!(take(&first, seq, &mut out, &mut intr), Step::More);
    assert_eq!(take(&done, seq, &mut out, &mut intr), Step::Done(0));
    assert!(!intr);
    let bodies: Vec<i32> = frames(&out).map(|(_, _, f)| code(f)).collect();
    assert_eq!(bodies, vec![1, 2]);
}

#[test]
fn dump_intr_on_any_message_marks_the_answer_interrupted() {
    let seq = seq_of(3);
    // On a message in the middle of the answer.
    let mut d = message(NEWLINK, MULTI, seq, 1);
    d.extend(message(NEWLINK, MULTI | NLM_F_DUMP_INTR, seq, 2));
    d.extend(message(NLMSG_DONE, MULTI, seq, 0));
    let (mut out, mut intr) = (Vec::new(), false);
    assert_eq!(take(&d, seq, &mut out, &mut intr), Step::Done(0));
    assert!(intr);
    // Only on the NLMSG_DONE (the change came after the last link).
    let d = message(NLMSG_DONE, MULTI | NLM_F_DUMP_INTR, seq, 0);
    let (mut out, mut intr) = (Vec::new(), false);
    assert_eq!(take(&d, seq, &mut out, &mut intr), Step::Done(0));
    assert!(intr);
    assert_eq!(flags(&d) & NLM_F_DUMP_INTR, NLM_F_DUMP_INTR);
}

#[test]
fn other_sequence_numbers_are_skipped_even_when_flagged() {
    let seq = seq_of(5);
    let mut d = message(NEWLINK, MULTI | NLM_F_DUMP_INTR, seq_of(4), 1);
    d.extend(message(NLMSG_DONE, MULTI, seq_of(4), 0));
    d.extend(message(NEWLINK, MULTI, seq, 7));
    let (mut out, mut intr) = (Vec::new(), false);
    assert_eq!(take(&d, seq, &mut out, &mut intr), Step::More);
    assert!(!intr);
    assert_eq!(
        frames(&out).map(|(_, _, f)| code(f)).collect::<Vec<_>>(),
        [7]
    );
}

#[test]
fn a_dump_ends_with_the_errno_of_its_done_or_error() {
    let seq = seq_of(1);
    let (mut out, mut intr) = (Vec::new(), false);
    let done = message(NLMSG_DONE, MULTI, seq, -libc::EINVAL);
    assert_eq!(
        take(&done, seq, &mut out, &mut intr),
        Step::Done(-libc::EINVAL)
    );
    let err = message(NLMSG_ERROR, 0, seq, -libc::EBUSY);
    assert_eq!(
        take(&err, seq, &mut out, &mut intr),
        Step::Done(-libc::EBUSY)
    );
    // An ack (code 0) does not end it.
    let ack = message(NLMSG_ERROR, 0, seq, 0);
    assert_eq!(take(&ack, seq, &mut out, &mut intr), Step::More);
    assert!(out.is_empty());
}

#[test]
fn a_cut_message_is_not_taken() {
    let seq = seq_of(2);
    let whole = message(NEWLINK, MULTI, seq, 1);
    let (mut out, mut intr) = (Vec::new(), false);
    assert_eq!(take(&whole[..12], seq, &mut out, &mut intr), Step::More);
    assert!(out.is_empty());
}

#[test]
fn dumps_are_named_in_messages() {
    assert_eq!(
        what(&RouteNetlinkMessage::GetLink(LinkMessage::default())),
        "link"
    );
}

/// In a netns of this thread's own (unshared; gone with the thread) with
/// 200 links, a dump left unread (as after a timeout) would make the kernel
/// answer the next one EBUSY: podtap reads it out first, and the next dump
/// is whole. And a datagram longer than the reply buffer is never used cut:
/// the buffer grows to fit it and the dump is asked again.
/// A batch socket in a netns of the calling thread's own (unshared; gone
/// with the thread) that holds `pairs` veth pairs besides lo.
fn batch_with_veths(pairs: usize) -> Batch {
    use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket};
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("private netns");
    let mut socket = Socket::new(NETLINK_ROUTE).expect("socket");
    socket.bind_auto().expect("bind");
    let batch = Batch::new(socket);
    let veths: Vec<Request> = (0..pairs)
        .map(|i| {
            let msg = rtnetlink::LinkVeth::new(&format!("a{i}"), &format!("b{i}")).build();
            Request::create(RouteNetlinkMessage::NewLink(msg))
        })
        .collect();
    let made = batch.run(&veths).expect("batch");
    assert!(made.iter().all(Result::is_ok), "{made:?}");
    batch
}

/// Run `test` (named `name`) on a thread of its own, which may enter a
/// netns of its own; skipped, saying why, without root.
fn as_root_on_a_thread(name: &str, test: impl FnOnce() + Send + 'static) {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP {name}: needs root");
        return;
    }
    std::thread::spawn(test).join().expect("test thread");
}

#[test]
fn a_dump_left_half_read_does_not_block_the_next() {
    as_root_on_a_thread("a_dump_left_half_read_does_not_block_the_next", || {
        use std::sync::atomic::Ordering;
        let batch = batch_with_veths(100);
        // A link dump asked for and never read: the kernel keeps it running.
        let seq = seq_of(batch.sent.fetch_add(1, Ordering::Relaxed));
        let mut buf = Vec::new();
        push(&mut buf, link_dump(), NLM_F_REQUEST | NLM_F_DUMP, seq);
        batch.socket.send(&buf, 0).expect("send");
        batch.open_dump.store(seq, Ordering::Relaxed);
        let mut count = 0;
        let done = batch
            .dump_raw(link_dump(), |_| count += 1)
            .expect("no I/O error");
        assert_eq!(done, Ok(()), "the next dump is not refused (EBUSY)");
        assert_eq!(count, 201, "lo and the 200 veth ends, each once");
        // A buffer far too small for one datagram: the cut answer is not
        // used, the buffer grows to fit, and the next asking is whole (the
        // rest of the cut one read out first).
        let (mut small, mut answer) = (Vec::with_capacity(64), Vec::new());
        let first = batch
            .dump_once(&Ask::Typed(&link_dump()), &mut small, &mut answer)
            .expect("no I/O error");
        assert!(
            matches!(first, Answered::Cut),
            "a cut datagram is never used"
        );
        assert!(small.capacity() >= DATAGRAM, "the buffer grew");
        answer.clear();
        let second = batch
            .dump_once(&Ask::Typed(&link_dump()), &mut small, &mut answer)
            .expect("no I/O error");
        assert!(
            matches!(
                second,
                Answered::Whole {
                    done: Ok(()),
                    interrupted: false
                }
            ),
            "asked again, the dump is whole"
        );
        assert_eq!(frames(&answer).count(), 201, "every message whole");
    });
}

/// An address whose label (its interface's name, by default) is not UTF-8:
/// the kernel allows it, and the answer still parses, without the label.
#[test]
fn an_address_label_that_is_not_utf8_does_not_spoil_the_answer() {
    use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage};
    let mut msg = AddressMessage::default();
    msg.header.index = 3;
    msg.header.prefix_len = 24;
    msg.attributes
        .push(AddressAttribute::Label("eAAA".to_string()));
    let local = std::net::IpAddr::from([198, 18, 9, 2]);
    msg.attributes.push(AddressAttribute::Local(local));
    let mut frame = Vec::new();
    push(&mut frame, RouteNetlinkMessage::NewAddress(msg), 0, 1);
    let at = frame
        .windows(4)
        .position(|w| w == b"eAAA")
        .expect("the label");
    frame[at + 1] = 0xff;
    let answer = typed(&frame).expect("the answer parses");
    let [RouteNetlinkMessage::NewAddress(m)] = answer.as_slice() else {
        panic!("one address: {answer:?}");
    };
    assert_eq!(m.header.index, 3);
    assert_eq!(m.attributes, vec![AddressAttribute::Local(local)]);
}

/// An answer over its bound fails the dump, naming it, whether it is kept
/// or streamed (the bound counts what was handed); the socket stays usable
/// (the rest of that answer is read out first).
#[test]
fn an_answer_over_its_bound_fails_and_leaves_the_socket_usable() {
    as_root_on_a_thread(
        "an_answer_over_its_bound_fails_and_leaves_the_socket_usable",
        || {
            let batch = batch_with_veths(100);
            for streamed in [false, true] {
                let (mut reply, mut answer) = (Vec::with_capacity(DATAGRAM), Vec::new());
                let mut sink = |_: Piece| {};
                let sink = streamed.then_some(&mut sink as &mut dyn FnMut(Piece));
                let over = batch.dump_once_within(
                    &Ask::Typed(&link_dump()),
                    &mut reply,
                    &mut answer,
                    4096,
                    sink,
                );
                let err = over.err().expect("over the bound");
                assert_eq!(
                    err.to_string(),
                    "the link dump holds more than 4096 bytes, the most podtap reads of one"
                );
                let mut count = 0;
                let done = batch
                    .dump_raw(link_dump(), |_| count += 1)
                    .expect("no I/O error");
                assert_eq!(done, Ok(()));
                assert_eq!(count, 201, "the next dump is whole");
            }
            assert_eq!(
                limit_of(&link_dump(), 1),
                usize::MAX,
                "links are read whole"
            );
        },
    );
}

/// Names the parser refuses as not UTF-8, in a rule and in a stranger's tc
/// filter: the answer still parses, the rule's name written as UTF-8, the
/// filter without its options (so without a redirect: never podtap's).
#[test]
fn a_rule_or_filter_with_a_name_that_is_not_utf8_does_not_spoil_the_answer() {
    use rtnetlink::packet_route::rule::{RuleAttribute, RuleMessage};
    use rtnetlink::packet_route::tc::{TcAttribute, TcFilterBpfOption, TcMessage, TcOption};
    let spoil = |frame: &mut Vec<u8>| {
        let at = frame
            .windows(4)
            .position(|w| w == b"eAAA")
            .expect("the name");
        frame[at + 1] = 0xff;
    };
    let mut rule = RuleMessage::default();
    rule.attributes.push(RuleAttribute::Iifname("eAAA".into()));
    rule.attributes.push(RuleAttribute::Table(100));
    let mut frame = Vec::new();
    push(&mut frame, RouteNetlinkMessage::NewRule(rule), 0, 1);
    spoil(&mut frame);
    let answer = typed(&frame).expect("the answer parses");
    let [RouteNetlinkMessage::NewRule(r)] = answer.as_slice() else {
        panic!("one rule: {answer:?}");
    };
    assert_eq!(
        r.attributes,
        vec![
            RuleAttribute::Iifname("e\u{fffd}AA".into()),
            RuleAttribute::Table(100)
        ]
    );

    let mut filter = TcMessage::with_index(4);
    filter.attributes.push(TcAttribute::Kind("bpf".into()));
    filter
        .attributes
        .push(TcAttribute::Options(vec![TcOption::Bpf(
            TcFilterBpfOption::ProgName("eAAA".into()),
        )]));
    let mut frame = Vec::new();
    push(
        &mut frame,
        RouteNetlinkMessage::NewTrafficFilter(filter),
        0,
        1,
    );
    spoil(&mut frame);
    let answer = typed(&frame).expect("the answer parses");
    let [RouteNetlinkMessage::NewTrafficFilter(f)] = answer.as_slice() else {
        panic!("one filter: {answer:?}");
    };
    assert_eq!(f.header.index, 4);
    assert_eq!(f.attributes, vec![TcAttribute::Kind("bpf".into())]);
}

/// A streamed dump hands every message once, a datagram at a time, and
/// keeps none of them; an answer interrupted by a change (a thread adds
/// and deletes a veth pair meanwhile) is voided with `Piece::Again` before
/// it is asked again.
#[test]
fn a_streamed_dump_hands_each_message_once_and_voids_an_interrupted_answer() {
    as_root_on_a_thread(
        "a_streamed_dump_hands_each_message_once_and_voids_an_interrupted_answer",
        || {
            use std::sync::atomic::{AtomicBool, Ordering};
            use std::sync::Arc;
            let batch = batch_with_veths(100);
            let netns =
                std::fs::File::open(format!("/proc/self/task/{}/ns/net", nix::unistd::gettid()))
                    .expect("this thread's netns");
            let stop = Arc::new(AtomicBool::new(false));
            let churning = stop.clone();
            let churner = std::thread::spawn(move || {
                nix::sched::setns(&netns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                let mut socket =
                    rtnetlink::sys::Socket::new(rtnetlink::sys::protocols::NETLINK_ROUTE)
                        .expect("socket");
                socket.bind_auto().expect("bind");
                let churn = Batch::new(socket);
                let add = rtnetlink::LinkVeth::new("c0", "c1").build();
                let del = rtnetlink::LinkUnspec::new_with_name("c0").build();
                while !churning.load(Ordering::Relaxed) {
                    let _ =
                        churn.run(&[Request::create(RouteNetlinkMessage::NewLink(add.clone()))]);
                    let _ =
                        churn.run(&[Request::change(RouteNetlinkMessage::DelLink(del.clone()))]);
                }
            });
            let (mut seen_again, mut whole) = (false, 0);
            for _ in 0..500 {
                let (mut count, mut pieces) = (0, 0);
                let mut sink = |piece: Piece| match piece {
                    Piece::Messages(m) => {
                        count += frames(m).count();
                        pieces += 1;
                    }
                    Piece::Again => {
                        (count, pieces) = (0, 0);
                        seen_again = true;
                    }
                };
                let (mut reply, mut answer) = (Vec::new(), Vec::new());
                // Interrupted more times than it asks is an error: ask again.
                let Ok(done) = batch.consistent(
                    &Ask::Typed(&link_dump()),
                    &mut reply,
                    &mut answer,
                    Some(&mut sink),
                ) else {
                    continue;
                };
                assert_eq!(done, Ok(()));
                assert!([201, 203].contains(&count), "each message once: {count}");
                assert!(pieces > 1, "handed a datagram at a time ({pieces})");
                assert!(answer.is_empty(), "nothing kept");
                whole += 1;
                if seen_again && whole > 2 {
                    break;
                }
            }
            stop.store(true, Ordering::Relaxed);
            churner.join().expect("churner");
            assert!(seen_again, "no dump was interrupted in 500");
        },
    );
}
