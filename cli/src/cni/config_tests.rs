use super::*;
use crate::cni::version::CniVersion;

fn conf(extra: &str) -> NetConf {
    parse(&format!(
        r#"{{"cniVersion":"1.0.0","name":"n","type":"podtap"{extra}}}"#
    ))
    .unwrap()
}

#[test]
fn defaults() {
    let o = conf("").attach_options("eth0", "").unwrap();
    assert_eq!(o.mode, Wiring::Tc);
    assert_eq!(o.queues, 1);
    assert!(o.vnet_hdr);
    assert_eq!(o.interfaces, Some(vec!["eth0".to_string()]));
    assert_eq!(conf("").state_dir(), PathBuf::from("/run/podtap"));
}

#[test]
fn precedence() {
    let c = conf(
        r#","mode":"tc","queues":2,"tapOwner":1000,
           "podPolicy":{"modes":["bridge"],"maxQueues":4},
           "args":{"cni":{"podtap":{"mode":"bridge","queues":3}}},
           "runtimeConfig":{"podtap":{"queues":4}}"#,
    );
    let o = c.attach_options("eth0", "").unwrap();
    assert_eq!((o.mode, o.queues, o.owner), (Wiring::Bridge, 4, Some(1000)));
    // CONVENTIONS.md: `args` wins over CNI_ARGS.
    let cni_args = "IgnoreUnknown=1;PODTAP_MODE=tc;PODTAP_QUEUES=2;K8S_POD_NAME=x";
    let o = c.attach_options("eth0", cni_args).unwrap();
    assert_eq!((o.mode, o.queues), (Wiring::Bridge, 4));
    let c = conf(r#","podPolicy":{"modes":["bridge"],"maxQueues":4}"#);
    let o = c.attach_options("eth0", "PODTAP_MODE=bridge").unwrap();
    assert_eq!(o.mode, Wiring::Bridge, "CNI_ARGS alone applies");
}

#[test]
fn every_supported_version_parses() {
    for v in CniVersion::ALL {
        let text = format!(r#"{{"cniVersion":"{v}","name":"n","type":"podtap"}}"#);
        assert_eq!(parse(&text).unwrap().cni_version, v);
    }
}

#[test]
fn teardown_reads_any_version_and_any_prev_result() {
    for (text, dir) in [
        (
            r#"{"cniVersion":"0.2.0","name":"n","stateDir":"/run/x"}"#,
            "/run/x",
        ),
        (
            r#"{"name":"n","prevResult":"garbage","mode":"vepa","queues":"x"}"#,
            "/run/podtap",
        ),
        (
            r#"{"cniVersion":"9.9.9","prevResult":{"ips":[{"version":"4"}]}}"#,
            "/run/podtap",
        ),
    ] {
        assert_eq!(
            parse_teardown(text).unwrap().state_dir(),
            PathBuf::from(dir)
        );
    }
    assert_eq!(
        parse_teardown("{").unwrap_err().code,
        code::DECODING_FAILURE
    );
    assert_eq!(parse_teardown("[]").unwrap_err().code, code::INVALID_CONFIG);
    let e = parse_teardown(r#"{"stateDir":7}"#).unwrap_err();
    assert_eq!(e.code, code::INVALID_CONFIG);
}

#[test]
fn gc_lists_accept_null_and_the_older_key() {
    let c = conf(r#","cni.dev/valid-attachments":null"#);
    assert_eq!(c.valid_attachments().map(<[_]>::len), Some(0));
    let c = conf(r#","cni.dev/attachments":[{"containerID":"c","ifname":"eth0"}]"#);
    assert_eq!(c.valid_attachments().map(<[_]>::len), Some(1));
    assert!(conf("").valid_attachments().is_none());
    // libcni 1.2.3 and later send the list under both keys.
    let both = r#","cni.dev/valid-attachments":[{"containerID":"c","ifname":"eth0"}],
                   "cni.dev/attachments":[{"containerID":"c","ifname":"eth0"}]"#;
    let c = conf(both);
    assert_eq!(c.valid_attachments().map(<[_]>::len), Some(1));
}

#[test]
fn pod_annotations_come_last() {
    let c = conf(
        r#","mode":"tc","podPolicy":{"modes":["bridge"],"maxQueues":2,"tapOwners":[1000],"tapGroups":[100]},
           "runtimeConfig":{"podtap":{"queues":2},
           "io.kubernetes.cri.pod-annotations":{"io.podtap.mode":"bridge",
           "io.podtap.tap-owner":"1000:100","other":"x"}}"#,
    );
    let o = c.attach_options("eth0", "").unwrap();
    assert_eq!(o.mode, Wiring::Bridge);
    assert_eq!((o.queues, o.owner, o.group), (2, Some(1000), Some(100)));
    let none =
        conf(r#","mode":"bridge","runtimeConfig":{"io.kubernetes.cri.pod-annotations":null}"#);
    assert_eq!(
        none.attach_options("eth0", "").unwrap().mode,
        Wiring::Bridge
    );
    let bad =
        conf(r#","runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"io.podtap.queues":"0"}}"#);
    assert_eq!(
        bad.attach_options("eth0", "").unwrap_err().code,
        code::INVALID_CONFIG
    );
}

#[test]
fn pod_sources_pass_the_node_policy() {
    let refused = |extra: &str, args: &str| {
        let e = conf(extra).attach_options("eth0", args).unwrap_err();
        assert_eq!(e.code, 106, "{extra} {args}: {e:?}");
        e.msg
    };
    let m = refused(r#","runtimeConfig":{"podtap":{"tapOwner":1000}}"#, "");
    assert!(
        m.starts_with("runtimeConfig.podtap asks for TAP owner uid 1000"),
        "{m}"
    );
    assert!(m.contains("podPolicy.tapOwners"), "{m}");
    // CNI_ARGS is the runtime's, as the conflist is the node's.
    let o = conf("").attach_options("eth0", "PODTAP_QUEUES=8").unwrap();
    assert_eq!(o.queues, 8);
    let m = refused(
        r#","runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"io.podtap.queues":"256"}}"#,
        "",
    );
    assert!(
        m.starts_with("the pod's annotations asks for 256 queues"),
        "{m}"
    );
    let m = refused(
        r#","runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"io.podtap.nic.eth0":"tap=tap0"}}"#,
        "",
    );
    assert!(
        m.contains("TAP name \"tap0\"") && m.contains("podPolicy.tapNames"),
        "{m}"
    );
    refused(
        r#","args":{"cni":{"podtap":{"guestMac":"02:00:00:00:00:01"}}}"#,
        "",
    );
    refused(r#","args":{"cni":{"podtap":{"mode":"bridge"}}}"#, "");
    refused(r#","args":{"cni":{"podtap":{"tapGroup":0}}}"#, "");
    let ann =
        r#","runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"io.podtap.tap-owner":"0"}}"#;
    let m = refused(ann, "");
    assert!(
        m.starts_with("the pod's annotations asks for TAP owner uid 0"),
        "{m}"
    );
    // The node's own settings are never a pod's privilege to lose.
    let own = conf(
        r#","mode":"bridge","queues":4,"tapOwner":107,
        "runtimeConfig":{"podtap":{"mode":"bridge","queues":2,"tapOwner":107}}"#,
    );
    let o = own.attach_options("eth0", "").unwrap();
    assert_eq!((o.mode, o.queues, o.owner), (Wiring::Bridge, 2, Some(107)));
    // The admin's own keys are not asks.
    let admin = conf(r#","mode":"macvtap","queues":8,"tapOwner":1000,"tapGroup":100"#);
    assert!(admin.attach_options("eth0", "").is_ok());
    assert_eq!(
        parse(r#"{"cniVersion":"1.0.0","podPolicy":[["bridge"],4]}"#)
            .unwrap_err()
            .code,
        code::INVALID_CONFIG
    );
    assert_eq!(
        parse(r#"{"cniVersion":"1.0.0","podPolicy":{"maxQueue":2}}"#)
            .unwrap_err()
            .code,
        code::INVALID_CONFIG
    );
}

#[test]
fn rejects() {
    assert_eq!(parse("{").unwrap_err().code, code::DECODING_FAILURE);
    assert_eq!(parse("{}").unwrap_err().code, code::INVALID_CONFIG);
    for old_or_new in ["0.2.0", "0.1.0", "2.0.0", "1.1"] {
        let conf = format!(r#"{{"cniVersion":"{old_or_new}"}}"#);
        assert_eq!(
            parse(&conf).unwrap_err().code,
            code::INCOMPATIBLE_VERSION,
            "{old_or_new}"
        );
    }
    assert_eq!(
        parse(r#"{"cniVersion":"1.0.0","queues":"x"}"#)
            .unwrap_err()
            .code,
        code::INVALID_CONFIG
    );
    let e = conf(r#","mode":"vepa""#)
        .attach_options("eth0", "")
        .unwrap_err();
    assert_eq!(e.code, code::INVALID_CONFIG);
    assert_eq!(
        conf(r#","queues":0"#)
            .attach_options("eth0", "")
            .unwrap_err()
            .code,
        code::INVALID_CONFIG
    );
    assert_eq!(
        conf("")
            .attach_options("eth0", "PODTAP_QUEUES=many")
            .unwrap_err()
            .code,
        code::INVALID_ENV
    );
}

#[test]
fn an_old_tc_redirect_is_accepted_and_ignored() {
    for old in ["u32", "bpf", "auto", "anything"] {
        let c = conf(&format!(
            r#","tcRedirect":"{old}","args":{{"cni":{{"podtap":{{"tcRedirect":"{old}"}}}}}}"#
        ));
        let o = c
            .attach_options("eth0", &format!("PODTAP_TC_REDIRECT={old}"))
            .unwrap();
        assert_eq!(o.mode, Wiring::Tc);
    }
}

#[test]
fn tc_redirect_taps_cni_args_name_and_own_the_tap() {
    let o = conf("")
        .attach_options(
            "veth0",
            "IgnoreUnknown=true;TC_REDIRECT_TAP_NAME=tap0;TC_REDIRECT_TAP_UID=123;TC_REDIRECT_TAP_GID=456",
        )
        .unwrap();
    assert_eq!((o.owner, o.group), (Some(123), Some(456)));
    assert_eq!(o.nics.len(), 1);
    assert_eq!(o.nics[0].interface, "veth0");
    assert_eq!(o.nics[0].tap_name.as_deref(), Some("tap0"));
    for bad in ["TC_REDIRECT_TAP_UID=x", "TC_REDIRECT_TAP_GID=-1"] {
        let e = conf("").attach_options("veth0", bad).unwrap_err();
        assert_eq!(e.code, code::INVALID_ENV, "{bad}");
    }
}
