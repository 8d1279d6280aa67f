//! What a runtime that embeds podtap, or takes tc-redirect-tap's place,
//! asks of it (root; the VM test also QEMU): TAP fds opened through the
//! library from the host's netns for a VMM there (`examples/attach_qemu.rs`,
//! two queues), TAP names, guest MACs, queue counts and owners chosen per
//! NIC, clashes refused whole, and tc-redirect-tap's `CNI_ARGS`.

use std::process::Command;

use serde_json::{json, Value};

use podtap_testkit::vm::{assert_line, boot_command, guest, nic_line, reach_in, vm_prerequisites};
use podtap_testkit::{
    iface, podtap_cmd, podtap_ok, root_or_skip, settled_snapshot, sh_ok, stderr, tool_or_skip,
    Chain, Pod, TempDir,
};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// `examples/<name>`, as `cargo build --examples` leaves it beside the test
/// binaries (tests/run.sh builds it first: `cargo test` builds an example
/// only as a test harness, under a hashed name).
fn example(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary");
    // target/<profile>/deps/<test> -> target/<profile>/examples/<name>
    let path = exe
        .ancestors()
        .nth(2)
        .expect("target/<profile>")
        .join("examples")
        .join(name);
    assert!(
        path.is_file(),
        "no {}: build it first with cargo build --examples",
        path.display()
    );
    path.display().to_string()
}

/// `eth0` (with default routes) and `net1`, both dual-stack veths.
fn two_nic_pod() -> Pod {
    let pod = Pod::stable_dual_stack();
    pod.add_veth("net1", "veth1", pod.net + 1, false);
    pod
}

fn mac_of_link(pod: &Pod, name: &str) -> String {
    let link = pod.pod.ip_json(&format!("link show {name}"));
    link[0]["address"].as_str().expect("address").to_string()
}

