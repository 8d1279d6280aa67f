//! `podtap scan` against real kernel objects (run as root).
//!
//! Every test builds its own pod and peer netns (`podtap_testkit::Pod`), scans the pod
//! with the podtap binary, validates the JSON against
//! `docs/description.schema.json`, and compares it with what iproute2
//! (`ip -j`) reports for the same netns, read independently.
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use podtap_testkit::scan::{
    arr, assert_matches_ip, opt_str, route, scan_path, scan_stable, IpView,
};
use podtap_testkit::{iface, Pod, Sleeper, TempDir};
use serde_json::{json, Value};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

// ---------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------

#[test]
fn dual_stack_veth_matches_ip() {
    if !podtap_testkit::root_or_skip("dual_stack_veth_matches_ip") {
        return;
    }
    let pod = Pod::dual_stack();
    let sc = scan_stable(BIN, &pod.pod);
    assert_matches_ip(&sc);

    let d = &sc.desc;
    assert_eq!(d["schema"], "podtap/v2");
    assert_eq!(d["ipv6_enabled"], true);
    let meta = std::fs::metadata(pod.pod.path()).unwrap();
    assert_eq!(d["netns"]["path"], pod.pod.path_str());
    assert_eq!(d["netns"]["inode"], meta.ino());
    assert_eq!(d["netns"]["dev"], meta.dev());

    let eth0 = iface(d, "eth0");
    assert_eq!(eth0["kind"], "veth");
    assert_eq!(eth0["eligible"], true);
    let n = pod.net;
    let addrs = arr(&eth0["addresses"]);
    assert!(addrs.contains(&json!(format!("198.18.{n}.2/24"))));
    assert!(addrs.contains(&json!(format!("2001:db8:{n:x}::2/64"))));
    // The kernel's own IPv6 link-local address is kept, and marked.
    let ll: Vec<&Value> = arr(&eth0["address_details"])
        .iter()
        .filter(|a| a["link_local"] == true)
        .collect();
    assert_eq!(ll.len(), 1, "one link-local address on eth0");
    assert_eq!(ll[0]["scope"], "link");

    let v4 = route(d, "0.0.0.0/0");
    assert_eq!(v4["gateway"], format!("198.18.{n}.1"));
    assert_eq!(v4["interface"], "eth0");
    assert_eq!(v4["family"], "inet");
    let v6 = route(d, "::/0");
    assert_eq!(v6["gateway"], format!("2001:db8:{n:x}::1"));
    assert_eq!(v6["interface"], "eth0");
    assert_eq!(v6["family"], "inet6");

    let lo = iface(d, "lo");
    assert_eq!(lo["kind"], "loopback");
    assert_eq!(lo["eligible"], false);
}

#[test]
fn two_addresses_on_one_interface_keep_kernel_order() {
    if !podtap_testkit::root_or_skip("two_addresses_on_one_interface_keep_kernel_order") {
        return;
    }
    let pod = Pod::new();
    let (p, q, n) = (&pod.pod, &pod.peer, pod.net);
    q.ip(&format!(
        "link add veth0 type veth peer name eth0 netns {}",
        p.name
    ));
    q.ip("link set veth0 up");
    p.ip("link set eth0 up");
    // .50 first, then .4: kernel order differs from numeric and textual order.
    p.ip(&format!("addr add 198.18.{n}.50/24 dev eth0"));
    p.ip(&format!("addr add 198.18.{n}.4/24 dev eth0"));
    p.ip(&format!("addr add 2001:db8:{n:x}::50/64 dev eth0 nodad"));
    p.ip(&format!("addr add 2001:db8:{n:x}::4/64 dev eth0 nodad"));
    let sc = scan_stable(BIN, p);
    assert_matches_ip(&sc);

    let got: Vec<&str> = arr(&iface(&sc.desc, "eth0")["addresses"])
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let pos = |a: String| got.iter().position(|g| *g == a).unwrap();
    assert!(pos(format!("198.18.{n}.50/24")) < pos(format!("198.18.{n}.4/24")));
    // IPv6 addresses are listed newest first by the kernel; ip agrees (checked above).
    assert!(got.contains(&format!("2001:db8:{n:x}::50/64").as_str()));
    assert!(got.contains(&format!("2001:db8:{n:x}::4/64").as_str()));
}

