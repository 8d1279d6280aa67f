//! podtap as a CNI plugin on bad input, alone in its chain (the bad-stdin tests need no root):
//! malformed or hostile stdin and environments get CNI error objects, VERSION
//! and a repeated DEL need nothing, and a corrupt checkpoint does not fail DEL.

use std::path::Path;

use podtap_testkit::{checkpoint_path, container_id, Chain, TempDir};
use serde_json::{json, Value};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A chain with no node netns and no other plugins: podtap alone, for bad input.
fn podtap_only(state: &Path) -> Chain {
    let conf = json!({
        "cniVersion": "1.0.0",
        "name": "bad-input",
        "plugins": [{ "type": "podtap", "stateDir": state }]
    });
    Chain::new(BIN, conf, None)
}

fn prev_result() -> Value {
    json!({
        "cniVersion": "1.0.0",
        "interfaces": [{ "name": "eth0", "mac": "02:00:00:00:00:01", "sandbox": "/run/netns/nonexistent-podtap" }],
        "ips": [{ "address": "10.1.0.2/24", "interface": 0 }]
    })
}

#[test]
fn bad_stdin_gives_cni_errors() {
    let state = TempDir::new();
    let chain = podtap_only(state.path());
    let cid = container_id(9);
    let add = Chain::env("ADD", &cid, "/run/netns/nonexistent-podtap", "eth0");
    // Invalid JSON: decoding failure.
    chain.exec("podtap", "{not json", &add).expect_err(6);
    chain.exec("podtap", "", &add).expect_err(6);
    // No cniVersion: invalid config; an unsupported one: incompatible version.
    chain
        .exec("podtap", r#"{"name":"n","type":"podtap"}"#, &add)
        .expect_err(7);
    let v = chain
        .exec(
            "podtap",
            r#"{"cniVersion":"0.2.0","name":"n","type":"podtap"}"#,
            &add,
        )
        .expect_err(1);
    assert_eq!(v["cniVersion"], "0.2.0");
    chain
        .exec(
            "podtap",
            r#"{"cniVersion":"2.0.0","name":"n","type":"podtap"}"#,
            &add,
        )
        .expect_err(1);
    // ADD without prevResult: podtap is chained.
    chain.podtap("1.0.0", json!({}), &add).expect_err(7);
    chain
        .podtap("1.0.0", json!({ "prevResult": "nope" }), &add)
        .expect_err(7);
    chain
        .podtap("1.0.0", json!({ "prevResult": { "interfaces": {} } }), &add)
        .expect_err(7);
    // Unknown mode, bad queues, wrong types.
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": prev_result(), "mode": "vepa" }),
            &add,
        )
        .expect_err(7);
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": prev_result(), "queues": 0 }),
            &add,
        )
        .expect_err(7);
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": prev_result(), "queues": "two" }),
            &add,
        )
        .expect_err(7);
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": prev_result(), "args": { "cni": { "podtap": { "mode": 3 } } } }),
            &add,
        )
        .expect_err(7);
    chain.podtap("1.0.0", json!({ "prevResult": prev_result(), "runtimeConfig": { "podtap": { "mode": "nope" } } }), &add).expect_err(7);
    // Environment: a missing variable, a bad CNI_ARGS, an id that cannot be a sandbox id, an unknown command.
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": prev_result() }),
            &[
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", &cid),
                ("CNI_IFNAME", "eth0"),
            ],
        )
        .expect_err(4);
    let mut bad_args = add.clone();
    bad_args.push(("CNI_ARGS", "PODTAP_QUEUES=lots"));
    chain
        .podtap("1.0.0", json!({ "prevResult": prev_result() }), &bad_args)
        .expect_err(4);
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": prev_result() }),
            &Chain::env("ADD", "../../etc", "/run/netns/x", "eth0"),
        )
        .expect_err(4);
    chain
        .podtap("1.0.0", json!({}), &[("CNI_COMMAND", "FROB")])
        .expect_err(4);
    // CHECK needs a prevResult too, and a version that defines it; so do
    // STATUS and GC.
    chain
        .podtap(
            "1.0.0",
            json!({}),
            &Chain::env("CHECK", &cid, "/run/netns/x", "eth0"),
        )
        .expect_err(7);
    chain
        .podtap(
            "0.3.1",
            json!({}),
            &Chain::env("CHECK", &cid, "/run/netns/x", "eth0"),
        )
        .expect_err(1);
    for command in ["STATUS", "GC"] {
        chain
            .podtap("1.0.0", json!({}), &[("CNI_COMMAND", command)])
            .expect_err(1);
    }
    chain
        .podtap(
            "1.1.0",
            json!({ "cni.dev/valid-attachments": [{ "containerID": 1 }] }),
            &[("CNI_COMMAND", "GC")],
        )
        .expect_err(7);
}

