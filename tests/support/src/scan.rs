//! `podtap scan` checked independently: the shipped JSON schema, and what
//! iproute2 (`ip -j`) reports for the same netns.

use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use serde_json::{json, Value};

use crate::netns::{settle, Netns};
use crate::podtap::iface;

/// What iproute2 says about a netns.
#[derive(Debug, PartialEq)]
pub struct IpView {
    pub addr: Value,
    pub routes4: Value,
    pub routes6: Value,
    pub neigh: Value,
}

impl IpView {
    pub fn read(ns: &Netns) -> Self {
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
pub fn without_timers(mut v: Value) -> Value {
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
pub struct Scanned {
    pub desc: Value,
    pub text: String,
    pub ip: IpView,
}

pub fn schema() -> Value {
    let path = crate::repo().join("docs/description.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Errors of `desc` against the shipped schema (draft 2020-12, formats checked).
pub fn schema_errors(desc: &Value) -> Vec<String> {
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema())
        .expect("docs/description.schema.json compiles");
    validator
        .iter_errors(desc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

pub fn assert_valid(desc: &Value) {
    let errors = schema_errors(desc);
    assert!(
        errors.is_empty(),
        "description does not match docs/description.schema.json:\n{}\n{desc:#}",
        errors.join("\n")
    );
}

/// `podtap scan --netns PATH` (`bin`: the podtap under test): must succeed and validate against the schema.
pub fn scan_path(bin: &str, path: &str) -> (Value, String) {
    let out = crate::podtap(bin, &["scan", "--netns", path]);
    let desc = crate::json_ok(&out);
    assert!(
        out.stderr.is_empty(),
        "a clean scan is silent: {}",
        crate::stderr(&out)
    );
    assert_valid(&desc);
    (desc, crate::stdout(&out))
}

/// Scan `ns` when it is quiet: iproute2 reports the same before and after the scan.
pub fn scan_stable(bin: &str, ns: &Netns) -> Scanned {
    settle(ns);
    for _ in 0..10 {
        let before = IpView::read(ns);
        let (desc, text) = scan_path(bin, &ns.path_str());
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

pub fn arr(v: &Value) -> &Vec<Value> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected an array: {v}"))
}

pub fn opt_str<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub fn has_flag(v: &Value, flag: &str) -> bool {
    v.get("flags")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x == flag))
}

pub fn route<'a>(desc: &'a Value, destination: &str) -> &'a Value {
    let found: Vec<&Value> = arr(&desc["routes"])
        .iter()
        .filter(|r| r["destination"] == destination)
        .collect();
    assert_eq!(found.len(), 1, "one route to {destination}: {found:#?}");
    found[0]
}

/// The podtap kind iproute2's `-d` output implies, when it implies one.
pub fn expected_kind(link: &Value) -> Option<&'static str> {
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
pub fn assert_interfaces_match_ip(sc: &Scanned) {
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
pub fn normalize_dst(dst: &str, family: &str) -> String {
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
pub fn assert_routes_match_ip(sc: &Scanned) {
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
pub fn assert_static_neighbours_match_ip(sc: &Scanned) {
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

pub fn assert_matches_ip(sc: &Scanned) {
    assert_interfaces_match_ip(sc);
    assert_routes_match_ip(sc);
    assert_static_neighbours_match_ip(sc);
}
