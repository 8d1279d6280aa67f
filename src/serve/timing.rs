//! Rate limiting and RA timing, with time passed in (milliseconds on any
//! monotonic clock the caller likes).

use super::ndp::MAX_RTR_ADV_INTERVAL_SECS;

/// A token bucket: `rate` tokens a second, at most `burst` saved up.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_per_sec: u64,
    burst_milli: u64,
    milli_tokens: u64,
    last_ms: u64,
}

impl TokenBucket {
    /// A full bucket at `now_ms`.
    pub fn new(rate_per_sec: u32, burst: u32, now_ms: u64) -> Self {
        let burst_milli = u64::from(burst) * 1000;
        TokenBucket {
            rate_per_sec: u64::from(rate_per_sec),
            burst_milli,
            milli_tokens: burst_milli,
            last_ms: now_ms,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, now_ms: u64) -> bool {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now_ms);
        let refill = elapsed.saturating_mul(self.rate_per_sec);
        self.milli_tokens = self
            .milli_tokens
            .saturating_add(refill)
            .min(self.burst_milli);
        if self.milli_tokens >= 1000 {
            self.milli_tokens -= 1000;
            true
        } else {
            false
        }
    }
}

/// RFC 4861 6.2.4: the first few RAs at most 16 s apart, then uniformly
/// random in [MinRtrAdvInterval, MaxRtrAdvInterval] = [200 s, 600 s].
#[derive(Debug, Clone)]
pub struct RaSchedule {
    next_ms: u64,
    sent: u32,
    /// RAs that could not be sent in a row (the link is down).
    failed: u32,
}

/// MAX_INITIAL_RTR_ADVERTISEMENTS and MAX_INITIAL_RTR_ADVERT_INTERVAL.
pub const INITIAL_RAS: u32 = 3;
pub const INITIAL_INTERVAL_MS: u64 = 16_000;
/// How soon an RA that could not be sent is first tried again; each
/// failure in a row doubles it, up to MaxRtrAdvInterval (a TAP whose VMM
/// never comes costs a wakeup every 10 minutes; a guest that boots asks
/// with a router solicitation anyway).
pub const RETRY_MS: u64 = 2_000;

impl RaSchedule {
    /// The first RA is due at once.
    pub fn new(now_ms: u64) -> Self {
        RaSchedule {
            next_ms: now_ms,
            sent: 0,
            failed: 0,
        }
    }

    /// When the next RA is due.
    pub fn next_ms(&self) -> u64 {
        self.next_ms
    }

    /// Whether an RA is due at `now_ms`.
    pub fn due(&self, now_ms: u64) -> bool {
        now_ms >= self.next_ms
    }

    /// An RA could not be sent (the TAP is down until the VMM opens it):
    /// try again soon, without using up one of the initial fast RAs.
    pub fn retry(&mut self, now_ms: u64) {
        let max = MAX_RTR_ADV_INTERVAL_SECS * 1000;
        let wait = RETRY_MS.saturating_mul(1 << self.failed.min(16)).min(max);
        self.failed = self.failed.saturating_add(1);
        self.next_ms = now_ms.saturating_add(wait);
    }

    /// Records an RA sent at `now_ms`; `random` picks the jitter.
    pub fn sent(&mut self, now_ms: u64, random: u32) {
        let max = MAX_RTR_ADV_INTERVAL_SECS * 1000;
        let min = max / 3;
        let mut interval = min + u64::from(random) % (max - min + 1);
        if self.sent < INITIAL_RAS {
            interval = interval.min(INITIAL_INTERVAL_MS);
        }
        self.sent = self.sent.saturating_add(1);
        self.failed = 0;
        self.next_ms = now_ms.saturating_add(interval);
    }
}
