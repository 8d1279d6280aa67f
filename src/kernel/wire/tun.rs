//! What a TAP's link info says about how it was made (`IFLA_INFO_DATA` of
//! kind "tun", linux/if_link.h `IFLA_TUN_*`): teardown proves a recorded
//! TAP by these flags, beside its ifindex, kind and marker.

const IFLA_TUN_TYPE: u16 = 3;
const IFLA_TUN_PI: u16 = 4;
const IFLA_TUN_VNET_HDR: u16 = 5;
const IFLA_TUN_PERSIST: u16 = 6;
const IFLA_TUN_MULTI_QUEUE: u16 = 7;
/// `IFF_TAP` as `IFLA_TUN_TYPE` carries it.
const IFF_TAP: u8 = 2;

/// The tun flags of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunInfo {
    /// A TAP (Ethernet frames), not a TUN.
    pub tap: bool,
    /// Frames carry the packet-information header (podtap sets `IFF_NO_PI`).
    pub pi: bool,
    /// `IFF_VNET_HDR`.
    pub vnet_hdr: bool,
    /// `IFF_MULTI_QUEUE`.
    pub multi_queue: bool,
    /// Kept after its last fd closes (`TUNSETPERSIST`).
    pub persist: bool,
}

impl TunInfo {
    /// Whether these are the flags podtap makes a TAP with (see
    /// `kernel::tap::TapFlags`): a TAP, no PI header, and the recorded
    /// vnet-header and multi-queue choices.
    pub fn is_podtap_tap(&self, vnet_hdr: bool, multi_queue: bool) -> bool {
        self.tap && !self.pi && self.vnet_hdr == vnet_hdr && self.multi_queue == multi_queue
    }
}

/// The flags among `(type, value)` attributes of `IFLA_INFO_DATA`.
pub fn parse<'a>(attrs: impl Iterator<Item = (u16, &'a [u8])>) -> TunInfo {
    let mut t = TunInfo::default();
    for (kind, value) in attrs {
        let on = value.first().is_some_and(|b| *b != 0);
        match kind {
            IFLA_TUN_TYPE => t.tap = value.first() == Some(&IFF_TAP),
            IFLA_TUN_PI => t.pi = on,
            IFLA_TUN_VNET_HDR => t.vnet_hdr = on,
            IFLA_TUN_PERSIST => t.persist = on,
            IFLA_TUN_MULTI_QUEUE => t.multi_queue = on,
            _ => {}
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_from_their_attributes() {
        let attrs: Vec<(u16, &[u8])> = vec![
            (IFLA_TUN_TYPE, &[2]),
            (IFLA_TUN_PI, &[0]),
            (IFLA_TUN_VNET_HDR, &[1]),
            (IFLA_TUN_PERSIST, &[1]),
            (IFLA_TUN_MULTI_QUEUE, &[0]),
        ];
        let t = parse(attrs.into_iter());
        assert!(t.tap && !t.pi && t.vnet_hdr && t.persist && !t.multi_queue);
        assert!(t.is_podtap_tap(true, false));
        assert!(!t.is_podtap_tap(false, false), "vnet_hdr differs");
        assert!(!t.is_podtap_tap(true, true), "multi-queue differs");
        let tun = parse(vec![(IFLA_TUN_TYPE, &[1u8][..])].into_iter());
        assert!(
            !tun.is_podtap_tap(false, false),
            "a TUN is not podtap's TAP"
        );
    }
}
