//! What the kernel tells podtap under a hostile neighbour: dumps taken
//! while another process churns the pod netns are consistent or retried.
//! Root only.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use podtap_testkit::churn::{self, Churn};
use podtap_testkit::*;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// Held by every test here: one waits for a freed nsfs inode number to
/// come back, and every new link takes /proc entries from the same inode
/// number allocator, so a test making links beside it would take the
/// number first.
static INODES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn inodes() -> std::sync::MutexGuard<'static, ()> {
    INODES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

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
    let _inodes = inodes();
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
        let out = podtap_cmd(BIN, std::path::Path::new("/nonexistent"))
            .env("PODTAP_LOG", "debug")
            .args(["scan", "--netns", &ns.path_str()])
            .output()
            .expect("run podtap scan");
        let err = stderr(&out);
        seen_intr += err.matches("dump was interrupted by a change").count();
        if !out.status.success() {
            // Every attempt interrupted: a clear error, never a torn answer.
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

fn inode_of(path: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map(|m| m.ino()).unwrap_or(0)
}

/// The pod netns dies and the kernel gives its nsfs inode number to a new
/// netns at the same path (the inode allocator hands out the lowest free
/// number, so a loop of delete + add repeats it; when another process on
/// the machine keeps taking the number, the checkpoint is given the
/// newcomer's and keeps the dead netns's cookie: the same state). The newcomer has the
/// recorded `(dev, inode)` and links named as podtap's were, but another
/// netns cookie: `check` and `exec` refuse it, and `detach` touches nothing
/// in it and drops the checkpoint.
#[test]
fn a_newer_netns_with_the_recorded_inode_is_refused_by_its_cookie() {
    if !root_or_skip("a_newer_netns_with_the_recorded_inode") {
        return;
    }
    let _inodes = inodes();
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("reuse");
    let desc = json_ok(&podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ));
    let tap = desc["interfaces"][1]["tap"]["name"]
        .as_str()
        .or_else(|| desc["interfaces"][0]["tap"]["name"].as_str())
        .expect("a TAP")
        .to_string();
    let cp: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.0.join(format!("{id}.json"))).expect("checkpoint"),
    )
    .expect("JSON");
    let recorded = cp["netns"]["inode"].as_u64().expect("inode");
    assert!(
        cp["netns_cookie"].as_u64().is_some(),
        "attach records the cookie"
    );
    let path = pod.pod.path_str();
    let mut reused = false;
    for _ in 0..300 {
        sh(&format!("ip netns del {}", pod.pod.name));
        std::thread::sleep(std::time::Duration::from_millis(10));
        sh(&format!("ip netns add {}", pod.pod.name));
        if inode_of(&path) == recorded {
            reused = true;
            break;
        }
    }
    if !reused {
        // Another process on the machine holds the freed number (every new
        // link or netns takes numbers from the same allocator). The state
        // reuse would make, made by hand: the checkpoint keeps the dead
        // netns's cookie and is given the newcomer's inode number.
        let now = inode_of(&path);
        eprintln!(
            "NOTE: inode {recorded} did not come back in 300 tries (now {now}); the checkpoint is given inode {now} and keeps the dead netns's cookie"
        );
        let file = state.0.join(format!("{id}.json"));
        let mut cp = cp.clone();
        cp["netns"]["inode"] = now.into();
        cp["description"]["netns"]["inode"] = now.into();
        std::fs::write(&file, serde_json::to_vec(&cp).expect("JSON")).expect("rewrite");
    }
    // The newcomer: links named as the pod's and podtap's were.
    pod.pod.ip("link add eth0 type veth peer name eth0p");
    pod.pod.ip(&format!("tuntap add dev {tap} mode tap"));
    let before = churn::link_names(&pod.pod);
    let check = podtap_state(BIN, &state.0, &["check", "--id", &id]);
    assert_eq!(exit_code(&check), 12, "{}", stderr(&check));
    let exec = podtap_state(
        BIN,
        &state.0,
        &["exec", "--id", &id, "--enter-netns", "--", "true"],
    );
    assert_eq!(exit_code(&exec), 12, "{}", stderr(&exec));
    assert!(stderr(&exec).contains("cookie"), "{}", stderr(&exec));
    let out = detach(BIN, &state, &id);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("different namespace"),
        "detach says why it left the netns alone: {}",
        stderr(&out)
    );
    assert_eq!(
        churn::link_names(&pod.pod),
        before,
        "detach touched the newcomer"
    );
    assert!(!state.0.join(format!("{id}.json")).exists());
}

/// A pod whose netns has `n` veths `eth0..eth<n-1>` (peers in the node
/// netns), each with an address, and a CNI plugin's clsact + filter on every
/// 8th: made with one `ip -batch` per netns.
fn wide_pod(n: u32) -> Pod {
    let pod = Pod::without_dad();
    let p = &pod.pod.name;
    let (mut peer, mut inside, mut tc) = (String::new(), String::new(), String::new());
    for i in 0..n {
        peer.push_str(&format!(
            "link add vp{i} type veth peer name eth{i} netns {p}\nlink set vp{i} up\n"
        ));
        inside.push_str(&format!(
            "link set eth{i} up\naddr add 198.18.{}.{}/24 dev eth{i}\n",
            pod.net,
            i + 2
        ));
        if i % 8 == 0 {
            tc.push_str(&format!(
                "qdisc add dev eth{i} clsact\nfilter add dev eth{i} ingress prio 1 u32 match u8 0 0 classid 1:1\n"
            ));
        }
    }
    pod.peer.batch("ip", &peer);
    pod.pod.batch("ip", &inside);
    pod.pod.batch("tc", &tc);
    pod
}

