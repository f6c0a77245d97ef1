//! Stretches a summary cannot tell apart, read again sample by sample:
//!
//! - hours in which a counter fell: an hour's summary keeps only its first,
//!   lowest, highest and last reading, which cannot tell a misread that came
//!   back from a reset;
//! - minutes in which a power changed sign: their mean cannot say how much
//!   of it flowed each way.
//!
//! Neighbouring ones are read as one. At most [`MAX_REFINED_MS`] of time per
//! answer, so that one question cannot read a month of raw samples; past it
//! (and where retention already deleted the raw samples) the summaries
//! stand, read as `counter.rs` and `power.rs` say.
//!
//! Pure: which reads to make, and splicing their answers in. It must not read
//! the store.

use super::counter::rises_only;
use super::plan::{Read, ReadKind};
use crate::store::{Agg, SummaryQuery};

/// Most time one answer reads again: a day (a device polled every 100 ms
/// has 864,000 samples in it).
pub const MAX_REFINED_MS: i64 = 24 * 3_600_000;
/// The width they are read again in: one sample a bucket (a series holds
/// one sample per millisecond at most).
pub const REFINED_WIDTH_MS: i64 = 1;

/// Summaries to read again: the read's index, the first and last summary's
/// index in its answer, and the store's query for them.
#[derive(Clone, Debug, PartialEq)]
pub struct Refinement {
    pub read: usize,
    pub first: usize,
    pub last: usize,
    pub query: SummaryQuery,
}

/// Whether a summary of `kind` needs its samples.
fn unclear(kind: ReadKind, a: &Agg) -> bool {
    match kind {
        ReadKind::Counter(_) => !rises_only(a),
        ReadKind::Power => a.min < 0.0 && a.max > 0.0,
        ReadKind::CounterBefore(_) => false,
    }
}

/// The summaries of `results` (the answers to `reads`) that need their
/// samples, neighbours together, earliest reads first, within
/// [`MAX_REFINED_MS`].
pub fn refinements(reads: &[Read], results: &[Vec<(i64, Agg)>]) -> Vec<Refinement> {
    let mut out: Vec<Refinement> = Vec::new();
    let mut budget = MAX_REFINED_MS;
    for (r, read) in reads.iter().enumerate() {
        let width = read.query.width_ms;
        for (j, (bucket, agg)) in results[r].iter().enumerate() {
            if !unclear(read.kind, agg) {
                continue;
            }
            let start = (*bucket).max(read.query.start_ms);
            let end = (bucket + width).min(read.query.end_ms);
            if end - start > budget {
                return out;
            }
            budget -= end - start;
            match out.last_mut() {
                Some(f) if f.read == r && f.last + 1 == j => {
                    f.last = j;
                    f.query.end_ms = end;
                }
                _ => out.push(Refinement {
                    read: r,
                    first: j,
                    last: j,
                    query: SummaryQuery {
                        start_ms: start,
                        end_ms: end,
                        width_ms: REFINED_WIDTH_MS,
                        ..read.query.clone()
                    },
                }),
            }
        }
    }
    out
}

