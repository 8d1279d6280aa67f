//! Links the `podtap` binary with the functions its common commands run
//! placed first in `.text` (LLD's `--symbol-ordering-file`), from
//! `.cargo/symbol-order.txt` (made by `benches/symbol-order.sh`).
//!
//! A podtap process lives a few milliseconds, and most of its code page
//! faults are first touches of functions spread over 5 MB of text; packed
//! together they take less than half the faults (docs/benchmarks.md, "Where
//! the time goes"). Only where the link is LLD's: x86_64-unknown-linux-gnu
//! with a toolchain that ships its own LLD (`gcc-ld/ld.lld` in the sysroot,
//! as rustup's do; the default linker there since Rust 1.90, and
//! `rust-version` is 1.91), and no flag or variable that asks for another
//! linker. GNU ld refuses the option, so anything else links in the
//! linker's own order; so does `PODTAP_SYMBOL_ORDER=0`. A name the list
//! holds and the binary does not is skipped without a warning: the list
//! names mangled symbols, which a dependency or toolchain update renames
//! (`.ci/check-symbol-order.sh` notices).

use std::path::{Path, PathBuf};
use std::process::Command;

const LIST: &str = ".cargo/symbol-order.txt";
const TARGET: &str = "x86_64-unknown-linux-gnu";

fn main() {
    println!("cargo:rerun-if-changed={LIST}");
    for var in [
        "PODTAP_SYMBOL_ORDER",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("TARGET") != TARGET || var("PODTAP_SYMBOL_ORDER") == "0" {
        return;
    }
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join(LIST);
    if !list.is_file() {
        return;
    }
    if let Some(why) = not_lld(&var("CARGO_ENCODED_RUSTFLAGS"), &var("RUSTC")) {
        println!("cargo:warning=podtap links without its symbol order: {why}");
        return;
    }
    // -Xlinker, not -Wl,: a comma in the path would split it.
    println!("cargo:rustc-link-arg-bins=-Xlinker");
    println!(
        "cargo:rustc-link-arg-bins=--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo:rustc-link-arg-bins=-Xlinker");
    println!("cargo:rustc-link-arg-bins=--no-warn-symbol-ordering");
}

/// Why the binary would not be linked by the toolchain's own LLD, if so.
fn not_lld(encoded_rustflags: &str, rustc: &str) -> Option<String> {
    let other = [
        "linker=",
        "linker-features=-lld",
        "link-self-contained=-linker",
        "-fuse-ld",
    ];
    if let Some(flag) = encoded_rustflags
        .split('\x1f')
        .find(|f| other.iter().any(|o| f.contains(o)))
    {
        return Some(format!("the rustflags choose the linker ({flag})"));
    }
    if std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some() {
        return Some("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER chooses the linker".into());
    }
    let sysroot = Command::new(if rustc.is_empty() { "rustc" } else { rustc })
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let lld = sysroot.map(|s| s.join("lib/rustlib").join(TARGET).join("bin/gcc-ld/ld.lld"));
    match lld {
        Some(path) if path.exists() => None,
        _ => Some("this toolchain ships no LLD of its own (gcc-ld/ld.lld)".into()),
    }
}
