//! Root integration tests for `podtap attach/detach/check/list` against real
//! kernel objects in private network namespaces, verified with iproute2/tc.
//!
//! Run: `cargo test --test attach -- --test-threads=2`

use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, OwnedFd};

use podtap_testkit::wiring::{
    filters, ingress_qdiscs, link, pod, pod_with_macvlan, verify_tap, verify_tc, verify_timings,
};
use podtap_testkit::{
    attach, check, detach, iface, in_netns, json_ok, podtap_state, sh, sh_ok, snapshot, stderr,
    stdout, taps, StateDir,
};
use serde_json::Value;

use podtap_testkit::{exit_code as code, net_tools_or_skip as ready};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

#[test]
fn tc_attach_wires_both_ways_and_detach_restores() {
    if !ready("tc_attach_wires_both_ways_and_detach_restores") {
        return;
    }
    let pod = pod_with_macvlan();
    let state = StateDir::new();
    let id = podtap_testkit::unique("tc");
    let before = snapshot(&pod.pod);

    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    verify_timings(&desc, &id);
    assert_eq!(desc["attachment"]["mode"], "tc");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| {
            std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode(&state.0), 0o700, "state dir is 0700");
        assert_eq!(
            mode(&state.0.join(format!("{id}.json"))),
            0o600,
            "checkpoint is 0600"
        );
    }
    for pod_if in ["eth0", "net1"] {
        let tap = verify_tap(&pod, &desc, pod_if);
        assert_eq!(iface(&desc, pod_if)["wiring"], "tc");
        verify_tc(&pod, pod_if, &tap);
        // Guest MAC is the pod interface's MAC, which tc mode leaves alone.
        assert_eq!(
            iface(&desc, pod_if)["guest_mac"],
            link(&pod.pod, pod_if)["address"]
        );
    }
    let mut found = taps(&pod.pod);
    found.sort();
    let mut described: Vec<String> = ["eth0", "net1"]
        .iter()
        .map(|i| iface(&desc, i)["tap"]["name"].as_str().unwrap().to_string())
        .collect();
    described.sort();
    assert_eq!(found, described, "exactly the described TAPs exist");

    let c = check(BIN, &state, &id);
    assert_eq!(code(&c), 0, "check: {}", stderr(&c));
    let l = podtap_state(BIN, &state.0, &["list", "--json"]);
    let rows = json_ok(&l);
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == id.as_str()),
        "list shows {id}: {rows}"
    );

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "detach restores the exact prior state"
    );
    assert!(
        !state.0.join(format!("{id}.json")).exists(),
        "checkpoint removed"
    );
}

#[test]
fn bridge_attach_swaps_mac_falls_back_for_macvlan_and_detach_restores() {
    if !ready("bridge_attach_swaps_mac_falls_back_for_macvlan_and_detach_restores") {
        return;
    }
    let pod = pod_with_macvlan();
    let state = StateDir::new();
    let id = podtap_testkit::unique("br");
    let before = snapshot(&pod.pod);
    let orig_mac = link(&pod.pod, "eth0")["address"]
        .as_str()
        .unwrap()
        .to_string();

    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &["--mode", "bridge"]));
    verify_timings(&desc, &id);
    assert_eq!(desc["attachment"]["mode"], "bridge");

    // eth0 (veth): a bridge holding eth0 and its TAP; eth0 carries a generated LAA MAC.
    let eth0 = iface(&desc, "eth0");
    assert_eq!(eth0["wiring"], "bridge");
    let tap = verify_tap(&pod, &desc, "eth0");
    let br = eth0["bridge"]["name"].as_str().unwrap();
    let br_link = link(&pod.pod, br);
    assert_eq!(br_link["linkinfo"]["info_kind"], "bridge");
    assert_eq!(br_link["ifindex"], eth0["bridge"]["ifindex"]);
    let members: Vec<String> = pod
        .pod
        .ip_json(&format!("link show master {br}"))
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["ifname"].as_str().unwrap().to_string())
        .collect();
    assert!(
        members.contains(&"eth0".to_string()) && members.contains(&tap),
        "bridge {br} members: {members:?}"
    );
    let bridged_mac = link(&pod.pod, "eth0")["address"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(eth0["bridge"]["pod_interface_mac"], bridged_mac.as_str());
    assert_ne!(
        bridged_mac, orig_mac,
        "pod interface MAC swapped while bridged"
    );
    let first = u8::from_str_radix(&bridged_mac[..2], 16).unwrap();
    assert_eq!(
        first & 0x03,
        0x02,
        "locally administered unicast: {bridged_mac}"
    );
    assert_eq!(
        eth0["guest_mac"],
        orig_mac.as_str(),
        "guest keeps the pod's own MAC"
    );
    assert!(
        ingress_qdiscs(&pod.pod, "eth0").is_empty(),
        "no tc on a bridged interface"
    );

    // net1 (macvlan): tc fallback, said so.
    let net1 = iface(&desc, "net1");
    assert_eq!(net1["wiring"], "tc");
    assert!(
        net1["wiring_note"]
            .as_str()
            .is_some_and(|n| n.contains("macvlan")),
        "{net1}"
    );
    assert!(net1.get("bridge").is_none_or(Value::is_null));
    let tap1 = verify_tap(&pod, &desc, "net1");
    verify_tc(&pod, "net1", &tap1);

    let c = check(BIN, &state, &id);
    assert_eq!(code(&c), 0, "check: {}", stderr(&c));

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    assert_eq!(
        link(&pod.pod, "eth0")["address"],
        orig_mac.as_str(),
        "original MAC back"
    );
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "detach restores the exact prior state"
    );
}

