//! Retry delays: exponential backoff with full jitter, capped, and the attempt
//! count that is forgiven only after a connection stayed up for a while. The
//! link uses it for reconnects, for retrying what the broker refused, and for
//! setting up TLS again.
//!
//! Pure: the caller supplies the randomness and the time, so tests are exact. It
//! must not sleep or read a clock.

use std::time::Duration;

use tokio::time::Instant;

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

    /// A delay uniformly spread over the whole window `[0, ceiling]` ("full
    /// jitter"), from the first retry on: a fleet that lost its broker at once
    /// comes back spread over the window instead of in its upper half. Never
    /// more than the cap. `random` is any uniformly random u64.
    pub fn delay(&self, attempt: u32, random: u64) -> Duration {
        let ceiling = self.ceiling(attempt).as_millis() as u64;
        Duration::from_millis(random % (ceiling + 1))
    }
}

/// How long a connection must stay up before its loss counts as a fresh start.
pub const STABLE: Duration = Duration::from_secs(60);

/// The attempt count for [`Backoff::delay`]. It grows with every failure and is
/// reset only when a connection had stayed up for [`STABLE`], so a connection
/// that the broker closes again soon after each connect (a session taken over by
/// another client, a message that breaks it) backs off further each time
/// instead of retrying at the first window forever.
#[derive(Clone, Copy, Debug, Default)]
pub struct Attempts {
    next: u32,
    up_since: Option<Instant>,
}

/// How the connection that just ended had gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It never came up.
    NotConnected,
    /// It came up and ended before it was stable.
    Short,
    /// It stayed up at least [`STABLE`]: the count started again.
    Stable,
}

impl Attempts {
    /// A connection came up at `now`.
    pub fn connected(&mut self, now: Instant) {
        self.up_since = Some(now);
    }

    /// The connection (or the attempt) failed at `now`: returns the attempt
    /// number to wait for and how the connection had gone.
    pub fn failed(&mut self, now: Instant) -> (u32, Ended) {
        let ended = match self.up_since.take() {
            None => Ended::NotConnected,
            Some(since) if now.saturating_duration_since(since) >= STABLE => {
                self.next = 0;
                Ended::Stable
            }
            Some(_) => Ended::Short,
        };
        let attempt = self.next;
        self.next = self.next.saturating_add(1);
        (attempt, ended)
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
    fn full_jitter_spreads_over_the_whole_window_from_the_first_retry() {
        let b = Backoff::default();
        let mut j = Jitter(42);
        for attempt in 0..40 {
            let c = b.ceiling(attempt);
            let delays: Vec<_> = (0..400).map(|_| b.delay(attempt, j.next_u64())).collect();
            assert!(delays.iter().all(|d| *d <= c), "attempt {attempt}");
            // Both halves of the window are used, the lowest tenth too.
            assert!(delays.iter().any(|d| *d < c / 10), "attempt {attempt}");
            assert!(delays.iter().any(|d| *d > c / 2), "attempt {attempt}");
        }
        assert_eq!(b.delay(0, 0), Duration::ZERO);
        assert_eq!(b.delay(0, 1000), s(1));
        assert_eq!(b.delay(3, 8000), s(8));
        assert_eq!(b.delay(3, 8001), Duration::ZERO);
    }

    #[test]
    fn attempts_reset_only_after_a_stable_connection() {
        let t0 = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.failed(t0), (0, Ended::NotConnected));
        assert_eq!(a.failed(t0), (1, Ended::NotConnected));
        // Up, and closed again a second later (a takeover): no reset.
        a.connected(t0);
        assert_eq!(a.failed(t0 + s(1)), (2, Ended::Short));
        a.connected(t0 + s(2));
        assert_eq!(a.failed(t0 + s(2) + STABLE - s(1)), (3, Ended::Short));
        // Up for STABLE: the next loss starts from the first window.
        a.connected(t0 + s(100));
        assert_eq!(a.failed(t0 + s(100) + STABLE), (0, Ended::Stable));
        assert_eq!(a.failed(t0 + s(200)), (1, Ended::NotConnected));
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
