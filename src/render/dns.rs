//! The resolver configuration given to the guest, shared by the guest-side formats.

use std::net::IpAddr;

use super::nic::Nic;
use super::route::guest_routes;
use super::RenderError;
use crate::model::Description;

/// The description's `dns`, checked: what cloud-init and guest-args carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GuestDns {
    /// Name servers, in the description's order.
    pub nameservers: Vec<IpAddr>,
    /// The search list: `search`, or `domain` alone when there is no `search`.
    pub search: Vec<String>,
}

/// `None` when the description has no name server and no search domain
/// (`options` alone are not carried). An error for a name server that is not
/// an IP address, or a search domain that is empty or has a comma, whitespace
/// or a control character.
pub(crate) fn guest_dns(desc: &Description) -> Result<Option<GuestDns>, RenderError> {
    let Some(dns) = &desc.dns else {
        return Ok(None);
    };
    let invalid = |value: &str, reason: &str| RenderError::InvalidDns {
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let nameservers = dns
        .nameservers
        .iter()
        .map(|n| n.parse().map_err(|_| invalid(n, "not an IP address")))
        .collect::<Result<Vec<IpAddr>, _>>()?;
    let mut search = Vec::new();
    for domain in dns.search_list() {
        let bad = |c: char| c == ',' || c.is_whitespace() || c.is_control();
        if domain.is_empty() || domain.contains(bad) {
            return Err(invalid(
                domain,
                "a search domain must be non-empty, without commas, whitespace or control characters",
            ));
        }
        search.push(domain.to_string());
    }
    if nameservers.is_empty() && search.is_empty() {
        return Ok(None);
    }
    Ok(Some(GuestDns {
        nameservers,
        search,
    }))
}

/// Index into `nics` of the NIC the guest reaches `ip` through: the longest
/// prefix among the NICs' guest addresses and guest routes that holds it (the
/// first NIC on a tie). Without any, the first NIC with an address, else NIC 0.
pub(crate) fn nic_towards(
    desc: &Description,
    nics: &[Nic<'_>],
    ip: Option<IpAddr>,
) -> Result<usize, RenderError> {
    let mut best: Option<(u8, usize)> = None;
    let mut first_with_address = None;
    for (index, nic) in nics.iter().enumerate() {
        let addresses = nic.guest_addresses()?;
        if !addresses.is_empty() && first_with_address.is_none() {
            first_with_address = Some(index);
        }
        let Some(ip) = ip else { continue };
        let routes = guest_routes(desc, &nic.interface.name)?;
        let prefixes = addresses
            .iter()
            .copied()
            .chain(routes.iter().map(|r| r.destination))
            .filter(|net| net.contains(ip))
            .map(|net| net.prefix());
        if let Some(longest) = prefixes.max() {
            if best.is_none_or(|(len, _)| longest > len) {
                best = Some((longest, index));
            }
        }
    }
    Ok(best
        .map(|(_, index)| index)
        .or(first_with_address)
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Dns;
    use crate::render::nic::attached_nics;
    use crate::render::samples;

    fn with_dns(dns: Dns) -> Description {
        Description {
            dns: Some(dns),
            ..samples::pod()
        }
    }

    #[test]
    fn search_falls_back_to_domain_and_options_alone_are_nothing() {
        let d = with_dns(Dns {
            nameservers: vec!["10.96.0.10".into(), "fd00::53".into()],
            domain: Some("pod.example".into()),
            ..Dns::default()
        });
        let g = guest_dns(&d).unwrap().unwrap();
        assert_eq!(g.nameservers.len(), 2);
        assert_eq!(g.search, ["pod.example"]);
        let d = with_dns(Dns {
            domain: Some("ignored.example".into()),
            search: vec!["a.example".into(), "b.example".into()],
            ..Dns::default()
        });
        assert_eq!(
            guest_dns(&d).unwrap().unwrap().search,
            ["a.example", "b.example"]
        );
        let d = with_dns(Dns {
            options: vec!["ndots:5".into()],
            ..Dns::default()
        });
        assert_eq!(guest_dns(&d).unwrap(), None);
        assert_eq!(guest_dns(&samples::pod()).unwrap(), None);
    }

    #[test]
    fn bad_values_are_errors() {
        for dns in [
            Dns {
                nameservers: vec!["dns.example".into()],
                ..Dns::default()
            },
            Dns {
                search: vec!["a,b".into()],
                ..Dns::default()
            },
            Dns {
                search: vec!["a b".into()],
                ..Dns::default()
            },
            Dns {
                domain: Some(String::new()),
                ..Dns::default()
            },
        ] {
            assert!(
                matches!(
                    guest_dns(&with_dns(dns.clone())),
                    Err(RenderError::InvalidDns { .. })
                ),
                "{dns:?}"
            );
        }
    }

    #[test]
    fn the_nic_with_the_longest_matching_prefix_wins() {
        let desc = samples::pod();
        let nics = attached_nics(&desc).unwrap();
        let ip = |s: &str| Some(s.parse().unwrap());
        // eth0 (net0) has the default route; net1 owns 192.168.50.0/24.
        assert_eq!(nic_towards(&desc, &nics, ip("8.8.8.8")).unwrap(), 0);
        assert_eq!(nic_towards(&desc, &nics, ip("192.168.50.53")).unwrap(), 1);
        assert_eq!(nic_towards(&desc, &nics, ip("192.168.60.53")).unwrap(), 1);
        // 172.16.0.0/16 is multipath over both: the first NIC on a tie.
        assert_eq!(nic_towards(&desc, &nics, ip("172.16.0.53")).unwrap(), 0);
        assert_eq!(
            nic_towards(&desc, &nics, ip("fd00:10:244:1::53")).unwrap(),
            0
        );
        assert_eq!(nic_towards(&desc, &nics, None).unwrap(), 0);
        // No route at all: the first NIC with an address.
        let mut bare = samples::pod();
        bare.routes.clear();
        samples::interface_mut(&mut bare, "eth0").addresses.clear();
        let nics = attached_nics(&bare).unwrap();
        assert_eq!(nic_towards(&bare, &nics, ip("8.8.8.8")).unwrap(), 1);
    }
}