#[test]
fn macvtap_attach_makes_an_owned_node_falls_back_for_macvlan_and_detach_restores() {
    let test = "macvtap_attach_makes_an_owned_node_falls_back_for_macvlan_and_detach_restores";
    if !ready(test) {
        return;
    }
    let pod = pod_with_macvlan();
    let state = StateDir::new();
    let id = podtap_testkit::unique("mvt");
    let before = snapshot(&pod.pod);
    let orig = link(&pod.pod, "eth0");

    let desc = json_ok(&attach(
        BIN,
        &state.0,
        &pod,
        &id,
        &["--mode", "macvtap", "--tap-owner", "4242:4343"],
    ));
    assert_eq!(desc["attachment"]["mode"], "macvtap");
    let eth0 = iface(&desc, "eth0");
    assert_eq!(eth0["wiring"], "macvtap");
    let name = eth0["tap"]["name"].as_str().unwrap();
    let mv = link(&pod.pod, name);
    assert_eq!(mv["linkinfo"]["info_kind"], "macvtap");
    assert_eq!(mv["linkinfo"]["info_data"]["mode"], "passthru");
    assert_eq!(mv["link"], "eth0", "the macvtap sits on eth0");
    assert_eq!(mv["ifindex"], eth0["tap"]["ifindex"]);
    // Passthru: the guest keeps the pod's MAC, and the MTU is carried.
    assert_eq!(mv["address"], orig["address"]);
    assert_eq!(eth0["guest_mac"], orig["address"]);
    assert_eq!(mv["mtu"], 1450);
    assert!(mv["flags"].to_string().contains("UP"), "{mv}");
    assert_eq!(link(&pod.pod, "eth0")["promiscuity"], 1);
    // podtap's own node, owned as asked, with the device number of this macvtap.
    let node = eth0["tap"]["device"].as_str().unwrap();
    assert_eq!(node, format!("/dev/podtap/{id}/{name}"));
    let stat = sh(&format!("stat -c '%F %u %g %a %t:%T' {node}"));
    let ifindex = mv["ifindex"].as_u64().unwrap();
    let sysfs = pod.pod.exec(&format!(
        "cat /sys/class/net/{name}/macvtap/tap{ifindex}/dev"
    ));
    let (major, minor) = sysfs.trim().split_once(':').unwrap();
    let hex = |n: &str| format!("{:x}", n.parse::<u64>().unwrap());
    assert_eq!(
        stat.trim(),
        format!(
            "character special file 4242 4343 660 {}:{}",
            hex(major),
            hex(minor)
        )
    );
    // A macvlan cannot carry a passthru macvtap: tc, with a note.
    let net1 = iface(&desc, "net1");
    assert_eq!(net1["wiring"], "tc");
    assert!(net1["wiring_note"]
        .as_str()
        .unwrap()
        .contains("tc redirect instead"));
    assert!(check(BIN, &state, &id).status.success());
    // Formats that open TAPs by name refuse it, naming what works.
    let r = podtap_state(BIN, &state.0, &["render", "qemu", "--id", &id]);
    assert_eq!(code(&r), 15, "{}", stderr(&r));
    assert!(
        stderr(&r).contains("podtap exec --vmm qemu"),
        "{}",
        stderr(&r)
    );
    // A scan now shows the macvtap as podtap's, not as a pod interface.
    let scan = json_ok(&podtap_state(
        BIN,
        &state.0,
        &["scan", "--netns", &pod.pod.path_str()],
    ));
    assert_eq!(iface(&scan, name)["eligible"], false);

    // check notices a missing node.
    std::fs::remove_file(node).unwrap();
    let c = check(BIN, &state, &id);
    assert!(!c.status.success());
    assert!(stderr(&c).contains("device node"), "{}", stderr(&c));

    assert!(detach(BIN, &state, &id).status.success());
    assert_eq!(before, snapshot(&pod.pod), "detach must restore the netns");
    assert_eq!(link(&pod.pod, "eth0")["promiscuity"], 0);
    assert!(!std::path::Path::new(&format!("/dev/podtap/{id}")).exists());
}
#[test]
fn existing_clsact_filter_survives_attach_and_detach() {
    if !ready("existing_clsact_filter_survives_attach_and_detach") {
        return;
    }
    let pod = pod();
    let n = &pod.pod.name;
    sh(&format!("tc -n {n} qdisc add dev eth0 clsact"));
    // A CNI plugin's own filter. (This kernel lacks act_gact, so `classid` stands in for `action pass`.)
    let action = if sh_ok(&format!(
        "tc -n {n} filter add dev eth0 ingress prio 1 u32 match u8 0 0 action pass"
    )) {
        "gact action pass"
    } else {
        sh(&format!(
            "tc -n {n} filter add dev eth0 ingress prio 1 u32 match u8 0 0 classid 1:1"
        ));
        "flowid 1:1"
    };
    let theirs = filters(&pod.pod, "eth0");
    let before = snapshot(&pod.pod);
    let state = StateDir::new();
    let id = podtap_testkit::unique("cls");

    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let tap = iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    verify_tc(&pod, "eth0", &tap);
    assert_eq!(
        ingress_qdiscs(&pod.pod, "eth0"),
        ["clsact"],
        "podtap used the existing clsact"
    );
    let during = filters(&pod.pod, "eth0");
    assert!(
        during.contains("pref 1 u32") && during.contains(action),
        "their filter kept:\n{during}"
    );
    let c = check(BIN, &state, &id);
    assert_eq!(code(&c), 0, "{}", stderr(&c));

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "{}", stderr(&d));
    assert_eq!(
        ingress_qdiscs(&pod.pod, "eth0"),
        ["clsact"],
        "clsact not removed"
    );
    assert_eq!(
        filters(&pod.pod, "eth0"),
        theirs,
        "their filter intact, ours gone"
    );
    assert_eq!(snapshot(&pod.pod), before);
}