#[test]
fn a_vmm_in_the_host_netns_boots_on_fds_the_library_opened() {
    let test = "a_vmm_in_the_host_netns_boots_on_fds_the_library_opened";
    if !vm_prerequisites(test) {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let n = pod.net;
    let before = settled_snapshot(&pod.pod);
    let mac = mac_of_link(&pod, "eth0");
    let (kernel, initrd) = guest();
    let mut cmd = Command::new("timeout");
    cmd.args([
        "150",
        &example("attach_qemu"),
        &pod.pod.path_str(),
        kernel,
        initrd,
    ])
    .env(
        "GUEST_APPEND",
        format!("podtap.ping=198.18.{n}.1,2001:db8:{n:x}::1 podtap.hold=25"),
    );
    let console = boot_command(cmd, "attach_qemu", |_| {
        // Reached back from the pod's network, both families.
        reach_in(&pod.peer, &format!("198.18.{n}.2"), &mac, 2);
        reach_in(&pod.peer, &format!("2001:db8:{n:x}::2"), &mac, 2);
    });
    assert_line(&console, &format!("PODTAP-PING OK 198.18.{n}.1"));
    assert_line(&console, &format!("PODTAP-PING OK 2001:db8:{n:x}::1"));
    // Two queues, as the example asked, on the pod interface's MAC.
    let nic = nic_line(&console, &mac);
    assert!(nic.ends_with("queues=2"), "{nic}");
    assert_eq!(settled_snapshot(&pod.pod), before, "the example detached");
}

#[test]
fn each_nic_gets_the_name_mac_queues_and_owner_the_caller_chose() {
    let test = "each_nic_gets_the_name_mac_queues_and_owner_the_caller_chose";
    if !root_or_skip(test) || !tool_or_skip(test, "ip") {
        return;
    }
    let pod = two_nic_pod();
    let state = TempDir::new();
    let before = settled_snapshot(&pod.pod);
    let netns = pod.pod.path_str();
    let desc: Value = serde_json::from_str(&podtap_ok(
        BIN,
        state.path(),
        &[
            "attach",
            "--netns",
            &netns,
            "--id",
            "chosen",
            "--nic",
            "eth0:tap=tap0,queues=2",
            "--nic",
            "net1:tap=tap0_kata,mac=02:00:5e:00:53:21,owner=4242:4243",
        ],
    ))
    .expect("attach prints JSON");
    // KubeVirt's tap binding wants tap0; Istio's Kata mode tap0_kata.
    let eth0 = iface(&desc, "eth0");
    assert_eq!(eth0["tap"]["name"], "tap0");
    assert_eq!(
        (
            eth0["tap"]["queues"].clone(),
            eth0["tap"]["multi_queue"].clone()
        ),
        (json!(2), json!(true))
    );
    assert_eq!(eth0["guest_mac"], json!(mac_of_link(&pod, "eth0")));
    let net1 = iface(&desc, "net1");
    assert_eq!(net1["tap"]["name"], "tap0_kata");
    assert_eq!(
        (
            net1["tap"]["queues"].clone(),
            net1["tap"]["multi_queue"].clone()
        ),
        (json!(1), json!(false))
    );
    assert_eq!(net1["guest_mac"], "02:00:5e:00:53:21");
    assert_eq!(
        (net1["tap"]["owner"].clone(), net1["tap"]["group"].clone()),
        (json!(4242), json!(4243))
    );
    // The kernel's own view of the TAPs.
    let kata = pod.pod.ip_json("-d link show tap0_kata");
    let info = &kata[0]["linkinfo"]["info_data"];
    assert_eq!(
        (info["user"].clone(), info["group"].clone()),
        (json!(4242), json!(4243)),
        "{kata}"
    );
    assert_eq!(info["multi_queue"], false, "{kata}");
    let tap0 = pod.pod.ip_json("-d link show tap0");
    assert_eq!(
        tap0[0]["linkinfo"]["info_data"]["multi_queue"], true,
        "{tap0}"
    );
    podtap_ok(BIN, state.path(), &["check", "--id", "chosen"]);
    podtap_ok(BIN, state.path(), &["detach", "--id", "chosen"]);
    assert_eq!(
        settled_snapshot(&pod.pod),
        before,
        "detach restored the pod"
    );
}

#[test]
fn a_clash_among_the_choices_is_one_error_and_nothing_built() {
    let test = "a_clash_among_the_choices_is_one_error_and_nothing_built";
    if !root_or_skip(test) || !tool_or_skip(test, "ip") {
        return;
    }
    let pod = two_nic_pod();
    let state = TempDir::new();
    let before = settled_snapshot(&pod.pod);
    let net1_mac = mac_of_link(&pod, "net1");
    for (nics, says) in [
        (
            vec!["eth0:tap=net1".to_string()],
            "a link of the netns already has it",
        ),
        (
            vec!["eth0:tap=tap_sixteen_byte".to_string()],
            "longer than 15 bytes",
        ),
        (
            vec!["eth0:tap=tap0".to_string(), "net1:tap=tap0".to_string()],
            "asked for another NIC too",
        ),
        (
            vec![
                "eth0:mac=02:00:5e:00:53:01".to_string(),
                "net1:mac=02:00:5e:00:53:01".to_string(),
            ],
            "another NIC has it",
        ),
        (
            vec![format!("eth0:mac={net1_mac}")],
            "keeps it as its guest MAC",
        ),
        (
            vec!["eth0:mac=01:00:5e:00:00:01".to_string()],
            "not a unicast address",
        ),
        (vec!["eth9:tap=tap9".to_string()], "eth9: not found"),
    ] {
        let mut cmd = podtap_cmd(BIN, state.path());
        cmd.args(["attach", "--netns", &pod.pod.path_str(), "--id", "clash"]);
        for nic in &nics {
            cmd.args(["--nic", nic]);
        }
        let out = cmd.output().expect("run podtap");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(13), "{nics:?}: {err}");
        assert!(out.stdout.is_empty(), "{nics:?}");
        assert_eq!(err.lines().count(), 1, "{nics:?}: {err}");
        assert!(
            err.starts_with("podtap: error: ") && err.contains(says),
            "{nics:?}: {err}"
        );
        assert_eq!(
            settled_snapshot(&pod.pod),
            before,
            "{nics:?}: nothing built"
        );
        let left = std::fs::read_dir(state.path())
            .map(Iterator::count)
            .unwrap_or(0);
        assert_eq!(left, 0, "{nics:?}: no checkpoint");
    }
}

