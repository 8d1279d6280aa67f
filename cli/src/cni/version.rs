//! The CNI spec versions podtap speaks, and what each one allows.
//!
//! Most clusters still write `cniVersion: 0.3.1` (Flannel, Calico, Cilium,
//! Multus), containerd's and CRI-O's default configs say 1.0.0, and 1.1.0
//! adds STATUS and GC. Results differ only in `ips[].version`, which 0.3.x
//! and 0.4.0 carry and 1.0.0 dropped; CHECK exists from 0.4.0.

use std::fmt;

/// One CNI spec version podtap supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CniVersion {
    V0_3_0,
    V0_3_1,
    V0_4_0,
    V1_0_0,
    V1_1_0,
}

impl CniVersion {
    /// Every supported version, oldest first.
    pub const ALL: [CniVersion; 5] = [
        CniVersion::V0_3_0,
        CniVersion::V0_3_1,
        CniVersion::V0_4_0,
        CniVersion::V1_0_0,
        CniVersion::V1_1_0,
    ];

    /// The newest version: the answer when a request names none podtap knows.
    pub const LATEST: CniVersion = CniVersion::V1_1_0;

    pub const fn as_str(self) -> &'static str {
        match self {
            CniVersion::V0_3_0 => "0.3.0",
            CniVersion::V0_3_1 => "0.3.1",
            CniVersion::V0_4_0 => "0.4.0",
            CniVersion::V1_0_0 => "1.0.0",
            CniVersion::V1_1_0 => "1.1.0",
        }
    }

    /// The supported version spelled `text`, if any.
    pub fn parse(text: &str) -> Option<CniVersion> {
        CniVersion::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// The names of every supported version, for VERSION and error details.
    pub fn names() -> Vec<&'static str> {
        CniVersion::ALL.iter().map(|v| v.as_str()).collect()
    }

    /// The first version that defines CHECK.
    pub const FIRST_WITH_CHECK: CniVersion = CniVersion::V0_4_0;

    /// The first version that defines STATUS and GC.
    pub const FIRST_WITH_STATUS_AND_GC: CniVersion = CniVersion::V1_1_0;

    /// Results before 1.0.0 name each IP's family in `ips[].version`.
    pub fn ips_carry_version(self) -> bool {
        self < CniVersion::V1_0_0
    }
}

impl fmt::Display for CniVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_order_by_age() {
        for v in CniVersion::ALL {
            assert_eq!(CniVersion::parse(v.as_str()), Some(v));
        }
        assert_eq!(CniVersion::parse("0.2.0"), None);
        assert_eq!(CniVersion::parse("1.1"), None);
        assert!(CniVersion::V0_3_1 < CniVersion::V1_0_0);
        assert_eq!(
            CniVersion::names(),
            ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]
        );
    }

    #[test]
    fn what_each_version_allows() {
        assert!(CniVersion::V0_3_1 < CniVersion::FIRST_WITH_CHECK);
        assert!(CniVersion::V1_0_0 < CniVersion::FIRST_WITH_STATUS_AND_GC);
        assert!(CniVersion::V0_4_0.ips_carry_version());
        assert!(!CniVersion::V1_0_0.ips_carry_version());
    }
}
