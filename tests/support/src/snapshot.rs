//! Independent snapshots of a netns (iproute2 and tc), for before/after comparisons.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::netns::{settle, Netns};
use crate::run::poll;

/// An independent snapshot of a netns's links, qdiscs and ingress filters, read
/// with iproute2/tc and stripped of counters, for before/after comparisons,
/// once no deferred link deletion of a CNI DEL is pending.
///
/// A link can vanish between the listing and its tc reads (a bridge deleted by
/// a detach that already returned): the snapshot is then taken again.
pub fn snapshot(ns: &Netns) -> String {
    wait_for_drained_bridges(ns);
    for _ in 0..20 {
        if let Some(s) = try_snapshot(ns) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("links of {} kept vanishing while they were read", ns.name)
}

fn try_snapshot(ns: &Netns) -> Option<String> {
    let links = ns.ip_json("-d link show");
    let mut out = String::new();
    for l in links.as_array().expect("links array") {
        let field = |k: &str| l.get(k).map(|v| v.to_string()).unwrap_or_default();
        let name = l
            .get("ifname")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        out.push_str(&format!(
            "link {} {} mac={} mtu={} master={} group={} kind={} flags={} txqlen={} ifalias={}\n",
            field("ifindex"),
            name,
            field("address"),
            field("mtu"),
            field("master"),
            field("group"),
            l.get("linkinfo")
                .and_then(|i| i.get("info_kind"))
                .map(|v| v.to_string())
                .unwrap_or_default(),
            field("flags"),
            field("txqlen"),
            field("ifalias"),
        ));
        let tc = |args: &str| -> Option<String> {
            let o = Command::new("sh")
                .arg("-c")
                .arg(format!("tc -n {} {args}", ns.name))
                .output()
                .expect("run tc");
            if o.status.success() {
                return Some(String::from_utf8_lossy(&o.stdout).trim().to_string());
            }
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("Cannot find device"),
                "tc -n {} {args} failed: {err}",
                ns.name
            );
            None
        };
        let qd = tc(&format!("qdisc show dev {name} ingress"))?;
        out.push_str(&format!("qdisc-ingress {name}: {qd}\n"));
        let qd_all = tc(&format!("qdisc show dev {name}"))?;
        out.push_str(&format!("qdisc {name}: {qd_all}\n"));
        if !qd.is_empty() {
            let f = tc(&format!("filter show dev {name} ingress"))?;
            out.push_str(&format!("filters {name}:\n{f}\n"));
        }
    }
    out.push_str(&ns.ip("addr show"));
    out.push_str(&ns.ip("route show table all"));
    Some(out)
}

/// Wait (up to 30 s) until no bridge of podtap's without ports is left in `ns`:
/// teardown returns before its bridges are deleted (each costs an
/// rcu_barrier() under RTNL), and a forked child deletes them one by one, one
/// drain at a time on the node, so under a parallel suite the wait can be long.
/// podtap's bridges are those with its marker, or with its bridge names
/// (`br_*`: a kill can land between creating a bridge and marking it). A
/// bridge still there afterwards shows up in the snapshot, as any leftover does.
pub fn wait_for_drained_bridges(ns: &Netns) {
    poll(Duration::from_secs(30), Duration::from_millis(20), || {
        let links = ns.ip_json("-d link show");
        let links = links.as_array().expect("links array");
        let str_of = |l: &Value, k: &str| l.get(k).and_then(|v| v.as_str()).map(str::to_string);
        !links.iter().any(|l| {
            let name = str_of(l, "ifname");
            l["linkinfo"]["info_kind"] == "bridge"
                && (str_of(l, "ifalias").is_some_and(|a| a.starts_with("podtap:"))
                    || name.as_deref().is_some_and(|n| n.starts_with("br_")))
                && !links.iter().any(|p| str_of(p, "master") == name)
        })
    });
}

/// [`snapshot`] once IPv6 duplicate address detection has settled. It
/// includes `qlen`: detach must restore a CNI veth's txqueuelen 0, which
/// adding an ingress qdisc raises to 1000.
pub fn settled_snapshot(ns: &Netns) -> String {
    settle(ns);
    snapshot(ns)
}

/// [`settled_snapshot`] plus all else routed wiring may change: IPv6 routes
/// of every table, policy rules of both families, proxy and permanent
/// neighbours, every net sysctl (but the connection tracker's live count),
/// and the nftables ruleset (`nft -s`: without counters, which traffic moves).
pub fn full_snapshot(ns: &Netns) -> String {
    let mut out = settled_snapshot(ns);
    for args in [
        "-6 route show table all",
        "rule show",
        "-6 rule show",
        "neigh show proxy",
        "-6 neigh show proxy",
        "neigh show nud permanent",
        "-6 neigh show nud permanent",
    ] {
        out.push_str(&format!("## ip {args}\n{}", ns.ip(args)));
    }
    let sysctl = ns.exec("sysctl -a");
    out.push_str("## sysctl\n");
    for line in sysctl.lines() {
        if line.starts_with("net.") && !line.starts_with("net.netfilter.nf_conntrack_count") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("## nft\n");
    out.push_str(&ns.exec("nft -s list ruleset"));
    out
}