/// A process of `uid` opens the TAP `name` in `pod` as a jailed VMM would
/// (TUNSETIFF, one queue, vnet_hdr): whether the kernel lets it. As
/// Firecracker's jailer does, it gets a `/dev/net/tun` node of its own
/// that anyone may open (in a mount namespace of its own: the host's node
/// is left alone); the TAP's owner is then what decides.
fn opens_as(pod: &Pod, uid: u32, name: &str) -> bool {
    let dir = TempDir::new();
    let script = dir.path().join("open_tap.py");
    std::fs::write(
        &script,
        format!(
            "import fcntl, os, struct\n\
             fd = os.open('/dev/net/tun', os.O_RDWR)\n\
             fcntl.ioctl(fd, 0x400454ca, struct.pack('16sH', b'{name}', 0x0002 | 0x1000 | 0x4000))\n"
        ),
    )
    .expect("write the script");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(dir.path(), mode).expect("chmod");
    let jail = "mount -t tmpfs none /dev/net && mknod -m 0666 /dev/net/tun c 10 200";
    sh_ok(&format!(
        "ip netns exec {} unshare --mount --propagation private sh -c '{jail} && \
         exec setpriv --reuid {uid} --regid {uid} --clear-groups /usr/bin/python3 {}'",
        pod.pod.name,
        script.display()
    ))
}

#[test]
fn tc_redirect_taps_cni_args_name_the_tap_and_let_its_jailed_user_open_it() {
    let test = "tc_redirect_taps_cni_args_name_the_tap_and_let_its_jailed_user_open_it";
    if !root_or_skip(test) || !tool_or_skip(test, "setpriv") || !tool_or_skip(test, "python3") {
        return;
    }
    let pod = Pod::dual_stack();
    let state = TempDir::new();
    let netns = pod.pod.path_str();
    let before = settled_snapshot(&pod.pod);
    let prev = json!({ "prevResult": { "cniVersion": "1.0.0",
        "interfaces": [{ "name": "eth0", "sandbox": netns }],
        "ips": [{ "address": format!("198.18.{}.2/24", pod.net), "interface": 0 }] } });
    let conf = json!({ "cniVersion": "1.0.0", "name": "fc",
                       "plugins": [{ "type": "podtap", "stateDir": state.path() }] });
    let chain = Chain::new(BIN, conf, None);
    let cid = podtap_testkit::container_id(51);
    // What firecracker-containerd sets for its jailer's uid and gid.
    let mut env = Chain::env("ADD", &cid, &netns, "eth0");
    env.push((
        "CNI_ARGS",
        "IgnoreUnknown=true;TC_REDIRECT_TAP_NAME=tap0;TC_REDIRECT_TAP_UID=4242;TC_REDIRECT_TAP_GID=4242",
    ));
    chain.podtap("1.0.0", prev.clone(), &env).expect_ok("ADD");
    assert!(
        opens_as(&pod, 4242, "tap0"),
        "the jailer's uid opens its TAP"
    );
    assert!(!opens_as(&pod, 4243, "tap0"), "another uid does not");
    let del = Chain::env("DEL", &cid, &netns, "eth0");
    chain.podtap("1.0.0", prev.clone(), &del).expect_ok("DEL");
    podtap_testkit::wait_for_deferred_teardown(&pod.pod);
    assert_eq!(settled_snapshot(&pod.pod), before, "DEL restored the pod");
    // KubeVirt's tap binding: the NetworkAttachmentDefinition's conf names it.
    let conf = json!({ "cniVersion": "1.0.0", "name": "kv",
                       "plugins": [{ "type": "podtap", "stateDir": state.path(), "tapName": "tap0" }] });
    let chain = Chain::new(BIN, conf, None);
    let add = Chain::env("ADD", &cid, &netns, "eth0");
    chain
        .podtap("1.0.0", prev.clone(), &add)
        .expect_ok("ADD (tapName)");
    assert!(pod.pod.ip("link show tap0").contains("tap0"));
    chain.podtap("1.0.0", prev, &del).expect_ok("DEL (tapName)");
    podtap_testkit::wait_for_deferred_teardown(&pod.pod);
    assert_eq!(settled_snapshot(&pod.pod), before);
}
