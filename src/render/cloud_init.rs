//! cloud-init network-config version 2 (the netplan dialect), written by hand.

use std::fmt::Write as _;

use super::dns::{guest_dns, nic_towards, GuestDns};
use super::nic::{attached_nics, Nic};
use super::route::{guest_routes, GuestRoute};
use super::RenderError;
use crate::model::{Description, Rule};

/// Text form: a NoCloud `network-config` file (top-level `version: 2`).
///
/// `nameservers` is written under one NIC only, the one the guest reaches the
/// first name server through: netplan's nameservers are per link (systemd-resolved
/// asks a link's servers over that link), and cloud-init's other renderers
/// merge every NIC's nameservers into one resolv.conf, which would repeat them.
pub(crate) fn render_cloud_init(desc: &Description) -> Result<String, RenderError> {
    let mut yaml = String::from("version: 2\nethernets:\n");
    let nics = attached_nics(desc)?;
    let dns = guest_dns(desc)?;
    let dns_nic = match &dns {
        Some(dns) => Some(nic_towards(desc, &nics, dns.nameservers.first().copied())?),
        None => None,
    };
    for (index, nic) in nics.iter().enumerate() {
        write_ethernet(&mut yaml, desc, nic)?;
        if let (Some(dns), true) = (&dns, dns_nic == Some(index)) {
            write_nameservers(&mut yaml, dns);
        }
        // netplan keeps rules per interface but installs them for the whole
        // guest: all of them go under the first NIC.
        if index == 0 {
            write_rules(&mut yaml, &desc.rules)?;
        }
    }
    Ok(yaml)
}

/// `routing-policy:` for the rules netplan can express: a table lookup by
/// source, destination, fwmark and TOS, at a priority.
fn write_rules(yaml: &mut String, rules: &[Rule]) -> Result<(), RenderError> {
    if rules.is_empty() {
        return Ok(());
    }
    push_line(yaml, 2, "routing-policy:");
    for rule in rules {
        let refuse = |what: &str| RenderError::PolicyRoutingUnsupported {
            format: "cloud-init",
            what: format!("rule {}: {what}", rule.priority),
        };
        let Some(table) = rule.table.filter(|_| rule.action == "table") else {
            return Err(refuse(&format!(
                "action {} (netplan only looks up tables)",
                rule.action
            )));
        };
        if rule.iif.is_some() || rule.oif.is_some() || rule.invert {
            return Err(refuse("iif/oif/not selectors"));
        }
        if rule.fwmask.is_some_and(|m| m != u32::MAX) {
            return Err(refuse("a fwmark mask"));
        }
        let mut first = true;
        let mut key = |yaml: &mut String, text: String| {
            let lead = if first { "- " } else { "  " };
            first = false;
            push_line(yaml, 3, &format!("{lead}{text}"));
        };
        if let Some(from) = &rule.from {
            key(yaml, format!("from: {}", quote(from)));
        }
        if let Some(to) = &rule.to {
            key(yaml, format!("to: {}", quote(to)));
        }
        key(yaml, format!("table: {table}"));
        key(yaml, format!("priority: {}", rule.priority));
        if let Some(mark) = rule.fwmark {
            key(yaml, format!("mark: {mark}"));
        }
        if rule.tos != 0 {
            key(yaml, format!("type-of-service: {}", rule.tos));
        }
    }
    Ok(())
}

/// `nameservers: {addresses: [...], search: [...]}`, each list only when not empty.
fn write_nameservers(yaml: &mut String, dns: &GuestDns) {
    push_line(yaml, 2, "nameservers:");
    if !dns.nameservers.is_empty() {
        push_line(yaml, 3, "addresses:");
        for server in &dns.nameservers {
            push_line(yaml, 4, &format!("- {}", quote(&server.to_string())));
        }
    }
    if !dns.search.is_empty() {
        push_line(yaml, 3, "search:");
        for domain in &dns.search {
            push_line(yaml, 4, &format!("- {}", quote(domain)));
        }
    }
}

fn write_ethernet(yaml: &mut String, desc: &Description, nic: &Nic<'_>) -> Result<(), RenderError> {
    let addresses = nic.guest_addresses()?;
    let routes = guest_routes(desc, &nic.interface.name)?;
    push_line(yaml, 1, &format!("{}:", nic.id));
    push_line(yaml, 2, "match:");
    push_line(yaml, 3, &format!("macaddress: {}", quote(&nic.mac)));
    push_line(
        yaml,
        2,
        &format!("set-name: {}", quote(&nic.interface.name)),
    );
    push_line(yaml, 2, &format!("mtu: {}", nic.interface.mtu));
    if !addresses.is_empty() {
        push_line(yaml, 2, "addresses:");
        for address in &addresses {
            push_line(yaml, 3, &format!("- {}", quote(&address.to_string())));
        }
    }
    if !routes.is_empty() {
        push_line(yaml, 2, "routes:");
        for route in &routes {
            write_route(yaml, route);
        }
    }
    Ok(())
}

