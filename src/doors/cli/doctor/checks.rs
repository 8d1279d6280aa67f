//! Pure: from probe results to findings (ok / warn / fail, and what to do).
//! Whether a check is required depends on the wiring mode asked about; a
//! check that fails but is not required is a warning.

use serde::Serialize;

use crate::model::Wiring;

/// A probe's outcome: what was seen when it worked, why not otherwise.
pub type Probe = std::result::Result<String, String>;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Works.
    Ok,
    /// Missing or weak, but not needed by the mode asked about.
    Warn,
    /// Missing and needed: attach in this mode would fail.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The check's name.
    pub check: String,
    /// Its outcome.
    pub status: Status,
    /// Whether the mode asked about needs it.
    pub required: bool,
    /// What was seen.
    pub detail: String,
    /// What to do about a warning or failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Judge a probe: ok when it worked; otherwise fail when `required`, warn if not.
pub fn judge(check: &str, required: bool, probe: Probe, fix: &str) -> Finding {
    let (status, detail) = match probe {
        Ok(seen) => (Status::Ok, seen),
        Err(why) if required => (Status::Fail, why),
        Err(why) => (Status::Warn, why),
    };
    Finding {
        check: check.into(),
        status,
        required,
        detail,
        fix: (status != Status::Ok).then(|| fix.to_string()),
    }
}

/// The kernel features probed in a throwaway netns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Veth,
    Bridge,
    Tap,
    Macvtap,
    Ingress,
    Clsact,
    U32,
    Mirred,
}

impl Feature {
    /// Every feature, in the order the probe reports them.
    pub const ALL: [Feature; 8] = [
        Feature::Veth,
        Feature::Bridge,
        Feature::Tap,
        Feature::Macvtap,
        Feature::Ingress,
        Feature::Clsact,
        Feature::U32,
        Feature::Mirred,
    ];

    /// The check's name.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Veth => "veth",
            Feature::Bridge => "bridge",
            Feature::Tap => "tap",
            Feature::Macvtap => "macvtap",
            Feature::Ingress => "ingress qdisc",
            Feature::Clsact => "clsact qdisc",
            Feature::U32 => "u32 filter",
            Feature::Mirred => "mirred action",
        }
    }

    /// Whether attach in `mode` needs it. veth is what the CNI plugins
    /// podtap chains after give a pod. clsact is what other plugins
    /// (Cilium, Calico eBPF) put beside podtap's filters.
    pub fn required(self, mode: Wiring) -> bool {
        match self {
            Feature::Veth => true,
            Feature::Bridge => mode == Wiring::Bridge,
            Feature::Tap => mode != Wiring::Macvtap,
            Feature::Macvtap => mode == Wiring::Macvtap,
            Feature::Ingress | Feature::U32 | Feature::Mirred => mode == Wiring::Tc,
            Feature::Clsact => false,
        }
    }

    /// What to do when it is missing.
    pub fn fix(self) -> &'static str {
        match self {
            Feature::Veth => "load veth (modprobe veth; CONFIG_VETH)",
            Feature::Tap => "load tun (modprobe tun; CONFIG_TUN), or use --mode macvtap",
            Feature::Bridge => "load bridge (modprobe bridge; CONFIG_BRIDGE), or use --mode tc",
            Feature::Macvtap => "load macvtap (modprobe macvtap; CONFIG_MACVTAP), or use --mode tc",
            Feature::Ingress => "load sch_ingress (CONFIG_NET_SCH_INGRESS), or use --mode bridge",
            Feature::Clsact => "only other plugins use clsact: load sch_ingress (CONFIG_NET_SCH_INGRESS) if one needs it",
            Feature::U32 => "load cls_u32 (CONFIG_NET_CLS_U32), or use --mode bridge",
            Feature::Mirred => "load act_mirred (CONFIG_NET_ACT_MIRRED), or use --mode bridge",
        }
    }
}

/// The privilege check from the euid and `/proc/self/status`'s `CapEff` (hex).
pub fn privileges(euid: u32, cap_eff: Option<&str>) -> Probe {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let caps = cap_eff
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or_else(|| "cannot read CapEff from /proc/self/status".to_string())?;
    let has = |bit: u32| caps & (1 << bit) != 0;
    match (has(CAP_NET_ADMIN), has(CAP_SYS_ADMIN)) {
        (true, true) => Ok(format!(
            "euid {euid}; CAP_NET_ADMIN and CAP_SYS_ADMIN effective"
        )),
        (false, _) => Err(format!(
            "euid {euid}; no CAP_NET_ADMIN: podtap cannot create links, qdiscs or filters"
        )),
        (true, false) => Err(format!(
            "euid {euid}; CAP_NET_ADMIN but no CAP_SYS_ADMIN: podtap cannot enter a pod netns (setns)"
        )),
    }
}

/// The vhost-net check: the device node opened, or why not and what that means.
pub fn vhost_net(open: std::result::Result<(), String>) -> Probe {
    open.map(|()| "/dev/vhost-net opens: VMMs can use vhost acceleration".to_string())
        .map_err(|why| {
            format!("/dev/vhost-net: {why}; no vhost acceleration: VMMs fall back to userspace virtio-net")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_feature_fails_only_where_the_mode_needs_it() {
        let gone = || Err::<String, String>("EOPNOTSUPP".into());
        let bridge_in_tc = judge("bridge", Feature::Bridge.required(Wiring::Tc), gone(), "x");
        assert_eq!(bridge_in_tc.status, Status::Warn);
        let bridge_in_bridge = judge(
            "bridge",
            Feature::Bridge.required(Wiring::Bridge),
            gone(),
            "x",
        );
        assert_eq!(bridge_in_bridge.status, Status::Fail);
        assert_eq!(bridge_in_bridge.fix.as_deref(), Some("x"));
        let ok = judge("veth", true, Ok("made".into()), "x");
        assert_eq!((ok.status, ok.fix), (Status::Ok, None));
        for f in Feature::ALL {
            let tc = f.required(Wiring::Tc);
            assert_eq!(
                tc,
                matches!(
                    f,
                    Feature::Veth
                        | Feature::Tap
                        | Feature::Ingress
                        | Feature::U32
                        | Feature::Mirred
                ),
                "{}",
                f.name()
            );
            assert!(!f.required(Wiring::Macvtap) || matches!(f, Feature::Veth | Feature::Macvtap));
        }
    }

    #[test]
    fn privileges_read_cap_eff() {
        assert!(privileges(0, Some("000001ffffffffff")).is_ok());
        let no_net_admin = privileges(1000, Some("0000000000000000")).unwrap_err();
        assert!(no_net_admin.contains("no CAP_NET_ADMIN"), "{no_net_admin}");
        // CAP_NET_ADMIN (bit 12) alone.
        let only = privileges(0, Some("0000000000001000")).unwrap_err();
        assert!(only.contains("no CAP_SYS_ADMIN"), "{only}");
        assert!(privileges(0, None).is_err());
        assert!(privileges(0, Some("zz")).is_err());
    }

    #[test]
    fn missing_vhost_net_says_what_it_means() {
        let why = vhost_net(Err("No such file or directory".into())).unwrap_err();
        assert!(why.contains("no vhost acceleration: VMMs fall back to userspace virtio-net"));
    }
}
