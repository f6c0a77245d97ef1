//! What retention deleted, and how far back each resolution reaches now:
//! rows deleted by age and by the size cap, per resolution (raw samples,
//! minute and hour rollups), and the oldest time each still holds. The
//! writer counts; `/metrics` (and from it `sitegate status`) reads.
//!
//! It keeps numbers; it must not query the database (the writer measures
//! with `retention::oldest_held`) nor decide what to delete.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::retention::{Resolution, Tally};
use crate::metrics::{Encoder, Kind};

/// Why rows were deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Past `retention_days` / `rollup_retention_days`.
    Age,
    /// To stay under `storage.max_size_mb`.
    Cap,
}

impl Reason {
    const ALL: [Reason; 2] = [Reason::Age, Reason::Cap];

    const fn as_str(self) -> &'static str {
        match self {
            Reason::Age => "age",
            Reason::Cap => "cap",
        }
    }
}

/// No data held at a resolution.
const NONE: i64 = i64::MIN;

#[derive(Debug)]
pub struct RetentionStats {
    /// By reason, then resolution.
    deleted: [[AtomicU64; 3]; 2],
    /// By resolution: the oldest time held (epoch ms), [`NONE`] for none or
    /// not measured yet.
    oldest: [AtomicI64; 3],
}

impl Default for RetentionStats {
    fn default() -> Self {
        Self {
            deleted: Default::default(),
            oldest: [
                AtomicI64::new(NONE),
                AtomicI64::new(NONE),
                AtomicI64::new(NONE),
            ],
        }
    }
}

impl RetentionStats {
    pub(super) fn record(&self, why: Reason, rows: &Tally) {
        for r in Resolution::ALL {
            self.deleted[why as usize][r as usize].fetch_add(rows.of(r), Ordering::Relaxed);
        }
    }

    pub(super) fn set_oldest(&self, held: [Option<i64>; 3]) {
        for (slot, t) in self.oldest.iter().zip(held) {
            slot.store(t.unwrap_or(NONE), Ordering::Relaxed);
        }
    }

    /// Rows deleted so far for `why` at `r`.
    pub fn deleted(&self, why: Reason, r: Resolution) -> u64 {
        self.deleted[why as usize][r as usize].load(Ordering::Relaxed)
    }

    /// The oldest time `r` holds, as last measured (epoch ms).
    pub fn oldest(&self, r: Resolution) -> Option<i64> {
        Some(self.oldest[r as usize].load(Ordering::Relaxed)).filter(|t| *t != NONE)
    }

    pub(super) fn collect(&self, out: &mut Encoder) {
        let mut deleted = out.family(
            "sitegate_store_deleted_rows_total",
            Kind::Counter,
            "Rows retention deleted, by reason (age: past retention_days or rollup_retention_days; cap: to stay under storage.max_size_mb) and resolution (raw counted in samples).",
        );
        for why in Reason::ALL {
            for r in Resolution::ALL {
                deleted.sample(
                    &[("reason", why.as_str()), ("resolution", r.as_str())],
                    self.deleted(why, r) as f64,
                );
            }
        }
        let mut oldest = out.family(
            "sitegate_store_oldest_timestamp_seconds",
            Kind::Gauge,
            "The oldest time each resolution still holds (Unix seconds; raw: compacted samples, rollups: their first whole period), measured after retention deletes; absent where it holds none.",
        );
        for r in Resolution::ALL {
            if let Some(t) = self.oldest(r) {
                oldest.sample(&[("resolution", r.as_str())], t as f64 / 1000.0);
            }
        }
    }
}
