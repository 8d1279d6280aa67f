//! DHCPv6: advertise, reply, status codes.

use super::*;

#[test]
fn solicit_gets_advertise() {
    let r = responder(calico());
    let f = answer(
        &r,
        &dhcp6_frame(
            1,
            &[d6opt(1, &CLIENT_DUID), ia_na(7, &[]), d6opt(8, &[0, 0])],
        ),
    )
    .unwrap();
    check_udp6(&f);
    assert_eq!(f[62], dhcp6::ADVERTISE);
    assert_eq!(&f[63..66], &[0x12, 0x34, 0x56]);
    assert_eq!(&f[6..12], &SERVER);
    assert_eq!(&f[22..38], &GW6.octets());
    assert_eq!(opt6(&f, 1).unwrap(), CLIENT_DUID);
    assert_eq!(opt6(&f, 2).unwrap(), server_duid());
    assert_eq!(opt6(&f, 7).unwrap(), vec![255]);
    let ia = opt6(&f, 3).unwrap();
    assert_eq!(&ia[..4], &7u32.to_be_bytes());
    assert_eq!(u32::from_be_bytes([ia[4], ia[5], ia[6], ia[7]]), 43_200);
    assert_eq!(ia_content(&ia), (vec![(POD6, 86_400, 86_400)], None));
    assert_eq!(opt6(&f, 23).unwrap(), v6("2001:db8::53").octets());
    assert_eq!(
        opt6(&f, 24).unwrap(),
        b"\x03pod\x07example\x00\x03svc\x07example\x00"
    );
}

#[test]
fn solicit_with_rapid_commit_gets_reply() {
    let r = responder(calico());
    let f = answer(
        &r,
        &dhcp6_frame(1, &[d6opt(1, &CLIENT_DUID), d6opt(14, &[]), ia_na(1, &[])]),
    )
    .unwrap();
    assert_eq!(f[62], dhcp6::REPLY);
    assert_eq!(opt6(&f, 14).unwrap(), Vec::<u8>::new());
    assert!(opt6(&f, 3).is_some());
}

#[test]
fn request_renew_rebind() {
    let r = responder(calico());
    let base = |t| {
        dhcp6_frame(
            t,
            &[
                d6opt(1, &CLIENT_DUID),
                d6opt(2, &server_duid()),
                ia_na(1, &[POD6]),
            ],
        )
    };
    for t in [3, 5] {
        let f = answer(&r, &base(t)).unwrap();
        assert_eq!(f[62], dhcp6::REPLY);
        assert_eq!(
            ia_content(&opt6(&f, 3).unwrap()),
            (vec![(POD6, 86_400, 86_400)], None)
        );
    }
    let other = dhcp6_frame(
        3,
        &[
            d6opt(1, &CLIENT_DUID),
            d6opt(2, &[0, 3, 0, 1, 9, 9, 9, 9, 9, 9]),
            ia_na(1, &[]),
        ],
    );
    assert!(answer(&r, &other).is_none(), "request for another server");
    let stale = v6("2001:db8:9::9");
    let rebind = dhcp6_frame(6, &[d6opt(1, &CLIENT_DUID), ia_na(1, &[stale])]);
    let f = answer(&r, &rebind).unwrap();
    let (addrs, _) = ia_content(&opt6(&f, 3).unwrap());
    assert_eq!(
        addrs,
        vec![(POD6, 86_400, 86_400), (stale, 0, 0)],
        "stale address expired at once"
    );
    let f = answer(
        &r,
        &dhcp6_frame(
            3,
            &[
                d6opt(1, &CLIENT_DUID),
                d6opt(2, &server_duid()),
                ia_na(1, &[stale]),
            ],
        ),
    )
    .unwrap();
    assert_eq!(
        ia_content(&opt6(&f, 3).unwrap()),
        (vec![], Some(dhcp6::STATUS_NOTONLINK))
    );
}

