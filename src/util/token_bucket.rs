//! A token bucket: `rate` tokens a second, at most `burst` saved up. The API's
//! per-caller rate limit and the uplink's backlog pacing are both one.
//!
//! Pure: every call is given the instant it happens at; the bucket never reads
//! a clock. An instant earlier than the last one seen adds nothing.

use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket. `rate` is in tokens a second and must be above zero
    /// (callers that allow "no limit" keep no bucket).
    pub fn full(rate: f64, burst: f64, now: Instant) -> Self {
        Self {
            rate,
            burst,
            tokens: burst,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at = self.at.max(now);
    }

    /// Takes one token, or says how long until one is there.
    pub fn take_one(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(self.until_one())
        }
    }

    /// Takes up to `want` whole tokens; returns how many it took.
    pub fn take_up_to(&mut self, now: Instant, want: usize) -> usize {
        self.refill(now);
        let n = (self.tokens.floor() as usize).min(want);
        self.tokens -= n as f64;
        n
    }

    /// When the next whole token is there (now or in the past when one is).
    pub fn next_token(&self) -> Instant {
        self.at + self.until_one()
    }

    fn until_one(&self) -> Duration {
        Duration::from_secs_f64((1.0 - self.tokens).max(0.0) / self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF_S: Duration = Duration::from_millis(500);

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let t0 = Instant::now();
        let mut b = TokenBucket::full(2.0, 3.0, t0);
        for _ in 0..3 {
            assert_eq!(b.take_one(t0), Ok(()));
        }
        assert_eq!(b.take_one(t0), Err(HALF_S));
        assert_eq!(b.next_token(), t0 + HALF_S);
        // Half a second later one token is back, and only one.
        assert_eq!(b.take_one(t0 + HALF_S), Ok(()));
        assert!(b.take_one(t0 + HALF_S).is_err());
        // Long idle refills to the burst, not beyond.
        let later = t0 + Duration::from_secs(60);
        assert_eq!(b.take_up_to(later, 1000), 3);
        assert_eq!(b.take_up_to(later, 1000), 0);
    }

    #[test]
    fn take_up_to_paces_whole_tokens() {
        let t0 = Instant::now();
        let mut b = TokenBucket::full(100.0, 10.0, t0);
        assert_eq!(b.take_up_to(t0, 4), 4);
        assert_eq!(b.take_up_to(t0, 1000), 6);
        assert!(b.next_token() > t0 && b.next_token() <= t0 + Duration::from_millis(10));
        let total: usize = (1..=1000)
            .map(|n| b.take_up_to(t0 + Duration::from_millis(n), 1000))
            .sum();
        assert!((99..=101).contains(&total), "{total}");
    }

    #[test]
    fn an_earlier_instant_adds_nothing() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let mut b = TokenBucket::full(1.0, 1.0, t1);
        assert_eq!(b.take_one(t1), Ok(()));
        assert!(b.take_one(t0).is_err());
        assert_eq!(b.next_token(), t1 + Duration::from_secs(1));
    }
}
