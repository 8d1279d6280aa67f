//! One interface's own choices as text, `KEY=VALUE[,KEY=VALUE...]`: the
//! value of `podtap attach --nic IFNAME:...` and of the `io.podtap.nic.IFNAME`
//! annotation. Keys: `tap` (the TAP's name), `mac` (the guest NIC's MAC),
//! `queues`, `owner` (`UID[:GID]`), `serve` (`yes`/`no`: answer the
//! guest's DHCP and router solicitations).

use podtap::attach::{NicOptions, TapOwner, MAX_QUEUES};

/// The keys, in the order `--help` lists them.
pub const KEYS: [&str; 5] = ["tap", "mac", "queues", "owner", "serve"];

/// `IFNAME:KEY=VALUE,...` (the `--nic` form).
pub fn parse_flag(text: &str) -> Result<NicOptions, String> {
    let (ifname, spec) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected IFNAME:KEY=VALUE[,KEY=VALUE...]"))?;
    parse(ifname, spec)
}

/// The choices `spec` makes for interface `ifname`.
pub fn parse(ifname: &str, spec: &str) -> Result<NicOptions, String> {
    if ifname.is_empty() {
        return Err(format!("{spec:?}: no interface named"));
    }
    let mut nic = NicOptions {
        interface: ifname.to_string(),
        ..NicOptions::default()
    };
    for pair in spec.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("{ifname}: {pair:?} is not KEY=VALUE"))?;
        let bad = |why: String| format!("{ifname}: {key}: {why}");
        match key {
            "tap" => nic.tap_name = Some(value.to_string()),
            "mac" => nic.guest_mac = Some(value.parse().map_err(|e| bad(format!("{e}")))?),
            "queues" => nic.queues = Some(parse_queues(value).map_err(bad)?),
            "owner" => {
                let owner: TapOwner = value.parse().map_err(|e| bad(format!("{e}")))?;
                nic.owner = Some(owner);
            }
            "serve" => nic.serve = Some(parse_yes_no(value).map_err(bad)?),
            _ => {
                return Err(format!(
                    "{ifname}: unknown key {key:?} (expected {})",
                    KEYS.join(", ")
                ))
            }
        }
    }
    Ok(nic)
}

/// `yes`/`no` (also `true`/`false`, `1`/`0`).
pub fn parse_yes_no(text: &str) -> Result<bool, String> {
    match text.trim() {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        other => Err(format!("{other:?}: expected yes or no")),
    }
}

/// A queue count from text (annotations, `CNI_ARGS`, `--nic`).
pub fn parse_queues(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_QUEUES).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} queues: must be 1..={MAX_QUEUES}")),
        Err(_) => Err(format!(
            "{text:?} is not a number of queues (1..={MAX_QUEUES})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nic_spec_reads_every_key() {
        let nic =
            parse_flag("eth0:tap=tap0,mac=02:00:00:00:00:01,queues=2,owner=1000:100,serve=yes")
                .unwrap();
        assert_eq!(nic.serve, Some(true));
        assert_eq!(nic.interface, "eth0");
        assert_eq!(nic.tap_name.as_deref(), Some("tap0"));
        assert_eq!(
            nic.guest_mac.map(|m| m.to_string()).as_deref(),
            Some("02:00:00:00:00:01")
        );
        assert_eq!(nic.queues, Some(2));
        assert_eq!(
            nic.owner,
            Some(TapOwner {
                uid: 1000,
                gid: Some(100)
            })
        );
        assert_eq!(parse("net1", "").unwrap().tap_name, None);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (bad, says) in [
            ("eth0", "expected IFNAME:"),
            (":tap=x", "no interface"),
            ("eth0:tap", "not KEY=VALUE"),
            ("eth0:colour=red", "unknown key"),
            ("eth0:queues=0", "must be 1..=256"),
            ("eth0:mac=zz", "bad MAC"),
            ("eth0:owner=bob", "UID or UID:GID"),
        ] {
            let why = parse_flag(bad).unwrap_err();
            assert!(why.contains(says), "{bad}: {why}");
        }
    }
}
