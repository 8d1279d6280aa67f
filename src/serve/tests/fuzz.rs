//! Random and mutated frames: the engine must never panic, never write
//! past its buffer, and finish in time bounded by the frame length.

use proptest::prelude::*;

use super::*;

fn seeds() -> Vec<Vec<u8>> {
    let mut overload = Dhcp4::new(1).opt(52, &[3]).frame();
    overload.truncate(overload.len() - 1);
    vec![
        Dhcp4::new(1).frame(),
        Dhcp4::new(3)
            .opt(54, &[169, 254, 1, 1])
            .opt(50, &[198, 18, 0, 5])
            .opt(80, &[])
            .frame(),
        Dhcp4::new(8).opt(57, &[5, 220]).frame(),
        overload,
        dhcp6_frame(
            1,
            &[d6opt(1, &CLIENT_DUID), ia_na(1, &[POD6]), d6opt(14, &[])],
        ),
        dhcp6_frame(
            5,
            &[
                d6opt(1, &CLIENT_DUID),
                d6opt(2, &server_duid()),
                ia_na(1, &[POD6]),
                ia_na(2, &[]),
            ],
        ),
        dhcp6_frame(4, &[d6opt(1, &CLIENT_DUID), ia_na(1, &[POD6])]),
        rs(guest_ll()),
        rs(Ipv6Addr::UNSPECIFIED),
        ns(eui64(v6("fe80::"), SERVER), guest_ll()),
    ]
}

fn responders() -> [Responder; 2] {
    [responder(calico()), responder(subnet())]
}

fn exercise(rs: &[Responder], frame: &[u8]) {
    let mut out = [0u8; MAX_FRAME];
    for r in rs {
        if let Some(n) = r.handle(frame, &mut out) {
            assert!((42..=MAX_FRAME).contains(&n));
        }
        let mut small = [0u8; 300];
        let _ = r.handle(frame, &mut small);
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..32)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        1 => (any::<usize>(), 1usize..64).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

fn apply(f: &mut Vec<u8>, m: &Mutation) {
    if f.is_empty() {
        return;
    }
    match m {
        Mutation::Set(i, b) => {
            let n = f.len();
            f[i % n] = *b;
        }
        Mutation::Truncate(i) => f.truncate(i % f.len()),
        Mutation::Insert(i, v) => {
            let at = i % f.len();
            f.splice(at..at, v.iter().copied());
        }
        Mutation::Remove(i, n) => {
            let at = i % f.len();
            let end = (at + n).min(f.len());
            f.drain(at..end);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(frame in proptest::collection::vec(any::<u8>(), 0..2048)) {
        exercise(&responders(), &frame);
    }

    #[test]
    fn random_after_valid_headers_never_panic(seed in 0usize..10, tail in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let mut f = seeds()[seed].clone();
        let keep = match f[12] { 0x08 => 42 + 240, _ => 62 };
        f.truncate(keep.min(f.len()));
        f.extend_from_slice(&tail);
        exercise(&responders(), &f);
    }

    #[test]
    fn mutated_frames_never_panic(seed in 0usize..10, ms in proptest::collection::vec(mutation(), 1..8)) {
        let mut f = seeds()[seed].clone();
        for m in &ms {
            apply(&mut f, m);
        }
        exercise(&responders(), &f);
    }
}

/// Worst cases for the loops: every byte a pad option, overload into both
/// extra areas, a maximum of zero-length DHCPv6 options, RS with 1 KiB of
/// options. Each must be answered (or refused) quickly.
#[test]
fn worst_case_frames_are_cheap() {
    let rs_ = responders();
    let mut pads = Dhcp4::new(1).opt(52, &[3]).bootp();
    pads.pop();
    pads.extend(std::iter::repeat_n(0u8, 1200));
    let mut zero6 = vec![];
    for _ in 0..350 {
        zero6.push(d6opt(99, &[]));
    }
    zero6.push(d6opt(1, &CLIENT_DUID));
    let mut rs_opts = vec![133, 0, 0, 0, 0, 0, 0, 0];
    for _ in 0..128 {
        rs_opts.extend_from_slice(&[99, 1, 0, 0, 0, 0, 0, 0]);
    }
    let frames = [
        udp4_frame(GUEST, &pads),
        dhcp6_frame(1, &zero6),
        icmp6_frame(guest_ll(), v6("ff02::2"), 255, &rs_opts),
    ];
    let start = std::time::Instant::now();
    for _ in 0..2000 {
        for f in &frames {
            exercise(&rs_, f);
        }
    }
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    let mut out = [0u8; MAX_FRAME];
    assert!(
        rs_[0].handle(&frames[1], &mut out).is_some(),
        "zero-length options are skipped, not fatal"
    );
}
