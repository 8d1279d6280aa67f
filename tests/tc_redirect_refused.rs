//! The BPF redirect on a node that refuses the `bpf(2)` system call, as a
//! container's seccomp profile does (Docker's and containerd's default
//! profiles deny it to a container without CAP_SYS_ADMIN or CAP_BPF): `--tc-redirect
//! auto` wires u32 + mirred instead and says so in one warning; `bpf`
//! fails with one line and leaves nothing built. The refusal is real: the
//! podtap process runs under a seccomp filter that makes `bpf(2)` fail with
//! EPERM, the kernel's answer to a denied call.
//!
//! Run: `cargo test --test tc_redirect_refused`

use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use podtap_testkit::wiring::{pod, redirect_kind, verify_tap};
use podtap_testkit::{check, detach, json_ok, podtap_cmd, snapshot, stderr, taps, Pod, StateDir};
use podtap_testkit::{exit_code as code, net_tools_or_skip as ready};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A classic BPF seccomp program: `bpf(2)` fails with EPERM, every other
/// system call is allowed (and so is every call of another architecture's
/// numbering, which this process never makes).
fn deny_bpf_filter() -> Vec<libc::sock_filter> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: u16::try_from(code).expect("a filter op code"),
        jt: 0,
        jf: 0,
        k,
    };
    let nr = u32::try_from(libc::SYS_bpf).expect("a syscall number");
    vec![
        // A = seccomp_data.nr (offset 0)
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        // if A == bpf: next, else skip one
        libc::sock_filter {
            code: u16::try_from(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K).expect("op"),
            jt: 0,
            jf: 1,
            k: nr,
        },
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | u32::try_from(libc::EPERM).expect("errno"),
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// `podtap attach --tc-redirect REDIRECT` of `pod` under the filter.
fn attach_without_bpf(state: &StateDir, pod: &Pod, id: &str, redirect: &str) -> Output {
    let mut filter = deny_bpf_filter();
    let mut cmd: Command = podtap_cmd(BIN, &state.0);
    cmd.args(["attach", "--netns", &pod.pod.path_str(), "--id", id])
        .args(["--tc-redirect", redirect]);
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes two prctl(2) calls on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: u16::try_from(filter.len()).expect("a short program"),
                filter: filter.as_mut_ptr(),
            };
            // Required to install a filter without CAP_SYS_ADMIN; harmless as root.
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("run podtap under the seccomp filter")
}

#[test]
fn without_the_bpf_syscall_auto_wires_u32_and_bpf_builds_nothing() {
    if !ready("without_the_bpf_syscall_auto_wires_u32_and_bpf_builds_nothing") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);

    let id = podtap_testkit::unique("nobpf");
    let out = attach_without_bpf(&state, &pod, &id, "auto");
    let desc = json_ok(&out);
    let err = stderr(&out);
    let warned: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("the BPF program did not load"))
        .collect();
    assert_eq!(warned.len(), 1, "one warning: {err}");
    assert!(warned[0].contains("using u32 + mirred"), "{}", warned[0]);
    let tap = verify_tap(&pod, &desc, "eth0");
    for (from, to) in [("eth0", tap.as_str()), (tap.as_str(), "eth0")] {
        assert_eq!(
            redirect_kind(&pod.pod, from, to),
            Some("u32"),
            "{from} -> {to}"
        );
    }
    let o = check(BIN, &state, &id);
    assert_eq!(code(&o), 0, "check: {}", stderr(&o));
    let o = detach(BIN, &state, &id);
    assert_eq!(code(&o), 0, "detach: {}", stderr(&o));
    assert_eq!(snapshot(&pod.pod), before, "detach restored the pod");

    let id = podtap_testkit::unique("nobpf");
    let out = attach_without_bpf(&state, &pod, &id, "bpf");
    assert_eq!(
        code(&out),
        6,
        "EPERM is a permission failure: {}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty(), "nothing printed");
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.starts_with("podtap: error:"))
        .unwrap_or_else(|| panic!("an error line: {err}"));
    assert!(line.contains("BPF redirect program"), "{line}");
    assert!(
        taps(&pod.pod).is_empty(),
        "the TAP made before the load is gone"
    );
    assert!(
        !state.0.join(format!("{id}.json")).exists(),
        "no checkpoint is left"
    );
    assert_eq!(snapshot(&pod.pod), before, "nothing built");
}
