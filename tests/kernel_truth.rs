//! What the kernel tells podtap under a hostile neighbour: dumps taken
//! while another process churns the pod netns are consistent or retried
//! (issue 28). Root only.

mod churn;
mod common;

use std::collections::BTreeSet;

use churn::Churn;
use common::*;

/// `podtap scan` of a netns with 300 links, while a stranger adds and
/// deletes veth pairs there: the link dump spans many datagrams, the
/// kernel flags answers that a change interrupted (`NLM_F_DUMP_INTR`), and
/// podtap asks again. Shown: the flag was seen (podtap's debug log says
/// so), and every answer podtap used is consistent: all 300 fixed links,
/// and each churned veth with its peer (a pair is created and deleted in
/// one step, so a dump that shows one end without the other is torn).
#[test]
fn scans_under_link_churn_are_consistent_and_interrupted_dumps_are_retried() {
    if !root_or_skip("scans_under_link_churn") {
        return;
    }
    let ns = Netns::new("ptk");
    let mut fixed = String::new();
    for i in 0..150 {
        fixed.push_str(&format!("link add fx{i}a type veth peer name fx{i}b\n"));
    }
    ns.batch("ip", &fixed);
    let mut churn = Churn::start(&ns, 40, 1);
    let (mut seen_intr, mut scans, mut gave_up) = (0, 0, 0);
    while scans < 300 && (scans < 20 || seen_intr == 0) {
        scans += 1;
        let out = podtap_cmd(std::path::Path::new("/nonexistent"))
            .env("PODTAP_LOG", "debug")
            .args(["scan", "--netns", &ns.path_str()])
            .output()
            .expect("run podtap scan");
        let err = stderr(&out);
        seen_intr += err.matches("dump was interrupted by a change").count();
        if !out.status.success() {
            // Five interrupted answers in a row: a clear error, never a torn answer.
            assert!(
                err.contains("times in a row; gave up"),
                "scan failed otherwise: {err}"
            );
            assert_eq!(exit_code(&out), 10, "{err}");
            gave_up += 1;
            continue;
        }
        let desc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let names: BTreeSet<String> = desc["interfaces"]
            .as_array()
            .expect("interfaces")
            .iter()
            .filter_map(|i| i["name"].as_str().map(str::to_string))
            .collect();
        for i in 0..150 {
            for end in ["a", "b"] {
                assert!(
                    names.contains(&format!("fx{i}{end}")),
                    "scan {scans} lost fx{i}{end}"
                );
            }
        }
        for i in 0..40 {
            let (a, b) = (format!("fz{i}a"), format!("fz{i}b"));
            assert_eq!(
                names.contains(&a),
                names.contains(&b),
                "scan {scans} shows one end of the pair {a}/{b}: a torn dump"
            );
        }
    }
    let errors = churn.stop();
    eprintln!("{scans} scans, {seen_intr} interrupted dumps retried, {gave_up} gave up");
    assert!(
        seen_intr > 0,
        "no dump was ever interrupted in {scans} scans: the test did not test anything"
    );
    assert!(gave_up < scans, "every scan gave up");
    assert!(churn::stolen(&errors).is_empty(), "{errors}");
}
