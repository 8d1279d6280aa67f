//! `PODTAP_TABLE_LIMIT_MIB`: the node admin's bound on what podtap reads of
//! one dump of a pod's tables (routes, rules, neighbours, addresses,
//! next-hop objects), in place of the default of 16 MiB
//! ([`podtap::attach::TABLE_ANSWER_LIMIT`], about 280 000 IPv4 routes),
//! passed to every library call that reads them.
//!
//! A node setting, read from the environment the node admin gives the CLI,
//! the CNI plugin and the OCI hook, as `PODTAP_TC_REDIRECT` is: no pod
//! source (CNI args, annotations) can raise it. A pod with a full Internet
//! routing table (about a million IPv4 routes, some 60 MiB of netlink)
//! needs it raised; a node that wants podtap to hold less, lowered.

use crate::error::{Error, Result};
use podtap::attach::TABLE_ANSWER_LIMIT;

/// The environment variable.
pub const TABLE_LIMIT_ENV: &str = "PODTAP_TABLE_LIMIT_MIB";

/// The smallest bound it takes, in MiB.
pub const MIN_MIB: usize = 1;

/// The largest bound it takes, in MiB (4 GiB: podtap holds several hundred
/// bytes of memory for each route it reads).
pub const MAX_MIB: usize = 4096;

/// The bound [`TABLE_LIMIT_ENV`] sets; unset or empty is the default. A
/// value that is not a whole number of MiB from [`MIN_MIB`] to [`MAX_MIB`]
/// is refused (exit 13), naming the variable.
pub fn from_env() -> Result<usize> {
    let value = match std::env::var(TABLE_LIMIT_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(String::from("not UTF-8")),
        Ok(text) => parse(&text),
    };
    let asked = value.map_err(|why| Error::Invalid(format!("{TABLE_LIMIT_ENV}: {why}")))?;
    Ok(asked.unwrap_or(TABLE_ANSWER_LIMIT))
}

/// Pure: the bound in bytes that `text` asks for (`None`: the default), or
/// why it is refused.
pub fn parse(text: &str) -> std::result::Result<Option<usize>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let range = || format!("must be a whole number of MiB from {MIN_MIB} to {MAX_MIB}");
    // Digits only: no sign, no spaces, no unit (the unit is in the name).
    if text.len() > 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
        // At most 32 characters of it are echoed: the value may be anything.
        let mut shown: String = text.chars().take(32).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        return Err(format!(
            "`{}` {}",
            crate::terminal::one_line(&shown),
            range()
        ));
    }
    match text.parse::<usize>() {
        Ok(mib) if (MIN_MIB..=MAX_MIB).contains(&mib) => Ok(Some(mib << 20)),
        _ => Err(format!("`{text}` {}", range())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_mib_in_range_are_taken_and_empty_is_the_default() {
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("1"), Ok(Some(1 << 20)));
        assert_eq!(parse("64"), Ok(Some(64 << 20)));
        assert_eq!(parse("0064"), Ok(Some(64 << 20)));
        assert_eq!(parse("4096"), Ok(Some(4096 << 20)));
    }

    #[test]
    fn anything_else_is_refused_naming_the_range() {
        for bad in [
            "0",
            "4097",
            "9999",
            "00000",
            "-1",
            "+5",
            " 5",
            "5 ",
            "5M",
            "1.5",
            "0x10",
            "x",
            "18446744073709551617",
        ] {
            let why = parse(bad).expect_err(bad);
            assert!(why.contains("from 1 to 4096"), "{bad}: {why}");
        }
    }

    #[test]
    fn a_hostile_value_is_one_short_line_in_the_refusal() {
        let why = parse("1\n\u{1b}[2Jx").expect_err("refused");
        assert!(!why.contains('\n') && !why.contains('\u{1b}'), "{why}");
        let why = parse(&"9".repeat(100_000)).expect_err("refused");
        assert!(why.len() < 120, "{why}");
    }
}
