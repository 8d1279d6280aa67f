//! Root robustness tests for attach/detach: SIGKILL at random instants of an
//! attach of 32 interfaces, 50 sandboxes attached and detached in parallel,
//! and two concurrent attaches of one id.
//!
//! Run: `cargo test --test attach_robustness -- --test-threads=2`
//! Set PODTAP_TEST_SEED to replay the kill points of a failed run.

use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use podtap_testkit::{
    attach_cmd, detach, json_ok, podtap_cmd, podtap_state, sh, snapshot, stderr, taps, Pod,
    StateDir,
};
use serde_json::Value;

use podtap_testkit::{exit_code as code, net_tools_or_skip as ready};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A pod with `n` veths `eth0..eth<n-1>`, made with one `ip -batch` per netns.
fn wide_pod(n: u32) -> Pod {
    let pod = Pod::without_dad();
    let p = &pod.pod.name;
    let mut peer_batch = String::new();
    let mut pod_batch = String::new();
    for i in 0..n {
        peer_batch.push_str(&format!(
            "link add vp{i} type veth peer name eth{i} netns {p}\nlink set vp{i} up\n"
        ));
        pod_batch.push_str(&format!(
            "link set eth{i} up\naddr add 198.18.{}.{}/24 dev eth{i}\n",
            pod.net,
            i + 2
        ));
    }
    pod.peer.batch("ip", &peer_batch);
    pod.pod.batch("ip", &pod_batch);
    // A CNI plugin's own clsact + filter on every 8th interface: podtap must sit beside it.
    let tc_batch: String = (0..n)
        .step_by(8)
        .map(|i| {
            format!(
                "qdisc add dev eth{i} clsact\nfilter add dev eth{i} ingress prio 1 u32 match u8 0 0 classid 1:1\n"
            )
        })
        .collect();
    pod.pod.batch("tc", &tc_batch);
    pod
}

fn checkpoints(state: &StateDir) -> Vec<String> {
    match std::fs::read_dir(&state.0) {
        Err(_) => Vec::new(),
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect(),
    }
}

/// xorshift64*: enough randomness for kill points, replayable from its seed.
struct Rng(u64);

impl Rng {
    fn from_env_or_clock() -> Self {
        let seed = std::env::var("PODTAP_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let now: u64 = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos()
                    .into();
                now ^ u64::from(std::process::id())
            });
        eprintln!("kill points: PODTAP_TEST_SEED={seed}");
        Rng(seed.max(1))
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap()
}

fn kill9(child: &mut Child) -> bool {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    let status = child.wait().expect("wait for podtap");
    status.signal() == Some(libc::SIGKILL)
}

/// Run an attach to completion, timing (from spawn) when its checkpoint first
/// appears and when it exits.
fn timed_attach(state: &StateDir, pod: &Pod, id: &str, mode: &str) -> (Option<u64>, u64, Output) {
    let file = state.0.join(format!("{id}.json"));
    let t = Instant::now();
    let mut child = attach_cmd(BIN, &state.0, pod, id, &["--mode", mode])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ck = None;
    while child.try_wait().unwrap().is_none() {
        if file.exists() {
            ck = Some(micros(t));
            break;
        }
        std::hint::spin_loop();
    }
    let out = child.wait_with_output().unwrap();
    (ck, micros(t), out)
}