/// Puts each refinement's summaries (`refined`, in the same order) in place
/// of those it read again; an empty answer (raw samples deleted) leaves them
/// as they were.
pub fn splice(
    results: &mut [Vec<(i64, Agg)>],
    refinements: &[Refinement],
    refined: Vec<Vec<(i64, Agg)>>,
) {
    let mut pairs: Vec<(&Refinement, Vec<(i64, Agg)>)> = refinements.iter().zip(refined).collect();
    // From the last to the first, so that earlier indexes stay valid.
    pairs.sort_by_key(|(f, _)| std::cmp::Reverse((f.read, f.first)));
    for (f, samples) in pairs {
        if !samples.is_empty() {
            results[f.read].splice(f.first..=f.last, samples);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::flow::Flow;
    use crate::model::Property;
    use crate::store::{HOUR_MS, MINUTE_MS};

    fn read(kind: ReadKind, width_ms: i64) -> Read {
        Read {
            device: 0,
            kind,
            query: SummaryQuery {
                device: "m".into(),
                property: Property::TotalEnergyConsumed,
                start_ms: HOUR_MS / 2,
                end_ms: 3 * HOUR_MS,
                width_ms,
            },
        }
    }

    fn agg(readings: &[(i64, f64)]) -> Agg {
        let mut a = Agg::one(readings[0].0, readings[0].1);
        readings[1..].iter().for_each(|(t, v)| a.add(*t, *v));
        a
    }

    #[test]
    fn hours_where_a_counter_fell_are_read_again_and_spliced_in() {
        let reads = [
            read(ReadKind::CounterBefore(Flow::Imported), HOUR_MS),
            read(ReadKind::Counter(Flow::Imported), HOUR_MS),
        ];
        let fell = agg(&[
            (HOUR_MS + 10, 1000.0),
            (HOUR_MS + 20, 5.0),
            (HOUR_MS + 30, 1001.0),
        ]);
        let mut results = vec![
            vec![(HOUR_MS, fell)],
            vec![
                (0, agg(&[(HOUR_MS / 2, 1.0), (HOUR_MS - 1, 2.0)])),
                (HOUR_MS, fell),
            ],
        ];
        let found = refinements(&reads, &results);
        assert_eq!(
            found.len(),
            1,
            "the reading before is not read again: {found:?}"
        );
        assert_eq!((found[0].read, found[0].first, found[0].last), (1, 1, 1));
        let q = &found[0].query;
        assert_eq!(
            (q.start_ms, q.end_ms, q.width_ms),
            (HOUR_MS, 2 * HOUR_MS, REFINED_WIDTH_MS)
        );
        let samples: Vec<(i64, Agg)> = [(10, 1000.0), (20, 5.0), (30, 1001.0)]
            .iter()
            .map(|&(t, v)| (HOUR_MS + t, Agg::one(HOUR_MS + t, v)))
            .collect();
        splice(&mut results, &found, vec![samples.clone()]);
        assert_eq!(results[1][1..], samples[..]);
        assert_eq!(results[1].len(), 4);
        // Nothing read again (raw samples gone): the hour stays.
        let mut kept = vec![Vec::new(), vec![(HOUR_MS, fell)]];
        let again = refinements(&reads, &kept);
        splice(&mut kept, &again, vec![Vec::new()]);
        assert_eq!(kept[1], [(HOUR_MS, fell)]);
    }

    #[test]
    fn minutes_whose_power_changed_sign_are_read_again_neighbours_together() {
        let reads = [read(ReadKind::Power, MINUTE_MS)];
        let m = |i: i64, lo: f64, hi: f64| {
            let t = HOUR_MS + i * MINUTE_MS;
            (t, agg(&[(t, lo), (t + 1, hi)]))
        };
        let results = vec![vec![
            m(0, -5.0, 5.0),
            m(1, -5.0, 5.0),
            m(2, 1.0, 5.0),
            m(3, -5.0, -1.0),
            m(4, -1.0, 2.0),
        ]];
        let found = refinements(&reads, &results);
        let spans: Vec<(usize, usize, i64, i64)> = found
            .iter()
            .map(|f| (f.first, f.last, f.query.start_ms, f.query.end_ms))
            .collect();
        assert_eq!(
            spans,
            [
                (0, 1, HOUR_MS, HOUR_MS + 2 * MINUTE_MS),
                (4, 4, HOUR_MS + 4 * MINUTE_MS, HOUR_MS + 5 * MINUTE_MS)
            ]
        );
    }

    #[test]
    fn at_most_a_day_is_read_again() {
        let reads = [read(ReadKind::Counter(Flow::Imported), HOUR_MS)];
        let fell = agg(&[(0, 10.0), (1, 5.0), (2, 6.0)]);
        let mut long = reads[0].clone();
        long.query.start_ms = 0;
        long.query.end_ms = 100 * HOUR_MS;
        let results = vec![(0..100).map(|h| (h * HOUR_MS, fell)).collect()];
        let found = refinements(&[long], &results);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].first, found[0].last), (0, 23));
    }
}
