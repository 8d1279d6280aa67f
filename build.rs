//! Links the `podtap` binary with the functions its common commands run
//! placed first in `.text` (LLD's `--symbol-ordering-file`), from
//! `.cargo/symbol-order.txt` (made by `benches/symbol-order.sh`).
//!
//! A podtap process lives a few milliseconds, and most of its code page
//! faults are first touches of functions spread over 5 MB of text; packed
//! together they take about half the faults (docs/benchmarks.md, "Where the
//! time goes"). Only on x86_64-unknown-linux-gnu, whose Rust toolchains
//! link with LLD by default (Rust 1.90 and later; `rust-version` is 1.91);
//! `PODTAP_SYMBOL_ORDER=0` leaves the order to the linker (for a build with
//! another linker). A name the list holds and the binary does not is
//! skipped without a warning: the list names mangled symbols, which a
//! dependency update renames (`.ci/check-symbol-order.sh` notices).

use std::path::Path;

fn main() {
    const LIST: &str = ".cargo/symbol-order.txt";
    println!("cargo:rerun-if-changed={LIST}");
    println!("cargo:rerun-if-env-changed=PODTAP_SYMBOL_ORDER");
    let target = std::env::var("TARGET").unwrap_or_default();
    let wanted = std::env::var("PODTAP_SYMBOL_ORDER").map_or(true, |v| v != "0");
    let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let list = Path::new(&dir).join(LIST);
    if target == "x86_64-unknown-linux-gnu" && wanted && list.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
