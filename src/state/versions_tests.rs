//! Checkpoint files of every version, read as the current one.

use super::test_id as id;
use super::*;

/// A version-1 checkpoint as podtap wrote it before version 2 (tc mode,
/// one NIC, a policy rule and its table, a permanent neighbour).
const V1_SAMPLE: &str = include_str!("testdata/checkpoint-v1.json");

#[test]
fn a_version_1_file_reads_for_teardown_and_as_the_current_version() {
    let (dir, sd) = scratch_state("cp5");
    let pod = id("pod-v1");
    fs::write(sd.file(&pod), V1_SAMPLE).unwrap();
    let old: serde_json::Value = serde_json::from_str(V1_SAMPLE).unwrap();
    assert_eq!(old["version"], 1);
    let routes = old["description"]["routes"].as_array().unwrap().len();
    assert!(routes > 0 && !old["description"]["rules"].as_array().unwrap().is_empty());

    let cp = sd.load_for_teardown(&pod).unwrap().unwrap();
    assert_eq!(
        (cp.version, cp.plan.nics.len(), cp.created.len()),
        (1, 1, 1)
    );
    assert_eq!(cp.plan.nics[0].tap.name, "tap_eth0");

    let cp = sd.load(&pod).unwrap().unwrap();
    assert_eq!((cp.version, cp.phase()), (VERSION, Phase::Complete));
    let desc = cp.description().unwrap();
    assert!(desc.routes.is_empty() && desc.rules.is_empty());
    assert_eq!(
        desc.neighbours.len(),
        old["description"]["neighbours"].as_array().unwrap().len()
    );
    assert_eq!(desc.attached().count(), 1);
    // The digest of the tables it held: what attach records now.
    let mut full: Description = serde_json::from_value(old["description"].clone()).unwrap();
    assert_eq!(cp.tables_digest, Some(full.take_tables().digest()));

    // Written back (by watch), it is a current file without the tables.
    sd.save(&cp).unwrap();
    let new: serde_json::Value = serde_json::from_slice(&fs::read(sd.file(&pod)).unwrap()).unwrap();
    assert_eq!(new["version"], VERSION);
    assert_eq!(new["description"]["routes"], serde_json::json!([]));
    // The plan is kept as it was read.
    assert_eq!(new["plan"], old["plan"]);
    assert_eq!(new["created"], old["created"]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_version_2_file_reads_as_version_3() {
    let (dir, sd) = scratch_state("cp7");
    let pod = id("pod-v1");
    let mut v2: serde_json::Value = serde_json::from_str(V1_SAMPLE).unwrap();
    v2["version"] = 2.into();
    fs::write(sd.file(&pod), v2.to_string()).unwrap();
    let cp = sd.load(&pod).unwrap().unwrap();
    assert_eq!(cp.version, VERSION);
    assert_eq!(cp.plan.tc_redirect, None);
    // An unknown later version is refused, never guessed at.
    v2["version"] = (VERSION + 1).into();
    fs::write(sd.file(&pod), v2.to_string()).unwrap();
    let err = sd.load_for_teardown(&pod).unwrap_err();
    assert!(matches!(
        err.primary(),
        crate::error::Error::CorruptState { .. }
    ));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_version_3_file_records_the_redirect_unless_auto() {
    // An earlier release wrote `bpf`, or nothing for `auto`: kept as read.
    let (dir, sd) = scratch_state("cp8");
    let pod = id("s");
    for (redirect, written) in [
        (Some("u32"), Some("u32")),
        (Some("bpf"), Some("bpf")),
        (None, None),
    ] {
        let mut cp = checkpoint::tests::sample("s");
        cp.plan.tc_redirect = redirect.map(String::from);
        sd.save(&cp).unwrap();
        let text: serde_json::Value =
            serde_json::from_slice(&fs::read(sd.file(&pod)).unwrap()).unwrap();
        assert_eq!(text["plan"]["tc_redirect"].as_str(), written);
        let read = sd.load(&pod).unwrap().unwrap().plan.tc_redirect;
        assert_eq!(read.as_deref(), redirect);
    }
    fs::remove_dir_all(&dir).unwrap();
}

/// A version-3 checkpoint of an earlier release whose tc NICs redirect
/// with its BPF program: read for teardown and as the current version,
/// and written back as it was (a rollback to that release reads it too).
/// (`tests/bpf_redirect_upgrade.rs` tears such an attachment down.)
#[test]
fn an_earlier_releases_bpf_redirect_checkpoint_reads() {
    let (dir, sd) = scratch_state("cp9");
    let pod = id("pod-v1");
    let mut v3: serde_json::Value = serde_json::from_str(V1_SAMPLE).unwrap();
    v3["version"] = 3.into();
    v3["plan"]["tc_redirect"] = "bpf".into();
    fs::write(sd.file(&pod), v3.to_string()).unwrap();
    let cp = sd.load_for_teardown(&pod).unwrap().unwrap();
    assert_eq!((cp.plan.nics.len(), cp.created.len()), (1, 1));
    assert!(cp.plan.nics[0].tc.is_some());
    let cp = sd.load(&pod).unwrap().unwrap();
    assert_eq!(cp.plan.tc_redirect.as_deref(), Some("bpf"));
    sd.save(&cp).unwrap();
    let text: serde_json::Value =
        serde_json::from_slice(&fs::read(sd.file(&pod)).unwrap()).unwrap();
    assert_eq!(text["plan"]["tc_redirect"], "bpf");
    fs::remove_dir_all(&dir).unwrap();
}
