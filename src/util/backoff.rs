//! Exponential backoff: the delay before retry `attempt` doubles from a base up
//! to a cap. [`Backoff::ceiling`] is that delay itself (for callers that retry
//! at a steady rhythm: Modbus polls of a failing device, steering writes);
//! [`Backoff::full_jitter`] spreads it uniformly over `[0, ceiling]` (for many
//! peers that failed at once: a fleet's MQTT reconnects).
//!
//! Pure: the caller supplies the randomness ([`Jitter`] or any other source).

use std::time::Duration;

/// Delays that double per attempt from `base`, never above `cap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    pub const fn new(base: Duration, cap: Duration) -> Self {
        Self { base, cap }
    }

    /// `base * 2^attempt` for `attempt` counted from 0, at most `cap`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A delay uniformly spread over the whole window `[0, ceiling(attempt)]`
    /// ("full jitter"), in whole milliseconds. `random` is any uniformly
    /// random u64.
    pub fn full_jitter(&self, attempt: u32, random: u64) -> Duration {
        let ceiling = u64::try_from(self.ceiling(attempt).as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(random % ceiling.saturating_add(1))
    }
}

/// A small xorshift generator for jitter, seeded from the OS once. Not for
/// secrets.
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
        Self::seeded(u64::from_le_bytes(seed))
    }

    /// A fixed sequence, for tests.
    pub fn seeded(seed: u64) -> Self {
        Self(seed | 1)
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

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn ceiling_doubles_from_the_base_up_to_the_cap() {
        let b = Backoff::new(s(1), s(60));
        let ceilings: Vec<_> = (0..9).map(|n| b.ceiling(n)).collect();
        assert_eq!(
            ceilings,
            [s(1), s(2), s(4), s(8), s(16), s(32), s(60), s(60), s(60)]
        );
        assert_eq!(b.ceiling(u32::MAX), s(60));
        let odd = Backoff::new(ms(300), ms(1000));
        assert_eq!(
            (0..4).map(|n| odd.ceiling(n)).collect::<Vec<_>>(),
            [ms(300), ms(600), ms(1000), ms(1000)]
        );
        // A cap beyond 2^31 bases holds, nothing overflows.
        let huge = Backoff::new(s(u64::MAX / 4), Duration::MAX);
        assert_eq!(huge.ceiling(40), Duration::MAX);
    }

    #[test]
    fn full_jitter_spreads_over_the_whole_window_from_the_first_retry() {
        let b = Backoff::new(s(1), s(60));
        let mut j = Jitter::seeded(42);
        for attempt in 0..40 {
            let c = b.ceiling(attempt);
            let delays: Vec<_> = (0..400)
                .map(|_| b.full_jitter(attempt, j.next_u64()))
                .collect();
            assert!(delays.iter().all(|d| *d <= c), "attempt {attempt}");
            // Both halves of the window are used, the lowest tenth too.
            assert!(delays.iter().any(|d| *d < c / 10), "attempt {attempt}");
            assert!(delays.iter().any(|d| *d > c / 2), "attempt {attempt}");
        }
        assert_eq!(b.full_jitter(0, 0), Duration::ZERO);
        assert_eq!(b.full_jitter(0, 1000), s(1));
        assert_eq!(b.full_jitter(3, 8000), s(8));
        assert_eq!(b.full_jitter(3, 8001), Duration::ZERO);
        assert_eq!(Backoff::new(s(1), Duration::MAX).full_jitter(200, 5), ms(5));
    }

    #[test]
    fn jitter_is_a_sequence_that_spreads() {
        let mut a = Jitter::seeded(7);
        let mut b = Jitter::seeded(7);
        let first: Vec<_> = (0..20).map(|_| a.next_u64()).collect();
        assert_eq!(first, (0..20).map(|_| b.next_u64()).collect::<Vec<_>>());
        let distinct: std::collections::HashSet<_> = first.iter().collect();
        assert_eq!(distinct.len(), 20);
        // A zero seed does not stick at zero.
        assert_ne!(Jitter::seeded(0).next_u64(), 0);
    }
}
