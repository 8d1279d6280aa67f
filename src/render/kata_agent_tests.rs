//! Unit tests of the Kata agent renderer against the protocol's field names.
use serde_json::{json, Value};

use super::*;
use crate::render::samples;

/// The sample pod without its multipath route, which Kata cannot carry.
fn pod() -> Description {
    let mut desc = samples::pod();
    samples::drop_multipath_routes(&mut desc);
    desc
}

fn rendered(desc: &Description) -> Value {
    let text = render_kata_agent(desc).unwrap();
    assert!(text.ends_with("}\n"), "{text}");
    serde_json::from_str(&text).unwrap()
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

fn refusal(desc: &Description) -> String {
    render_kata_agent(desc).unwrap_err().to_string()
}

#[test]
fn field_names_are_the_proto_names() {
    let out = rendered(&pod());
    assert_eq!(
        keys(&out),
        ["addARPNeighbors", "updateInterfaces", "updateRoutes"]
    );
    let request = &out["updateInterfaces"][0];
    assert_eq!(keys(request), ["interface"]);
    assert_eq!(
        keys(&request["interface"]),
        [
            "IPAddresses",
            "device",
            "devicePath",
            "hwAddr",
            "mtu",
            "name"
        ]
    );
    assert_eq!(
        keys(&request["interface"]["IPAddresses"][0]),
        ["address", "family", "mask"]
    );
    assert_eq!(keys(&out["updateRoutes"]), ["routes"]);
    assert_eq!(keys(&out["updateRoutes"]["routes"]), ["Routes"]);
    assert_eq!(
        keys(&out["updateRoutes"]["routes"]["Routes"][0]),
        ["dest", "device", "family", "flags", "gateway", "mtu", "scope", "source"]
    );
    assert_eq!(keys(&out["addARPNeighbors"]), ["neighbors"]);
    assert_eq!(keys(&out["addARPNeighbors"]["neighbors"]), ["ARPNeighbors"]);
    let neighbour = &out["addARPNeighbors"]["neighbors"]["ARPNeighbors"][0];
    assert_eq!(
        keys(neighbour),
        ["device", "flags", "lladdr", "state", "toIPAddress"]
    );
    assert_eq!(
        keys(&neighbour["toIPAddress"]),
        ["address", "family", "mask"]
    );
}

#[test]
fn fields_are_written_in_proto_field_number_order() {
    let text = render_kata_agent(&samples::single_ipv4()).unwrap();
    let order = [
        "\"updateInterfaces\"",
        "\"interface\"",
        "\"device\"",
        "\"name\"",
        "\"IPAddresses\"",
        "\"family\"",
        "\"address\"",
        "\"mask\"",
        "\"mtu\"",
        "\"hwAddr\"",
        "\"devicePath\"",
        "\"updateRoutes\"",
        "\"routes\"",
        "\"Routes\"",
        "\"dest\"",
        "\"gateway\"",
        "\"addARPNeighbors\"",
        "\"neighbors\"",
        "\"ARPNeighbors\"",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|key| text.find(key).unwrap_or_else(|| panic!("{key} in {text}")))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
}

#[test]
fn dual_stack_interface_without_link_local() {
    let out = rendered(&pod());
    assert_eq!(
        out["updateInterfaces"][0],
        json!({"interface": {
            "device": "eth0",
            "name": "eth0",
            "IPAddresses": [
                {"family": 0, "address": "10.244.1.5", "mask": "24"},
                {"family": 1, "address": "fd00:10:244:1::5", "mask": "64"}
            ],
            "mtu": 1400,
            "hwAddr": "0a:58:0a:f4:01:05",
            "devicePath": ""
        }})
    );
    assert_eq!(out["updateInterfaces"][1]["interface"]["name"], "net1");
    assert_eq!(
        out["updateInterfaces"][1]["interface"]["hwAddr"],
        "52:54:00:12:34:04"
    );
    assert_eq!(out["updateInterfaces"].as_array().unwrap().len(), 2);
    assert!(!render_kata_agent(&pod()).unwrap().contains("fe80"));
}

#[test]
fn default_routes_for_both_families() {
    let out = rendered(&pod());
    let routes = out["updateRoutes"]["routes"]["Routes"].as_array().unwrap();
    let defaults: Vec<&Value> = routes
        .iter()
        .filter(|r| r["dest"] == "0.0.0.0/0" || r["dest"] == "::/0")
        .collect();
    assert_eq!(
        defaults,
        [
            &json!({"dest": "0.0.0.0/0", "gateway": "169.254.1.1", "device": "eth0",
                    "source": "", "scope": 0, "family": 0, "flags": 4, "mtu": 0}),
            &json!({"dest": "::/0", "gateway": "fd00:10:244:1::1", "device": "eth0",
                    "source": "", "scope": 0, "family": 1, "flags": 0, "mtu": 0}),
        ]
    );
}

#[test]
fn every_guest_route_in_order_with_scope_and_mtu() {
    let out = rendered(&pod());
    let summary: Vec<String> = out["updateRoutes"]["routes"]["Routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} gw={} dev={} scope={} mtu={}",
                r["dest"].as_str().unwrap(),
                r["gateway"].as_str().unwrap(),
                r["device"].as_str().unwrap(),
                r["scope"],
                r["mtu"]
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            "10.96.0.0/12 gw= dev=eth0 scope=253 mtu=0",
            "0.0.0.0/0 gw=169.254.1.1 dev=eth0 scope=0 mtu=0",
            "10.100.0.0/16 gw=10.244.1.1 dev=eth0 scope=0 mtu=1300",
            "::/0 gw=fd00:10:244:1::1 dev=eth0 scope=0 mtu=0",
            "192.168.60.0/24 gw= dev=net1 scope=253 mtu=0",
        ]
    );
}