/// Remove what a stopped churn left (its veth pairs, its addresses).
fn clear_churn(ns: &Netns) {
    for name in churn::link_names(ns) {
        if name.starts_with("fz") && name.ends_with('a') && name != "fzaddr" {
            let _ = sh_ok(&format!("ip -n {} link del {name}", ns.name));
        }
    }
    ns.ip("addr flush dev fzaddr");
}

/// One attach + detach of every interface of `pod` (tc mode) while its
/// netns churns: both succeed, and nothing podtap made is left.
fn attach_detach(state: &StateDir, pod: &Pod, n: u32, round: u32) {
    let id = format!("churn{}x{round}", pod.net);
    let names: Vec<String> = (0..n).map(|i| format!("eth{i}")).collect();
    let interfaces = names.join(",");
    let out = attach(
        BIN,
        &state.0,
        pod,
        &id,
        &["--mode", "tc", "--interfaces", &interfaces],
    );
    let desc = json_ok(&out);
    let attached = desc["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter(|i| !i["tap"].is_null())
        .count();
    assert_eq!(attached, n as usize, "round {round}: every NIC attached");
    let out = detach(BIN, state, &id);
    assert!(out.status.success(), "round {round}: {}", stderr(&out));
    let left: Vec<String> = taps(&pod.pod);
    assert!(left.is_empty(), "round {round}: TAPs left: {left:?}");
}

/// The churn: a 32-NIC and a 64-NIC pod are attached and detached
/// (tc mode, side by side) round after round while a stranger creates and
/// deletes veth pairs and addresses in each pod netns as fast as `ip
/// -batch` goes. After every round nothing podtap made is left; after the
/// last, each netns is exactly as before (once the churn's own objects are
/// cleared) and the churn never found one of its objects gone.
///
/// Rounds: `PODTAP_CHURN_ROUNDS`, default 50 (about 10 s
/// here: a round of both pods takes about 0.2 s; each churn makes about
/// 200 changes a second).
#[test]
fn attach_and_detach_under_foreign_churn_leave_nothing_and_touch_nothing_foreign() {
    if !root_or_skip("attach_and_detach_under_foreign_churn") {
        return;
    }
    let rounds: u32 = std::env::var("PODTAP_CHURN_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(50);
    let _inodes = inodes();
    let (small, big) = (wide_pod(32), wide_pod(64));
    let state = StateDir::new();
    let mut churns = Vec::new();
    let mut before = Vec::new();
    for (net, pod) in [(10, &small), (11, &big)] {
        churn::prepare(&pod.pod);
        before.push(snapshot(&pod.pod));
        churns.push(Churn::start(&pod.pod, 40, net));
    }
    let started = std::time::Instant::now();
    for round in 0..rounds {
        std::thread::scope(|s| {
            let a = s.spawn(|| attach_detach(&state, &small, 32, round));
            attach_detach(&state, &big, 64, round);
            a.join().expect("the 32-NIC round");
        });
    }
    eprintln!(
        "{rounds} rounds of a 32- and a 64-NIC attach+detach under churn in {:?}",
        started.elapsed()
    );
    for (k, pod) in [&small, &big].into_iter().enumerate() {
        let errors = churns[k].stop();
        assert!(
            churn::stolen(&errors).is_empty(),
            "podtap removed a foreign object: {errors}"
        );
        clear_churn(&pod.pod);
        assert_eq!(
            snapshot(&pod.pod),
            before[k],
            "the pod netns is not as it was"
        );
    }
}

/// Discovery trusts only root-owned holders: once the pod netns's path is
/// gone and only a process of another user holds it (it could hand over
/// any netns it can reach), detach finds nothing, touches nothing and drops
/// the checkpoint; the same netns held by a root process is found and
/// cleaned (`teardown_adversarial` covers that case).
#[test]
fn a_netns_held_only_by_another_users_process_is_not_trusted() {
    if !root_or_skip("a_netns_held_only_by_another_users_process") {
        return;
    }
    if !tool_or_skip("a_netns_held_only_by_another_users_process", "setpriv") {
        return;
    }
    let _inodes = inodes();
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("nobody");
    json_ok(&podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ));
    let mut holder = Command::new("ip")
        .args(["netns", "exec", &pod.pod.name])
        .args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .args(["sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .expect("start a process of another user in the pod netns");
    // Its pid: the `sleep` that `ip netns exec` became (setpriv execs too).
    let pid = holder.id();
    assert!(
        poll(Duration::from_secs(5), Duration::from_millis(20), || {
            sh(&format!("stat -c %u /proc/{pid}")).trim() == "65534"
        }),
        "the holder runs as uid 65534"
    );
    sh(&format!("ip netns del {}", pod.pod.name));
    let out = detach(BIN, &state, &id);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("is gone"), "{}", stderr(&out));
    // Its TAP is still there: podtap did not act through the stranger.
    let links = sh(&format!("nsenter -t {pid} -n ip -o link show type tun"));
    assert!(
        !links.trim().is_empty(),
        "podtap acted through a non-root holder"
    );
    let _ = holder.kill();
    let _ = holder.wait();
}
