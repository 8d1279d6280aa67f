//! DHCPv4: offers, acknowledgements, NAKs and their options.

use super::*;

#[test]
fn calico_routes_host_route_first_then_default() {
    let routes = dhcp4::classless_routes(
        v4("198.18.0.5"),
        32,
        Some(v4("169.254.1.1")),
        &calico().routes4,
    );
    assert_eq!(
        routes,
        vec![
            (v4("169.254.1.1"), 32, v4("0.0.0.0")),
            (v4("0.0.0.0"), 0, v4("169.254.1.1"))
        ]
    );
    assert_eq!(
        dhcp4::encode_classless(&routes),
        vec![32, 169, 254, 1, 1, 0, 0, 0, 0, 0, 169, 254, 1, 1]
    );
}

#[test]
fn calico_explicit_link_route_is_not_doubled() {
    let mut c = calico();
    c.routes4.push(Route4 {
        dest: v4("169.254.1.1"),
        prefix: 32,
        gateway: None,
    });
    let routes = dhcp4::classless_routes(v4("198.18.0.5"), 32, c.gateway4, &c.routes4);
    assert_eq!(
        routes,
        vec![
            (v4("169.254.1.1"), 32, v4("0.0.0.0")),
            (v4("0.0.0.0"), 0, v4("169.254.1.1"))
        ]
    );
}

#[test]
fn subnet_routes_skip_connected_and_end_with_default() {
    let c = subnet();
    let routes = dhcp4::classless_routes(v4("198.18.2.5"), 24, c.gateway4, &c.routes4);
    assert_eq!(
        routes,
        vec![
            (v4("198.19.0.0"), 16, v4("198.18.2.254")),
            (v4("0.0.0.0"), 0, v4("198.18.2.1"))
        ]
    );
}

#[test]
fn default_added_when_only_gateway_given() {
    let routes = dhcp4::classless_routes(v4("198.18.2.5"), 24, Some(v4("198.18.2.1")), &[]);
    assert_eq!(routes, vec![(v4("0.0.0.0"), 0, v4("198.18.2.1"))]);
}

#[test]
fn discover_gets_offer_with_every_option() {
    let r = responder(calico());
    let f = answer(&r, &Dhcp4::new(1).frame()).unwrap();
    check_ipv4_sums(&f);
    assert_eq!(msg_type(&f), dhcp4::OFFER);
    assert_eq!(yiaddr(&f), v4("198.18.0.5"));
    assert_eq!(opt4(&f, 1).unwrap(), vec![255, 255, 255, 255]);
    assert_eq!(opt4(&f, 3), None, "gateway outside a /32: no option 3");
    let classless = vec![32, 169, 254, 1, 1, 0, 0, 0, 0, 0, 169, 254, 1, 1];
    assert_eq!(opt4(&f, 121).unwrap(), classless);
    assert_eq!(opt4(&f, 249).unwrap(), classless);
    assert_eq!(opt4(&f, 26).unwrap(), 1450u16.to_be_bytes());
    assert_eq!(opt4(&f, 6).unwrap(), vec![198, 18, 1, 53]);
    assert_eq!(opt4(&f, 15).unwrap(), b"pod.example");
    assert_eq!(
        opt4(&f, 119).unwrap(),
        b"\x03pod\x07example\x00\x03svc\x07example\x00"
    );
    assert_eq!(opt4(&f, 54).unwrap(), vec![169, 254, 1, 1]);
    assert_eq!(opt4(&f, 51).unwrap(), 86_400u32.to_be_bytes());
    assert_eq!(opt4(&f, 58).unwrap(), 43_200u32.to_be_bytes());
    assert_eq!(opt4(&f, 59).unwrap(), 75_600u32.to_be_bytes());
    assert_eq!(opt4(&f, 80), None);
    assert_eq!(
        &f[..6],
        &GUEST,
        "unicast to chaddr without the broadcast flag"
    );
    assert_eq!(ip4_dst(&f), v4("198.18.0.5"));
    assert_eq!(&f[6..12], &SERVER);
    assert_eq!(&f[42 + 4..42 + 8], &[0xde, 0xad, 0xbe, 0xef], "xid echoed");
}

