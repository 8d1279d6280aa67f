//! `podtap scan` against real kernel objects (run as root).
//!
//! Every test builds its own pod and peer netns (`common::Pod`), scans the pod
//! with the podtap binary, validates the JSON against
//! `docs/description.schema.json`, and compares it with what iproute2
//! (`ip -j`) reports for the same netns, read independently.
mod common;

use std::net::{IpAddr, Ipv6Addr};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{iface, settle, Netns, Pod, TempDir, PLUGINS};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// What iproute2 says about a netns.
#[derive(Debug, PartialEq)]
struct IpView {
    addr: Value,
    routes4: Value,
    routes6: Value,
    neigh: Value,
}

impl IpView {
    fn read(ns: &Netns) -> Self {
        IpView {
            addr: without_timers(ns.ip_json("-d addr show")),
            routes4: ns.ip_json("-d -4 route show table main"),
            routes6: ns.ip_json("-d -6 route show table main"),
            // `nud all`: iproute2 hides NOARP entries otherwise. Multicast entries
            // come and go with MLD/IGMP and are never described: left out.
            neigh: Value::Array(
                arr(&ns.ip_json("neigh show nud all"))
                    .iter()
                    .filter(|n| {
                        !opt_str(n, "dst")
                            .and_then(|d| d.parse::<IpAddr>().ok())
                            .is_some_and(|ip| ip.is_multicast())
                    })
                    .cloned()
                    .collect(),
            ),
        }
    }
}

/// Drop running timers (bridge `gc_timer`, `hello_timer`, ...): they tick while nothing changes.
fn without_timers(mut v: Value) -> Value {
    match &mut v {
        Value::Object(map) => {
            map.retain(|k, _| !k.ends_with("_timer"));
            for x in map.values_mut() {
                *x = without_timers(x.take());
            }
        }
        Value::Array(items) => {
            for x in items.iter_mut() {
                *x = without_timers(x.take());
            }
        }
        _ => {}
    }
    v
}

/// One scan, with the iproute2 view taken around it.
struct Scanned {
    desc: Value,
    text: String,
    ip: IpView,
}

fn schema() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/description.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Errors of `desc` against the shipped schema (draft 2020-12, formats checked).
fn schema_errors(desc: &Value) -> Vec<String> {
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema())
        .expect("docs/description.schema.json compiles");
    validator
        .iter_errors(desc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn assert_valid(desc: &Value) {
    let errors = schema_errors(desc);
    assert!(
        errors.is_empty(),
        "description does not match docs/description.schema.json:\n{}\n{desc:#}",
        errors.join("\n")
    );
}

/// `podtap scan --netns PATH`: must succeed and validate against the schema.
fn scan_path(path: &str) -> (Value, String) {
    let out = common::podtap(&["scan", "--netns", path]);
    let desc = common::json_ok(&out);
    assert!(
        out.stderr.is_empty(),
        "a clean scan is silent: {}",
        common::stderr(&out)
    );
    assert_valid(&desc);
    (desc, common::stdout(&out))
}

/// Scan `ns` when it is quiet: iproute2 reports the same before and after the scan.
fn scan_stable(ns: &Netns) -> Scanned {
    settle(ns);
    for _ in 0..10 {
        let before = IpView::read(ns);
        let (desc, text) = scan_path(&ns.path_str());
        let after = IpView::read(ns);
        if before == after {
            return Scanned {
                desc,
                text,
                ip: after,
            };
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("netns {} kept changing while scanned", ns.name);
}

fn arr(v: &Value) -> &Vec<Value> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected an array: {v}"))
}

fn opt_str<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn has_flag(v: &Value, flag: &str) -> bool {
    v.get("flags")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x == flag))
}

fn route<'a>(desc: &'a Value, destination: &str) -> &'a Value {
    let found: Vec<&Value> = arr(&desc["routes"])
        .iter()
        .filter(|r| r["destination"] == destination)
        .collect();
    assert_eq!(found.len(), 1, "one route to {destination}: {found:#?}");
    found[0]
}

