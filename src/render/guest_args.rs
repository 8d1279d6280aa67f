//! podtap's own kernel command line for its test guest's init script.
//!
//! The format is fixed (the init script parses it), space-separated:
//! - `podtap.nic=MAC,MTU[,CIDR...]` per NIC;
//! - `podtap.route=DEST,GW,MAC,METRIC,ONLINK,MTU[,TABLE]` per route (leg) of a NIC
//!   (TABLE only for another table than main);
//! - `podtap.rule=PRIORITY,FROM,TO,FWMARK,TABLE` per policy rule (`-` for any);
//! - `podtap.neigh=IP,LLADDR,MAC` per neighbour of a NIC;
//! - `podtap.noarp=MAC` per NIC whose pod interface is `NOARP` (an L3-only
//!   link: the guest's NIC gets `arp off`);
//! - `podtap.dns=IP[,IP...]` and `podtap.search=DOMAIN[,DOMAIN...]`, once each,
//!   when the description's `dns` has name servers / a search list.

use std::net::IpAddr;

use super::dns::guest_dns;
use super::nic::{attached_nics, normalize_mac, Nic};
use super::route::{guest_routes, GuestRoute};
use super::RenderError;
use crate::model::{Description, Neighbour, Rule};

/// x86 COMMAND_LINE_SIZE is 2048; leave room for console= and friends.
pub(crate) const GUEST_ARGS_LIMIT: usize = 2000;

/// Text form: all entries on one line, NICs first, then routes (per NIC,
/// gateway-less first), then neighbours, then DNS, and a newline.
pub(crate) fn render_guest_args(desc: &Description) -> Result<String, RenderError> {
    let nics = attached_nics(desc)?;
    let mut entries = Vec::new();
    for nic in &nics {
        entries.push(nic_entry(nic)?);
        // Routed, the guest's link is the TAP, which resolves addresses
        // whatever the pod interface does.
        if nic.interface.l3.is_none() && nic.interface.flags.iter().any(|f| f == "NOARP") {
            entries.push(format!("podtap.noarp={}", nic.mac));
        }
    }
    for nic in &nics {
        for route in guest_routes(desc, &nic.interface.name)? {
            entries.push(route_entry(&route, nic));
        }
    }
    for rule in &desc.rules {
        entries.push(rule_entry(rule)?);
    }
    for nic in &nics {
        for neighbour in desc
            .neighbours
            .iter()
            .filter(|n| n.interface == nic.interface.name)
        {
            if let Some(entry) = neighbour_entry(neighbour, nic)? {
                entries.push(entry);
            }
        }
    }
    if let Some(dns) = guest_dns(desc)? {
        let join = |items: Vec<String>| items.join(",");
        if !dns.nameservers.is_empty() {
            let servers = dns.nameservers.iter().map(IpAddr::to_string).collect();
            entries.push(format!("podtap.dns={}", join(servers)));
        }
        if !dns.search.is_empty() {
            entries.push(format!("podtap.search={}", join(dns.search)));
        }
    }
    let line = entries.join(" ");
    if line.len() > GUEST_ARGS_LIMIT {
        return Err(RenderError::CommandLineTooLong {
            length: line.len(),
            limit: GUEST_ARGS_LIMIT,
        });
    }
    Ok(line + "\n")
}

fn nic_entry(nic: &Nic<'_>) -> Result<String, RenderError> {
    let mut entry = format!("podtap.nic={},{}", nic.mac, nic.interface.mtu);
    for address in nic.guest_addresses()? {
        entry.push(',');
        entry.push_str(&address.to_string());
    }
    Ok(entry)
}

/// A route of another table than main gets the table as a seventh field.
fn route_entry(route: &GuestRoute, nic: &Nic<'_>) -> String {
    let mut entry = format!(
        "podtap.route={},{},{},{},{},{}",
        route.destination,
        route.gateway.map_or("-".to_string(), |g| g.to_string()),
        nic.mac,
        route.metric,
        u8::from(route.onlink),
        route.mtu.unwrap_or(0)
    );
    if route.table != 254 {
        entry.push_str(&format!(",{}", route.table));
    }
    entry
}

/// `podtap.rule=PRIORITY,FROM,TO,FWMARK,TABLE` (`-` for any): table lookups
/// by source, destination and fwmark; anything else is refused.
fn rule_entry(rule: &Rule) -> Result<String, RenderError> {
    let refuse = |what: &str| RenderError::PolicyRoutingUnsupported {
        format: "guest-args",
        what: format!("rule {}: {what}", rule.priority),
    };
    let Some(table) = rule.table.filter(|_| rule.action == "table") else {
        return Err(refuse(&format!("action {}", rule.action)));
    };
    if rule.iif.is_some() || rule.oif.is_some() || rule.invert || rule.tos != 0 {
        return Err(refuse("iif/oif/tos/not selectors"));
    }
    let any = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mark = match (rule.fwmark, rule.fwmask) {
        (None, _) => "-".to_string(),
        (Some(m), None) => m.to_string(),
        (Some(m), Some(mask)) => format!("{m}/{mask}"),
    };
    Ok(format!(
        "podtap.rule={},{},{},{mark},{table}",
        rule.priority,
        any(&rule.from),
        any(&rule.to)
    ))
}