#[test]
fn subnet_offer_has_router_and_hostname() {
    let r = responder(subnet());
    let f = answer(&r, &Dhcp4::new(1).frame()).unwrap();
    assert_eq!(opt4(&f, 3).unwrap(), vec![198, 18, 2, 1]);
    assert_eq!(opt4(&f, 1).unwrap(), vec![255, 255, 255, 0]);
    assert_eq!(opt4(&f, 12).unwrap(), b"guest1");
    assert_eq!(opt4(&f, 54).unwrap(), vec![198, 18, 2, 1]);
}

#[test]
fn broadcast_flag_gets_broadcast() {
    let r = responder(calico());
    let mut d = Dhcp4::new(1);
    d.flags = 0x8000;
    let f = answer(&r, &d.frame()).unwrap();
    assert_eq!(&f[..6], &[0xff; 6]);
    assert_eq!(ip4_dst(&f), Ipv4Addr::BROADCAST);
    assert_eq!(&f[42 + 10..42 + 12], &[0x80, 0], "flags echoed");
}

#[test]
fn rapid_commit_discover_gets_ack() {
    let r = responder(calico());
    let f = answer(&r, &Dhcp4::new(1).opt(80, &[]).frame()).unwrap();
    assert_eq!(msg_type(&f), dhcp4::ACK);
    assert_eq!(opt4(&f, 80).unwrap(), Vec::<u8>::new());
    assert_eq!(yiaddr(&f), v4("198.18.0.5"));
}

#[test]
fn request_selecting() {
    let r = responder(calico());
    let ok = Dhcp4::new(3)
        .opt(54, &[169, 254, 1, 1])
        .opt(50, &[198, 18, 0, 5]);
    let f = answer(&r, &ok.frame()).unwrap();
    assert_eq!(msg_type(&f), dhcp4::ACK);
    let wrong = Dhcp4::new(3)
        .opt(54, &[169, 254, 1, 1])
        .opt(50, &[198, 18, 0, 99]);
    let f = answer(&r, &wrong.frame()).unwrap();
    assert_eq!(msg_type(&f), dhcp4::NAK);
    assert_eq!(yiaddr(&f), Ipv4Addr::UNSPECIFIED);
    assert_eq!(&f[..6], &[0xff; 6], "NAK is broadcast");
    assert_eq!(ip4_dst(&f), Ipv4Addr::BROADCAST);
    assert_eq!(opt4(&f, 51), None);
    let other = Dhcp4::new(3)
        .opt(54, &[198, 18, 9, 9])
        .opt(50, &[198, 18, 0, 5]);
    assert!(
        answer(&r, &other.frame()).is_none(),
        "the client chose another server"
    );
}

#[test]
fn request_init_reboot_and_renew() {
    let r = responder(calico());
    let f = answer(&r, &Dhcp4::new(3).opt(50, &[198, 18, 0, 5]).frame()).unwrap();
    assert_eq!(msg_type(&f), dhcp4::ACK);
    let f = answer(&r, &Dhcp4::new(3).opt(50, &[10, 0, 0, 7]).frame()).unwrap();
    assert_eq!(msg_type(&f), dhcp4::NAK, "INIT-REBOOT with a stale address");
    let mut renew = Dhcp4::new(3);
    renew.ciaddr = v4("198.18.0.5");
    let f = answer(&r, &renew.frame()).unwrap();
    assert_eq!(msg_type(&f), dhcp4::ACK);
    assert_eq!(
        ip4_dst(&f),
        v4("198.18.0.5"),
        "renewal answered unicast to ciaddr"
    );
    assert_eq!(&f[..6], &GUEST);
    assert_eq!(&f[42 + 12..42 + 16], &[198, 18, 0, 5], "ciaddr echoed");
    renew.ciaddr = v4("198.18.0.77");
    assert_eq!(msg_type(&answer(&r, &renew.frame()).unwrap()), dhcp4::NAK);
    assert_eq!(
        msg_type(&answer(&r, &Dhcp4::new(3).frame()).unwrap()),
        dhcp4::NAK
    );
}

#[test]
fn inform_gets_ack_without_lease() {
    let r = responder(subnet());
    let mut inf = Dhcp4::new(8);
    inf.ciaddr = v4("198.18.2.5");
    let f = answer(&r, &inf.frame()).unwrap();
    assert_eq!(msg_type(&f), dhcp4::ACK);
    assert_eq!(yiaddr(&f), Ipv4Addr::UNSPECIFIED);
    assert_eq!(opt4(&f, 51), None);
    assert_eq!(opt4(&f, 58), None);
    assert!(opt4(&f, 121).is_some());
    assert_eq!(ip4_dst(&f), v4("198.18.2.5"));
}

