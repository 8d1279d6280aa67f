//! Property tests: every parser that reads outside input (CNI config and
//! prevResult, CNI_ARGS, OCI state and annotations, checkpoint files, door
//! arguments, `--dns-from` resolv.conf files) takes thousands of generated and mutated inputs without
//! panicking. (A hang would time the test run out.)

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::Value;

use crate::cmd::resolv_conf;
use crate::cni::{config, result};
use crate::nic_spec::parse_queues;
use crate::oci_hook;
use crate::pod_policy::PodPolicy;
use podtap::attach::TapOwner;
use podtap::model::Wiring;
use podtap::render::Format;
use podtap::state::{Checkpoint, SandboxId};
use podtap::MacAddr;

const CASES: u32 = 2000;

const CNI_CONF: &str = r#"{"cniVersion":"1.1.0","name":"net","type":"podtap","mode":"bridge","queues":2,
"tapOwner":1000,"stateDir":"/run/podtap","podPolicy":{"modes":["tc","bridge"],"maxQueues":8,"tapOwners":[1000]},"args":{"cni":{"podtap":{"mode":"tc"}}},
"runtimeConfig":{"podtap":{"queues":4}},"cni.dev/valid-attachments":[{"containerID":"c","ifname":"eth0"}],
"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","mac":"0e:00:00:00:00:01","sandbox":"/run/netns/p"}],
"ips":[{"address":"198.18.0.2/24","interface":0}],"routes":[{"dst":"0.0.0.0/0"}],"dns":{"nameservers":["198.18.0.1"]}}}"#;

const OCI_STATE: &str = r#"{"ociVersion":"1.0.2","id":"ctr-1","status":"creating","pid":4242,
"bundle":"/run/bundles/ctr-1","annotations":{"io.podtap.mode":"bridge","io.podtap.queues":"2",
"io.podtap.interfaces":"eth0,net1","io.podtap.tap-owner":"1000:1000","io.podtap.output":"podtap.json"}}"#;

const RESOLV_CONF: &str = "# cluster DNS\nnameserver 10.96.0.10\nnameserver fd00::53 ; v6\n\
domain pod.example\nsearch ns.svc.cluster.local svc.cluster.local\noptions ndots:5 timeout:2\n";

const CHECKPOINT: &str = r#"{"version":1,"id":"s1","netns":{"path":"/run/netns/p","inode":4026532545,"dev":4},
"netns_cookie":77,"phase":"complete","plan":{"id":"s1","mode":"tc","group":1885601793,"nics":[{"pod":{"ifindex":2,
"name":"eth0","mac":"0e:00:00:00:00:01","mtu":1500,"kind":"veth","txqlen":0},"tap":{"name":"tap_eth0","mtu":1500,
"queues":1,"vnet_hdr":true,"multi_queue":false},"wiring":"tc","tc":{"prio":49374,"create_pod_qdisc":true}}]},
"created":[{"name":"tap_eth0","ifindex":5,"kind":"tap"}]}"#;