#[test]
fn macvlan_is_eligible() {
    if !podtap_testkit::root_or_skip("macvlan_is_eligible") {
        return;
    }
    let pod = Pod::new();
    pod.add_macvlan("mv0", pod.net);
    let sc = scan_stable(BIN, &pod.pod);
    assert_matches_ip(&sc);
    let mv = iface(&sc.desc, "mv0");
    assert_eq!(mv["kind"], "macvlan");
    assert_eq!(mv["kind_raw"], "macvlan");
    assert_eq!(mv["eligible"], true);
    assert_eq!(mv["guest_mac"], mv["mac"]);
}

#[test]
fn sixty_four_veths_all_present_in_ifindex_order() {
    if !podtap_testkit::root_or_skip("sixty_four_veths_all_present_in_ifindex_order") {
        return;
    }
    let pod = Pod::new();
    let (p, q) = (&pod.pod, &pod.peer);
    let (mut peer_batch, mut pod_batch) = (String::new(), String::new());
    for i in 0..64 {
        peer_batch.push_str(&format!(
            "link add pv{i} type veth peer name e{i} netns {}\nlink set pv{i} up\n",
            p.name
        ));
        pod_batch.push_str(&format!(
            "link set e{i} up\naddr add 198.18.{i}.2/24 dev e{i}\n"
        ));
    }
    q.batch("ip", &peer_batch);
    p.batch("ip", &pod_batch);

    let sc = scan_stable(BIN, p);
    assert_matches_ip(&sc);
    let ifaces = arr(&sc.desc["interfaces"]);
    let indexes: Vec<u64> = ifaces
        .iter()
        .map(|i| i["ifindex"].as_u64().unwrap())
        .collect();
    assert!(
        indexes.windows(2).all(|w| w[0] < w[1]),
        "ifindex order: {indexes:?}"
    );
    for i in 0..64 {
        let e = iface(&sc.desc, &format!("e{i}"));
        assert_eq!(e["kind"], "veth");
        assert_eq!(e["eligible"], true);
        assert_eq!(e["addresses"][0], format!("198.18.{i}.2/24"));
    }
    let veths = ifaces.iter().filter(|i| i["kind"] == "veth").count();
    assert_eq!(veths, 64);
}

#[test]
fn fifteen_character_interface_name() {
    if !podtap_testkit::root_or_skip("fifteen_character_interface_name") {
        return;
    }
    let name = "podtap-eth-0123";
    assert_eq!(name.len(), 15);
    let pod = Pod::new();
    pod.add_veth(name, "veth0", pod.net, true);
    let sc = scan_stable(BIN, &pod.pod);
    assert_matches_ip(&sc);
    let i = iface(&sc.desc, name);
    assert_eq!(i["eligible"], true);
    assert_eq!(route(&sc.desc, "0.0.0.0/0")["interface"], name);
    assert_eq!(route(&sc.desc, "::/0")["interface"], name);
}