#[test]
fn sigkill_at_random_points_of_a_32_interface_attach_then_detach_restores() {
    if !ready("sigkill_at_random_points_of_a_32_interface_attach_then_detach_restores") {
        return;
    }
    const NICS: u32 = 32;
    const KILLS: usize = 24;
    let pod = wide_pod(NICS);
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let id = podtap_testkit::unique("crash");
    let file = state.0.join(format!("{id}.json"));

    // Calibrate per mode: when the checkpoint appears and when the attach ends
    // (from spawn). Re-measured on every later full attach: load changes while tests run.
    let mut window = [(0u64, 0u64); 2];
    for (m, mode) in ["tc", "bridge"].into_iter().enumerate() {
        let (ck, end, out) = timed_attach(&state, &pod, &id, mode);
        let desc = json_ok(&out);
        let with_tap = desc["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["tap"].is_object())
            .count();
        assert_eq!(with_tap, NICS as usize);
        assert_eq!(taps(&pod.pod).len(), NICS as usize);
        window[m] = (ck.unwrap_or(0), end);
        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 0, "{}", stderr(&d));
        assert_eq!(
            snapshot(&pod.pod),
            before,
            "calibration run ({mode}) restores"
        );
    }
    eprintln!(
        "attach of {NICS} interfaces (checkpoint at, end) in us: tc {:?}, bridge {:?}",
        window[0], window[1]
    );

    let mut rng = Rng::from_env_or_clock();
    let (mut none, mut applying, mut complete) = (0, 0, 0);
    for k in 0..KILLS {
        let m = usize::from(k % 3 == 2);
        let mode = ["tc", "bridge"][m];
        let (ck, end) = window[m];
        let mut child = attach_cmd(BIN, &state.0, &pod, &id, &["--mode", mode])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // One kill in four: anywhere from spawn to 10% past the end (covers "before the
        // checkpoint" and "already done"). Otherwise: once the checkpoint exists, anywhere
        // in the rest of the measured attach, where the kernel objects are being made.
        let how = if k % 4 == 0 {
            let delay = rng.below(end + end / 10);
            std::thread::sleep(Duration::from_micros(delay));
            format!("{delay} us after spawn")
        } else {
            while !file.exists() && child.try_wait().unwrap().is_none() {
                std::hint::spin_loop();
            }
            let delay = rng.below(end.saturating_sub(ck));
            std::thread::sleep(Duration::from_micros(delay));
            format!("{delay} us after the checkpoint appeared")
        };
        let killed = kill9(&mut child);
        let phase = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["phase"].as_str().map(str::to_string));
        match phase.as_deref() {
            None => none += 1,
            Some("applying") => applying += 1,
            _ => complete += 1,
        }
        let what = format!("kill #{k} ({mode}) {how} (killed: {killed}, phase: {phase:?})");

        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 0, "{what}: detach: {}", stderr(&d));
        assert!(checkpoints(&state).is_empty(), "{what}: checkpoint removed");
        assert_eq!(
            snapshot(&pod.pod),
            before,
            "{what}: detach restores the original snapshot"
        );

        let (ck, end, again) = timed_attach(&state, &pod, &id, mode);
        assert_eq!(
            code(&again),
            0,
            "{what}: a following attach succeeds: {}",
            stderr(&again)
        );
        window[m] = ((window[m].0 + ck.unwrap_or(0)) / 2, (window[m].1 + end) / 2);
        assert_eq!(
            taps(&pod.pod).len(),
            NICS as usize,
            "{what}: following attach made every TAP"
        );
        let c = podtap_state(BIN, &state.0, &["check", "--id", &id]);
        assert_eq!(code(&c), 0, "{what}: check: {}", stderr(&c));
        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 0, "{what}: second detach: {}", stderr(&d));
        assert_eq!(snapshot(&pod.pod), before, "{what}: second detach restores");
    }
    eprintln!("kill points: {none} before the checkpoint, {applying} mid-attach, {complete} after it finished");
    assert!(
        applying >= KILLS / 3,
        "too few kills landed inside the attach ({applying}/{KILLS})"
    );
}

