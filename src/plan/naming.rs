//! Names, priorities, link groups and markers: how podtap's objects are
//! called and how teardown knows them again.

use std::collections::BTreeSet;

use super::{TC_PRIO_BASE, TC_PRIO_SPAN};
use crate::id::SandboxId;
use crate::kernel::mac::MacAddr;
use crate::model::ifname::is_safe_ifname;
use crate::model::Interface;

/// High bits of the link group podtap puts its TAPs and bridges in.
const GROUP_BASE: u32 = 0x7064_0000;

/// `<prefix>_<ifname>` if it is a safe name ([`is_safe_ifname`]: what every
/// renderer accepts) and free, else `<prefix><ifindex>`, then
/// `<prefix><ifindex>_<n>`. Deterministic for a given netns. The pod's
/// interface name is the pod's: one with `$`, quotes, `,` or `=` (the kernel
/// allows them) never reaches a TAP name.
pub fn unique_name(prefix: &str, iface: &Interface, taken: &mut BTreeSet<String>) -> String {
    // Built lazily: the first candidate is almost always free.
    let fallbacks = (1..1000).map(|n| format!("{prefix}{}_{n}", iface.ifindex));
    let name = [
        format!("{prefix}_{}", iface.name),
        format!("{prefix}{}", iface.ifindex),
    ]
    .into_iter()
    .chain(fallbacks)
    .find(|c| is_safe_ifname(c) && !taken.contains(c))
    .unwrap_or_else(|| format!("{prefix}{}", iface.ifindex));
    taken.insert(name.clone());
    name
}

/// Why `name` cannot be the TAP name a caller asked for, if it cannot:
/// not a name every renderer carries, a link of the netns has it, or
/// another NIC asked for it.
pub(super) fn tap_name_refusal(
    name: &str,
    links: &BTreeSet<String>,
    asked: &BTreeSet<String>,
) -> Option<&'static str> {
    if name.len() > crate::model::ifname::MAX_IFNAME {
        Some("longer than 15 bytes, the kernel's limit")
    } else if !is_safe_ifname(name) {
        Some("not a name of letters, digits and -_. (not starting with - or .)")
    } else if links.contains(name) {
        Some("a link of the netns already has it")
    } else if asked.contains(name) {
        Some("asked for another NIC too")
    } else {
        None
    }
}

/// The first of podtap's priorities no filter on the hook uses; `None` when
/// every one is taken (podtap never shares a priority: its detach deletes
/// everything at its priority).
pub(super) fn free_prio(used: &BTreeSet<u16>) -> Option<u16> {
    (TC_PRIO_BASE..TC_PRIO_BASE + TC_PRIO_SPAN).find(|p| !used.contains(p))
}

/// Whether `prio` is in podtap's own range (for `detach --force`).
pub fn is_podtap_prio(prio: u16) -> bool {
    (TC_PRIO_BASE..TC_PRIO_BASE + TC_PRIO_SPAN).contains(&prio)
}

/// A link group for this id, avoiding groups already used in the netns.
pub fn link_group(id: &SandboxId, used: &BTreeSet<u32>) -> u32 {
    let start = preferred_group(id);
    (0..0x1_0000u32)
        .map(|n| GROUP_BASE | ((start + n) & 0xffff))
        .find(|g| !used.contains(g))
        .unwrap_or(start)
}

/// The group an id gets when nothing else uses it (what `detach --force` looks for first).
pub fn preferred_group(id: &SandboxId) -> u32 {
    GROUP_BASE | (fnv1a(id.as_str().as_bytes()) & 0xffff)
}

/// A locally administered unicast MAC for the bridged pod interface, derived from
/// its own MAC and the id, never equal to the original.
pub fn bridged_mac(original: Option<MacAddr>, id: &SandboxId) -> MacAddr {
    let original_text = original.map(|m| m.to_string()).unwrap_or_default();
    let h = fnv1a(format!("{id}/{original_text}").as_bytes()).to_be_bytes();
    let h2 = fnv1a(original_text.as_bytes()).to_be_bytes();
    let mac = MacAddr([0x02 | 0x04, h[0], h[1], h[2], h[3], h2[3]]);
    if Some(mac) == original {
        MacAddr([0x06, h[1], h[2], h[3], h[0], h2[2]])
    } else {
        mac
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// The ifalias podtap puts on its own TAPs and bridges.
pub fn marker(id: &SandboxId) -> String {
    format!("podtap:{id}")
}

/// The sandbox id the marker `alias` names, if it is one of podtap's.
pub fn marked_id(alias: &str) -> Option<&str> {
    alias
        .split(' ')
        .next()?
        .strip_prefix("podtap:")
        .filter(|id| !id.is_empty())
}

/// Whether `alias` is podtap's marker for `id` (a bridge marker carries more fields after it).
pub fn is_marker_of(alias: &str, id: &SandboxId) -> bool {
    alias.split(' ').next() == Some(marker(id).as_str())
}

/// The bridge marker is `podtap:<id> pod=<ifindex> mac=<original MAC>`.
pub fn bridge_marker(id: &SandboxId, pod_ifindex: u32, mac: Option<MacAddr>) -> String {
    match mac {
        Some(mac) => format!("{} pod={pod_ifindex} mac={mac}", marker(id)),
        None => format!("{} pod={pod_ifindex}", marker(id)),
    }
}

/// The original MAC a bridge marker records for pod interface `pod_ifindex`.
pub fn bridge_marker_mac(alias: &str, pod_ifindex: u32) -> Option<MacAddr> {
    let mut fields = alias.split(' ').skip(1);
    let pod = fields.next()?.strip_prefix("pod=")?.parse::<u32>().ok()?;
    let mac = fields.next()?.strip_prefix("mac=")?.parse().ok()?;
    (pod == pod_ifindex).then_some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_marker_round_trips() {
        let id = SandboxId::new("s1").unwrap();
        let mac: MacAddr = "aa:bb:cc:dd:ee:ff".parse().unwrap();
        let m = bridge_marker(&id, 7, Some(mac));
        assert_eq!(bridge_marker_mac(&m, 7), Some(mac));
        assert_eq!(bridge_marker_mac(&m, 8), None);
        assert_eq!(bridge_marker_mac("podtap:s1", 7), None);
        assert!(is_marker_of(&m, &id));
        assert!(is_marker_of("podtap:s1", &id));
        assert!(!is_marker_of("podtap:s10", &id));
    }
}
