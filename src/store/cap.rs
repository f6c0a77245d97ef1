//! Holding `storage.max_size_mb` while samples arrive: the writer's side of
//! the size cap. The staging ring takes at most a fifth of the cap (a
//! compaction starts once more is staged, [`Cap::staged_max`]); in a
//! compaction's transaction, before it writes, the oldest data is deleted to
//! make room for what it will add (the growth of the last one, per sample
//! moved), and after it whatever is still over, so no commit leaves more
//! than the cap in use. `retention.rs` says what goes first; the ring and the
//! newest [`KEPT_NEWEST_MS`] of raw samples never go.
//!
//! Bookkeeping only, with how often the writer says or measures what the
//! cap deleted: the writer runs the steps (`writer.rs`).

use std::time::Duration;
use tokio::time::Instant;

use crate::config::size_floor::{self, KEPT_NEWEST_MS};

/// Bytes a compaction adds per sample it moves, before one was measured:
/// chunks, keys and new rollup rows on noisy data, with room to spare.
const FIRST_GUESS: f64 = 6.0;
/// How often at most the log says the cap cannot be held.
const FULL_WARNING_EVERY: Duration = Duration::from_secs(600);
/// How often at most the log says how far back the raw history reaches
/// while the cap deletes.
const REACH_LOG_EVERY: Duration = Duration::from_secs(3600);
/// How often at most the oldest times are measured again while retention
/// deletes (and once at the end of each pass).
const OLDEST_EVERY: Duration = Duration::from_secs(60);

/// Something done at most once per period.
struct Every {
    period: Duration,
    last: Option<Instant>,
}

impl Every {
    const fn new(period: Duration) -> Self {
        Self { period, last: None }
    }

    /// Whether it is due at `now`; if so, it counts as done.
    fn due(&mut self, now: Instant) -> bool {
        let due = self
            .last
            .is_none_or(|at| now.duration_since(at) >= self.period);
        if due {
            self.last = Some(now);
        }
        due
    }
}

pub(crate) struct Cap {
    pub max_bytes: u64,
    /// Staged samples from which a compaction starts at once.
    pub staged_max: usize,
    grown_per_sample: f64,
    warned: Every,
    reach_logged: Every,
    oldest_measured: Every,
}

impl Cap {
    pub fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            staged_max: size_floor::staged_max(max_bytes),
            grown_per_sample: FIRST_GUESS,
            warned: Every::new(FULL_WARNING_EVERY),
            reach_logged: Every::new(REACH_LOG_EVERY),
            oldest_measured: Every::new(OLDEST_EVERY),
        }
    }

    /// Bytes to free before a compaction of `staged` samples.
    pub fn room_for(&self, staged: usize) -> u64 {
        (staged as f64 * self.grown_per_sample) as u64
    }

    /// A compaction moved `moved` samples and the pages in use went from
    /// `before` to `after`.
    pub fn measured(&mut self, before: u64, after: u64, moved: usize) {
        // A few samples say little (rollup rows of whole periods appear at once).
        if moved >= 10_000 {
            self.grown_per_sample = after.saturating_sub(before) as f64 / moved as f64;
        }
    }

    /// The oldest time the cap may delete raw samples from, given the newest
    /// sample's.
    pub fn keep_from(newest: i64) -> i64 {
        newest.saturating_sub(KEPT_NEWEST_MS)
    }

    /// Whether to log now that the cap holds only the ring and the kept window.
    pub fn warn_full(&mut self, now: Instant) -> bool {
        self.warned.due(now)
    }

    /// Whether to log now how far back the raw history reaches (the cap
    /// deleted something).
    pub fn log_reach(&mut self, now: Instant) -> bool {
        self.reach_logged.due(now)
    }

    /// Whether to measure the oldest times again now (retention deleted
    /// something).
    pub fn measure_oldest(&mut self, now: Instant) -> bool {
        self.oldest_measured.due(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_follows_the_last_compaction_and_the_warning_is_rare() {
        let mut cap = Cap::new(16 << 20);
        assert_eq!(cap.staged_max, size_floor::staged_max(16 << 20));
        assert_eq!(cap.room_for(1000), 6000);
        cap.measured(1_000_000, 1_350_000, 100_000);
        assert_eq!(cap.room_for(1000), 3500);
        // Too few samples to learn from.
        cap.measured(0, 1_000_000, 10);
        assert_eq!(cap.room_for(1000), 3500);
        assert_eq!(Cap::keep_from(1_000_000), 700_000);
        assert_eq!(Cap::keep_from(i64::MIN), i64::MIN);
        let t = Instant::now();
        assert!(cap.warn_full(t));
        assert!(!cap.warn_full(t + Duration::from_secs(60)));
        assert!(cap.warn_full(t + FULL_WARNING_EVERY));
        assert!(cap.log_reach(t));
        assert!(!cap.log_reach(t + FULL_WARNING_EVERY));
        assert!(cap.log_reach(t + REACH_LOG_EVERY));
        assert!(cap.measure_oldest(t));
        assert!(!cap.measure_oldest(t + Duration::from_secs(1)));
    }
}
