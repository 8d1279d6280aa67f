//! Router advertisements and neighbour advertisements.

use super::*;

#[test]
fn rs_gets_ra_from_the_gateway() {
    let r = responder(calico());
    let f = answer(&r, &rs(guest_ll())).unwrap();
    check_icmp6(&f);
    assert_eq!(&f[..6], &GUEST);
    assert_eq!(
        &f[22..38],
        &GW6.octets(),
        "sent from the pod's link-local gateway"
    );
    assert_eq!(&f[38..54], &guest_ll().octets());
    assert_eq!(f[54], 134);
    assert_eq!(f[54 + 5], 0xc0, "M and O");
    assert_eq!(u16::from_be_bytes([f[60], f[61]]), 1800, "router lifetime");
    let opts = ra_opts(&f);
    let kinds: Vec<u8> = opts.iter().map(|o| o.0).collect();
    assert_eq!(kinds, vec![1, 5, 24, 25, 31], "no PIO for a /128");
    assert_eq!(opts[0].1, SERVER);
    assert_eq!(opts[1].1[2..], 1450u32.to_be_bytes());
    assert_eq!(
        opts[2].1,
        vec![48, 0, 0, 0, 7, 8, 0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0]
    );
    assert_eq!(&opts[3].1[6..], &v6("2001:db8::53").octets());
    assert_eq!(
        &opts[4].1[6..32],
        b"\x03pod\x07example\x00\x03svc\x07example\x00"
    );
}

#[test]
fn rs_from_unspecified_gets_multicast_and_sllao_is_refused() {
    let r = responder(calico());
    let f = answer(&r, &rs(Ipv6Addr::UNSPECIFIED)).unwrap();
    assert_eq!(&f[..6], &[0x33, 0x33, 0, 0, 0, 1]);
    assert_eq!(&f[38..54], &v6("ff02::1").octets());
    let mut body = vec![133, 0, 0, 0, 0, 0, 0, 0, 1, 1];
    body.extend_from_slice(&GUEST);
    assert!(answer(
        &r,
        &icmp6_frame(Ipv6Addr::UNSPECIFIED, v6("ff02::2"), 255, &body)
    )
    .is_none());
}

#[test]
fn rs_validation() {
    let r = responder(calico());
    let body = [133, 0, 0, 0, 0, 0, 0, 0];
    assert!(
        answer(&r, &icmp6_frame(guest_ll(), v6("ff02::2"), 64, &body)).is_none(),
        "hop limit"
    );
    let bad_code = [133, 1, 0, 0, 0, 0, 0, 0];
    assert!(answer(&r, &icmp6_frame(guest_ll(), v6("ff02::2"), 255, &bad_code)).is_none());
    let zero_len_opt = [133, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
    assert!(answer(
        &r,
        &icmp6_frame(guest_ll(), v6("ff02::2"), 255, &zero_len_opt)
    )
    .is_none());
    let ra = [134, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(answer(&r, &icmp6_frame(guest_ll(), v6("ff02::1"), 255, &ra)).is_none());
}

#[test]
fn eui64_address_gets_autonomous_pio_and_zero_lifetime() {
    let r = responder(subnet());
    let f = r
        .unsolicited_ra(&mut [0u8; MAX_FRAME])
        .map(|_| ())
        .and_then(|_| answer(&r, &rs(guest_ll())))
        .unwrap();
    check_icmp6(&f);
    assert_eq!(
        u16::from_be_bytes([f[60], f[61]]),
        0,
        "does not hold the default"
    );
    let src = eui64(v6("fe80::"), SERVER);
    assert_eq!(
        &f[22..38],
        &src.octets(),
        "global gateway: RA from our link-local"
    );
    let pio = ra_opts(&f).into_iter().find(|o| o.0 == 3).unwrap().1;
    assert_eq!(pio[0], 64);
    assert_eq!(pio[1], 0xc0, "L and A");
    assert_eq!(&pio[14..30], &v6("2001:db8:1::").octets());
    let rio = ra_opts(&f).into_iter().find(|o| o.0 == 24).unwrap().1;
    assert_eq!(rio[0], 48, "route via the pod gateway the RA stands for");
}

#[test]
fn non_eui64_address_gets_onlink_only_pio() {
    let mut c = subnet();
    c.ipv6 = vec![(v6("2001:db8:1::5"), 64)];
    let r = responder(c.clone());
    let f = answer(&r, &rs(guest_ll())).unwrap();
    let pio = ra_opts(&f).into_iter().find(|o| o.0 == 3).unwrap().1;
    assert_eq!(pio[1], 0x80, "L only: the address comes from DHCPv6");
    c.ipv6 = vec![(eui64(v6("2001:db8:1::"), GUEST), 64)];
    c.slaac = false;
    let f = answer(&responder(c), &rs(guest_ll())).unwrap();
    assert_eq!(
        ra_opts(&f).into_iter().find(|o| o.0 == 3).unwrap().1[1],
        0x80
    );
}

#[test]
fn unsolicited_ra_to_all_nodes() {
    let r = responder(calico());
    let mut out = [0u8; MAX_FRAME];
    let n = r.unsolicited_ra(&mut out).unwrap();
    check_icmp6(&out[..n]);
    assert_eq!(&out[..6], &[0x33, 0x33, 0, 0, 0, 1]);
    let mut c = calico();
    c.ipv6.clear();
    assert!(responder(c).unsolicited_ra(&mut out).is_none());
}

#[test]
fn ns_for_our_router_address_gets_na() {
    let r = responder(subnet());
    let ours = eui64(v6("fe80::"), SERVER);
    let f = answer(&r, &ns(ours, guest_ll())).unwrap();
    check_icmp6(&f);
    assert_eq!(f[54], 136);
    assert_eq!(f[58], 0xe0, "router, solicited, override");
    assert_eq!(&f[62..78], &ours.octets());
    assert_eq!(&f[78..80], &[2, 1]);
    assert_eq!(&f[80..86], &SERVER);
    let dad = answer(&r, &ns(ours, Ipv6Addr::UNSPECIFIED)).unwrap();
    assert_eq!(&dad[38..54], &v6("ff02::1").octets());
    assert!(
        answer(&r, &ns(v6("fe80::99"), guest_ll())).is_none(),
        "not our target"
    );
    // The real gateway's link-local answers for itself.
    assert!(answer(&responder(calico()), &ns(GW6, guest_ll())).is_none());
}
