//! Policy routing across the renderers: those that can carry rules and
//! tables do, the others refuse rather than drop them.

use super::samples;
use super::{render, Format};
use crate::model::{Description, Family, Rule};

fn with_policy() -> Description {
    let mut desc = samples::single_ipv4();
    let mut extra = desc.routes[0].clone();
    extra.table = 100;
    desc.routes.push(extra);
    desc.rules = vec![Rule {
        family: Family::Inet,
        priority: 100,
        from: Some("10.0.2.0/24".into()),
        to: None,
        iif: None,
        oif: None,
        fwmark: Some(7),
        fwmask: None,
        tos: 0,
        table: Some(100),
        action: "table".into(),
        goto: None,
        invert: false,
    }];
    desc
}

#[test]
fn cloud_init_writes_routing_policy_and_route_tables() {
    let yaml = render(Format::CloudInit, &with_policy()).unwrap();
    assert!(yaml.contains("routing-policy:\n"), "{yaml}");
    assert!(yaml.contains("- from: \"10.0.2.0/24\"\n"), "{yaml}");
    assert!(yaml.contains("  table: 100\n"), "{yaml}");
    assert!(yaml.contains("  priority: 100\n"), "{yaml}");
    assert!(yaml.contains("  mark: 7\n"), "{yaml}");
    assert!(
        yaml.contains("        table: 100\n"),
        "route in table 100: {yaml}"
    );
}

#[test]
fn guest_args_carry_rules_and_tables() {
    let line = render(Format::GuestArgs, &with_policy()).unwrap();
    assert!(
        line.contains("podtap.rule=100,10.0.2.0/24,-,7,100"),
        "{line}"
    );
    assert!(
        line.split(' ')
            .any(|e| e.starts_with("podtap.route=") && e.ends_with(",100")),
        "{line}"
    );
}

#[test]
fn formats_without_words_for_it_refuse() {
    for format in [Format::KernelCmdline, Format::KataAgent] {
        let err = render(format, &with_policy()).unwrap_err();
        assert!(
            err.to_string().contains("policy routing"),
            "{format}: {err}"
        );
    }
    // Without rules or tables they render as before.
    assert!(render(Format::KernelCmdline, &samples::single_ipv4()).is_ok());
}

#[test]
fn rules_no_renderer_can_express_are_refused() {
    let mut desc = with_policy();
    desc.rules[0].action = "blackhole".into();
    desc.rules[0].table = None;
    for format in [Format::CloudInit, Format::GuestArgs] {
        let err = render(format, &desc).unwrap_err();
        assert!(err.to_string().contains("blackhole"), "{format}: {err}");
    }
}