/// `to` is always a CIDR (`0.0.0.0/0`, `::/0` for defaults): netplan 0.99
/// and older cloud-init releases do not know `to: default`. A route without
/// gateway gets `scope: link`, which netplan requires for it.
fn write_route(yaml: &mut String, route: &GuestRoute) {
    push_line(
        yaml,
        3,
        &format!("- to: {}", quote(&route.destination.to_string())),
    );
    match route.gateway {
        Some(gateway) => push_line(yaml, 4, &format!("via: {}", quote(&gateway.to_string()))),
        None => push_line(yaml, 4, &format!("scope: {}", quote("link"))),
    }
    push_line(yaml, 4, &format!("metric: {}", route.metric));
    if route.onlink && route.gateway.is_some() {
        push_line(yaml, 4, "on-link: true");
    }
    if let Some(mtu) = route.mtu {
        push_line(yaml, 4, &format!("mtu: {mtu}"));
    }
    if route.table != 254 {
        push_line(yaml, 4, &format!("table: {}", route.table));
    }
}

fn push_line(yaml: &mut String, depth: usize, content: &str) {
    yaml.push_str(&"  ".repeat(depth));
    yaml.push_str(content);
    yaml.push('\n');
}

/// A YAML double-quoted scalar. Every string is quoted: an all-digit MAC
/// such as `00:11:22:33:44:55` would otherwise be a YAML 1.1 base-60 number.
fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(quoted, "\\u{:04x}", u32::from(c));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    #[test]
    fn full_pod_network_config() {
        let yaml = render_cloud_init(&samples::pod()).unwrap();
        let expected = r#"version: 2
ethernets:
  net0:
    match:
      macaddress: "0a:58:0a:f4:01:05"
    set-name: "eth0"
    mtu: 1400
    addresses:
      - "10.244.1.5/24"
      - "fd00:10:244:1::5/64"
    routes:
      - to: "10.96.0.0/12"
        scope: "link"
        metric: 0
      - to: "0.0.0.0/0"
        via: "169.254.1.1"
        metric: 0
        on-link: true
      - to: "10.100.0.0/16"
        via: "10.244.1.1"
        metric: 100
        mtu: 1300
      - to: "::/0"
        via: "fd00:10:244:1::1"
        metric: 1024
      - to: "172.16.0.0/16"
        via: "10.244.1.1"
        metric: 50
  net1:
    match:
      macaddress: "52:54:00:12:34:04"
    set-name: "net1"
    mtu: 9000
    addresses:
      - "192.168.50.10/24"
    routes:
      - to: "192.168.60.0/24"
        scope: "link"
        metric: 0
      - to: "172.16.0.0/16"
        via: "192.168.50.1"
        metric: 50
"#;
        assert_eq!(yaml, expected);
    }

    #[test]
    fn on_link_metric_and_route_mtu_are_kept() {
        let yaml = render_cloud_init(&samples::pod()).unwrap();
        assert!(yaml.contains("on-link: true"));
        assert!(yaml.contains("metric: 100"));
        assert!(yaml.contains("        mtu: 1300\n"));
    }

    #[test]
    fn kernel_link_local_and_multicast_entries_are_left_out() {
        let yaml = render_cloud_init(&samples::pod()).unwrap();
        for absent in [
            "fe80",
            "ff00",
            "10.244.1.0/24",
            "fd00:10:244:1::/64",
            "eth9",
        ] {
            assert!(!yaml.contains(absent), "{absent}");
        }
    }

    #[test]
    fn nameservers_go_under_the_nic_towards_the_first_server() {
        use crate::model::Dns;
        let mut desc = samples::pod();
        desc.dns = Some(Dns {
            nameservers: vec!["192.168.50.53".into(), "FD00::53".into()],
            domain: Some("pod.example".into()),
            search: vec!["ns.svc.cluster.local".into(), "svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        });
        let yaml = render_cloud_init(&desc).unwrap();
        let block = r#"    nameservers:
      addresses:
        - "192.168.50.53"
        - "fd00::53"
      search:
        - "ns.svc.cluster.local"
        - "svc.cluster.local"
"#;
        // net1 owns 192.168.50.0/24; the block ends net1's mapping, the last one.
        assert!(yaml.ends_with(block), "{yaml}");
        assert_eq!(yaml.matches("nameservers:").count(), 1);
        assert!(!yaml.contains("ndots") && !yaml.contains("pod.example"));
        let without = render_cloud_init(&samples::pod()).unwrap();
        assert_eq!(yaml, without + block);

        // Search only, via `domain`; the NIC falls to net0 (no server to route).
        desc.dns = Some(Dns {
            domain: Some("pod.example".into()),
            ..Dns::default()
        });
        let yaml = render_cloud_init(&desc).unwrap();
        let search = "    nameservers:\n      search:\n        - \"pod.example\"\n  net1:\n";
        assert!(yaml.contains(search), "{yaml}");
        // Nothing to carry: no block.
        desc.dns = Some(Dns {
            options: vec!["ndots:5".into()],
            ..Dns::default()
        });
        assert!(!render_cloud_init(&desc).unwrap().contains("nameservers"));
        desc.dns = Some(Dns {
            nameservers: vec!["not-an-ip".into()],
            ..Dns::default()
        });
        assert!(matches!(
            render_cloud_init(&desc),
            Err(RenderError::InvalidDns { .. })
        ));
    }

    #[test]
    fn strings_are_quoted_and_escaped() {
        assert_eq!(quote("00:11:22:33:44:55"), "\"00:11:22:33:44:55\"");
        assert_eq!(quote("a\"b\\c\u{1}"), "\"a\\\"b\\\\c\\u0001\"");
    }
}
