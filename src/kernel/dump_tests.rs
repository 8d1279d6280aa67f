use super::*;
use crate::kernel::batch::seq_of;

/// A netlink message of `kind` with `flags`, `seq` and a 4-byte body `code`.
fn message(kind: u16, flags: u16, seq: u32, code: i32) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&20u32.to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&code.to_ne_bytes());
    m
}

const NEWLINK: u16 = links::RTM_NEWLINK;
const MULTI: u16 = 0x2;

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
    use rtnetlink::packet_route::link::LinkMessage;
    assert_eq!(
        what(&RouteNetlinkMessage::GetLink(LinkMessage::default())),
        "link"
    );
}