/// None for entries without a link-layer address (incomplete, failed).
fn neighbour_entry(neighbour: &Neighbour, nic: &Nic<'_>) -> Result<Option<String>, RenderError> {
    if neighbour.mac.is_empty() || matches!(neighbour.state.as_str(), "incomplete" | "failed") {
        return Ok(None);
    }
    let invalid = |reason: &str| RenderError::InvalidNeighbour {
        ip: neighbour.ip.clone(),
        interface: neighbour.interface.clone(),
        reason: reason.to_string(),
    };
    let ip: IpAddr = neighbour
        .ip
        .parse()
        .map_err(|_| invalid("not an IP address"))?;
    let lladdr = normalize_mac(&neighbour.mac).ok_or_else(|| invalid("not a MAC address"))?;
    Ok(Some(format!("podtap.neigh={ip},{lladdr},{}", nic.mac)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    #[test]
    fn exact_entries_for_the_pod() {
        let text = render_guest_args(&samples::pod()).unwrap();
        let expected = [
            "podtap.nic=0a:58:0a:f4:01:05,1400,10.244.1.5/24,fd00:10:244:1::5/64",
            "podtap.nic=52:54:00:12:34:04,9000,192.168.50.10/24",
            "podtap.route=10.96.0.0/12,-,0a:58:0a:f4:01:05,0,0,0",
            "podtap.route=0.0.0.0/0,169.254.1.1,0a:58:0a:f4:01:05,0,1,0",
            "podtap.route=10.100.0.0/16,10.244.1.1,0a:58:0a:f4:01:05,100,0,1300",
            "podtap.route=::/0,fd00:10:244:1::1,0a:58:0a:f4:01:05,1024,0,0",
            "podtap.route=172.16.0.0/16,10.244.1.1,0a:58:0a:f4:01:05,50,0,0",
            "podtap.route=192.168.60.0/24,-,52:54:00:12:34:04,0,0,0",
            "podtap.route=172.16.0.0/16,192.168.50.1,52:54:00:12:34:04,50,0,0",
            "podtap.neigh=169.254.1.1,ee:ee:ee:ee:ee:ee,0a:58:0a:f4:01:05",
            "podtap.neigh=192.168.50.1,52:54:00:aa:bb:cc,52:54:00:12:34:04",
        ]
        .join(" ");
        assert_eq!(text, expected + "\n");
    }

    #[test]
    fn single_nic_without_neighbours() {
        assert_eq!(
            render_guest_args(&samples::single_ipv4()).unwrap(),
            "podtap.nic=52:54:00:12:34:01,1500,10.0.2.15/24 \
             podtap.route=0.0.0.0/0,10.0.2.2,52:54:00:12:34:01,0,0,0\n"
        );
    }

    #[test]
    fn neighbours_without_lladdr_are_skipped() {
        let mut desc = samples::single_ipv4();
        let mut pending = samples::pod().neighbours[0].clone();
        pending.interface = "eth0".into();
        pending.state = "incomplete".into();
        desc.neighbours.push(pending);
        assert!(!render_guest_args(&desc).unwrap().contains("podtap.neigh"));
    }

    #[test]
    fn dns_and_search_come_last() {
        use crate::model::Dns;
        let mut desc = samples::single_ipv4();
        desc.dns = Some(Dns {
            nameservers: vec!["10.0.2.3".into(), "FD00::53".into()],
            domain: Some("ignored.example".into()),
            search: vec!["ns.svc.cluster.local".into(), "svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        });
        assert_eq!(
            render_guest_args(&desc).unwrap(),
            "podtap.nic=52:54:00:12:34:01,1500,10.0.2.15/24 \
             podtap.route=0.0.0.0/0,10.0.2.2,52:54:00:12:34:01,0,0,0 \
             podtap.dns=10.0.2.3,fd00::53 podtap.search=ns.svc.cluster.local,svc.cluster.local\n"
        );
        desc.dns = Some(Dns {
            domain: Some("pod.example".into()),
            ..Dns::default()
        });
        let text = render_guest_args(&desc).unwrap();
        assert!(
            text.ends_with(",0,0,0 podtap.search=pod.example\n"),
            "{text}"
        );
        assert!(!text.contains("podtap.dns"));
        desc.dns = Some(Dns {
            search: vec!["a,b".into()],
            ..Dns::default()
        });
        assert!(matches!(
            render_guest_args(&desc),
            Err(RenderError::InvalidDns { .. })
        ));
    }

    #[test]
    fn dns_counts_towards_the_2000_bytes() {
        use crate::model::Dns;
        let mut desc = samples::single_ipv4();
        let base = render_guest_args(&desc).unwrap().len() - 1;
        let search = |len: usize| vec!["a".repeat(len)];
        // " podtap.search=" is 15 bytes: exactly at the limit, then one over.
        let fill = GUEST_ARGS_LIMIT - base - 15;
        desc.dns = Some(Dns {
            search: search(fill),
            ..Dns::default()
        });
        assert_eq!(
            render_guest_args(&desc).unwrap().len(),
            GUEST_ARGS_LIMIT + 1
        );
        desc.dns = Some(Dns {
            search: search(fill + 1),
            ..Dns::default()
        });
        assert!(matches!(
            render_guest_args(&desc),
            Err(RenderError::CommandLineTooLong { limit: 2000, .. })
        ));
    }

    #[test]
    fn over_2000_bytes_is_an_error() {
        let mut desc = samples::single_ipv4();
        let addresses = &mut samples::interface_mut(&mut desc, "eth0").addresses;
        for n in 0..150 {
            addresses.push(format!("10.1.{n}.1/24"));
        }
        assert!(matches!(
            render_guest_args(&desc),
            Err(RenderError::CommandLineTooLong { limit: 2000, .. })
        ));
    }
}
