//! Reconnect delays: exponential backoff with full jitter, capped.
//!
//! Pure: the caller supplies the randomness, so tests are exact. It must not
//! sleep or read a clock.

use std::time::Duration;

/// Delay before reconnect attempt `n` after a failure.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    /// 1 s doubling up to the contract's cap of 60 s.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The ceiling for attempt `attempt` (0-based): `base * 2^attempt`, at most `cap`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A delay uniformly spread over `[ceiling/2, ceiling]` ("equal jitter"): never
    /// zero, so a fleet that lost its broker at once does not return at once, and
    /// never more than the cap. `random` is any uniformly random u64.
    pub fn delay(&self, attempt: u32, random: u64) -> Duration {
        let ceiling = self.ceiling(attempt);
        let half = ceiling / 2;
        let span = (ceiling - half).as_millis() as u64;
        half + Duration::from_millis(if span == 0 { 0 } else { random % (span + 1) })
    }
}

/// A small xorshift generator for jitter; seeded from the OS once. Not for secrets.
#[derive(Clone, Debug)]
pub struct Jitter(u64);

impl Jitter {
    pub fn from_os() -> Self {
        let mut seed = [0u8; 8];
        // Without OS randomness the jitter is merely less random; fall back to a
        // clock-derived seed.
        if getrandom::fill(&mut seed).is_err() {
            seed = (crate::model::time::now_ms() as u64).to_le_bytes();
        }
        Self(u64::from_le_bytes(seed) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn ceiling_doubles_up_to_the_cap() {
        let b = Backoff::default();
        let ceilings: Vec<_> = (0..9).map(|n| b.ceiling(n)).collect();
        assert_eq!(
            ceilings,
            [s(1), s(2), s(4), s(8), s(16), s(32), s(60), s(60), s(60)]
        );
        assert_eq!(b.ceiling(u32::MAX), s(60));
    }

    #[test]
    fn jittered_delay_stays_within_half_and_whole_ceiling() {
        let b = Backoff::default();
        let mut j = Jitter(42);
        for attempt in 0..40 {
            for _ in 0..50 {
                let d = b.delay(attempt, j.next_u64());
                let c = b.ceiling(attempt);
                assert!(d >= c / 2 && d <= c, "attempt {attempt}: {d:?} vs {c:?}");
            }
        }
        assert_eq!(b.delay(3, 0), s(4));
        assert_eq!(b.delay(3, 4000), s(8));
    }

    #[test]
    fn jitter_spreads() {
        let b = Backoff::default();
        let mut j = Jitter(7);
        let delays: std::collections::HashSet<_> =
            (0..20).map(|_| b.delay(6, j.next_u64())).collect();
        assert!(delays.len() > 10);
    }
}