#[test]
fn queues_4_gives_a_multi_queue_tap_that_4_opens_attach_to() {
    if !ready("queues_4_gives_a_multi_queue_tap_that_4_opens_attach_to") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("mq");
    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &["--queues", "4"]));
    let tap = &iface(&desc, "eth0")["tap"];
    assert_eq!(tap["queues"], 4);
    assert_eq!(tap["multi_queue"], true);
    let name = tap["name"].as_str().unwrap().to_string();
    let data = link(&pod.pod, &name)["linkinfo"]["info_data"].clone();
    assert_eq!(data["multi_queue"], true, "{data}");
    assert_eq!(data["persist"], true);

    let mq = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE;
    let fds = in_netns(&pod.pod.path_str(), move || {
        (0..4).map(|_| open_tap(&name, mq)).collect::<Vec<_>>()
    });
    assert_eq!(fds.len(), 4);
    for (n, r) in fds.iter().enumerate() {
        assert!(r.is_ok(), "queue {n}: {:?}", r.as_ref().err());
    }
    // A single-queue open of the same TAP is refused: the kernel holds it as multi-queue.
    let name = tap["name"].as_str().unwrap().to_string();
    let single = in_netns(&pod.pod.path_str(), move || {
        open_tap(&name, IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)
    });
    assert!(single.is_err(), "a non-multi-queue open must fail");
    drop(fds);
    let c = check(BIN, &state, &id);
    assert_eq!(code(&c), 0, "{}", stderr(&c));
    assert_eq!(code(&detach(BIN, &state, &id)), 0);
    assert!(taps(&pod.pod).is_empty());
}

