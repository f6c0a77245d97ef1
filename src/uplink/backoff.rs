//! The link's retry policy: the delays ([`RETRY`], `util::Backoff` with full
//! jitter) and the attempt count that is forgiven only after a connection
//! stayed up for a while. The link uses it for reconnects, for retrying what
//! the broker refused, and for setting up TLS again.
//!
//! Pure: the caller supplies the randomness and the time, so tests are exact. It
//! must not sleep or read a clock.

use std::time::Duration;

use tokio::time::Instant;

use crate::util::Backoff;

/// Retry delays of the link: 1 s doubling up to the contract's cap of 60 s,
/// spread with full jitter from the first retry on (`Backoff::full_jitter`), so a
/// fleet that lost its broker at once comes back spread over the window instead
/// of in its upper half.
pub const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// How long a connection must stay up before its loss counts as a fresh start.
pub const STABLE: Duration = Duration::from_secs(60);

/// The attempt count for [`RETRY`]. It grows with every failure and is
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

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
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
    fn retries_double_from_one_second_to_the_contracts_minute() {
        assert_eq!(RETRY.ceiling(0), s(1));
        assert_eq!(RETRY.ceiling(5), s(32));
        assert_eq!(RETRY.ceiling(6), s(60));
        assert_eq!(RETRY.full_jitter(3, 8000), s(8));
    }
}
