//! The `podtap` binary: a CLI, and a CNI plugin when `CNI_COMMAND` is set and it has no arguments.
//!
//! Entered as C's `main` (`no_main`), not through Rust's runtime start-up:
//! a podtap process lives a few milliseconds, and that start-up reads
//! `/proc/self/maps` to find the main thread's stack guard and gives every
//! thread a signal stack (an mmap, an mprotect and, at its end, an munmap),
//! all to print a message on stack overflow. Without it an 8-interface
//! attach or detach is about 0.2 ms (5%) faster here (`benches/phases.py`);
//! a stack overflow still ends the process, by SIGSEGV. What else that
//! start-up does, [`podtap::main`] does itself: see `src/start.rs`.
// The unit-test build of this file keeps libtest's own `main`.
#![cfg_attr(not(test), no_main)]

/// The C entry point: glibc has set up the process (and std reads the
/// arguments through `.init_array`), so the arguments are not needed here.
/// An exit code outside 0-255 (none is documented) becomes 1, not its low byte.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    u8::try_from(podtap::main()).map_or(1, libc::c_int::from)
}