#[test]
fn confirm() {
    let r = responder(calico());
    let status = |f: &[u8]| opt6(f, 13).map(|s| u16::from_be_bytes([s[0], s[1]]));
    let ok = answer(
        &r,
        &dhcp6_frame(4, &[d6opt(1, &CLIENT_DUID), ia_na(1, &[POD6])]),
    )
    .unwrap();
    assert_eq!(status(&ok), Some(dhcp6::STATUS_SUCCESS));
    assert!(opt6(&ok, 3).is_none());
    let bad = answer(
        &r,
        &dhcp6_frame(
            4,
            &[d6opt(1, &CLIENT_DUID), ia_na(1, &[v6("2001:db8:9::9")])],
        ),
    )
    .unwrap();
    assert_eq!(status(&bad), Some(dhcp6::STATUS_NOTONLINK));
    assert!(
        answer(
            &r,
            &dhcp6_frame(4, &[d6opt(1, &CLIENT_DUID), ia_na(1, &[])])
        )
        .is_none(),
        "no address: silence"
    );
}

#[test]
fn information_request_release_decline() {
    let r = responder(calico());
    let f = answer(&r, &dhcp6_frame(11, &[d6opt(8, &[0, 0])])).unwrap();
    assert_eq!(f[62], dhcp6::REPLY);
    assert!(opt6(&f, 3).is_none());
    assert!(opt6(&f, 23).is_some());
    assert_eq!(opt6(&f, 32).unwrap(), 43_200u32.to_be_bytes());
    let rel = answer(
        &r,
        &dhcp6_frame(
            8,
            &[
                d6opt(1, &CLIENT_DUID),
                d6opt(2, &server_duid()),
                ia_na(1, &[POD6]),
            ],
        ),
    )
    .unwrap();
    assert_eq!(opt6(&rel, 13).unwrap()[..2], [0, 0]);
    assert!(opt6(&rel, 3).is_none());
    let stale = [
        d6opt(1, &CLIENT_DUID),
        d6opt(2, &server_duid()),
        ia_na(1, &[v6("2001:db8:9::9")]),
    ];
    let dec = answer(&r, &dhcp6_frame(9, &stale)).unwrap();
    assert_eq!(
        ia_content(&opt6(&dec, 3).unwrap()),
        (vec![], Some(dhcp6::STATUS_NOBINDING))
    );
}

#[test]
fn dhcp6_needs_client_id_and_guest_mac() {
    let r = responder(calico());
    assert!(answer(&r, &dhcp6_frame(1, &[ia_na(1, &[])])).is_none());
    let mut f = dhcp6_frame(1, &[d6opt(1, &CLIENT_DUID)]);
    f[11] = 0x99;
    assert!(answer(&r, &f).is_none());
    let mut truncated = dhcp6_frame(1, &[d6opt(1, &CLIENT_DUID)]);
    let n = truncated.len();
    truncated[n - 11] = 0xff; // option length past the end
    assert!(answer(&r, &truncated).is_none());
}

#[test]
fn extension_headers_are_bounded() {
    let r = responder(calico());
    let plain = dhcp6_frame(1, &[d6opt(1, &CLIENT_DUID)]);
    let with = |n: usize| {
        let mut f = plain[..54].to_vec();
        f[20] = 0; // hop-by-hop first
        for i in 0..n {
            let next = if i + 1 == n { 17 } else { 60 };
            f.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
        }
        f.extend_from_slice(&plain[54..]);
        let plen = (f.len() - 54) as u16;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        f
    };
    assert!(answer(&r, &with(2)).is_some());
    assert!(answer(&r, &with(wire::MAX_EXT_HEADERS + 1)).is_none());
    let mut frag = with(1);
    frag[20] = 44;
    assert!(answer(&r, &frag).is_none(), "fragments refused");
}

#[test]
fn vlan_tagged_ignored() {
    let r = responder(calico());
    let mut f = Dhcp4::new(1).frame();
    f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    assert!(answer(&r, &f).is_none());
}
