use std::collections::BTreeMap;
use std::ffi::OsString;

use clap::Parser;

use super::parse;
use crate::doors::cli::args::{Cli, Command};

fn argv(words: &[&str]) -> Vec<OsString> {
    std::iter::once("podtap")
        .chain(words.iter().copied())
        .map(OsString::from)
        .collect()
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

/// Every word list built from `pieces` (each used at most once, in the
/// order given, up to `max` of them) after `command`.
fn combinations<'a>(command: &'a str, pieces: &[&[&'a str]], max: usize) -> Vec<Vec<&'a str>> {
    let mut out = vec![(vec![command], 0)];
    for piece in pieces {
        let grown: Vec<(Vec<&str>, usize)> = out
            .iter()
            .filter(|(_, used)| *used < max)
            .map(|(words, used)| {
                (
                    words.iter().chain(piece.iter()).copied().collect(),
                    used + 1,
                )
            })
            .collect();
        out.extend(grown);
    }
    out.into_iter().map(|(words, _)| words).collect()
}

/// The heart of it: whatever the quick path takes, clap parses to the same
/// value (in this process's environment, which both read).
fn same_as_clap(words: &[&str]) -> bool {
    let args = argv(words);
    let Some(quick) = parse(&args, |k| std::env::var_os(k)) else {
        return false;
    };
    let clap = Cli::try_parse_from(&args)
        .unwrap_or_else(|e| panic!("{words:?}: the quick path took what clap refuses: {e}"));
    assert_eq!(format!("{quick:?}"), format!("{clap:?}"), "{words:?}");
    true
}

#[test]
fn what_the_quick_path_takes_clap_parses_the_same() {
    let attach: &[&[&str]] = &[
        &["--netns", "/run/netns/p"],
        &["--id", "pod-1"],
        &["--mode", "bridge"],
        &["--mode=macvtap"],
        &["--queues", "4"],
        &["--queues", "007"],
        &["--no-vnet-hdr"],
        &["--tc-redirect", "bpf"],
        &["--tap-owner", "107:107"],
        &["--interfaces", "eth0,,net1"],
        &["--dns-from=/etc/resolv.conf"],
        &["--state-dir", "/tmp/s"],
        &["-o", "/tmp/out.json"],
        &["--log-format", "json"],
        &["--id", "again"],
        &["--queues", "+4"],
        &["--queues", "99999999999"],
        &["--mode", "TC"],
        &["--force"],
        &["--netns"],
    ];
    let detach: &[&[&str]] = &[
        &["--id", "pod-1"],
        &["--force"],
        &["--netns=/proc/1/ns/net"],
        &["--state-dir", "/tmp/s"],
        &["--log-format=text"],
        &["--force=true"],
        &["--mode", "tc"],
        &["-o", "x"],
        &["--id", "-x"],
        &["--id", ""],
    ];
    let mut taken = 0;
    for words in combinations("attach", attach, 5)
        .iter()
        .chain(&combinations("detach", detach, 5))
    {
        taken += usize::from(same_as_clap(words));
    }
    // The common forms are taken (not everything falls through to clap).
    assert!(taken > 100, "only {taken} command lines were taken");
}

#[test]
fn the_command_lines_runtimes_send_are_taken() {
    for words in [
        &["attach", "--netns", "/run/netns/p", "--id", "a"][..],
        &[
            "attach",
            "--netns=/proc/7/ns/net",
            "--id=a",
            "--mode",
            "tc",
            "-o",
            "/x",
        ],
        &["detach", "--id", "a"],
        &["detach", "--id", "a", "--netns", "/run/netns/p", "--force"],
    ] {
        assert!(parse(&argv(words), no_env).is_some(), "{words:?}");
    }
}

#[test]
fn anything_else_is_left_to_clap() {
    for words in [
        &["attach", "--help"][..],
        &["--version"],
        &[
            "--log-format",
            "json",
            "attach",
            "--netns",
            "/n",
            "--id",
            "a",
        ],
        &["attach", "--netns", "/n"],
        &["attach", "--netns", "/n", "--id", "a", "--id", "b"],
        &["attach", "--netns", "/n", "--id", "a", "--queues", "-1"],
        &["attach", "--netns", "/n", "--id", "a", "--mode", "ipvlan"],
        &["attach", "--netns", "/n", "--id", "a", "--tc-redirect", ""],
        &["attach", "--netns", "/n", "--id", "a", "extra"],
        &["attach", "--netns", "/n", "--id", "a", "--", "x"],
        &["attach", "--netns", "/n", "--id", "a", "-h"],
        &["detach", "--id", "a", "--force=yes"],
        &["detach", "--id", "a", "--no-vnet-hdr"],
        &["check", "--id", "a"],
        &["scan", "--netns", "/n"],
    ] {
        assert!(parse(&argv(words), no_env).is_none(), "{words:?}");
    }
}

#[test]
fn environment_defaults_are_read_as_clap_reads_them() {
    let env: BTreeMap<&str, &str> = [
        ("PODTAP_STATE_DIR", "/var/lib/p"),
        ("PODTAP_TC_REDIRECT", "auto"),
        ("PODTAP_LOG_FORMAT", "json"),
    ]
    .into();
    let lookup = |k: &str| env.get(k).map(OsString::from);
    let cli = parse(&argv(&["attach", "--netns", "/n", "--id", "a"]), lookup);
    let Some(Cli {
        log_format,
        command: Command::Attach(a),
    }) = cli
    else {
        panic!("not taken: {cli:?}");
    };
    assert_eq!(log_format, super::LogFormat::Json);
    assert_eq!(a.tc_redirect, "auto");
    assert_eq!(a.state.state_dir, std::path::PathBuf::from("/var/lib/p"));
    // A flag wins over its variable.
    let cli = parse(&argv(&["detach", "--id", "a", "--state-dir", "/s"]), lookup);
    assert!(
        matches!(cli, Some(Cli { command: Command::Detach(d), .. }) if d.state.state_dir == std::path::Path::new("/s"))
    );
    // A variable set but empty, or to a value clap would refuse: clap decides.
    for (k, v) in [
        ("PODTAP_STATE_DIR", ""),
        ("PODTAP_TC_REDIRECT", ""),
        ("PODTAP_TC_REDIRECT", "ebpf"),
        ("PODTAP_LOG_FORMAT", "JSON"),
    ] {
        let one = |name: &str| (name == k).then(|| OsString::from(v));
        let cli = parse(&argv(&["attach", "--netns", "/n", "--id", "a"]), one);
        assert!(cli.is_none(), "{k}={v:?}");
    }
}
