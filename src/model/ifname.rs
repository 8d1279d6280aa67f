//! The one rule for the link names podtap chooses (TAPs, bridges) and every
//! renderer accepts: the naming step never makes a name a renderer would refuse.

/// Linux's IFNAMSIZ minus the terminating NUL.
pub(crate) const MAX_IFNAME: usize = 15;

/// A link name every output format can carry unquoted: 1 to 15 bytes of
/// `[A-Za-z0-9_.-]`, not starting with `-` (an option to a VMM's parser) or
/// `.` (a hidden file, `.` and `..`). The kernel allows far more (quotes,
/// `$`, `,`, `=`), which a pod's interface name may use.
pub(crate) fn is_safe_ifname(name: &str) -> bool {
    (1..=MAX_IFNAME).contains(&name.len())
        && !name.starts_with(['-', '.'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod tests {
    use super::is_safe_ifname;

    #[test]
    fn safe_names() {
        for ok in ["tap_eth0", "tap7", "br_net-1.100", "a", "tap_abcdefghijk"] {
            assert!(is_safe_ifname(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".x",
            "-x",
            "tap_e$(id>x)",
            "tap a",
            "tap'a",
            "tap\"a",
            "tap,a",
            "tap=a",
            "tap_abcdefghijkl",
            "tap_é",
        ] {
            assert!(!is_safe_ifname(bad), "{bad:?}");
        }
    }
}
