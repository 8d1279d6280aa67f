//! What a podtap process sets up before it runs, and finishes before it
//! exits. The binary enters at C's `main` (see `src/main.rs`), so the parts
//! of Rust's own start-up that matter are done here.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether fd 1 was closed when the process started (then opened on /dev/null).
static STDOUT_WAS_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether the process started with its stdout closed (`>&-`): what it
/// prints there reaches nobody, so a command whose product is printed
/// refuses to run ([`crate::doors::output::check_destination`],
/// [`crate::doors::output::check_stdout`]).
pub(crate) fn stdout_was_closed() -> bool {
    STDOUT_WAS_CLOSED.load(Ordering::Relaxed)
}

/// Before anything else runs, on the main thread, before any other thread.
pub(crate) fn prepare() {
    standard_fds_open();
    // As Rust's start-up: a write to a closed pipe fails with EPIPE instead
    // of killing the process. (One malloc arena for every thread was tried
    // and dropped: the scan parses on two threads at once, and contending
    // for one arena made it 0.1-0.2 ms slower than the arena a thread's
    // first allocation costs.)
    // SAFETY: setting a signal's disposition to SIG_IGN has no memory-safety
    // preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Before the process exits: what Rust's start-up would flush.
pub(crate) fn finish() {
    let _ = std::io::stdout().flush();
}

/// As Rust's start-up: a closed stdin, stdout or stderr is opened on
/// /dev/null, so that no file podtap opens later (a checkpoint, a lock)
/// takes fd 0, 1 or 2 and receives what is printed.
fn standard_fds_open() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: three valid pollfds for the duration of the call.
    let polled = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } >= 0;
    for pfd in fds {
        let closed = if polled {
            pfd.revents & libc::POLLNVAL != 0
        } else {
            // SAFETY: F_GETFD on any fd number is harmless.
            let flags = unsafe { libc::fcntl(pfd.fd, libc::F_GETFD) };
            flags == -1
        };
        if closed && pfd.fd == libc::STDOUT_FILENO {
            STDOUT_WAS_CLOSED.store(true, Ordering::Relaxed);
        }
        // The lowest free fd is this one: the ones below it are open.
        // SAFETY: a NUL-terminated path; the fd is kept open on purpose.
        if closed && unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) } != pfd.fd {
            // Rust's start-up aborts here too: nothing can be printed safely.
            std::process::abort();
        }
    }
}
