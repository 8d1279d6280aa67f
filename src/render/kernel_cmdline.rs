//! The kernel's own `ip=` parameter (CONFIG_IP_PNP): one IPv4 interface only.

use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::nic::{attached_nics, Nic};
use super::route::{guest_routes, GuestRoute};
use super::RenderError;
use crate::model::Description;

/// The in-kernel autoconfiguration runs before udev renames anything, so the
/// first virtio NIC is always `eth0`.
const GUEST_DEVICE: &str = "eth0";

/// Text form: `ip=<client>::<gw>:<netmask>::eth0:off` and a newline.
///
/// Refused (with the reason) unless there is exactly one NIC with exactly
/// one IPv4 address, no IPv6 address or route, and at most a default IPv4
/// route through a gateway inside that address's subnet.
pub(crate) fn render_kernel_cmdline(desc: &Description) -> Result<String, RenderError> {
    super::route::refuse_policy_routing(desc, "kernel-cmdline")?;
    let nics = attached_nics(desc)?;
    let [nic] = nics.as_slice() else {
        return Err(unsupported(format!(
            "it configures exactly one interface, but {} are attached",
            nics.len()
        )));
    };
    let address = single_ipv4_address(nic)?;
    let gateway = default_gateway(desc, nic, address)?;
    Ok(format!(
        "ip={}::{}:{}::{GUEST_DEVICE}:off\n",
        address.ip(),
        gateway.map(|g| g.to_string()).unwrap_or_default(),
        address.mask()
    ))
}

fn single_ipv4_address(nic: &Nic<'_>) -> Result<IpNetwork, RenderError> {
    let addresses = nic.guest_addresses()?;
    let (ipv4, ipv6): (Vec<IpNetwork>, Vec<IpNetwork>) =
        addresses.into_iter().partition(IpNetwork::is_ipv4);
    if let Some(first) = ipv6.first() {
        return Err(unsupported(format!(
            "it is IPv4-only, but interface {} has IPv6 address {first}",
            nic.interface.name
        )));
    }
    match ipv4.as_slice() {
        [address] => Ok(*address),
        _ => Err(unsupported(format!(
            "it takes exactly one IPv4 address, but interface {} has {}",
            nic.interface.name,
            ipv4.len()
        ))),
    }
}

fn default_gateway(
    desc: &Description,
    nic: &Nic<'_>,
    address: IpNetwork,
) -> Result<Option<IpAddr>, RenderError> {
    let routes = guest_routes(desc, &nic.interface.name)?;
    let mut gateway = None;
    for route in &routes {
        check_expressible(route, address)?;
        if gateway.is_some() {
            return Err(unsupported("it takes only one default route".to_string()));
        }
        gateway = route.gateway;
    }
    Ok(gateway)
}

/// `ip=` can only say "default route via a gateway on my subnet".
fn check_expressible(route: &GuestRoute, address: IpNetwork) -> Result<(), RenderError> {
    let to = route.destination;
    let reason = if !to.is_ipv4() {
        Some(format!(
            "it is IPv4-only, but there is an IPv6 route to {to}"
        ))
    } else if !route.is_default() {
        Some(format!(
            "it can only set a default route, not the route to {to}"
        ))
    } else if route.multipath {
        Some("the default route is multipath".to_string())
    } else if route.onlink {
        Some("the default route is onlink (gateway outside the subnet)".to_string())
    } else if route.mtu.is_some() {
        Some("the default route has its own MTU".to_string())
    } else {
        match route.gateway {
            None => Some("the default route has no gateway (device route)".to_string()),
            Some(gateway) if !address.contains(gateway) => Some(format!(
                "the default gateway {gateway} is outside {address}"
            )),
            Some(_) => None,
        }
    };
    reason.map_or(Ok(()), |reason| Err(unsupported(reason)))
}

fn unsupported(reason: String) -> RenderError {
    RenderError::KernelCmdlineUnsupported { reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Route;
    use crate::render::samples;

    fn refusal(desc: &Description) -> String {
        render_kernel_cmdline(desc).unwrap_err().to_string()
    }

    #[test]
    fn one_ipv4_nic_with_a_default_gateway() {
        assert_eq!(
            render_kernel_cmdline(&samples::single_ipv4()).unwrap(),
            "ip=10.0.2.15::10.0.2.2:255.255.255.0::eth0:off\n"
        );
    }

    #[test]
    fn no_default_route_leaves_the_gateway_empty() {
        let mut desc = samples::single_ipv4();
        desc.routes.retain(|r| r.destination != "0.0.0.0/0");
        assert_eq!(
            render_kernel_cmdline(&desc).unwrap(),
            "ip=10.0.2.15:::255.255.255.0::eth0:off\n"
        );
    }

    #[test]
    fn refusals_say_why_and_what_to_use_instead() {
        let message = refusal(&samples::pod());
        assert_eq!(
            message,
            "the kernel ip= parameter cannot describe this network: it configures exactly one \
             interface, but 2 are attached; use the cloud-init or guest-args format instead"
        );
    }

    #[test]
    fn ipv6_addresses_are_refused() {
        let mut desc = samples::single_ipv4();
        samples::interface_mut(&mut desc, "eth0")
            .addresses
            .push("fd00::15/64".into());
        assert!(
            refusal(&desc).contains("IPv4-only, but interface eth0 has IPv6 address fd00::15/64")
        );
    }

    #[test]
    fn two_ipv4_addresses_are_refused() {
        let mut desc = samples::single_ipv4();
        samples::interface_mut(&mut desc, "eth0")
            .addresses
            .push("10.0.3.15/24".into());
        assert!(refusal(&desc).contains("exactly one IPv4 address, but interface eth0 has 2"));
    }

    #[test]
    fn onlink_default_route_is_refused() {
        let mut desc = samples::single_ipv4();
        desc.routes[0].onlink = true;
        assert!(refusal(&desc).contains("onlink"));
    }

    #[test]
    fn gateway_outside_the_subnet_is_refused() {
        let mut desc = samples::single_ipv4();
        desc.routes[0].gateway = Some("169.254.1.1".into());
        assert!(refusal(&desc).contains("169.254.1.1 is outside 10.0.2.15/24"));
    }

    #[test]
    fn extra_and_multipath_routes_are_refused() {
        let mut desc = samples::single_ipv4();
        desc.routes.push(Route {
            destination: "10.96.0.0/12".into(),
            ..desc.routes[0].clone()
        });
        assert!(refusal(&desc).contains("not the route to 10.96.0.0/12"));

        let mut desc = samples::single_ipv4();
        let legs = samples::pod().routes[8].nexthops.clone();
        desc.routes[0].nexthops = legs
            .into_iter()
            .map(|mut hop| {
                hop.interface = "eth0".into();
                hop.gateway = Some("10.0.2.3".into());
                hop
            })
            .collect();
        assert!(refusal(&desc).contains("multipath"));
    }

    #[test]
    fn ipv6_routes_are_refused() {
        let mut desc = samples::single_ipv4();
        desc.routes.push(samples::pod().routes[4].clone());
        desc.routes[3].interface = Some("eth0".into());
        assert!(refusal(&desc).contains("IPv6 route to ::/0"));
    }
}