#[test]
fn permanent_neighbours_only() {
    let out = rendered(&pod());
    assert_eq!(
        out["addARPNeighbors"]["neighbors"]["ARPNeighbors"],
        json!([{
            "toIPAddress": {"family": 0, "address": "169.254.1.1", "mask": ""},
            "device": "eth0",
            "lladdr": "ee:ee:ee:ee:ee:ee",
            "state": 128,
            "flags": 0
        }])
    );
}

#[test]
fn no_neighbours_gives_an_empty_list() {
    let out = rendered(&samples::single_ipv4());
    assert_eq!(
        out["addARPNeighbors"],
        json!({"neighbors": {"ARPNeighbors": []}})
    );
}

#[test]
fn a_source_becomes_a_preferred_source_with_prefix_zero() {
    let mut desc = samples::single_ipv4();
    desc.routes[0].source = Some("10.0.2.15".into());
    let out = rendered(&desc);
    assert_eq!(
        out["updateRoutes"]["routes"]["Routes"][0]["source"],
        "10.0.2.15/0"
    );
}

#[test]
fn a_source_the_guest_does_not_get_is_refused() {
    let mut desc = samples::single_ipv4();
    desc.routes[0].source = Some("10.0.2.99".into());
    let message = refusal(&desc);
    assert!(
        message.contains("not an address the guest gets"),
        "{message}"
    );
}

#[test]
fn multipath_routes_are_refused() {
    let message = refusal(&samples::pod());
    assert!(
        message.starts_with("the Kata agent protocol cannot carry this network"),
        "{message}"
    );
    assert!(
        message.contains("the route to 172.16.0.0/16 is multipath"),
        "{message}"
    );
}

#[test]
fn two_routes_to_one_destination_are_refused() {
    let mut desc = pod();
    let mut second = desc.routes[0].clone();
    second.metric = 100;
    second.interface = Some("net1".into());
    second.gateway = Some("192.168.50.1".into());
    second.onlink = false;
    desc.routes.push(second);
    let message = refusal(&desc);
    assert!(
        message.contains("two routes to 0.0.0.0/0 (via eth0 and via net1)"),
        "{message}"
    );
}

#[test]
fn a_shared_guest_mac_is_refused() {
    let mut desc = pod();
    samples::interface_mut(&mut desc, "net1").guest_mac = Some("0a:58:0a:f4:01:05".into());
    let message = refusal(&desc);
    assert!(message.contains("the same guest MAC"), "{message}");
}

#[test]
fn an_unknown_scope_is_an_error() {
    let mut desc = samples::single_ipv4();
    desc.routes[0].scope = "galaxy".into();
    assert!(matches!(
        render_kata_agent(&desc),
        Err(RenderError::InvalidRoute { .. })
    ));
    desc.routes[0].scope = "17".into();
    assert_eq!(
        rendered(&desc)["updateRoutes"]["routes"]["Routes"][0]["scope"],
        17
    );
}
