//! The bound on what podtap reads of a pod's tables (`TABLE_ANSWER_LIMIT`,
//! `docs/security.md`). In a test binary of its own: building and checking a
//! 300 000-route pod leaves this process large, and the stdin tests of
//! `tests/untrusted_input.rs` measure a child's peak RSS, which on Linux
//! counts the parent's pages it was forked with.

use podtap_testkit::{snapshot, taps, Pod, TempDir};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A pod whose `eth0` has `count` host routes through its gateway in the
/// main table (one `ip -batch`).
fn pod_with_routes(count: u32) -> Pod {
    // DAD off: eth0's link-local address is never "tentative" in one
    // snapshot and settled in the next.
    let pod = Pod::without_dad();
    pod.add_veth("eth0", "veth0", pod.net, false);
    let gateway = format!("198.18.{}.1", pod.net);
    let routes: String = (0..count)
        .map(|i| {
            let [_, a, b, c] = i.to_be_bytes();
            format!("route add 10.{a}.{b}.{c}/32 via {gateway}\n")
        })
        .collect();
    pod.pod.batch("ip", &routes);
    pod
}

/// What a user sees of a scan or attach whose route dump is over `bound`:
/// exit 10, nothing on stdout, one line naming the dump and the bound.
fn assert_refused_over(o: &std::process::Output, command: &str, bound: &str) {
    let err = podtap_testkit::stderr(o);
    assert_eq!(podtap_testkit::exit_code(o), 10, "{command}: {err}");
    assert!(o.stdout.is_empty(), "{command}: nothing printed");
    assert_eq!(err.lines().count(), 1, "{err}");
    let line = format!("the route dump holds more than {bound}, the most podtap reads of one");
    assert!(err.contains(&line), "{err}");
}

/// A pod with more routes than podtap reads (300 000: the answer to the
/// route dump is over 16 MiB): scan and attach fail with one line naming
/// the dump and the bound (exit 10), and attach builds nothing.
#[test]
fn a_route_table_over_the_bound_is_refused_whole() {
    let test = "a_route_table_over_the_bound_is_refused_whole";
    if !podtap_testkit::net_tools_or_skip(test) {
        return;
    }
    let pod = pod_with_routes(300_000);
    let state = TempDir::new();
    let before = snapshot(&pod.pod);
    let id = podtap_testkit::unique("bigroutes");
    let netns = pod.pod.path_str();
    for args in [
        &["scan", "--netns", &netns][..],
        &["attach", "--netns", &netns, "--id", &id][..],
    ] {
        let o = podtap_testkit::podtap_state(BIN, state.path(), args);
        assert_refused_over(&o, args[0], "16 MiB");
    }
    assert!(taps(&pod.pod).is_empty(), "no TAP");
    assert!(
        !state.path().join(format!("{id}.json")).exists(),
        "no checkpoint"
    );
    assert_eq!(snapshot(&pod.pod), before, "nothing built");
}

/// `podtap` with `PODTAP_TABLE_LIMIT_MIB=mib` (the node admin's bound).
fn podtap_limited(state: &std::path::Path, mib: &str, args: &[&str]) -> std::process::Output {
    podtap_testkit::podtap_cmd(BIN, state)
        .env("PODTAP_TABLE_LIMIT_MIB", mib)
        .args(args)
        .output()
        .expect("run podtap")
}

/// The node admin's bound (`PODTAP_TABLE_LIMIT_MIB`): a pod whose route dump
/// is about 1.4 MiB is refused whole under 1 MiB and attached under 2; a
/// value that is not a whole number of MiB from 1 to 4096 is refused in one
/// line naming the variable (exit 13), before anything is read, except by
/// detach, which reads none of the pod's tables and must not fail.
#[test]
fn the_node_admin_sets_the_bound_and_a_bad_bound_stops_no_teardown() {
    let test = "the_node_admin_sets_the_bound_and_a_bad_bound_stops_no_teardown";
    if !podtap_testkit::net_tools_or_skip(test) {
        return;
    }
    let pod = pod_with_routes(24_000);
    let state = TempDir::new();
    let before = snapshot(&pod.pod);
    let id = podtap_testkit::unique("limited");
    let netns = pod.pod.path_str();
    let attach = ["attach", "--netns", &netns, "--id", &id];

    let o = podtap_limited(state.path(), "1", &attach);
    assert_refused_over(&o, "attach", "1 MiB");
    assert_eq!(snapshot(&pod.pod), before, "nothing built");

    for bad in ["0", "4097", "16M", "-1", "lots"] {
        let o = podtap_limited(state.path(), bad, &["scan", "--netns", &netns]);
        assert_eq!(podtap_testkit::exit_code(&o), 13, "{bad}");
        let err = podtap_testkit::stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("PODTAP_TABLE_LIMIT_MIB") && err.contains("from 1 to 4096"),
            "{err}"
        );
        assert!(o.stdout.is_empty(), "{bad}: nothing printed");
    }

    let o = podtap_limited(state.path(), "2", &attach);
    let desc = podtap_testkit::json_ok(&o);
    let described = desc["routes"].as_array().map_or(0, Vec::len);
    assert!(described > 24_000, "{described} routes described");
    assert_eq!(taps(&pod.pod).len(), 1, "one TAP");

    let o = podtap_limited(state.path(), "lots", &["detach", "--id", &id]);
    assert_eq!(
        podtap_testkit::exit_code(&o),
        0,
        "{}",
        podtap_testkit::stderr(&o)
    );
    assert_eq!(snapshot(&pod.pod), before, "detach undid it all");
}