/// `sample` with up to 8 byte-level edits (replace, insert, delete), kept UTF-8.
fn mutated(sample: &'static str) -> impl Strategy<Value = String> {
    prop::collection::vec((any::<usize>(), 0u8..3, any::<u8>()), 0..8).prop_map(move |edits| {
        let mut bytes = sample.as_bytes().to_vec();
        for (at, op, b) in edits {
            let at = at % (bytes.len() + 1);
            match op {
                0 if at < bytes.len() => bytes[at] = b,
                1 => bytes.insert(at, b),
                _ if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ => {}
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Arbitrary JSON values, a few levels deep, with the keys parsers look for.
fn json() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "cniVersion",
        "name",
        "mode",
        "queues",
        "tapOwner",
        "tapGroup",
        "vnetHdr",
        "stateDir",
        "prevResult",
        "interfaces",
        "ips",
        "routes",
        "mac",
        "sandbox",
        "interface",
        "args",
        "cni",
        "podtap",
        "runtimeConfig",
        "cni.dev/valid-attachments",
        "cni.dev/attachments",
        "containerID",
        "ifname",
        "id",
        "bundle",
        "annotations",
        "pid",
        "version",
        "plan",
        "nics",
        "netns",
        "phase",
        "created",
        "dns",
        "nameservers",
        "domain",
        "search",
        "options",
        "podPolicy",
        "modes",
        "maxQueues",
        "tapOwners",
        "tapGroups",
    ])
    .prop_map(str::to_string);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop_oneof![
            Just("0.3.1".to_string()),
            Just("1.0.0".to_string()),
            Just("1.1.0".to_string()),
            ".{0,12}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Everything the CNI door does with a config before it touches the kernel.
fn cni_pipeline(stdin: &str, cni_args: &str) {
    let _ = config::requested_version(stdin);
    let _ = config::parse_teardown(stdin);
    if let Ok(conf) = config::parse(stdin) {
        let _ = conf.valid_attachments();
        let _ = conf.attach_options("eth0", cni_args);
        let _ = conf.state_dir();
        if let Some(prev) = &conf.prev_result {
            let dns = result::dns(prev);
            if result::validate(prev).is_ok() {
                assert!(dns.is_ok(), "validate accepts only a readable dns");
                let _ = result::interfaces(prev);
                let _ = result::find(prev, "eth0", "/run/netns/p");
                for style in [
                    result::ResultTap::Listed,
                    result::ResultTap::Omitted,
                    result::ResultTap::TcRedirectTap,
                ] {
                    let entry = result::TapEntry {
                        tap_name: "tap_eth0",
                        tap_mac: Some("7e:00:00:00:00:07"),
                        guest_mac: Some("0e:00:00:00:00:01"),
                        sandbox: "/run/netns/p",
                        container_id: "c1",
                        pod_ifname: "eth0",
                        pod_mac_now: Some("06:00:00:00:00:01"),
                        vm_ips: vec![result::VmIp {
                            address: "198.18.0.2/24".into(),
                            gateway: None,
                        }],
                        style,
                    };
                    let _ = result::with_tap(prev, conf.cni_version, &entry);
                }
            }
        }
    }
}

fn oci_pipeline(text: &str) {
    if let Ok(state) = oci_hook::parse_state(text) {
        for policy in [PodPolicy::default(), allow_all()] {
            let _ = oci_hook::options(&state.annotations, &policy);
        }
    }
}

/// A policy that lets a pod ask for anything, so the parsers behind it run too.
fn allow_all() -> PodPolicy {
    PodPolicy {
        modes: vec![Wiring::Bridge, Wiring::Macvtap],
        max_queues: Some(256),
        tap_owners: (0..2000).collect(),
        tap_groups: (0..2000).collect(),
        tap_names: vec!["tap0".into(), "tap0_kata".into()],
        guest_macs: true,
        serve: true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn cni_config_mutations_never_panic(stdin in mutated(CNI_CONF), args in ".{0,40}") {
        cni_pipeline(&stdin, &args);
    }

    #[test]
    fn cni_config_shapes_never_panic(v in json()) {
        cni_pipeline(&v.to_string(), "");
        let mut conf = serde_json::json!({"cniVersion": "1.0.0", "name": "n", "type": "podtap"});
        conf["prevResult"] = v.clone();
        conf["runtimeConfig"] = serde_json::json!({ "podtap": v.clone() });
        conf["cni.dev/valid-attachments"] = v;
        cni_pipeline(&conf.to_string(), "PODTAP_MODE=bridge;PODTAP_QUEUES=3");
    }

    #[test]
    fn cni_args_never_panic(args in "([A-Z_]{0,14}=?[a-z0-9;=]{0,8}){0,6}") {
        cni_pipeline(r#"{"cniVersion":"1.0.0","name":"n"}"#, &args);
    }

    #[test]
    fn oci_state_mutations_never_panic(text in mutated(OCI_STATE)) {
        oci_pipeline(&text);
    }

    #[test]
    fn oci_annotations_never_panic(ann in prop::collection::btree_map(
        prop::sample::select(vec!["io.podtap.mode", "io.podtap.queues", "io.podtap.interfaces",
            "io.podtap.tap-owner", "io.podtap.output", "other"]).prop_map(str::to_string),
        ".{0,20}", 0..6)) {
        let _ = oci_hook::options(&ann, &allow_all());
        let state = serde_json::json!({"id": "c", "bundle": "/nonexistent-bundle", "annotations": ann});
        oci_pipeline(&state.to_string());
    }

    #[test]
    fn checkpoint_mutations_never_panic(text in mutated(CHECKPOINT)) {
        if let Ok(cp) = serde_json::from_str::<Checkpoint>(&text) {
            let _ = cp.is_netns((4, 4026532545), Some(77));
            let _ = serde_json::to_string(&cp);
        }
    }

    #[test]
    fn resolv_conf_mutations_never_panic(text in mutated(RESOLV_CONF), other in ".{0,80}") {
        for text in [text, other] {
            if let Ok(dns) = resolv_conf::parse(&text) {
                // What it records are plain addresses and whole words.
                for server in &dns.nameservers {
                    prop_assert!(server.parse::<std::net::IpAddr>().is_ok(), "{server:?}");
                }
                for word in dns.search.iter().chain(&dns.options).chain(&dns.domain) {
                    prop_assert!(!word.is_empty() && !word.contains(char::is_whitespace), "{word:?}");
                }
            }
        }
    }

    #[test]
    fn checkpoint_shapes_never_panic(v in json()) {
        let _ = serde_json::from_value::<Checkpoint>(v);
    }

    #[test]
    fn door_arguments_never_panic(s in ".{0,160}") {
        if let Ok(id) = SandboxId::new(s.clone()) {
            prop_assert!(!id.as_str().contains('/') && !id.as_str().contains(".."));
        }
        let _ = s.parse::<TapOwner>();
        let _ = parse_queues(&s);
        let _ = s.parse::<Wiring>();
        let _ = s.parse::<MacAddr>();
        let _ = s.parse::<Format>();
        let _ = BTreeMap::from([("io.podtap.queues".to_string(), s)]);
    }
}

#[test]
fn the_samples_are_valid_to_begin_with() {
    let conf = config::parse(CNI_CONF).unwrap();
    assert!(
        conf.attach_options("eth0", "").is_ok(),
        "the sample passes its own policy"
    );
    assert!(oci_hook::parse_state(OCI_STATE).is_ok());
    assert!(serde_json::from_str::<Checkpoint>(CHECKPOINT).is_ok());
    let prev = config::parse(CNI_CONF).unwrap().prev_result.unwrap();
    assert!(result::dns(&prev).unwrap().is_some());
    let dns = resolv_conf::parse(RESOLV_CONF).unwrap();
    assert_eq!(
        (dns.nameservers.len(), dns.search.len(), dns.options.len()),
        (2, 2, 2)
    );
}
