//! Which table answers which part of a time-series query.
//!
//! A query range `[start, end)` with bucket width `w` is cut into segments, each
//! read from one source: hour rollups, minute rollups or raw samples. A rollup
//! level is usable only when `w` is a whole multiple of its period (then each
//! rollup row falls inside exactly one output bucket), and only for whole periods
//! inside the range; the partial periods at the edges are read from the next finer
//! level, down to raw samples. So the answer equals a naive fold over the raw
//! samples. Pure: no SQLite.

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

/// Cuts `[start, end)` into ascending, adjacent, non-empty segments for buckets of
/// `width` ms. `width > 0` and `start < end`, else the plan is empty.
pub fn plan(start: i64, end: i64, width: i64) -> Vec<Segment> {
    let mut levels = vec![Source::Raw];
    if width > 0 && width % MINUTE_MS == 0 {
        levels.push(Source::Minute);
    }
    if width > 0 && width % HOUR_MS == 0 {
        levels.push(Source::Hour);
    }
    let mut out = Vec::new();
    if width > 0 && start < end {
        split(start, end, &levels, &mut out);
    }
    out
}

fn split(start: i64, end: i64, levels: &[Source], out: &mut Vec<Segment>) {
    let Some((&source, finer)) = levels.split_last() else {
        return;
    };
    let Some(period) = source.period_ms() else {
        out.push(Segment { source, start, end });
        return;
    };
    let first_whole = ceil_to(start, period);
    let last_whole = end - end.rem_euclid(period);
    if first_whole >= last_whole {
        split(start, end, finer, out);
        return;
    }
    if start < first_whole {
        split(start, first_whole, finer, out);
    }
    out.push(Segment {
        source,
        start: first_whole,
        end: last_whole,
    });
    if last_whole < end {
        split(last_whole, end, finer, out);
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
mod tests {
    use super::*;

    fn check(start: i64, end: i64, width: i64, expected: &[(Source, i64, i64)]) {
        let got: Vec<_> = plan(start, end, width)
            .into_iter()
            .map(|s| (s.source, s.start, s.end))
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn aligned_hours_use_only_hour_rollups() {
        check(0, 2 * HOUR_MS, HOUR_MS, &[(Source::Hour, 0, 2 * HOUR_MS)]);
    }

    #[test]
    fn unaligned_edges_step_down_to_minutes_then_raw() {
        let start = HOUR_MS - MINUTE_MS - 500;
        let end = 3 * HOUR_MS + 2 * MINUTE_MS + 7;
        check(
            start,
            end,
            HOUR_MS,
            &[
                (Source::Raw, start, HOUR_MS - MINUTE_MS),
                (Source::Minute, HOUR_MS - MINUTE_MS, HOUR_MS),
                (Source::Hour, HOUR_MS, 3 * HOUR_MS),
                (Source::Minute, 3 * HOUR_MS, 3 * HOUR_MS + 2 * MINUTE_MS),
                (Source::Raw, 3 * HOUR_MS + 2 * MINUTE_MS, end),
            ],
        );
    }

    #[test]
    fn widths_not_a_multiple_of_a_minute_read_raw() {
        check(0, 10 * HOUR_MS, 90_000, &[(Source::Raw, 0, 10 * HOUR_MS)]);
        check(5, 20_000, 1_000, &[(Source::Raw, 5, 20_000)]);
    }

    #[test]
    fn minute_multiples_never_use_hours_unless_width_divides() {
        check(
            0,
            2 * HOUR_MS,
            5 * MINUTE_MS,
            &[(Source::Minute, 0, 2 * HOUR_MS)],
        );
        check(
            -30_000,
            90_000,
            MINUTE_MS,
            &[
                (Source::Raw, -30_000, 0),
                (Source::Minute, 0, MINUTE_MS),
                (Source::Raw, MINUTE_MS, 90_000),
            ],
        );
    }

    #[test]
    fn a_range_inside_one_period_is_raw() {
        check(10, 20, HOUR_MS, &[(Source::Raw, 10, 20)]);
        check(20, 10, HOUR_MS, &[]);
    }
}
