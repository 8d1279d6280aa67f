//! What failed, and when to try it again: from [`RETRY`], doubling up to
//! [`RETRY_MAX`], per key (a device id, or a whole round, or listing the
//! VMM's devices).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long to wait before trying a failed VMM call (or round) again.
pub(super) const RETRY: Duration = Duration::from_secs(2);
/// The longest wait between two tries of something that keeps failing.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(60);

/// Backoff keys of a whole round and of listing the VMM's devices (device
/// ids start with `podtap-`, so these never clash with one).
pub(super) const ROUND: &str = "round";
pub(super) const VMM: &str = "vmm";

/// Per key: when it may be tried again, and the last wait.
#[derive(Debug, Default)]
pub(super) struct Backoff(BTreeMap<String, (Instant, Duration)>);

impl Backoff {
    /// Whether `key` may be tried now (it has not failed, or its backoff ran out).
    pub(super) fn due(&self, key: &str) -> bool {
        self.0.get(key).is_none_or(|(at, _)| Instant::now() >= *at)
    }

    /// `key` failed: try it again after twice the last wait (from [`RETRY`]).
    pub(super) fn failed(&mut self, key: &str) {
        let wait = self
            .0
            .get(key)
            .map_or(RETRY, |(_, last)| (*last * 2).min(RETRY_MAX));
        self.0
            .insert(key.to_string(), (Instant::now() + wait, wait));
    }

    /// `key` succeeded: forget its failures.
    pub(super) fn succeeded(&mut self, key: &str) {
        self.0.remove(key);
    }

    /// How long until the next retry is due; `None` when nothing waits.
    pub(super) fn next_retry(&self) -> Option<Duration> {
        let at = self.0.values().map(|(at, _)| *at).min()?;
        Some(at.saturating_duration_since(Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_waits_and_doubles_and_a_success_forgets_it() {
        let mut b = Backoff::default();
        assert!(b.due("k") && b.next_retry().is_none());
        b.failed("k");
        assert!(!b.due("k"));
        assert_eq!(b.0["k"].1, RETRY);
        b.failed("k");
        assert_eq!(b.0["k"].1, RETRY * 2);
        assert!(b.next_retry().is_some_and(|d| d <= RETRY * 2));
        b.succeeded("k");
        assert!(b.due("k") && b.next_retry().is_none());
    }

    #[test]
    fn the_wait_stops_growing_at_the_maximum() {
        let mut b = Backoff::default();
        for _ in 0..10 {
            b.failed("k");
        }
        assert_eq!(b.0["k"].1, RETRY_MAX);
    }
}
