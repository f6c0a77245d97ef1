//! Which table answers which part of a time-series query.
//!
//! A query range `[start, end)` with bucket width `w` is cut into segments, each
//! read from one source: hour rollups, minute rollups or raw samples. A rollup
//! level is usable only when `w` is a whole multiple of its period (then each
//! rollup row falls inside exactly one output bucket), and only for whole periods
//! inside the range; the partial periods at the edges are read from the next finer
//! level, down to raw samples. So the answer equals a naive fold over the raw
//! samples. A rollup level answers only from the first period it still holds
//! whole ([`Held`]): retention deletes the oldest periods, and may delete
//! part of one; before that, the finer level answers. Pure: no SQLite.

/// Minute rollup period in ms.
pub const MINUTE_MS: i64 = 60_000;
/// Hour rollup period in ms.
pub const HOUR_MS: i64 = 3_600_000;

/// Where a segment's rows come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Raw,
    Minute,
    Hour,
}

impl Source {
    /// The rollup period, or `None` for raw samples.
    pub const fn period_ms(self) -> Option<i64> {
        match self {
            Source::Raw => None,
            Source::Minute => Some(MINUTE_MS),
            Source::Hour => Some(HOUR_MS),
        }
    }
}

/// A half-open time range `[start, end)` served by one source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub source: Source,
    pub start: i64,
    pub end: i64,
}

/// From which time each rollup level holds every period whole: periods
/// before it were deleted, in full or in part (`retention.rs` records it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub minute_from: i64,
    pub hour_from: i64,
}

impl Held {
    /// Nothing deleted: every period whole.
    pub const ALL: Held = Held {
        minute_from: i64::MIN,
        hour_from: i64::MIN,
    };

    fn from(self, source: Source) -> i64 {
        match source {
            Source::Raw => i64::MIN,
            Source::Minute => self.minute_from,
            Source::Hour => self.hour_from,
        }
    }
}

/// Cuts `[start, end)` into ascending, adjacent, non-empty segments for buckets of
/// `width` ms. `width > 0` and `start < end`, else the plan is empty.
pub fn plan(start: i64, end: i64, width: i64, held: Held) -> Vec<Segment> {
    let mut levels = vec![Source::Raw];
    if width > 0 && width % MINUTE_MS == 0 {
        levels.push(Source::Minute);
    }
    if width > 0 && width % HOUR_MS == 0 {
        levels.push(Source::Hour);
    }
    let mut out = Vec::new();
    if width > 0 && start < end {
        split(start, end, &levels, held, &mut out);
    }
    out
}

fn split(start: i64, end: i64, levels: &[Source], held: Held, out: &mut Vec<Segment>) {
    let Some((&source, finer)) = levels.split_last() else {
        return;
    };
    let Some(period) = source.period_ms() else {
        out.push(Segment { source, start, end });
        return;
    };
    let first_whole = ceil_to(start.max(held.from(source)), period);
    let last_whole = end - end.rem_euclid(period);
    if first_whole >= last_whole {
        split(start, end, finer, held, out);
        return;
    }
    if start < first_whole {
        split(start, first_whole, finer, held, out);
    }
    out.push(Segment {
        source,
        start: first_whole,
        end: last_whole,
    });
    if last_whole < end {
        split(last_whole, end, finer, held, out);
    }
}

fn ceil_to(ts: i64, period: i64) -> i64 {
    let r = ts.rem_euclid(period);
    if r == 0 {
        ts
    } else {
        ts - r + period
    }
}

#[cfg(test)]
mod tests;
