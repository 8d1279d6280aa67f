//! Pure: from probe results to findings (ok / warn / fail, and what to do).
//! Whether a check is required depends on the wiring mode asked about; a
//! check that fails but is not required is a warning.

use serde::Serialize;

use podtap::probe::Feature;

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

/// What to do when a kernel feature is missing.
pub fn fix(feature: Feature) -> &'static str {
    match feature {
            Feature::Veth => "load veth (modprobe veth; CONFIG_VETH)",
            Feature::Tap => "load tun (modprobe tun; CONFIG_TUN), or use --mode macvtap",
            Feature::Bridge => "load bridge (modprobe bridge; CONFIG_BRIDGE), or use --mode tc",
            Feature::Macvtap => "load macvtap (modprobe macvtap; CONFIG_MACVTAP), or use --mode tc",
            Feature::Ingress => "load sch_ingress (CONFIG_NET_SCH_INGRESS), or use --mode bridge",
            Feature::Clsact => "only other plugins use clsact: load sch_ingress (CONFIG_NET_SCH_INGRESS) if one needs it",
            Feature::U32 => "load cls_u32 (CONFIG_NET_CLS_U32), or use --mode bridge",
            Feature::Mirred => "load act_mirred (CONFIG_NET_ACT_MIRRED), or use --mode bridge",
            Feature::Nftables => "load nf_tables, nft_nat and nft_counter (CONFIG_NF_TABLES_INET, CONFIG_NFT_NAT), or use another --mode",
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
        use podtap::model::Wiring;
        let gone = || Err::<String, String>("EOPNOTSUPP".into());
        let bridge_in_tc = judge("bridge", Feature::Bridge.needed_by(Wiring::Tc), gone(), "x");
        assert_eq!(bridge_in_tc.status, Status::Warn);
        let bridge_in_bridge = judge(
            "bridge",
            Feature::Bridge.needed_by(Wiring::Bridge),
            gone(),
            "x",
        );
        assert_eq!(bridge_in_bridge.status, Status::Fail);
        assert_eq!(bridge_in_bridge.fix.as_deref(), Some("x"));
        let ok = judge("veth", true, Ok("made".into()), "x");
        assert_eq!((ok.status, ok.fix), (Status::Ok, None));
        for f in Feature::ALL {
            assert!(fix(f).contains("CONFIG_"), "{f}");
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
