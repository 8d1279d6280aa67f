//! The VMMs on PATH and their versions: `BIN --version`, with a timeout and
//! a bounded read of its output.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::checks::Probe;

/// How long a `--version` may take.
const TIMEOUT: Duration = Duration::from_secs(3);
/// How much of its output is read.
const LIMIT: u64 = 4096;

/// The VMM kinds podtap renders for, and how their binaries are named.
pub const KINDS: [(&str, &str); 3] = [
    ("qemu", "qemu-system-"),
    ("cloud-hypervisor", "cloud-hypervisor"),
    ("firecracker", "firecracker"),
];

/// The executables on `path` (a PATH value) whose name is `prefix` (or,
/// for qemu, starts with it), first hit per name.
pub fn find(path: &str, prefix: &str) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut found: Vec<PathBuf> = Vec::new();
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut here: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name == prefix || (prefix.ends_with('-') && name.starts_with(prefix))
            })
            .map(|e| e.path())
            .filter(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .collect();
        here.sort();
        for p in here {
            if !found.iter().any(|f| f.file_name() == p.file_name()) {
                found.push(p);
            }
        }
    }
    found
}

/// One line per binary: its path and the first line of its `--version`.
pub fn describe(kind: &str, bins: &[PathBuf]) -> Probe {
    if bins.is_empty() {
        return Err(format!("no {kind} binary on PATH"));
    }
    let lines: Vec<String> = bins
        .iter()
        .map(|b| format!("{} ({})", b.display(), version(b)))
        .collect();
    Ok(lines.join("; "))
}

/// The first line of `bin --version`, or why there is none.
pub fn version(bin: &Path) -> String {
    let child = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return format!("cannot run: {e}"),
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < TIMEOUT => std::thread::sleep(Duration::from_millis(10)),
            _ => break None,
        }
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        return format!("--version did not answer within {}s", TIMEOUT.as_secs());
    };
    let mut out = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = stdout.take(LIMIT).read_to_string(&mut out);
    }
    first_line(&out).unwrap_or_else(|| format!("--version printed nothing ({status})"))
}

/// The first non-empty line, trimmed and cut to 120 characters.
pub fn first_line(out: &str) -> Option<String> {
    let line = out.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(120).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn first_line_is_bounded_and_skips_blank_lines() {
        assert_eq!(
            super::first_line("\n  QEMU emulator version 8.2.2\nCopyright").as_deref(),
            Some("QEMU emulator version 8.2.2")
        );
        assert_eq!(super::first_line(&"x".repeat(500)).unwrap().len(), 120);
        assert_eq!(super::first_line(" \n"), None);
    }
}
