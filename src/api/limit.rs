//! Per-caller rate limits: a token bucket per token name (or `anonymous`),
//! refilled at `requests_per_s` up to `burst`. A request that finds the bucket
//! empty is answered 429 `rate_limited` with `Retry-After`.
//!
//! The bucket arithmetic is `util::TokenBucket`'s, a pure function of the
//! instants it is given; the map of buckets is bounded by the configured token
//! names. Requests over the
//! MQTT RPC bridge are not limited here (the uplink paces itself).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

use crate::config::RateLimitConfig;
use crate::util::TokenBucket;

/// The buckets of every caller seen, under the current limit.
pub struct RateLimiter {
    state: Mutex<State>,
}

struct State {
    limit: RateLimitConfig,
    buckets: HashMap<String, TokenBucket>,
}

impl RateLimiter {
    pub fn new(limit: RateLimitConfig) -> Self {
        Self {
            state: Mutex::new(State {
                limit,
                buckets: HashMap::new(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Plain numbers; a panic elsewhere cannot leave them half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new limit (config reload); buckets start full again.
    pub fn set_limit(&self, limit: RateLimitConfig) {
        let mut s = self.state();
        s.limit = limit;
        s.buckets.clear();
    }

    /// `Ok` when `caller` may go on now; else how long to wait (`Retry-After`).
    pub fn check(&self, caller: &str, now: Instant) -> Result<(), Duration> {
        let mut s = self.state();
        let limit = s.limit;
        if limit.requests_per_s <= 0.0 {
            return Ok(());
        }
        match s.buckets.get_mut(caller) {
            Some(b) => b.take_one(now),
            None => {
                let mut b = TokenBucket::full(limit.requests_per_s, f64::from(limit.burst), now);
                let r = b.take_one(now);
                s.buckets.insert(caller.to_string(), b);
                r
            }
        }
    }

    pub fn limit(&self) -> RateLimitConfig {
        self.state().limit
    }
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(per_s: f64, burst: u32) -> RateLimitConfig {
        RateLimitConfig {
            requests_per_s: per_s,
            burst,
        }
    }

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let l = RateLimiter::new(limit(2.0, 3));
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.check("a", t0), Ok(()));
        }
        let wait = l.check("a", t0).expect_err("bucket empty");
        assert_eq!(wait, Duration::from_millis(500));
        // Another caller has its own bucket.
        assert_eq!(l.check("b", t0), Ok(()));
        // Half a second later one token is back, and only one.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(l.check("a", t1), Ok(()));
        assert!(l.check("a", t1).is_err());
        // Long idle refills to the burst, not beyond.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(l.check("a", t2), Ok(()));
        }
        assert!(l.check("a", t2).is_err());
    }

    #[test]
    fn zero_rate_is_off_and_a_new_limit_refills() {
        let l = RateLimiter::new(limit(0.0, 0));
        let t0 = Instant::now();
        for _ in 0..10_000 {
            assert_eq!(l.check("a", t0), Ok(()));
        }
        l.set_limit(limit(1.0, 1));
        assert_eq!(l.check("a", t0), Ok(()));
        assert!(l.check("a", t0).is_err());
        l.set_limit(limit(1.0, 1));
        assert_eq!(l.check("a", t0), Ok(()));
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
    }
}