#[test]
fn decline_release_and_unknown_are_silent() {
    let r = responder(calico());
    for t in [2, 4, 5, 6, 7, 9, 200] {
        assert!(answer(&r, &Dhcp4::new(t).frame()).is_none(), "type {t}");
    }
}

#[test]
fn only_the_guest_is_served() {
    let r = responder(calico());
    let mut d = Dhcp4::new(1);
    d.chaddr = [2, 0, 0, 0, 0, 0x99];
    assert!(answer(&r, &d.frame()).is_none(), "other chaddr");
    let mut d = Dhcp4::new(1);
    d.src_mac = [2, 0, 0, 0, 0, 0x99];
    assert!(answer(&r, &d.frame()).is_none(), "other Ethernet source");
}

#[test]
fn client_id_is_echoed() {
    let r = responder(calico());
    let f = answer(
        &r,
        &Dhcp4::new(1).opt(61, &[1, 2, 0, 0, 0, 0, 0x10]).frame(),
    )
    .unwrap();
    assert_eq!(opt4(&f, 61).unwrap(), vec![1, 2, 0, 0, 0, 0, 0x10]);
}

#[test]
fn no_ipv4_no_answer() {
    let mut c = calico();
    c.ipv4 = None;
    assert!(answer(&responder(c), &Dhcp4::new(1).frame()).is_none());
}

#[test]
fn overloaded_file_field_is_read_once() {
    let r = responder(calico());
    // Message type only in `file`, option 52 = 1; a nested 52 there is ignored.
    let mut m = Dhcp4::new(3).bootp();
    let opts_at = 240;
    m.truncate(opts_at);
    m.extend_from_slice(&[52, 1, 1, 255]);
    let file = 108;
    m[file..file + 12].copy_from_slice(&[52, 1, 3, 53, 1, 1, 50, 4, 198, 18, 0, 5]);
    m[file + 12] = 255;
    let f = answer(&r, &udp4_frame(GUEST, &m)).unwrap();
    assert_eq!(msg_type(&f), dhcp4::OFFER);
}

#[test]
fn optional_options_dropped_before_limit() {
    let mut c = calico();
    c.search = (0..12)
        .map(|i| format!("zone{i}.cluster.example.org"))
        .collect();
    let r = responder(c);
    let small = answer(&r, &Dhcp4::new(1).frame()).unwrap();
    assert!(small.len() - 14 <= 576, "{}", small.len());
    assert!(opt4(&small, 119).is_none());
    assert!(opt4(&small, 121).is_some());
    let big = answer(&r, &Dhcp4::new(1).opt(57, &1500u16.to_be_bytes()).frame()).unwrap();
    assert!(
        opt4(&big, 119).unwrap().len() > 255,
        "split over two options"
    );
}

#[test]
fn many_routes_fill_121_and_249() {
    let mut c = subnet();
    for i in 0..25u8 {
        c.routes4.push(Route4 {
            dest: Ipv4Addr::new(198, 19, i, 0),
            prefix: 24,
            gateway: Some(v4("198.18.2.254")),
        });
    }
    let r = responder(c);
    let f = answer(&r, &Dhcp4::new(1).opt(57, &1500u16.to_be_bytes()).frame()).unwrap();
    assert_eq!(opt4(&f, 121).unwrap().len(), 25 * 8 + 7 + 5);
    assert_eq!(opt4(&f, 249), opt4(&f, 121));
    let mut c = subnet();
    for i in 0..40u8 {
        c.routes4.push(Route4 {
            dest: Ipv4Addr::new(198, 19, i, 0),
            prefix: 24,
            gateway: Some(v4("198.18.2.254")),
        });
    }
    assert!(
        matches!(Responder::new(c), Err(ConfigError::TooLarge(_))),
        "121 must fit 576 bytes"
    );
}

#[test]
fn small_buffer_is_refused_not_overrun() {
    let r = responder(calico());
    let frame = Dhcp4::new(1).frame();
    let full = answer(&r, &frame).unwrap();
    for n in 0..MAX_FRAME {
        let mut out = vec![0u8; n];
        match r.handle(&frame, &mut out) {
            None => assert!(n < full.len(), "{n}"),
            Some(len) => {
                assert!(len <= n);
                check_ipv4_sums(&out[..len]);
                assert!(opt4(&out[..len], 121).is_some());
            }
        }
    }
}
