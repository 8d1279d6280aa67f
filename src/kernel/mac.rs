//! Ethernet hardware addresses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 48-bit Ethernet address. Text form: six lower-case hex pairs joined by `:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The address in a netlink attribute, when it is 6 bytes long.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        <[u8; 6]>::try_from(bytes).ok().map(MacAddr)
    }

    /// The six bytes, as netlink wants them.
    pub fn to_vec(self) -> Vec<u8> {
        self.0.to_vec()
    }

    /// Whether the locally-administered bit is set and the multicast bit is clear.
    pub fn is_local_unicast(self) -> bool {
        self.0[0] & 0x03 == 0x02
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// A text that is not a MAC address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad MAC address {0:?}: expected six hex pairs like 02:00:0a:ff:10:01")]
pub struct BadMac(pub String);

impl FromStr for MacAddr {
    type Err = BadMac;

    fn from_str(s: &str) -> Result<Self, BadMac> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or_else(|| BadMac(s.into()))?;
            if part.len() != 2 {
                return Err(BadMac(s.into()));
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| BadMac(s.into()))?;
        }
        if parts.next().is_some() {
            return Err(BadMac(s.into()));
        }
        Ok(MacAddr(out))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let m: MacAddr = "02:00:0A:ff:10:01".parse().unwrap();
        assert_eq!(m.0, [2, 0, 10, 255, 16, 1]);
        assert_eq!(m.to_string(), "02:00:0a:ff:10:01");
        assert!(m.is_local_unicast());
        for bad in [
            "02:00",
            "zz:00:00:00:00:00",
            "02:00:0a:ff:10:01:00",
            "2:0:a:f:1:1",
            "",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?}");
        }
        assert_eq!(MacAddr::from_bytes(&[1, 2, 3]), None);
    }

    #[test]
    fn serde_is_the_text_form() {
        let m = MacAddr([0xaa, 0xbb, 0xcc, 0, 0, 1]);
        let j = serde_json::to_string(&m).unwrap();
        assert_eq!(j, "\"aa:bb:cc:00:00:01\"");
        assert_eq!(serde_json::from_str::<MacAddr>(&j).unwrap(), m);
        assert!(serde_json::from_str::<MacAddr>("\"nope\"").is_err());
    }
}