#[test]
fn onlink_mtu_multipath_and_device_only_routes() {
    if !podtap_testkit::root_or_skip("onlink_mtu_multipath_and_device_only_routes") {
        return;
    }
    let pod = Pod::new();
    let (n, m) = (pod.net, pod.net + 1);
    pod.add_veth("eth0", "veth0", n, true);
    pod.add_veth("eth1", "veth1", m, false);
    let p = &pod.pod;
    p.ip("route add 198.19.5.0/24 via 198.19.200.1 dev eth0 onlink");
    p.ip(&format!(
        "route add 198.19.6.0/24 via 198.18.{n}.1 dev eth0 mtu 1400"
    ));
    p.ip(&format!(
        "route add 198.19.7.0/24 nexthop via 198.18.{n}.1 dev eth0 weight 1 nexthop via 198.18.{m}.1 dev eth1 weight 3"
    ));
    p.ip("-6 route add 2001:db8:99::/64 dev eth0");
    // An IPv4 route with an IPv6 gateway (RTA_VIA).
    p.ip(&format!(
        "route add 198.19.8.0/24 via inet6 2001:db8:{n:x}::1 dev eth0"
    ));
    p.ip(&format!(
        "-6 route add 2001:db8:77::/64 nexthop via 2001:db8:{n:x}::1 dev eth0 weight 2 nexthop via 2001:db8:{m:x}::1 dev eth1"
    ));
    let sc = scan_stable(BIN, p);
    assert_matches_ip(&sc);
    let d = &sc.desc;

    let onlink = route(d, "198.19.5.0/24");
    assert_eq!(onlink["onlink"], true);
    assert_eq!(onlink["gateway"], "198.19.200.1");
    assert_eq!(onlink["interface"], "eth0");

    let mtu = route(d, "198.19.6.0/24");
    assert_eq!(mtu["mtu"], 1400);
    assert_eq!(mtu["onlink"], false);

    let mp = route(d, "198.19.7.0/24");
    assert!(mp.get("interface").is_none() && mp.get("gateway").is_none());
    let hops: Vec<(String, u64)> = arr(&mp["nexthops"])
        .iter()
        .map(|h| {
            (
                h["interface"].as_str().unwrap().into(),
                h["weight"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(hops, [("eth0".to_string(), 1), ("eth1".to_string(), 3)]);
    let mp6 = route(d, "2001:db8:77::/64");
    assert_eq!(arr(&mp6["nexthops"]).len(), 2);

    let via6 = route(d, "198.19.8.0/24");
    assert_eq!(via6["family"], "inet");
    assert_eq!(via6["gateway"], format!("2001:db8:{n:x}::1"));

    let dev_only = route(d, "2001:db8:99::/64");
    assert_eq!(dev_only["family"], "inet6");
    assert_eq!(dev_only["interface"], "eth0");
    assert!(dev_only.get("gateway").is_none());
}

#[test]
fn route_types_protocols_sources_and_ipv6_onlink_match_ip() {
    let test = "route_types_protocols_sources_and_ipv6_onlink_match_ip";
    if !podtap_testkit::root_or_skip(test) {
        return;
    }
    let pod = Pod::dual_stack();
    let (p, n) = (&pod.pod, pod.net);
    p.ip("route add blackhole 198.19.9.0/24");
    p.ip("route add prohibit 198.19.12.0/24");
    p.ip("-6 route add unreachable 2001:db8:66::/64");
    p.ip(&format!(
        "route add 198.19.11.0/24 via 198.18.{n}.1 src 198.18.{n}.2 proto static metric 50"
    ));
    p.ip("-6 route add 2001:db8:55::/64 via 2001:db8:ff::1 dev eth0 onlink");
    // Kernel features newer than the rest: IPv4 via an IPv6 gateway (5.2), nexthop objects (5.3).
    let v4_via_v6 = podtap_testkit::sh_ok(&format!(
        "ip -n {} route add 198.19.8.0/24 via inet6 2001:db8:{n:x}::1 dev eth0",
        p.name
    ));
    let nhid = podtap_testkit::sh_ok(&format!(
        "ip -n {0} nexthop add id 7 via 198.18.{n}.1 dev eth0 && ip -n {0} route add 198.19.10.0/24 nhid 7",
        p.name
    ));
    let sc = scan_stable(BIN, p);
    assert_matches_ip(&sc);
    let d = &sc.desc;

    assert_eq!(route(d, "198.19.9.0/24")["type"], "blackhole");
    assert_eq!(route(d, "198.19.12.0/24")["type"], "prohibit");
    assert_eq!(route(d, "2001:db8:66::/64")["type"], "unreachable");
    let stat = route(d, "198.19.11.0/24");
    assert_eq!(stat["protocol"], "static");
    assert_eq!(stat["metric"], 50);
    assert_eq!(stat["source"], format!("198.18.{n}.2"));
    let onlink6 = route(d, "2001:db8:55::/64");
    assert_eq!(onlink6["onlink"], true);
    assert_eq!(onlink6["gateway"], "2001:db8:ff::1");
    if v4_via_v6 {
        assert_eq!(
            route(d, "198.19.8.0/24")["gateway"],
            format!("2001:db8:{n:x}::1")
        );
    } else {
        eprintln!("{test}: kernel refuses IPv4 routes via IPv6; part skipped");
    }
    if nhid {
        assert_eq!(
            route(d, "198.19.10.0/24")["gateway"],
            format!("198.18.{n}.1")
        );
    } else {
        eprintln!("{test}: kernel has no nexthop objects; part skipped");
    }
}

#[test]
fn permanent_neighbours_are_reported() {
    if !podtap_testkit::root_or_skip("permanent_neighbours_are_reported") {
        return;
    }
    let pod = Pod::dual_stack();
    let (p, n) = (&pod.pod, pod.net);
    p.ip(&format!(
        "neigh add 198.18.{n}.9 lladdr 02:00:00:00:00:09 dev eth0 nud permanent"
    ));
    p.ip(&format!(
        "neigh add 2001:db8:{n:x}::9 lladdr 02:00:00:00:00:0a dev eth0 nud permanent"
    ));
    p.ip(&format!(
        "neigh add 198.18.{n}.44 lladdr 02:00:00:00:00:44 dev eth0 nud noarp"
    ));
    // Pin the gateway too, with the peer's real MAC, read from the peer side.
    let peer = pod.peer.ip_json("link show veth0");
    let gw_mac = peer[0]["address"].as_str().unwrap().to_string();
    p.ip(&format!(
        "neigh replace 198.18.{n}.1 lladdr {gw_mac} dev eth0 nud permanent"
    ));
    let sc = scan_stable(BIN, p);
    assert_matches_ip(&sc);

    let neighbours = arr(&sc.desc["neighbours"]);
    let find = |ip: String| {
        neighbours
            .iter()
            .find(|x| x["ip"] == ip.as_str())
            .unwrap_or_else(|| panic!("neighbour {ip} in {neighbours:#?}"))
    };
    let plain = find(format!("198.18.{n}.9"));
    assert_eq!(plain["state"], "permanent");
    assert_eq!(plain["interface"], "eth0");
    assert_eq!(plain["gateway"], false);
    assert_eq!(find(format!("2001:db8:{n:x}::9"))["state"], "permanent");
    assert_eq!(find(format!("198.18.{n}.44"))["state"], "noarp");
    let gw = find(format!("198.18.{n}.1"));
    assert_eq!(gw["gateway"], true);
    assert_eq!(gw["mac"], gw_mac);
}

#[test]
fn ipv6_disabled_still_scans_ipv4() {
    let test = "ipv6_disabled_still_scans_ipv4";
    if !podtap_testkit::root_or_skip(test) {
        return;
    }
    if !Path::new("/proc/sys/net/ipv6").exists() {
        eprintln!("SKIP {test}: this kernel has no IPv6");
        return;
    }
    if !podtap_testkit::tool_or_skip(test, "sysctl") {
        return;
    }
    let pod = Pod::new();
    let (p, q, n) = (&pod.pod, &pod.peer, pod.net);
    p.exec("sysctl -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1");
    assert_eq!(
        p.exec("cat /proc/sys/net/ipv6/conf/all/disable_ipv6")
            .trim(),
        "1"
    );
    q.ip(&format!(
        "link add veth0 type veth peer name eth0 netns {}",
        p.name
    ));
    q.ip("link set veth0 up");
    q.ip(&format!("addr add 198.18.{n}.1/24 dev veth0"));
    p.ip("link set eth0 up");
    p.ip(&format!("addr add 198.18.{n}.2/24 dev eth0"));
    p.ip(&format!("route add default via 198.18.{n}.1 dev eth0"));

    let sc = scan_stable(BIN, p);
    assert_matches_ip(&sc);
    let d = &sc.desc;
    assert_eq!(d["ipv6_enabled"], false);
    assert_eq!(
        iface(d, "eth0")["addresses"],
        json!([format!("198.18.{n}.2/24")])
    );
    assert_eq!(route(d, "0.0.0.0/0")["gateway"], format!("198.18.{n}.1"));
    assert!(arr(&d["routes"]).iter().all(|r| r["family"] == "inet"));
}

#[test]
fn two_scans_are_byte_identical() {
    if !podtap_testkit::root_or_skip("two_scans_are_byte_identical") {
        return;
    }
    let pod = Pod::dual_stack();
    let (p, n) = (&pod.pod, pod.net);
    pod.add_veth("eth1", "veth1", n + 1, false);
    p.ip(&format!(
        "neigh add 198.18.{n}.9 lladdr 02:00:00:00:00:09 dev eth0 nud permanent"
    ));
    p.ip(&format!(
        "route add 198.19.7.0/24 nexthop via 198.18.{n}.1 dev eth0 nexthop via 198.18.{}.1 dev eth1",
        n + 1
    ));
    let first = scan_stable(BIN, p);
    let (_, second) = scan_path(BIN, &p.path_str());
    assert_eq!(first.text, second, "two scans differ");
    assert_eq!(IpView::read(p), first.ip, "netns changed between scans");

    // --output writes the same bytes to a file and nothing to stdout.
    let dir = TempDir::new();
    let file = dir.path().join("desc.json");
    let scan_to = |target: &std::path::Path| {
        let out = podtap_testkit::podtap(
            BIN,
            &[
                "scan",
                "--netns",
                &p.path_str(),
                "--output",
                target.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{}", podtap_testkit::stderr(&out));
        out
    };
    assert!(scan_to(&file).stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first.text);

    // --output naming a device (a null device node of this test's own, as
    // /dev/null would be) or a symlink writes through it and leaves it what it
    // was: never a regular file renamed into its place.
    let null = dir.path().join("null");
    let made = std::process::Command::new("mknod")
        .args(["-m", "666", null.to_str().unwrap(), "c", "1", "3"])
        .status()
        .unwrap();
    assert!(made.success(), "mknod");
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    scan_to(&null);
    scan_to(&link);
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&null)
        .unwrap()
        .file_type()
        .is_char_device());
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first.text);

    // The same netns named by /proc/PID/ns/net: same identity and content.
    let sleeper = Sleeper::new(p);
    let (by_pid, _) = scan_path(BIN, &sleeper.path());
    assert_eq!(by_pid["netns"]["path"], sleeper.path());
    assert_eq!(by_pid["netns"]["inode"], first.desc["netns"]["inode"]);
    let strip = |d: &Value| {
        let mut d = d.clone();
        d["netns"]["path"] = Value::Null;
        d
    };
    assert_eq!(strip(&by_pid), strip(&first.desc));
}

#[test]
fn loopback_bridge_tap_tun_and_bridge_ports_are_not_eligible() {
    if !podtap_testkit::root_or_skip("loopback_bridge_tap_tun_and_bridge_ports_are_not_eligible") {
        return;
    }
    let pod = Pod::dual_stack();
    let p = &pod.pod;
    p.ip("link add br0 type bridge");
    p.ip("link add vin0 type veth peer name vin1");
    p.ip("link set vin0 master br0");
    p.ip("link set br0 up");
    // vin1 is an ordinary veth: up, so eligible (a down link gets no NIC).
    p.ip("link set vin1 up");
    if !podtap_testkit::sh_ok(&format!("ip -n {} tuntap add dev tap0 mode tap", p.name)) {
        eprintln!("SKIP loopback_bridge_tap_tun_...: no /dev/net/tun");
        return;
    }
    p.ip("tuntap add dev tun0 mode tun");
    let sc = scan_stable(BIN, p);
    assert_matches_ip(&sc);
    let d = &sc.desc;
    for (name, kind) in [
        ("lo", "loopback"),
        ("br0", "bridge"),
        ("tap0", "tap"),
        ("tun0", "tun"),
        ("vin0", "veth"),
    ] {
        let i = iface(d, name);
        assert_eq!(i["kind"], kind, "{name}");
        assert_eq!(i["eligible"], false, "{name}");
        assert!(i.get("guest_mac").is_none(), "{name}");
        assert!(opt_str(i, "ineligible_reason").is_some(), "{name}");
    }
    assert_eq!(iface(d, "vin0")["controller"], "br0");
    assert_eq!(iface(d, "vin1")["eligible"], true);
    assert_eq!(iface(d, "eth0")["eligible"], true);
}

/// Routes through next-hop objects (`ip nexthop`). With the netns's
/// `net.ipv4.nexthop_compat_mode` at 1 (the default) the kernel puts each
/// object's gateway, device and legs in the route; at 0 only the object's
/// id. The description is the same either way: podtap reads the objects.
#[test]
fn routes_through_next_hop_objects_read_alike_in_either_compat_mode() {
    let test = "routes_through_next_hop_objects_read_alike_in_either_compat_mode";
    if !podtap_testkit::net_tools_or_skip(test) {
        return;
    }
    let pod = Pod::dual_stack();
    let p = &pod.pod.name;
    let sub = pod.net;
    if !podtap_testkit::sh_ok(&format!(
        "ip -n {p} nexthop add id 5 via 198.18.{sub}.1 dev eth0"
    )) {
        eprintln!("SKIP {test}: the kernel has no next-hop objects");
        return;
    }
    podtap_testkit::sh(&format!(
        "ip -n {p} link set lo up && \
         ip -n {p} nexthop add id 6 via 198.18.{sub}.3 dev eth0 && \
         ip -n {p} nexthop add id 7 group 5,3/6,2 && \
         ip -n {p} nexthop add id 8 blackhole && \
         ip -n {p} nexthop add id 9 via 2001:db8:{sub:x}::1 dev eth0 && \
         ip -n {p} nexthop add id 10 via 198.18.{sub}.9 dev eth0 onlink && \
         ip -n {p} route add 198.19.1.0/24 nhid 5 && \
         ip -n {p} route add 198.19.2.0/24 nhid 7 && \
         ip -n {p} route add 198.19.3.0/24 nhid 8 && \
         ip -n {p} route add 198.19.4.0/24 nhid 9 && \
         ip -n {p} route add 198.19.5.0/24 nhid 10 && \
         ip -n {p} -6 route add 2001:db8:5::/64 nhid 9 && \
         ip -n {p} nexthop add id 11 group 6 && \
         ip -n {p} route add 198.19.6.0/24 nhid 11 && \
         ip -n {p} nexthop add id 12 via 2001:db8:{sub:x}::3 dev eth0 && \
         ip -n {p} nexthop add id 13 group 12 && \
         ip -n {p} -6 route add 2001:db8:6::/64 nhid 13"
    ));
    let compat = |on: u8| {
        podtap_testkit::sh(&format!(
            "ip netns exec {p} sysctl -qw net.ipv4.nexthop_compat_mode={on}"
        ));
        scan_path(BIN, &pod.pod.path_str()).0
    };
    let shown = compat(1);
    let gw = format!("198.18.{sub}.1");
    assert_eq!(route(&shown, "198.19.1.0/24")["gateway"], gw.as_str());
    assert_eq!(route(&shown, "198.19.1.0/24")["interface"], "eth0");
    let legs = arr(&route(&shown, "198.19.2.0/24")["nexthops"]);
    let weights: Vec<&Value> = legs.iter().map(|h| &h["weight"]).collect();
    assert_eq!(weights, [&json!(3), &json!(2)], "{legs:?}");
    assert_eq!(route(&shown, "198.19.3.0/24")["type"], "blackhole");
    assert_eq!(route(&shown, "198.19.5.0/24")["onlink"], true);
    let one = route(&shown, "198.19.6.0/24");
    assert_eq!(one["gateway"], format!("198.18.{sub}.3").as_str(), "{one}");
    let read = compat(0);
    assert_eq!(read["routes"], shown["routes"], "compat mode 0 reads alike");
}
