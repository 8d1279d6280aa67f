//! `podtap scan` output and the shipped schema, docs/description.schema.json (draft 2020-12).

use podtap_testkit::scan::{assert_valid, scan_path, schema, schema_errors};
use podtap_testkit::Pod;
use serde_json::json;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

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
    if !podtap_testkit::root_or_skip("schema_is_draft_2020_12_and_covers_attach_fields") {
        return;
    }
    let pod = Pod::dual_stack();
    let (scanned, _) = scan_path(BIN, &pod.pod.path_str());

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
        served: true,
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