#[test]
fn tap_owner_and_no_vnet_hdr_show_in_ip_link() {
    if !ready("tap_owner_and_no_vnet_hdr_show_in_ip_link") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("own");
    let desc = json_ok(&attach(
        BIN,
        &state.0,
        &pod,
        &id,
        &[
            "--tap-owner",
            "1000:1000",
            "--no-vnet-hdr",
            "--interfaces",
            "eth0",
        ],
    ));
    let tap = &iface(&desc, "eth0")["tap"];
    assert_eq!(tap["vnet_hdr"], false);
    let name = tap["name"].as_str().unwrap();
    // iproute2 prints names when the ids resolve; compare with what they resolve to here.
    let user = sh("getent passwd 1000 | cut -d: -f1 || true")
        .trim()
        .to_string();
    let group = sh("getent group 1000 | cut -d: -f1 || true")
        .trim()
        .to_string();
    let user = if user.is_empty() {
        "1000".to_string()
    } else {
        user
    };
    let group = if group.is_empty() {
        "1000".to_string()
    } else {
        group
    };
    let text = pod.pod.ip(&format!("-d link show dev {name}"));
    assert!(
        text.contains(&format!(
            "tun type tap pi off vnet_hdr off persist on user {user} group {group}"
        )),
        "{text}"
    );
    // And numerically, from the pod netns's sysfs.
    let owner = pod.pod.exec(&format!(
        "cat /sys/class/net/{name}/owner /sys/class/net/{name}/group"
    ));
    assert_eq!(
        owner.split_whitespace().collect::<Vec<_>>(),
        ["1000", "1000"]
    );
    assert_eq!(code(&detach(BIN, &state, &id)), 0);
}

#[test]
fn dns_from_a_resolv_conf_is_recorded_and_rendered() {
    if !ready("dns_from_a_resolv_conf_is_recorded_and_rendered") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let dir = podtap_testkit::TempDir::new();
    let conf = dir.path().join("resolv.conf");
    std::fs::write(
        &conf,
        "# test\nnameserver 198.18.0.53\nsearch pod.example svc.example\noptions ndots:5\n",
    )
    .unwrap();
    let id = podtap_testkit::unique("dns");
    let desc = json_ok(&attach(
        BIN,
        &state.0,
        &pod,
        &id,
        &["--dns-from", conf.to_str().unwrap()],
    ));
    assert_eq!(
        desc["dns"],
        serde_json::json!({
            "nameservers": ["198.18.0.53"],
            "search": ["pod.example", "svc.example"],
            "options": ["ndots:5"]
        })
    );
    // A repeated attach returns the recorded description, dns included.
    assert_eq!(json_ok(&attach(BIN, &state.0, &pod, &id, &[])), desc);
    let args = podtap_state(BIN, &state.0, &["render", "guest-args", "--id", &id]);
    assert!(
        stdout(&args).contains(" podtap.dns=198.18.0.53 podtap.search=pod.example,svc.example\n"),
        "{}",
        stdout(&args)
    );
    assert_eq!(code(&detach(BIN, &state, &id)), 0);

    // A bad file is exit 13, one line naming it, before anything is built.
    let before = snapshot(&pod.pod);
    let bad = dir.path().join("bad.conf");
    std::fs::write(&bad, "nameserver dns.example\n").unwrap();
    let missing = dir.path().join("missing.conf");
    for (path, what) in [
        (
            bad.as_path(),
            "line 1: nameserver \"dns.example\" is not an IP address",
        ),
        (missing.as_path(), "No such file"),
        (dir.path(), "not a regular file"),
    ] {
        let o = attach(
            BIN,
            &state.0,
            &pod,
            &id,
            &["--dns-from", path.to_str().unwrap()],
        );
        assert_eq!(code(&o), 13, "{path:?}: {}", stderr(&o));
        let msg = stderr(&o);
        assert!(
            msg.lines().count() == 1
                && msg.contains(&format!("--dns-from {}: ", path.display()))
                && msg.contains(what),
            "{msg}"
        );
    }
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "refused attaches changed nothing"
    );
}

// --- TUNSETIFF from the test, independent of podtap's own code -------------

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: i16 = 0x0002;
const IFF_NO_PI: i16 = 0x1000;
const IFF_VNET_HDR: i16 = 0x4000;
const IFF_MULTI_QUEUE: i16 = 0x0100;

