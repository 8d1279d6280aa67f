//! The bound on what podtap reads of a pod's tables (`TABLE_ANSWER_LIMIT`,
//! `docs/security.md`). In a test binary of its own: building and checking a
//! 300 000-route pod leaves this process large, and the stdin tests of
//! `tests/untrusted_input.rs` measure a child's peak RSS, which on Linux
//! counts the parent's pages it was forked with.

use podtap_testkit::{snapshot, taps, Pod, TempDir};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A pod with more routes than podtap reads (300 000: the answer to the
/// route dump is over 16 MiB): scan and attach fail with one line naming
/// the dump and the bound (exit 10), and attach builds nothing.
#[test]
fn a_route_table_over_the_bound_is_refused_whole() {
    let test = "a_route_table_over_the_bound_is_refused_whole";
    if !podtap_testkit::net_tools_or_skip(test) {
        return;
    }
    let pod = Pod::new();
    pod.add_veth("eth0", "veth0", pod.net, false);
    let gateway = format!("198.18.{}.1", pod.net);
    let routes: String = (0..300_000u32)
        .map(|i| {
            let [_, a, b, c] = i.to_be_bytes();
            format!("route add 10.{a}.{b}.{c}/32 via {gateway}\n")
        })
        .collect();
    pod.pod.batch("ip", &routes);
    let state = TempDir::new();
    let before = snapshot(&pod.pod);
    let id = podtap_testkit::unique("bigroutes");
    let netns = pod.pod.path_str();
    for args in [
        &["scan", "--netns", &netns][..],
        &["attach", "--netns", &netns, "--id", &id][..],
    ] {
        let o = podtap_testkit::podtap_state(BIN, state.path(), args);
        assert_eq!(podtap_testkit::exit_code(&o), 10, "{}", args[0]);
        assert!(o.stdout.is_empty(), "{}: nothing printed", args[0]);
        let err = podtap_testkit::stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("the route dump holds more than 16 MiB, the most podtap reads of one"),
            "{err}"
        );
    }
    assert!(taps(&pod.pod).is_empty(), "no TAP");
    assert!(
        !state.path().join(format!("{id}.json")).exists(),
        "no checkpoint"
    );
    assert_eq!(snapshot(&pod.pod), before, "nothing built");
}
