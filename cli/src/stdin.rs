//! Reading a door's stdin with a cap: the CNI configuration and the OCI
//! state come from the runtime, but their content (annotations, `args`,
//! `prevResult`) is partly the pod author's, so podtap never reads more than
//! [`STDIN_CAP`] bytes of it, whatever the writer sends.

use std::io::Read;

/// The most a door reads from stdin: 1 MiB. A real CNI configuration or OCI
/// state is a few KiB; one pod's annotations are capped at 256 KiB by Kubernetes.
pub const STDIN_CAP: u64 = 1 << 20;

/// Why stdin could not be read.
#[derive(Debug)]
pub enum StdinError {
    /// More than the cap arrived (only `cap + 1` bytes were read).
    TooLarge(u64),
    /// It is not UTF-8 (no JSON document is).
    NotUtf8,
    /// The read failed.
    Io(std::io::Error),
}

impl std::fmt::Display for StdinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StdinError::TooLarge(cap) if cap % (1 << 20) == 0 => write!(
                f,
                "stdin holds more than {} MiB, the most podtap reads",
                cap >> 20
            ),
            StdinError::TooLarge(cap) => {
                write!(
                    f,
                    "stdin holds more than {cap} bytes, the most podtap reads"
                )
            }
            StdinError::NotUtf8 => write!(f, "stdin is not UTF-8 text"),
            StdinError::Io(e) => write!(f, "read stdin: {e}"),
        }
    }
}

/// Read all of `input` as text if it holds at most `cap` bytes. Reads at
/// most `cap + 1` bytes: memory stays bounded however much is sent.
pub fn read_capped(input: impl Read, cap: u64) -> Result<String, StdinError> {
    let mut bytes = Vec::new();
    input
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(StdinError::Io)?;
    if u64::try_from(bytes.len()).map_or(true, |n| n > cap) {
        return Err(StdinError::TooLarge(cap));
    }
    String::from_utf8(bytes).map_err(|_| StdinError::NotUtf8)
}

/// Read the process's stdin with [`STDIN_CAP`].
pub fn read_stdin() -> Result<String, StdinError> {
    read_capped(std::io::stdin().lock(), STDIN_CAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_up_to_the_cap_and_no_further() {
        assert_eq!(read_capped(&b"{}"[..], 2).unwrap(), "{}");
        assert_eq!(read_capped(&b""[..], 2).unwrap(), "");
        // An endless reader: the cap ends the read.
        let endless = std::io::repeat(b'x');
        assert!(matches!(
            read_capped(endless, 1024),
            Err(StdinError::TooLarge(1024))
        ));
        let e = read_capped(&b"abc"[..], 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stdin holds more than 2 bytes, the most podtap reads"
        );
        assert_eq!(
            StdinError::TooLarge(STDIN_CAP).to_string(),
            "stdin holds more than 1 MiB, the most podtap reads"
        );
        assert!(matches!(
            read_capped(&[0xff, b'{'][..], 8),
            Err(StdinError::NotUtf8)
        ));
    }
}