/// Open `/dev/net/tun` and attach to TAP `name` with `flags` in this thread's netns.
fn open_tap(name: &str, flags: i16) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    // struct ifreq: 16 bytes of name, then the flags, padded to 40 bytes.
    let mut req = [0u8; 40];
    req[..name.len()].copy_from_slice(name.as_bytes());
    req[16..18].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: TUNSETIFF reads and writes a 40-byte struct ifreq we own.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF as _, req.as_mut_ptr()) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(f.into())
}

#[test]
fn an_old_tc_redirect_setting_is_accepted_and_ignored() {
    if !ready("an_old_tc_redirect_setting_is_accepted_and_ignored") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    // An earlier release took `u32` (and before it `bpf` and `auto`) in
    // PODTAP_TC_REDIRECT and --tc-redirect: whatever they say now, the
    // redirect is u32 + mirred and nothing is refused.
    for (setting, flag) in [
        ("u32", None),
        ("", None),
        ("bpf", Some("auto")),
        ("auto", Some("u32")),
    ] {
        let id = podtap_testkit::unique("redir");
        let mut cmd = podtap_testkit::podtap_cmd(BIN, &state.0);
        cmd.env("PODTAP_TC_REDIRECT", setting).args([
            "attach",
            "--netns",
            &pod.pod.path_str(),
            "--id",
            &id,
        ]);
        if let Some(flag) = flag {
            cmd.args(["--tc-redirect", flag]);
        }
        let out = cmd.output().expect("run podtap");
        let desc = json_ok(&out);
        let tap = verify_tap(&pod, &desc, "eth0");
        for (from, to) in [("eth0", tap.as_str()), (tap.as_str(), "eth0")] {
            assert_eq!(
                podtap_testkit::wiring::redirect_kind(&pod.pod, from, to),
                Some("u32"),
                "{setting}: {from} -> {to}"
            );
        }
        let o = check(BIN, &state, &id);
        assert!(o.status.success(), "{setting}: check: {}", stderr(&o));
        assert_eq!(stdout(&attach(BIN, &state.0, &pod, &id, &[])), stdout(&out));
        let o = detach(BIN, &state, &id);
        assert!(o.status.success(), "{setting}: detach: {}", stderr(&o));
        assert_eq!(
            snapshot(&pod.pod),
            before,
            "{setting}: detach restored the pod"
        );
    }
}

#[test]
fn a_classic_bpf_filter_dressed_as_the_redirect_is_not_taken_for_it() {
    if !ready("a_classic_bpf_filter_dressed_as_the_redirect_is_not_taken_for_it") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let id = podtap_testkit::unique("dressed");
    let n = &pod.pod.name;
    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let tap = verify_tap(&pod, &desc, "eth0");
    let ifindex = link(&pod.pod, &tap)["ifindex"].as_u64().expect("ifindex");
    let f = filters(&pod.pod, "eth0");
    let prio = f
        .split_whitespace()
        .skip_while(|w| *w != "pref")
        .nth(1)
        .expect("a filter priority")
        .to_string();
    // Someone with CAP_NET_ADMIN in the pod swaps podtap's filter for a
    // classic BPF one (accept all) with the TAP as classid, at the same
    // priority: a dump shows the same kind, priority and classid.
    let swapped = format!(
        "tc -n {n} filter del dev eth0 ingress prio {prio} && \
         tc -n {n} filter add dev eth0 ingress prio {prio} protocol all \
         bpf bytecode '1,6 0 0 4294967295,' classid :{ifindex:x}"
    );
    sh(&swapped);
    assert!(filters(&pod.pod, "eth0").contains(&format!("flowid :{ifindex:x}")));
    let o = check(BIN, &state, &id);
    assert_eq!(code(&o), 12, "check sees no redirect: {}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "tc redirect eth0 -> {tap} (prio {prio}) is missing"
        )),
        "{}",
        stderr(&o)
    );
    // Detach removes the TAP and leaves the stranger's filter (and so the
    // ingress qdisc that holds it), saying so.
    let o = detach(BIN, &state, &id);
    assert!(o.status.success(), "detach: {}", stderr(&o));
    assert!(stderr(&o).contains("left it"), "{}", stderr(&o));
    assert!(taps(&pod.pod).is_empty(), "the TAP is gone");
    assert!(
        filters(&pod.pod, "eth0").contains("bytecode"),
        "the stranger's filter stays"
    );
    assert!(sh_ok(&format!("tc -n {n} qdisc del dev eth0 ingress")));
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "nothing else of podtap's is left"
    );
}
