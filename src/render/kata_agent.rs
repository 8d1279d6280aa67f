//! The Kata agent's network requests as JSON: `UpdateInterface`,
//! `UpdateRoutes` and `AddARPNeighbors` (kata-containers
//! `src/libs/protocols/protos/agent.proto` and `types.proto`).
//!
//! # JSON field names
//!
//! Every field is written under its name exactly as the `.proto` file spells
//! it: `IPAddresses`, `hwAddr`, `devicePath`, `toIPAddress`, `Routes`,
//! `ARPNeighbors`, `neighbors`, ... None of these messages sets `json_name`,
//! and for every field written here the proto3 JSON name (the field name
//! with each `_` removed and the letter after it capitalised; the first
//! letter is kept as it is, so `IPAddresses` stays `IPAddresses`) is that
//! same spelling. The text therefore reads the same to a proto3 JSON parser
//! and to Kata's own JSON reader (the `protocols` crate's `with-serde`
//! feature, used by `kata-agent-ctl`), which uses the rust-protobuf field
//! names, i.e. the proto names.
//!
//! `raw_flags` is written under its proto name too (proto3 JSON would say
//! `rawFlags`), and only when it is not 0: it carries the pod interface's
//! flags a guest NIC takes on (`NOARP`, which the agent turns into `arp
//! off`, `MULTICAST`, `ALLMULTI`, `PROMISC`). `type` (rust-protobuf
//! `type_`) is left out at its default; the agent does not read it.
//!
//! # JSON values
//!
//! Enums (`IPFamily`) and 64-bit integers are JSON numbers: `family` is `0`
//! (`v4`) or `1` (`v6`), `mtu` is `1400`. Kata's reader accepts only numbers
//! for them (`deserialize_enum_or_unknown` reads an `i32`), and proto3 JSON
//! parsers accept numbers as well as the `"v4"` / `"1400"` a proto3 printer
//! would write.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnetwork::IpNetwork;
use serde::Serialize;

use super::nic::{attached_nics, normalize_mac, Nic};
use super::route::{guest_routes, GuestRoute};
use super::RenderError;
use crate::model::{Description, Neighbour};

/// `types.IPFamily.v4`.
const IP_FAMILY_V4: i32 = 0;
/// `types.IPFamily.v6`.
const IP_FAMILY_V6: i32 = 1;
/// The kernel's `NUD_PERMANENT` neighbour state.
const NUD_PERMANENT: i32 = 0x80;
/// The kernel's `RTNH_F_ONLINK` route flag.
const RTNH_F_ONLINK: u32 = 4;

/// The whole output. The keys are the RPC names in lowerCamelCase;
/// `updateInterfaces` is plural because `UpdateInterface` takes one
/// interface, so there is one request per NIC.
#[derive(Debug, Serialize)]
struct KataAgentRequests {
    #[serde(rename = "updateInterfaces")]
    update_interfaces: Vec<UpdateInterfaceRequest>,
    #[serde(rename = "updateRoutes")]
    update_routes: UpdateRoutesRequest,
    #[serde(rename = "addARPNeighbors")]
    add_arp_neighbors: AddArpNeighborsRequest,
}

/// agent.proto `UpdateInterfaceRequest { types.Interface interface = 1; }`.
#[derive(Debug, Serialize)]
struct UpdateInterfaceRequest {
    interface: Interface,
}

/// types.proto `Interface`, fields 1-6 and 8 in field-number order (`type`
/// = 7 stays at its default, see the module comment).
#[derive(Debug, Serialize)]
struct Interface {
    device: String,
    name: String,
    #[serde(rename = "IPAddresses")]
    ip_addresses: Vec<IpAddress>,
    mtu: u64,
    #[serde(rename = "hwAddr")]
    hw_addr: String,
    /// Empty: the NIC is there at boot, so the agent need not wait for a PCI device.
    #[serde(rename = "devicePath")]
    device_path: String,
    /// The `IFF_*` flags of [`GUEST_FLAGS`] the pod interface has.
    #[serde(skip_serializing_if = "is_zero")]
    raw_flags: u32,
}

/// The flags a guest NIC takes on from its pod interface: `IFF_PROMISC`,
/// `IFF_NOARP`, `IFF_ALLMULTI`, `IFF_MULTICAST`. The rest (`UP`,
/// `LOWER_UP`, `MASTER`...) are the host link's state.
const GUEST_FLAGS: u32 = 0x100 | 0x80 | 0x200 | 0x1000;