#[test]
fn fifty_sandboxes_attach_and_detach_in_parallel() {
    if !ready("fifty_sandboxes_attach_and_detach_in_parallel") {
        return;
    }
    const N: usize = 50;
    let pods: Vec<Pod> = (0..N)
        .map(|_| std::thread::spawn(Pod::stable_dual_stack))
        .map(|h| h.join().unwrap())
        .collect();
    let befores: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = pods.iter().map(|p| s.spawn(|| snapshot(&p.pod))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let state = StateDir::new();
    let ids: Vec<String> = (0..N).map(|_| podtap_testkit::unique("par")).collect();

    let t = Instant::now();
    let children: Vec<Child> = pods
        .iter()
        .zip(&ids)
        .map(|(p, id)| {
            attach_cmd(BIN, &state.0, p, id, &["--mode", "tc"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    eprintln!("{N} parallel attaches: {} ms", t.elapsed().as_millis());
    for ((out, pod), id) in outs.iter().zip(&pods).zip(&ids) {
        let desc = json_ok(out);
        assert_eq!(desc["attachment"]["id"], id.as_str());
        assert_eq!(taps(&pod.pod).len(), 1, "{id}: one TAP");
    }
    let rows = json_ok(&podtap_state(BIN, &state.0, &["list", "--json"]));
    assert_eq!(
        rows.as_array().unwrap().len(),
        N,
        "list shows every sandbox"
    );

    let t = Instant::now();
    let children: Vec<Child> = ids
        .iter()
        .map(|id| {
            podtap_cmd(BIN, &state.0)
                .args(["detach", "--id", id])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    eprintln!("{N} parallel detaches: {} ms", t.elapsed().as_millis());
    for (out, id) in outs.iter().zip(&ids) {
        assert_eq!(code(out), 0, "detach {id}: {}", stderr(out));
    }
    assert!(
        checkpoints(&state).is_empty(),
        "no checkpoints left: {:?}",
        checkpoints(&state)
    );
    std::thread::scope(|s| {
        for (pod, before) in pods.iter().zip(&befores) {
            s.spawn(move || {
                assert_eq!(taps(&pod.pod).len(), 0, "{}: no TAP left", pod.pod.name);
                assert_eq!(&snapshot(&pod.pod), before, "{}: restored", pod.pod.name);
            });
        }
    });
}

#[test]
fn two_concurrent_attaches_of_one_id_leave_one_attachment() {
    if !ready("two_concurrent_attaches_of_one_id_leave_one_attachment") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    for round in 0..5 {
        let id = podtap_testkit::unique("same");
        let a = attach_cmd(BIN, &state.0, &pod, &id, &["--mode", "tc"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let b = attach_cmd(BIN, &state.0, &pod, &id, &["--mode", "tc"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        json_ok(&a);
        json_ok(&b);
        assert_eq!(a.stdout, b.stdout, "round {round}: identical descriptions");
        assert_eq!(
            taps(&pod.pod).len(),
            1,
            "round {round}: exactly one set of TAPs"
        );
        let f = sh(&format!(
            "tc -n {} filter show dev eth0 ingress",
            pod.pod.name
        ));
        assert_eq!(
            f.matches("Egress Redirect").count() + f.matches(" podtap_redirect ").count(),
            1,
            "round {round}: one redirect filter:\n{f}"
        );
        let c = podtap_state(BIN, &state.0, &["check", "--id", &id]);
        assert_eq!(code(&c), 0, "round {round}: {}", stderr(&c));
        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 0, "round {round}: {}", stderr(&d));
        assert_eq!(snapshot(&pod.pod), before, "round {round}: restored");
    }
}

#[test]
fn an_attach_waits_for_the_netns_lock_however_the_netns_is_named() {
    if !ready("an_attach_waits_for_the_netns_lock_however_the_netns_is_named") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    // Another attach into this netns holds its lock: here a flock taken on
    // the netns through /proc/PID/ns/net of a process inside it, not through
    // the /run/netns path podtap is given.
    let mut inside = Command::new("ip")
        .args(["netns", "exec", &pod.pod.name, "sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let ns = std::fs::File::open(format!("/proc/{}/ns/net", inside.id())).unwrap();
    // SAFETY: flock on a file we keep open.
    assert_eq!(unsafe { libc::flock(ns.as_raw_fd(), libc::LOCK_EX) }, 0);
    let id = podtap_testkit::unique("wait");
    let mut a = attach_cmd(BIN, &state.0, &pod, &id, &["--mode", "tc"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(a.try_wait().unwrap().is_none(), "attach waits for the lock");
    assert!(taps(&pod.pod).is_empty(), "and builds nothing meanwhile");
    drop(ns);
    json_ok(&a.wait_with_output().unwrap());
    assert_eq!(taps(&pod.pod).len(), 1);
    let _ = inside.kill();
    let _ = inside.wait();
    assert_eq!(code(&detach(BIN, &state, &id)), 0);
    assert_eq!(snapshot(&pod.pod), before);
}

#[test]
fn sigkill_during_detach_then_detach_again_restores() {
    if !ready("sigkill_during_detach_then_detach_again_restores") {
        return;
    }
    const NICS: u32 = 32;
    const KILLS: usize = 8;
    let pod = wide_pod(NICS);
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let id = podtap_testkit::unique("dcrash");
    let detach_cmd = || {
        let mut c = podtap_cmd(BIN, &state.0);
        c.args(["detach", "--id", &id])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let mut full_us = Vec::new();
    for mode in ["tc", "bridge"] {
        json_ok(
            &attach_cmd(BIN, &state.0, &pod, &id, &["--mode", mode])
                .output()
                .unwrap(),
        );
        let t = Instant::now();
        assert!(detach_cmd().status().unwrap().success());
        full_us.push(micros(t));
        assert_eq!(snapshot(&pod.pod), before, "calibration ({mode})");
    }
    eprintln!(
        "full detach of {NICS} interfaces: tc {} us, bridge {} us",
        full_us[0], full_us[1]
    );
    let mut rng = Rng::from_env_or_clock();
    for k in 0..KILLS {
        let (mode, full) = if k % 2 == 1 {
            ("bridge", full_us[1])
        } else {
            ("tc", full_us[0])
        };
        json_ok(
            &attach_cmd(BIN, &state.0, &pod, &id, &["--mode", mode])
                .output()
                .unwrap(),
        );
        let delay = rng.below(full);
        let mut child = detach_cmd().spawn().unwrap();
        std::thread::sleep(Duration::from_micros(delay));
        let killed = kill9(&mut child);
        let what = format!("detach kill #{k} ({mode}) after {delay} us (killed: {killed})");
        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 0, "{what}: detach again: {}", stderr(&d));
        assert!(checkpoints(&state).is_empty(), "{what}: checkpoint removed");
        assert_eq!(snapshot(&pod.pod), before, "{what}: restored");
    }
}

#[test]
fn two_ids_racing_for_one_interface_leave_one_attachment() {
    if !ready("two_ids_racing_for_one_interface_leave_one_attachment") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    for round in 0..6 {
        let ids = [podtap_testkit::unique("ra"), podtap_testkit::unique("rb")];
        let children: Vec<_> = ids
            .iter()
            .map(|id| {
                attach_cmd(BIN, &state.0, &pod, id, &["--mode", "tc"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let codes: Vec<i32> = outs.iter().map(code).collect();
        let winners: Vec<usize> = (0..2).filter(|&i| codes[i] == 0).collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one attach wins: {codes:?}"
        );
        let loser = 1 - winners[0];
        assert_eq!(codes[loser], 13, "round {round}: {}", stderr(&outs[loser]));
        assert!(
            stderr(&outs[loser]).contains("eth0"),
            "round {round}: the refusal names the interface: {}",
            stderr(&outs[loser])
        );
        assert_eq!(taps(&pod.pod).len(), 1, "round {round}: one TAP");
        let c = podtap_state(BIN, &state.0, &["check", "--id", &ids[winners[0]]]);
        assert_eq!(code(&c), 0, "round {round}: winner intact: {}", stderr(&c));
        for id in &ids {
            let d = detach(BIN, &state, id);
            assert_eq!(code(&d), 0, "round {round}: {}", stderr(&d));
        }
        assert_eq!(snapshot(&pod.pod), before, "round {round}: restored");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&state.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(leftovers.is_empty(), "state dir left with {leftovers:?}");
}