#[test]
fn version_and_idempotent_del_need_nothing() {
    let state = TempDir::new();
    let chain = podtap_only(state.path());
    // VERSION answers in the asked version when podtap speaks it (CRI-O's
    // ocicni asks each plugin at load for the conflist's version).
    let all = json!(["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]);
    for (stdin, answer) in [
        (r#"{"cniVersion":"0.3.1"}"#, "0.3.1"),
        (r#"{"cniVersion":"0.4.0"}"#, "0.4.0"),
        (r#"{"cniVersion":"1.0.0"}"#, "1.0.0"),
        (r#"{"cniVersion":"1.1.0"}"#, "1.1.0"),
        (r#"{"cniVersion":"0.2.0"}"#, "1.1.0"),
        ("", "1.1.0"),
    ] {
        let v = chain
            .exec("podtap", stdin, &[("CNI_COMMAND", "VERSION")])
            .expect_ok("VERSION");
        assert_eq!(v, json!({ "cniVersion": answer, "supportedVersions": all }));
    }
    // DEL for an attachment that never existed, in a netns that never existed: success, no output.
    let cid = container_id(10);
    let r = chain.podtap(
        "1.0.0",
        json!({}),
        &Chain::env("DEL", &cid, "/run/netns/nonexistent-podtap", "eth0"),
    );
    r.expect_ok("DEL unknown");
    assert!(r.out.stdout.is_empty(), "DEL prints nothing on success");
    chain
        .podtap("1.0.0", json!({}), &Chain::env("DEL", &cid, "", "eth0"))
        .expect_ok("DEL without netns");
    // An id that could never have been attached: nothing to do either.
    chain
        .podtap("1.0.0", json!({}), &Chain::env("DEL", "bad/id", "", "eth0"))
        .expect_ok("DEL bad id");
    // DEL never fails for a version or a prevResult: a failing DEL stops the
    // chain's reverse walk before host-local releases the pod's address.
    let del = Chain::env("DEL", &cid, "", "eth0");
    for (version, extra) in [
        ("0.2.0", json!({})),
        ("0.3.1", json!({ "prevResult": "stale" })),
        (
            "9.9.9",
            json!({ "prevResult": { "ips": 7 }, "mode": "vepa" }),
        ),
        (
            "1.1.0",
            json!({ "prevResult": { "cniVersion": "0.3.1", "interfaces": [{}] } }),
        ),
    ] {
        let r = chain.podtap(version, extra.clone(), &del);
        r.expect_ok(&format!("DEL at {version} with {extra}"));
    }
    // DEL still needs its identity variables.
    chain
        .podtap(
            "1.0.0",
            json!({}),
            &[("CNI_COMMAND", "DEL"), ("CNI_IFNAME", "eth0")],
        )
        .expect_err(4);
}

/// A corrupt checkpoint must not block pod deletion: DEL succeeds whether the
/// netns is gone or unknown, and the file is moved aside, never deleted.
#[test]
fn del_with_a_corrupt_checkpoint_and_no_netns_succeeds_and_keeps_the_file() {
    let state = TempDir::new();
    let chain = podtap_only(state.path());
    for (n, netns) in [(11, "/run/netns/nonexistent-podtap"), (12, "")] {
        let cid = container_id(n);
        let id = format!("{cid}-eth0");
        std::fs::create_dir_all(state.path()).unwrap();
        std::fs::write(
            checkpoint_path(state.path(), &id),
            b"{\"version\": 1, \"id\": ",
        )
        .unwrap();
        chain
            .podtap("1.0.0", json!({}), &Chain::env("DEL", &cid, netns, "eth0"))
            .expect_ok("DEL over a corrupt checkpoint");
        assert!(!checkpoint_path(state.path(), &id).exists());
        let kept: Vec<String> = std::fs::read_dir(state.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|f| f.starts_with(&format!("{id}.json.corrupt-")))
            .collect();
        assert_eq!(
            kept.len(),
            1,
            "the corrupt file is kept aside (netns {netns:?})"
        );
    }
}
