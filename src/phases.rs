//! Where a podtap process spends its time, for `benches/phases.py`:
//! with `PODTAP_PHASES=1` in its environment a process prints, on exit, one
//! JSON line on stderr:
//!
//! ```text
//! podtap-phases {"main_ns":123456789,"end_ns":123460000,"phases":[["args",41],["netns",80],...]}
//! ```
//!
//! `main_ns` and `end_ns` are CLOCK_MONOTONIC at `main` and at the print (a
//! parent that reads the same clock before fork and after reap gets process
//! start and exit); each phase is the microseconds since the mark before it
//! (the first since `main`), in the order the marks were made. Marks from
//! other threads are recorded too (in time order). Off (the default), a mark
//! costs one relaxed atomic load; nothing else is read, kept or printed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The environment variable that turns the record on (`1`).
pub(crate) const ENV: &str = "PODTAP_PHASES";

/// The prefix of the line, so a reader can pick it out of other stderr output.
const PREFIX: &str = "podtap-phases";

static ON: AtomicBool = AtomicBool::new(false);
static MARKS: Mutex<Vec<(&'static str, u64)>> = Mutex::new(Vec::new());

/// CLOCK_MONOTONIC in nanoseconds (the clock Python's `time.perf_counter_ns` reads on Linux).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// Called first thing in `main`: reads `PODTAP_PHASES` once and, when it is
/// `1`, starts the record.
pub(crate) fn start() {
    if std::env::var_os(ENV).is_some_and(|v| v == "1") {
        ON.store(true, Ordering::Relaxed);
        mark("main");
    }
}

/// The phase that ends now is `name`.
pub(crate) fn mark(name: &'static str) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let t = now_ns();
    if let Ok(mut marks) = MARKS.lock() {
        marks.push((name, t));
    }
}

/// Print the record (when on) as one line on stderr.
pub(crate) fn finish() {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let end = now_ns();
    let marks = MARKS.lock().map(|m| m.clone()).unwrap_or_default();
    eprintln!("{PREFIX} {}", line(&marks, end));
}

/// The JSON of `marks` (the first is `main`) ending at `end`.
fn line(marks: &[(&'static str, u64)], end: u64) -> String {
    let main = marks.first().map_or(end, |m| m.1);
    let mut prev = main;
    let mut phases = Vec::new();
    for &(name, t) in marks.iter().skip(1) {
        phases.push(format!("[\"{name}\",{}]", t.saturating_sub(prev) / 1000));
        prev = prev.max(t);
    }
    format!(
        "{{\"main_ns\":{main},\"end_ns\":{end},\"phases\":[{}]}}",
        phases.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::line;

    #[test]
    fn each_phase_is_the_time_since_the_mark_before() {
        let marks = [
            ("main", 1_000_000),
            ("args", 1_050_000),
            ("scan", 1_350_000),
        ];
        let text = line(&marks, 1_400_000);
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["main_ns"], 1_000_000);
        assert_eq!(v["end_ns"], 1_400_000);
        assert_eq!(
            v["phases"],
            serde_json::json!([["args", 50], ["scan", 300]])
        );
    }

    #[test]
    fn off_by_default_a_mark_records_nothing() {
        super::mark("nothing");
        assert!(super::MARKS.lock().map(|m| m.is_empty()).unwrap_or(false));
    }
}
