use super::*;
use rtnetlink::packet_core::{Emitable, NetlinkMessage};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;

/// What the raw reader makes of a typed message's bytes (its payload).
fn link_state(msg: &LinkMessage) -> LinkState {
    let mut body = vec![0u8; msg.buffer_len()];
    msg.emit(&mut body);
    parse(&body).unwrap_or_default()
}

fn message(index: u32, up: bool, attributes: Vec<LinkAttribute>) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    if up {
        msg.header.flags = LinkFlags::Up | LinkFlags::Broadcast;
    }
    msg.attributes = attributes;
    msg
}

/// The payload of `msg` as the kernel sends it (after the netlink header).
fn wire(msg: LinkMessage) -> Vec<u8> {
    let mut nl = NetlinkMessage::from(RouteNetlinkMessage::NewLink(msg));
    nl.finalize();
    let mut buf = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut buf);
    buf[16..].to_vec()
}

#[test]
fn the_raw_reader_agrees_with_the_typed_parse() {
    let msg = message(
        7,
        true,
        vec![
            LinkAttribute::IfName("tap_eth0".into()),
            LinkAttribute::Mtu(9000),
            LinkAttribute::TxQueueLen(1000),
            LinkAttribute::Group(1_885_613_138),
            LinkAttribute::Controller(4),
            LinkAttribute::Link(2),
            LinkAttribute::IfAlias("podtap:pod-1".into()),
            LinkAttribute::Address(vec![2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Tun)]),
        ],
    );
    let typed = link_state(&msg);
    assert_eq!(parse(&wire(msg)), Some(typed.clone()));
    // What both read, spelled out: the typed parse goes through the raw one.
    let expected = LinkState {
        ifindex: 7,
        link_type: 0,
        name: "tap_eth0".into(),
        kind: Some("tun".into()),
        group: 1_885_613_138,
        has_group: true,
        controller: Some(4),
        lower: Some(2),
        link_netnsid: None,
        mac: MacAddr::from_bytes(&[2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]),
        mtu: 9000,
        up: true,
        loopback: false,
        flags: 0x1 | 0x2,
        oper_state: None,
        txqlen: Some(1000),
        alias: Some("podtap:pod-1".into()),
        tun: None,
    };
    assert_eq!(typed, expected);
    assert_eq!(typed.kind.as_deref(), Some("tun"));
    assert!(typed.up);

    let bare = message(1, false, vec![LinkAttribute::IfName("lo".into())]);
    let parsed = parse(&wire(bare.clone()));
    assert_eq!(parsed, Some(link_state(&bare)));
    assert_eq!(parsed.map(|l| l.up), Some(false));
}

#[test]
fn a_short_or_cut_payload_reads_as_far_as_it_goes() {
    assert_eq!(parse(&[0u8; 8]), None);
    let msg = message(
        3,
        false,
        vec![
            LinkAttribute::IfName("eth0".into()),
            LinkAttribute::Mtu(1500),
        ],
    );
    let full = wire(msg);
    // The last attribute cut off: the ones before it still count.
    let cut = parse(&full[..full.len() - 2]).expect("a header");
    assert_eq!((cut.ifindex, cut.name.as_str(), cut.mtu), (3, "eth0", 0));
}

#[test]
fn a_dumped_link_loses_only_its_af_spec() {
    use rtnetlink::packet_route::link::{AfSpecInet6, AfSpecUnspec, In6AddrGenMode};
    let kept = vec![
        LinkAttribute::IfName("eth0".into()),
        LinkAttribute::Mtu(1500),
        LinkAttribute::Address(vec![2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]),
    ];
    let mut all = kept.clone();
    all.insert(
        1,
        LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(vec![AfSpecInet6::AddrGenMode(
            In6AddrGenMode::None,
        )])]),
    );
    let mut nl = NetlinkMessage::from(RouteNetlinkMessage::NewLink(message(3, true, all)));
    nl.finalize();
    let mut frame = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut frame);

    let slim = without_af_spec(&frame).expect("it had an AF_SPEC");
    let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&slim).unwrap();
    let rtnetlink::packet_core::NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(got)) =
        parsed.payload
    else {
        panic!("not a link message");
    };
    assert_eq!(got, message(3, true, kept));
    assert_eq!(without_af_spec(&slim), None, "nothing left to take out");
    assert_eq!(without_af_spec(&frame[..20]), None);
    // The last attribute cut short: the message is left to its parser.
    assert_eq!(without_af_spec(&frame[..frame.len() - 6]), None);
}

#[test]
fn header_flags_operstate_and_peer_netns_are_read() {
    use rtnetlink::packet_route::link::{LinkLayerType, State};
    let mut msg = message(
        1,
        true,
        vec![
            LinkAttribute::IfName("lo".into()),
            LinkAttribute::OperState(State::Up),
            LinkAttribute::Link(2),
            LinkAttribute::LinkNetNsId(3),
        ],
    );
    msg.header.link_layer_type = LinkLayerType::Loopback;
    msg.header.flags = LinkFlags::Up | LinkFlags::Loopback;
    let s = parse(&wire(msg.clone())).expect("a link");
    assert_eq!(
        (s.link_type, s.up, s.loopback, s.oper_state),
        (ARPHRD_LOOPBACK, true, true, Some(6))
    );
    assert_eq!(
        (s.lower, s.link_netnsid, s.has_group),
        (Some(2), Some(3), false)
    );

    // A whole message of a dump: only an RTM_NEWLINK is a link.
    let mut nl = NetlinkMessage::from(RouteNetlinkMessage::NewLink(msg.clone()));
    nl.finalize();
    let mut frame = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut frame);
    assert_eq!(parse_new(&frame), Some(s));
    let mut nl = NetlinkMessage::from(RouteNetlinkMessage::DelLink(msg));
    nl.finalize();
    let mut frame = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut frame);
    assert_eq!(parse_new(&frame), None);
    assert_eq!(parse_new(&frame[..4]), None);
}