/// The podtap kind iproute2's `-d` output implies, when it implies one.
fn expected_kind(link: &Value) -> Option<&'static str> {
    let info = &link["linkinfo"];
    match opt_str(info, "info_kind") {
        Some("veth") => Some("veth"),
        Some("macvlan") => Some("macvlan"),
        Some("macvtap") => Some("macvtap"),
        Some("bridge") => Some("bridge"),
        Some("tun") if opt_str(&info["info_data"], "type") == Some("tap") => Some("tap"),
        Some("tun") => Some("tun"),
        Some(_) => None,
        None if link["link_type"] == "loopback" => Some("loopback"),
        None if link["link_type"] == "ether" => Some("physical"),
        None => None,
    }
}

/// Interfaces: same set, ifindex order, names, MACs, MTU, state, controller,
/// kinds, eligibility, and every address in kernel order with its details.
fn assert_interfaces_match_ip(sc: &Scanned) {
    let ifaces = arr(&sc.desc["interfaces"]);
    let mut links: Vec<&Value> = arr(&sc.ip.addr).iter().collect();
    links.sort_by_key(|l| l["ifindex"].as_u64());
    let ours: Vec<(u64, &str)> = ifaces
        .iter()
        .map(|i| (i["ifindex"].as_u64().unwrap(), i["name"].as_str().unwrap()))
        .collect();
    let theirs: Vec<(u64, &str)> = links
        .iter()
        .map(|l| {
            (
                l["ifindex"].as_u64().unwrap(),
                l["ifname"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(ours, theirs, "interfaces (in ifindex order) differ from ip");

    for link in links {
        let name = link["ifname"].as_str().unwrap();
        let i = iface(&sc.desc, name);
        assert_eq!(i["mtu"], link["mtu"], "{name}: mtu");
        assert_eq!(i["oper_state"], link["operstate"], "{name}: oper_state");
        if link["link_type"] == "ether" || link["link_type"] == "loopback" {
            assert_eq!(i["mac"], link["address"], "{name}: mac");
        }
        assert_eq!(
            opt_str(i, "controller"),
            opt_str(link, "master"),
            "{name}: controller"
        );
        assert_eq!(
            opt_str(i, "kind_raw"),
            opt_str(&link["linkinfo"], "info_kind"),
            "{name}: kind_raw"
        );
        let kind = expected_kind(link);
        if let Some(kind) = kind {
            assert_eq!(i["kind"], kind, "{name}: kind");
        }
        // An administratively down link carries nothing: it gets no VM NIC.
        let up = link["flags"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "UP"));
        let eligible = !matches!(kind, Some("loopback" | "bridge" | "tap" | "tun"))
            && link.get("master").is_none()
            && link["link_type"] == "ether"
            && up;
        assert_eq!(i["eligible"], eligible, "{name}: eligible");
        if eligible {
            assert_eq!(i["guest_mac"], i["mac"], "{name}: guest_mac is its own MAC");
            assert!(i.get("ineligible_reason").is_none(), "{name}");
        } else {
            assert!(i.get("guest_mac").is_none(), "{name}: no guest_mac");
            assert!(opt_str(i, "ineligible_reason").is_some(), "{name}: reason");
        }

        let infos: Vec<&Value> = link
            .get("addr_info")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let want: Vec<String> = infos
            .iter()
            .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
            .collect();
        let got: Vec<String> = arr(&i["addresses"])
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, want, "{name}: addresses (kernel order)");
        let details = arr(&i["address_details"]);
        assert_eq!(details.len(), infos.len(), "{name}: address_details");
        for (d, a) in details.iter().zip(&infos) {
            let local = a["local"].as_str().unwrap();
            assert_eq!(d["cidr"], format!("{local}/{}", a["prefixlen"]));
            assert_eq!(d["family"], a["family"], "{local}: family");
            assert_eq!(d["scope"], a["scope"], "{local}: scope");
            assert_eq!(d["tentative"], a.get("tentative") == Some(&json!(true)));
            assert_eq!(d["deprecated"], a.get("deprecated") == Some(&json!(true)));
            // iproute2 prints "dynamic" when IFA_F_PERMANENT is not set.
            assert_eq!(d["permanent"], a.get("dynamic") != Some(&json!(true)));
            let link_local = local
                .parse::<Ipv6Addr>()
                .is_ok_and(|v6| v6.segments()[0] & 0xffc0 == 0xfe80);
            assert_eq!(d["link_local"], link_local, "{local}: link_local");
        }
    }
}

/// iproute2 prints "default" for /0 and host routes without a prefix length.
fn normalize_dst(dst: &str, family: &str) -> String {
    let v4 = family == "inet";
    match dst {
        "default" => (if v4 { "0.0.0.0/0" } else { "::/0" }).to_string(),
        d if d.contains('/') => d.to_string(),
        d => format!("{d}/{}", if v4 { 32 } else { 128 }),
    }
}

/// Routes: every main-table route ip reports appears once with the same
/// destination, gateway, dev, metric, protocol, scope, type, onlink, mtu,
/// source and next hops; and podtap reports no others.
fn assert_routes_match_ip(sc: &Scanned) {
    let routes = arr(&sc.desc["routes"]);
    for (family, theirs) in [("inet", &sc.ip.routes4), ("inet6", &sc.ip.routes6)] {
        let ours: Vec<&Value> = routes.iter().filter(|r| r["family"] == family).collect();
        let theirs = arr(theirs);
        assert_eq!(
            ours.len(),
            theirs.len(),
            "{family} routes: podtap {ours:#?}\nip {theirs:#?}"
        );
        for r in theirs {
            let dst = normalize_dst(r["dst"].as_str().unwrap(), family);
            let metric = r.get("metric").and_then(Value::as_u64).unwrap_or(0);
            // An IPv4 route via an IPv6 gateway (RTA_VIA) prints as "via": {"host": ...}.
            let gateway = opt_str(r, "gateway").or_else(|| opt_str(&r["via"], "host"));
            let dev = opt_str(r, "dev");
            let found: Vec<&&Value> = ours
                .iter()
                .filter(|o| {
                    o["destination"] == dst.as_str()
                        && o["metric"] == metric
                        && opt_str(o, "gateway") == gateway
                        && opt_str(o, "interface") == dev
                })
                .collect();
            assert_eq!(found.len(), 1, "ip route {r} in podtap {ours:#?}");
            let o = found[0];
            let ctx = format!("route {r}\npodtap {o}");
            assert_eq!(
                o["protocol"],
                opt_str(r, "protocol").unwrap_or("boot"),
                "{ctx}"
            );
            assert_eq!(o["scope"], opt_str(r, "scope").unwrap_or("global"), "{ctx}");
            assert_eq!(o["type"], opt_str(r, "type").unwrap_or("unicast"), "{ctx}");
            assert_eq!(o["onlink"], has_flag(r, "onlink"), "{ctx}");
            let mtu = r
                .get("metrics")
                .and_then(Value::as_array)
                .and_then(|ms| ms.iter().find_map(|m| m.get("mtu")))
                .and_then(Value::as_u64);
            assert_eq!(o.get("mtu").and_then(Value::as_u64), mtu, "{ctx}");
            assert_eq!(opt_str(o, "source"), opt_str(r, "prefsrc"), "{ctx}");
            let want_hops = r
                .get("nexthops")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let got_hops = o
                .get("nexthops")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            assert_eq!(got_hops.len(), want_hops.len(), "{ctx}: nexthops");
            for (g, w) in got_hops.iter().zip(&want_hops) {
                assert_eq!(opt_str(g, "gateway"), opt_str(w, "gateway"), "{ctx}");
                assert_eq!(g["interface"], w["dev"], "{ctx}");
                assert_eq!(
                    g["weight"].as_u64(),
                    Some(w.get("weight").and_then(Value::as_u64).unwrap_or(1)),
                    "{ctx}"
                );
                assert_eq!(g["onlink"], has_flag(w, "onlink"), "{ctx}");
            }
        }
    }
}

/// Static neighbours (permanent, noarp) with a MAC: the same entries as
/// `ip neigh` reports, both ways, with the same MAC and state.
fn assert_static_neighbours_match_ip(sc: &Scanned) {
    let ours = arr(&sc.desc["neighbours"]);
    let theirs: Vec<&Value> = arr(&sc.ip.neigh)
        .iter()
        .filter(|n| {
            let stat = n["state"]
                .as_array()
                .is_some_and(|s| s.iter().any(|x| x == "PERMANENT" || x == "NOARP"));
            let mac = opt_str(n, "lladdr");
            stat && mac.is_some_and(|m| m.len() == 17 && m != "00:00:00:00:00:00")
        })
        .collect();
    for n in &theirs {
        let found: Vec<&Value> = ours
            .iter()
            .filter(|o| o["ip"] == n["dst"] && o["interface"] == n["dev"])
            .collect();
        assert_eq!(found.len(), 1, "ip neighbour {n} in podtap {ours:#?}");
        assert_eq!(found[0]["mac"], n["lladdr"], "{n}");
        let state = n["state"][0].as_str().unwrap().to_ascii_lowercase();
        assert_eq!(found[0]["state"], state.as_str(), "{n}");
    }
    let ours_static = ours
        .iter()
        .filter(|o| o["state"] == "permanent" || o["state"] == "noarp")
        .count();
    assert_eq!(ours_static, theirs.len(), "static neighbours: {ours:#?}");
}

fn assert_matches_ip(sc: &Scanned) {
    assert_interfaces_match_ip(sc);
    assert_routes_match_ip(sc);
    assert_static_neighbours_match_ip(sc);
}

/// A failed podtap run: `code`, nothing on stdout, one `podtap: error:` line naming `path`.
fn assert_error(out: &Output, code: i32, path: &str) {
    let err = common::stderr(out);
    assert_eq!(out.status.code(), Some(code), "exit code; stderr: {err}");
    assert!(out.stdout.is_empty(), "no output on error");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one stderr line: {err:?}");
    assert!(err.ends_with('\n'), "line ends with a newline: {err:?}");
    assert!(lines[0].starts_with("podtap: error:"), "{err:?}");
    assert!(lines[0].contains(path), "names {path}: {err:?}");
}

/// A process kept alive inside a netns (for `/proc/PID/ns/net` paths); killed on drop.
struct Sleeper(std::process::Child);

impl Sleeper {
    fn new(ns: &Netns) -> Self {
        // `ip netns exec` execs the command, so the child's pid is sleep's.
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sleep", "60"])
            .spawn()
            .unwrap();
        let s = Sleeper(child);
        let want = std::fs::metadata(ns.path()).unwrap().ino();
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::metadata(s.path()).map(|m| m.ino()).ok() != Some(want) {
            assert!(
                Instant::now() < deadline,
                "sleeper never entered {}",
                ns.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn path(&self) -> String {
        format!("/proc/{}/ns/net", self.0.id())
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------

#[test]
fn dual_stack_veth_matches_ip() {
    if !common::root_or_skip("dual_stack_veth_matches_ip") {
        return;
    }
    let pod = Pod::dual_stack();
    let sc = scan_stable(&pod.pod);
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
    if !common::root_or_skip("two_addresses_on_one_interface_keep_kernel_order") {
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
    let sc = scan_stable(p);
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
    if !common::root_or_skip("macvlan_is_eligible") {
        return;
    }
    let pod = Pod::new();
    pod.add_macvlan("mv0", pod.net);
    let sc = scan_stable(&pod.pod);
    assert_matches_ip(&sc);
    let mv = iface(&sc.desc, "mv0");
    assert_eq!(mv["kind"], "macvlan");
    assert_eq!(mv["kind_raw"], "macvlan");
    assert_eq!(mv["eligible"], true);
    assert_eq!(mv["guest_mac"], mv["mac"]);
}

#[test]
fn sixty_four_veths_all_present_in_ifindex_order() {
    if !common::root_or_skip("sixty_four_veths_all_present_in_ifindex_order") {
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

    let sc = scan_stable(p);
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
    if !common::root_or_skip("fifteen_character_interface_name") {
        return;
    }
    let name = "podtap-eth-0123";
    assert_eq!(name.len(), 15);
    let pod = Pod::new();
    pod.add_veth(name, "veth0", pod.net, true);
    let sc = scan_stable(&pod.pod);
    assert_matches_ip(&sc);
    let i = iface(&sc.desc, name);
    assert_eq!(i["eligible"], true);
    assert_eq!(route(&sc.desc, "0.0.0.0/0")["interface"], name);
    assert_eq!(route(&sc.desc, "::/0")["interface"], name);
}

#[test]
fn onlink_mtu_multipath_and_device_only_routes() {
    if !common::root_or_skip("onlink_mtu_multipath_and_device_only_routes") {
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
    p.ip(&format!(
        "-6 route add 2001:db8:77::/64 nexthop via 2001:db8:{n:x}::1 dev eth0 weight 2 nexthop via 2001:db8:{m:x}::1 dev eth1"
    ));
    let sc = scan_stable(p);
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

    let dev_only = route(d, "2001:db8:99::/64");
    assert_eq!(dev_only["family"], "inet6");
    assert_eq!(dev_only["interface"], "eth0");
    assert!(dev_only.get("gateway").is_none());
}

#[test]
fn route_types_protocols_sources_and_ipv6_onlink_match_ip() {
    let test = "route_types_protocols_sources_and_ipv6_onlink_match_ip";
    if !common::root_or_skip(test) {
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
    let v4_via_v6 = common::sh_ok(&format!(
        "ip -n {} route add 198.19.8.0/24 via inet6 2001:db8:{n:x}::1 dev eth0",
        p.name
    ));
    let nhid = common::sh_ok(&format!(
        "ip -n {0} nexthop add id 7 via 198.18.{n}.1 dev eth0 && ip -n {0} route add 198.19.10.0/24 nhid 7",
        p.name
    ));
    let sc = scan_stable(p);
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
    if !common::root_or_skip("permanent_neighbours_are_reported") {
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
    let sc = scan_stable(p);
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
    if !common::root_or_skip(test) {
        return;
    }
    if !Path::new("/proc/sys/net/ipv6").exists() {
        eprintln!("SKIP {test}: this kernel has no IPv6");
        return;
    }
    if !common::tool_or_skip(test, "sysctl") {
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

    let sc = scan_stable(p);
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
    if !common::root_or_skip("two_scans_are_byte_identical") {
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
    let first = scan_stable(p);
    let (_, second) = scan_path(&p.path_str());
    assert_eq!(first.text, second, "two scans differ");
    assert_eq!(IpView::read(p), first.ip, "netns changed between scans");

    // --output writes the same bytes to a file and nothing to stdout.
    let dir = TempDir::new();
    let file = dir.path().join("desc.json");
    let out = common::podtap(&[
        "scan",
        "--netns",
        &p.path_str(),
        "--output",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first.text);

    // The same netns named by /proc/PID/ns/net: same identity and content.
    let sleeper = Sleeper::new(p);
    let (by_pid, _) = scan_path(&sleeper.path());
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
    if !common::root_or_skip("loopback_bridge_tap_tun_and_bridge_ports_are_not_eligible") {
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
    if !common::sh_ok(&format!("ip -n {} tuntap add dev tap0 mode tap", p.name)) {
        eprintln!("SKIP loopback_bridge_tap_tun_...: no /dev/net/tun");
        return;
    }
    p.ip("tuntap add dev tun0 mode tun");
    let sc = scan_stable(p);
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

// ---------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------

#[test]
fn schema_is_draft_2020_12_and_covers_attach_fields() {
    let schema = schema();
    if let Err(e) = jsonschema::meta::validate(&schema) {
        panic!("docs/description.schema.json is not a valid schema: {e}");
    }
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    if !common::root_or_skip("schema_is_draft_2020_12_and_covers_attach_fields") {
        return;
    }
    let pod = Pod::dual_stack();
    let (scanned, _) = scan_path(&pod.pod.path_str());

    // What attach adds, built from the crate's own types so names cannot drift.
    use podtap::model::{Attachment, BridgeInfo, Description, Dns, TapInfo, Timings, Wiring};
    let mut desc: Description = serde_json::from_value(scanned.clone()).unwrap();
    let eth0 = desc
        .interfaces
        .iter_mut()
        .find(|i| i.name == "eth0")
        .unwrap();
    eth0.tap = Some(TapInfo {
        name: "tap0".into(),
        ifindex: 9,
        queues: 2,
        vnet_hdr: true,
        multi_queue: true,
        owner: Some(107),
        group: Some(107),
        mac: Some("7e:00:00:00:00:09".into()),
        device: None,
    });
    eth0.wiring = Some(Wiring::Bridge);
    eth0.wiring_note = Some("bridge requested".into());
    eth0.bridge = Some(BridgeInfo {
        name: "br-eth0".into(),
        ifindex: 10,
        pod_interface_mac: "02:00:00:00:00:01".into(),
    });
    desc.dns = Some(Dns {
        nameservers: vec!["198.18.0.53".into(), "2001:db8::53".into()],
        domain: Some("pod.example".into()),
        search: vec!["ns.svc.cluster.local".into()],
        options: vec!["ndots:5".into()],
    });
    desc.attachment = Some(Attachment {
        id: "sandbox-1".into(),
        mode: Wiring::Bridge,
        timings_us: Timings {
            scan: 1,
            tap: 2,
            wiring: 3,
            checkpoint: 4,
            total: 10,
        },
        revision: 2,
    });
    let attached = serde_json::to_value(&desc).unwrap();
    assert!(attached["interfaces"][1]["tap"].is_object());
    assert!(attached["dns"]["nameservers"].is_array());
    assert_valid(&attached);
    let mut sparse = attached.clone();
    sparse["dns"] = json!({ "search": ["pod.example"] });
    assert_valid(&sparse);

    // The schema has teeth: each of these is rejected.
    let mut bad = Vec::new();
    let mut v = scanned.clone();
    v["unknown_field"] = json!(1);
    bad.push(("unknown top-level field", v));
    let mut v = scanned.clone();
    v["interfaces"][1]["kind"] = json!("wifi");
    bad.push(("unknown kind", v));
    let mut v = scanned.clone();
    v.as_object_mut().unwrap().remove("routes");
    bad.push(("missing routes", v));
    let mut v = scanned.clone();
    v["routes"][0]["family"] = json!("inet6");
    bad.push(("IPv4 destination in an inet6 route", v));
    let mut v = scanned.clone();
    v["interfaces"][1]["mac"] = json!("not-a-mac");
    bad.push(("bad MAC", v));
    let mut v = scanned.clone();
    v["dns"] = json!({ "nameservers": [53] });
    bad.push(("a nameserver that is not a string", v));
    let mut v = scanned.clone();
    v["dns"] = json!({ "servers": ["198.18.0.53"] });
    bad.push(("an unknown dns field", v));
    let mut v = scanned;
    v["interfaces"][0]["guest_mac"] = v["interfaces"][0]["mac"].clone();
    bad.push(("guest_mac on an ineligible interface", v));
    for (what, v) in bad {
        assert!(!schema_errors(&v).is_empty(), "schema accepted: {what}");
    }
}

// ---------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------

#[test]
fn missing_path_exits_3() {
    let path = format!("/run/netns/{}", common::unique("ptmissing"));
    assert!(!Path::new(&path).exists());
    assert_error(&common::podtap(&["scan", "--netns", &path]), 3, &path);
}

#[test]
fn regular_file_exits_4() {
    let dir = TempDir::new();
    let file = dir.path().join("not-a-netns");
    std::fs::write(&file, "x").unwrap();
    let path = file.display().to_string();
    assert_error(&common::podtap(&["scan", "--netns", &path]), 4, &path);
}

#[test]
fn directory_exits_4() {
    let dir = TempDir::new();
    let path = dir.path().display().to_string();
    assert_error(&common::podtap(&["scan", "--netns", &path]), 4, &path);
}

/// open(2) on a FIFO blocks until a writer comes: podtap must refuse it without opening.
#[test]
fn fifo_exits_4_without_blocking() {
    let dir = TempDir::new();
    let fifo = dir.path().join("fifo");
    common::sh(&format!("mkfifo {}", fifo.display()));
    let path = fifo.display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_podtap"))
        .args(["scan", "--netns", &path])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("podtap scan blocked on a FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_error(&child.wait_with_output().unwrap(), 4, &path);
}

#[test]
fn exited_process_exits_3() {
    let mut child = Command::new("true").spawn().unwrap();
    let path = format!("/proc/{}/ns/net", child.id());
    child.wait().unwrap();
    assert!(!Path::new(&path).exists(), "{path} outlived its process");
    let out = common::podtap(&["scan", "--netns", &path]);
    assert_error(&out, 3, &path);
    assert!(common::stderr(&out).contains("exited"), "hints why");
}

/// Exited but not yet reaped (a zombie, as a runtime may briefly hold it): also gone.
#[test]
fn zombie_process_exits_3() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    let stat = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = std::fs::read_to_string(&stat).unwrap();
        // The state follows the parenthesised command name.
        if state
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z')
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "child {pid} never became a zombie"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let path = format!("/proc/{pid}/ns/net");
    let out = common::podtap(&["scan", "--netns", &path]);
    child.wait().unwrap();
    assert_error(&out, 3, &path);
}

#[test]
fn host_netns_exits_5() {
    let path = "/proc/self/ns/net";
    let out = common::podtap(&["scan", "--netns", path]);
    assert_error(&out, 5, path);
    assert!(common::stderr(&out).contains("--allow-host-netns"));
}

/// The host netns is never attached: detach could not tell podtap's objects
/// from the host's, and a redirect on a host NIC cuts the node off.
#[test]
fn attach_refuses_the_host_netns_always() {
    if !common::root_or_skip("attach_refuses_the_host_netns_always") {
        return;
    }
    let state = common::StateDir::new();
    let path = "/proc/self/ns/net";
    let out = common::podtap_state(&state.0, &["attach", "--netns", path, "--id", "host"]);
    assert_error(&out, 5, path);
    let out = common::podtap_state(
        &state.0,
        &[
            "attach",
            "--netns",
            path,
            "--id",
            "host",
            "--allow-host-netns",
        ],
    );
    assert_eq!(common::exit_code(&out), 2, "{}", common::stderr(&out));
    let left: Vec<_> = std::fs::read_dir(&state.0)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().starts_with("host")),
        "{left:?}"
    );
}

/// An unprivileged user cannot scan: a pinned netns file is world-readable,
/// so open succeeds and setns(2) fails with EPERM (needs CAP_SYS_ADMIN); a
/// root process's `/proc/PID/ns/net` fails at open with EACCES. Both exit 6.
#[test]
fn unprivileged_user_exits_6() {
    if !common::root_or_skip("unprivileged_user_exits_6")
        || !common::tool_or_skip("unprivileged_user_exits_6", "setpriv")
    {
        return;
    }
    let pod = Pod::dual_stack();
    // A copy of the binary that user 65534 can surely execute.
    let dir = TempDir::new();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("podtap");
    std::fs::copy(env!("CARGO_BIN_EXE_podtap"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |path: &str| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["scan", "--netns", path])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };

    let pinned = pod.pod.path_str();
    let out = as_nobody(&pinned);
    assert_error(&out, 6, &pinned);

    let sleeper = Sleeper::new(&pod.pod);
    let by_pid = sleeper.path();
    let out = as_nobody(&by_pid);
    assert_error(&out, 6, &by_pid);
    assert!(common::stderr(&out).contains("permission denied"));
}

// ---------------------------------------------------------------------------
// CNI reference plugins
// ---------------------------------------------------------------------------

/// Plugins ADDed into a pod, run in the node netns as a runtime would; DEL on drop.
struct Cni {
    node: String,
    netns: String,
    id: String,
    added: Vec<(String, String, Value)>,
    _dir: TempDir,
}

impl Cni {
    fn call(&self, command: &str, plugin: &str, ifname: &str, conf: &Value) -> Output {
        common::cni_plugin(
            &self.node,
            command,
            plugin,
            &self.id,
            &self.netns,
            ifname,
            conf,
        )
    }

    fn add(&mut self, plugin: &str, ifname: &str, conf: Value) -> Value {
        let out = self.call("ADD", plugin, ifname, &conf);
        self.added.push((plugin.into(), ifname.into(), conf));
        assert!(
            out.status.success(),
            "CNI ADD {plugin} failed: {}{}",
            common::stdout(&out),
            common::stderr(&out)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Cni {
    fn drop(&mut self) {
        for (plugin, ifname, conf) in std::mem::take(&mut self.added).into_iter().rev() {
            let _ = self.call("DEL", &plugin, &ifname, &conf);
        }
    }
}

#[test]
fn cni_bridge_and_macvlan_plugins() {
    let test = "cni_bridge_and_macvlan_plugins";
    if !common::root_or_skip(test) {
        return;
    }
    for plugin in ["bridge", "macvlan", "host-local"] {
        if !common::tool_or_skip(test, &format!("{PLUGINS}/{plugin}")) {
            return;
        }
    }
    let pod = Pod::new();
    let (node, n) = (&pod.peer, pod.net);
    node.ip("link add mvm0 type veth peer name mvm0b");
    node.ip("link set mvm0 up");
    node.ip("link set mvm0b up");
    let dir = TempDir::new();
    let ipam_dir = dir.path().join("ipam").display().to_string();
    let mut cni = Cni {
        node: node.name.clone(),
        netns: pod.pod.path_str(),
        id: common::unique("ctr"),
        added: Vec::new(),
        _dir: dir,
    };
    let bridge = common::unique("ptb");
    let br_result = cni.add(
        "bridge",
        "eth0",
        json!({
            "cniVersion": "1.0.0",
            "name": common::unique("ptnet"),
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipam": {
                "type": "host-local",
                "dataDir": ipam_dir,
                "ranges": [
                    [{"subnet": format!("198.18.{n}.0/24")}],
                    [{"subnet": format!("2001:db8:{n:x}::/64")}]
                ],
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
            }
        }),
    );
    let mv_result = cni.add(
        "macvlan",
        "net1",
        json!({
            "cniVersion": "1.0.0",
            "name": common::unique("ptmv"),
            "type": "macvlan",
            "master": "mvm0",
            "mode": "bridge",
            "ipam": {
                "type": "host-local",
                "dataDir": ipam_dir,
                "ranges": [[{"subnet": format!("198.19.{n}.0/24")}]]
            }
        }),
    );
    // The bridge is the node's: it must not show up in the pod.
    assert!(common::sh_ok(&format!(
        "ip -n {} link show {bridge}",
        node.name
    )));

    let sc = scan_stable(&pod.pod);
    assert_matches_ip(&sc);
    let d = &sc.desc;
    assert!(arr(&d["interfaces"])
        .iter()
        .all(|i| i["name"] != bridge.as_str()));

    for (result, ifname, kind) in [
        (&br_result, "eth0", "veth"),
        (&mv_result, "net1", "macvlan"),
    ] {
        let cni_ifaces = arr(&result["interfaces"]);
        let pod_ifaces: Vec<&Value> = cni_ifaces
            .iter()
            .filter(|i| i["sandbox"] == pod.pod.path_str().as_str())
            .collect();
        assert_eq!(pod_ifaces.len(), 1, "{result:#}");
        assert_eq!(pod_ifaces[0]["name"], ifname);
        let ours = iface(d, ifname);
        let cni_mac = pod_ifaces[0]["mac"].as_str().unwrap().to_ascii_lowercase();
        assert_eq!(
            ours["mac"],
            cni_mac.as_str(),
            "{ifname}: MAC from the CNI result"
        );
        assert_eq!(ours["guest_mac"], cni_mac.as_str());
        assert_eq!(ours["kind"], kind);
        assert_eq!(ours["eligible"], true);

        let ips = arr(&result["ips"]);
        assert!(!ips.is_empty());
        for ip in ips {
            let idx = usize::try_from(ip["interface"].as_u64().unwrap()).unwrap();
            assert_eq!(cni_ifaces[idx]["name"], ifname, "{ip}");
            assert!(
                arr(&ours["addresses"]).contains(&ip["address"]),
                "{ifname}: {} from the CNI result in {:#}",
                ip["address"],
                ours["addresses"]
            );
        }

        let routes = result
            .get("routes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for r in &routes {
            let dst = r["dst"].as_str().unwrap();
            let v4 = dst.contains('.');
            // A route without gw goes via the gateway of the same family.
            let gw = opt_str(r, "gw").map(str::to_string).unwrap_or_else(|| {
                ips.iter()
                    .find(|ip| ip["address"].as_str().unwrap().contains('.') == v4)
                    .and_then(|ip| opt_str(ip, "gateway"))
                    .unwrap()
                    .to_string()
            });
            let ours = route(d, dst);
            assert_eq!(ours["gateway"], gw.as_str(), "{dst}");
            assert_eq!(ours["interface"], ifname, "{dst}");
            assert_eq!(ours["family"], if v4 { "inet" } else { "inet6" });
        }
        if ifname == "eth0" {
            assert_eq!(routes.len(), 2, "both default routes in the bridge result");
        }
    }
    drop(cni);
    // DEL removed what ADD made in the pod.
    let left: Vec<String> = arr(&pod.pod.ip_json("link show"))
        .iter()
        .map(|l| l["ifname"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, ["lo"], "after CNI DEL");
}