/// [`GUEST_FLAGS`] for `nic`: routed, not `IFF_NOARP` (the guest's link is
/// the TAP, which resolves addresses whatever the pod interface does).
fn guest_flags(nic: &Nic<'_>) -> u32 {
    match nic.interface.l3 {
        Some(_) => GUEST_FLAGS & !0x80,
        None => GUEST_FLAGS,
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// types.proto `IPAddress { IPFamily family; string address; string mask; }`.
#[derive(Debug, Serialize)]
struct IpAddress {
    family: i32,
    address: String,
    /// The prefix length in decimal (`"24"`), as the agent parses it; empty
    /// for a neighbour's address.
    mask: String,
}

/// agent.proto `UpdateRoutesRequest { Routes routes = 1; }`.
#[derive(Debug, Serialize)]
struct UpdateRoutesRequest {
    routes: Routes,
}

/// agent.proto `Routes { repeated types.Route Routes = 1; }`.
#[derive(Debug, Serialize)]
struct Routes {
    #[serde(rename = "Routes")]
    routes: Vec<Route>,
}

/// types.proto `Route`, every field in field-number order.
#[derive(Debug, Serialize)]
struct Route {
    dest: String,
    gateway: String,
    device: String,
    source: String,
    scope: u32,
    family: i32,
    flags: u32,
    mtu: u32,
}

/// agent.proto `AddARPNeighborsRequest { ARPNeighbors neighbors = 1; }`.
#[derive(Debug, Serialize)]
struct AddArpNeighborsRequest {
    neighbors: ArpNeighbors,
}

/// agent.proto `ARPNeighbors { repeated types.ARPNeighbor ARPNeighbors = 1; }`.
#[derive(Debug, Serialize)]
struct ArpNeighbors {
    #[serde(rename = "ARPNeighbors")]
    arp_neighbors: Vec<ArpNeighbor>,
}

/// types.proto `ARPNeighbor`, every field in field-number order.
#[derive(Debug, Serialize)]
struct ArpNeighbor {
    #[serde(rename = "toIPAddress")]
    to_ip_address: IpAddress,
    device: String,
    lladdr: String,
    state: i32,
    flags: i32,
}

/// Text form: one pretty-printed JSON object and a newline.
///
/// Refused: multipath routes and two routes to the same destination (Kata's
/// `Route` has one next hop and no metric), two NICs with the same guest MAC
/// (the agent finds links by `hwAddr`), and a route `src` the guest does not
/// get as an address (the guest kernel would refuse the route).
pub(crate) fn render_kata_agent(desc: &Description) -> Result<String, RenderError> {
    let requests = kata_agent_requests(desc)?;
    let json = serde_json::to_string_pretty(&requests).map_err(|error| RenderError::Json {
        what: "Kata agent requests",
        message: error.to_string(),
    })?;
    Ok(json + "\n")
}

fn kata_agent_requests(desc: &Description) -> Result<KataAgentRequests, RenderError> {
    // Kata's Route has no table and the agent protocol no rules.
    super::route::refuse_policy_routing(desc, "kata-agent")?;
    let nics = attached_nics(desc)?;
    check_distinct_macs(&nics)?;
    let mut guest_addresses = Vec::new();
    let mut update_interfaces = Vec::new();
    for nic in &nics {
        let addresses = nic.guest_addresses()?;
        update_interfaces.push(UpdateInterfaceRequest {
            interface: interface(nic, &addresses),
        });
        guest_addresses.extend(addresses.iter().map(IpNetwork::ip));
    }
    let mut routes = Vec::new();
    let mut destinations = BTreeMap::new();
    for nic in &nics {
        for route in guest_routes(desc, &nic.interface.name)? {
            check_single_route_to(&mut destinations, &route, nic)?;
            routes.push(kata_route(&route, nic, &guest_addresses)?);
        }
    }
    let mut arp_neighbors = Vec::new();
    for nic in &nics {
        for neighbour in desc
            .neighbours
            .iter()
            .filter(|n| n.interface == nic.interface.name)
        {
            if let Some(entry) = arp_neighbor(neighbour, nic)? {
                arp_neighbors.push(entry);
            }
        }
    }
    Ok(KataAgentRequests {
        update_interfaces,
        update_routes: UpdateRoutesRequest {
            routes: Routes { routes },
        },
        add_arp_neighbors: AddArpNeighborsRequest {
            neighbors: ArpNeighbors { arp_neighbors },
        },
    })
}

/// `device` and `name` are both the pod interface's name, as Kata's runtime
/// sends them; the agent finds the link by `hwAddr` and renames it to `name`.
fn interface(nic: &Nic<'_>, addresses: &[IpNetwork]) -> Interface {
    Interface {
        device: nic.interface.name.clone(),
        name: nic.interface.name.clone(),
        ip_addresses: addresses
            .iter()
            .map(|address| ip_address(address.ip(), address.prefix().to_string()))
            .collect(),
        mtu: u64::from(nic.interface.mtu),
        hw_addr: nic.mac.clone(),
        device_path: String::new(),
        raw_flags: crate::model::flag_bits(&nic.interface.flags) & guest_flags(nic),
    }
}

fn ip_address(ip: IpAddr, mask: String) -> IpAddress {
    IpAddress {
        family: family(ip),
        address: ip.to_string(),
        mask,
    }
}

fn family(ip: IpAddr) -> i32 {
    if ip.is_ipv4() {
        IP_FAMILY_V4
    } else {
        IP_FAMILY_V6
    }
}

/// The agent adds each route with NLM_F_REPLACE and no priority, so a
/// second route to the same destination would replace the first.
fn check_single_route_to(
    destinations: &mut BTreeMap<IpNetwork, String>,
    route: &GuestRoute,
    nic: &Nic<'_>,
) -> Result<(), RenderError> {
    if route.multipath {
        return Err(unsupported(format!(
            "the route to {} is multipath, and a Route has one gateway and one device",
            route.destination
        )));
    }
    if let Some(first) = destinations.insert(route.destination, nic.interface.name.clone()) {
        return Err(unsupported(format!(
            "there are two routes to {} (via {first} and via {}), and a Route has no metric, \
             so the agent would replace one with the other",
            route.destination, nic.interface.name
        )));
    }
    Ok(())
}

/// `dest` is the CIDR (`0.0.0.0/0`, `::/0` for defaults), `gateway` is empty
/// for a device route, `scope` is the kernel's number, `flags` carries
/// `onlink`, and `mtu` is 0 when the route has none. The route's metric is
/// not carried (see `check_single_route_to`).
fn kata_route(
    route: &GuestRoute,
    nic: &Nic<'_>,
    guest_addresses: &[IpAddr],
) -> Result<Route, RenderError> {
    Ok(Route {
        dest: route.destination.to_string(),
        gateway: route.gateway.map(|g| g.to_string()).unwrap_or_default(),
        device: nic.interface.name.clone(),
        source: route_source(route, guest_addresses)?,
        scope: route_scope(route)?,
        family: family(route.destination.ip()),
        flags: if route.onlink { RTNH_F_ONLINK } else { 0 },
        mtu: route.mtu.unwrap_or(0),
    })
}

/// The preferred source as `ADDR/0`: the agent makes a source with prefix
/// length 0 the route's preferred source (RTA_PREFSRC) and reads a longer
/// prefix, a bare address included, as a source-specific route (RTA_SRC).
/// Empty when the route has none.
fn route_source(route: &GuestRoute, guest_addresses: &[IpAddr]) -> Result<String, RenderError> {
    let Some(text) = route.source.as_deref() else {
        return Ok(String::new());
    };
    let invalid = |reason: String| RenderError::InvalidRoute {
        destination: route.destination.to_string(),
        reason,
    };
    let source: IpAddr = text
        .parse()
        .map_err(|_| invalid(format!("source {text:?} is not an IP address")))?;
    if source.is_ipv4() != route.destination.is_ipv4() {
        return Err(invalid(format!(
            "source {source} is of another address family"
        )));
    }
    if !guest_addresses.contains(&source) {
        return Err(unsupported(format!(
            "the route to {} has source {source}, which is not an address the guest gets, \
             so the guest kernel would refuse the route",
            route.destination
        )));
    }
    Ok(format!("{source}/0"))
}

/// The kernel's `rtm_scope` for the description's (iproute2) scope name.
fn route_scope(route: &GuestRoute) -> Result<u32, RenderError> {
    let scope: u8 = match route.scope.as_ref() {
        "global" | "universe" => 0,
        "site" => 200,
        "link" => 253,
        "host" => 254,
        "nowhere" => 255,
        number => number.parse().map_err(|_| RenderError::InvalidRoute {
            destination: route.destination.to_string(),
            reason: format!("scope {number:?} is not a route scope"),
        })?,
    };
    Ok(u32::from(scope))
}

/// Only permanent entries with a link-layer address, as `NUD_PERMANENT`
/// with no flags; `device` is the pod interface's name. None for others.
fn arp_neighbor(neighbour: &Neighbour, nic: &Nic<'_>) -> Result<Option<ArpNeighbor>, RenderError> {
    if neighbour.state != "permanent" || neighbour.mac.is_empty() {
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
    // Routed: every next hop the guest has is the TAP, whatever the pod's
    // own neighbour says.
    let lladdr = match &nic.interface.l3 {
        Some(l3) => normalize_mac(&l3.router_mac)
            .ok_or_else(|| invalid("router MAC is not a MAC address"))?,
        None => lladdr,
    };
    Ok(Some(ArpNeighbor {
        to_ip_address: ip_address(ip, String::new()),
        device: nic.interface.name.clone(),
        lladdr,
        state: NUD_PERMANENT,
        flags: 0,
    }))
}

fn check_distinct_macs(nics: &[Nic<'_>]) -> Result<(), RenderError> {
    let mut seen = BTreeMap::new();
    for nic in nics {
        if let Some(first) = seen.insert(nic.mac.as_str(), nic.interface.name.as_str()) {
            return Err(unsupported(format!(
                "interfaces {first} and {} have the same guest MAC {}, and the agent finds \
                 links by hwAddr",
                nic.interface.name, nic.mac
            )));
        }
    }
    Ok(())
}

fn unsupported(reason: String) -> RenderError {
    RenderError::KataAgentUnsupported { reason }
}

#[cfg(test)]
#[path = "kata_agent_tests.rs"]
mod tests;
