//! A node upgrade finds attachments an earlier podtap made with its BPF
//! redirect: a direct-action cls_bpf filter each way, running its
//! four-instruction program with the target as classid, and
//! `"tc_redirect": "bpf"` in the checkpoint. podtap no longer makes them,
//! so this test makes what that release left: it attaches (u32 + mirred),
//! swaps both filters for that release's at the same priority (the program
//! loaded with bpf(2)) and records `bpf` as it did. `check`, `show`,
//! `list` and `render` read the attachment, and `detach` tears it down
//! exactly.
//!
//! Run: `cargo test --test bpf_redirect_upgrade`

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use rtnetlink::packet_core::{
    NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST,
};
use rtnetlink::packet_route::tc::{TcAttribute, TcBpfFlags, TcFilterBpfOption, TcHandle};
use rtnetlink::packet_route::tc::{TcMessage, TcOption};
use rtnetlink::packet_route::RouteNetlinkMessage;

use podtap_testkit::wiring::{filters, link, pod, redirect_kind, verify_tap};
use podtap_testkit::{attach, check, detach, in_netns, json_ok, podtap_state, sh, snapshot};
use podtap_testkit::{exit_code as code, net_tools_or_skip as ready, stderr, stdout, taps};
use podtap_testkit::{Netns, StateDir};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// The earlier release's program (`struct bpf_insn`s, little endian):
/// `r1 = skb->tc_classid; r2 = 0; call bpf_redirect; exit`.
const INSNS: [[u8; 8]; 4] = [
    [0x61, 0x11, 72, 0, 0, 0, 0, 0],
    [0xb7, 0x02, 0, 0, 0, 0, 0, 0],
    [0x85, 0, 0, 0, 23, 0, 0, 0],
    [0x95, 0, 0, 0, 0, 0, 0, 0],
];

/// Load [`INSNS`] as that release did: `BPF_PROG_TYPE_SCHED_CLS`, GPL,
/// named `podtap_redir`.
fn load_program() -> OwnedFd {
    let code: Vec<u8> = INSNS.concat();
    let license = b"GPL\0";
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&3u32.to_ne_bytes());
    attr[4..8].copy_from_slice(&4u32.to_ne_bytes());
    attr[8..16].copy_from_slice(&(code.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    attr[48..60].copy_from_slice(b"podtap_redir");
    // SAFETY: `attr` is a writable `union bpf_attr` of 128 bytes for
    // BPF_PROG_LOAD (5); its pointers name `code` and `license`, live for
    // the call.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 5, attr.as_mut_ptr(), attr.len()) };
    assert!(
        fd >= 0,
        "BPF_PROG_LOAD: {}",
        std::io::Error::last_os_error()
    );
    let fd = i32::try_from(fd).expect("an fd");
    // SAFETY: a non-negative BPF_PROG_LOAD result is a new fd we own.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Replace the filter at `prio` on `from`'s ingress with that release's
/// redirect to ifindex `to`.
fn swap_in_old_redirect(ns: &Netns, from: &str, to: u32, prio: u16, prog: &OwnedFd) {
    let n = &ns.name;
    sh(&format!(
        "tc -n {n} filter del dev {from} ingress prio {prio}"
    ));
    let from = u32::try_from(link(ns, from)["ifindex"].as_u64().expect("ifindex")).expect("u32");
    let prog = u32::try_from(prog.as_raw_fd()).expect("an fd");
    let mut msg = TcMessage::with_index(i32::try_from(from).expect("an ifindex"));
    msg.header.parent = 0xFFFF_FFF2.into();
    msg.header.info = (u32::from(prio) << 16) | u32::from(0x0003u16.to_be());
    msg.attributes.push(TcAttribute::Kind("bpf".into()));
    msg.attributes.push(TcAttribute::Options(vec![
        TcOption::Bpf(TcFilterBpfOption::ProgFd(prog)),
        TcOption::Bpf(TcFilterBpfOption::ProgName("podtap_redirect".into())),
        TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
        TcOption::Bpf(TcFilterBpfOption::ClassId(TcHandle::from(to))),
    ]));
    let mut req = NetlinkMessage::from(RouteNetlinkMessage::NewTrafficFilter(msg));
    req.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    in_netns(&ns.path_str(), move || {
        use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket};
        let mut socket = Socket::new(NETLINK_ROUTE).expect("netlink socket");
        socket.bind_auto().expect("bind");
        req.finalize();
        let mut buf = vec![0u8; req.buffer_len()];
        req.serialize(&mut buf);
        socket.send(&buf, 0).expect("send");
        let mut reply = Vec::with_capacity(8192);
        socket.recv(&mut reply, 0).expect("the kernel's answer");
        let ack = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&reply).expect("an ack");
        if let NetlinkPayload::Error(e) = ack.payload {
            assert!(e.code.is_none(), "add the cls_bpf filter: {e:?}");
        }
    });
}

#[test]
fn an_earlier_releases_bpf_redirect_is_read_checked_and_torn_down() {
    if !ready("an_earlier_releases_bpf_redirect_is_read_checked_and_torn_down") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let id = podtap_testkit::unique("oldbpf");
    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let tap = verify_tap(&pod, &desc, "eth0");
    let prio: u16 = filters(&pod.pod, "eth0")
        .split_whitespace()
        .skip_while(|w| *w != "pref")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("a filter priority");
    let index = |dev: &str| {
        u32::try_from(link(&pod.pod, dev)["ifindex"].as_u64().expect("ifindex")).expect("u32")
    };
    let prog = load_program();
    swap_in_old_redirect(&pod.pod, "eth0", index(&tap), prio, &prog);
    swap_in_old_redirect(&pod.pod, &tap, index("eth0"), prio, &prog);
    drop(prog);
    for (from, to) in [("eth0", tap.as_str()), (tap.as_str(), "eth0")] {
        assert_eq!(
            redirect_kind(&pod.pod, from, to),
            Some("bpf"),
            "{from} -> {to}"
        );
    }
    let file = state.0.join(format!("{id}.json"));
    let mut cp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).expect("the checkpoint")).expect("JSON");
    assert_eq!(cp["version"], 3);
    cp["plan"]["tc_redirect"] = "bpf".into();
    std::fs::write(&file, cp.to_string()).expect("rewrite the checkpoint");

    let o = check(BIN, &state, &id);
    assert_eq!(code(&o), 0, "check: {}", stderr(&o));
    let o = podtap_state(BIN, &state.0, &["show", "--id", &id]);
    assert_eq!(code(&o), 0, "show: {}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("tc bpf redirect prio {prio}")),
        "{}",
        stdout(&o)
    );
    let o = podtap_state(BIN, &state.0, &["list"]);
    assert!(stdout(&o).contains(&id), "list: {}", stdout(&o));
    let o = podtap_state(BIN, &state.0, &["render", "qemu", "--id", &id]);
    assert_eq!(code(&o), 0, "render: {}", stderr(&o));

    let o = detach(BIN, &state, &id);
    assert_eq!(code(&o), 0, "detach: {}", stderr(&o));
    assert!(
        !stderr(&o).contains("warning"),
        "nothing left: {}",
        stderr(&o)
    );
    assert!(taps(&pod.pod).is_empty(), "the TAP is gone");
    assert!(!file.exists(), "the checkpoint is gone");
    assert_eq!(snapshot(&pod.pod), before, "detach restored the pod");
}
