//! Telemetry averaged over each post interval: the site's and the DER's
//! quantities sampled every second, posted as one reading each when the
//! interval ends. Intervals are aligned to the post rate in server time, so
//! at 60 s each starts on the minute, as CSIP-AUS's checks ask; stored
//! energy is the amount at the interval's end, not an average.
//!
//! Pure: samples and times in, readings out.

use std::collections::BTreeMap;

use crate::csip::resource::mirror::{Quantity, Sample};

/// The start of the interval of `rate_s` holding `now_s`.
pub fn interval_start(now_s: i64, rate_s: u32) -> i64 {
    let r = i64::from(rate_s.max(1));
    now_s - now_s.rem_euclid(r)
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Acc {
    sum: f64,
    n: u32,
    last: f64,
}

/// One interval's samples, per mirror role and quantity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Averager {
    /// The interval being filled: start and length, s.
    pub start_s: Option<i64>,
    pub rate_s: u32,
    acc: BTreeMap<(u16, Quantity), Acc>,
}

/// A finished interval: its start and length, and each mirror's readings.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    pub start_s: i64,
    pub duration_s: u32,
    pub by_role: Vec<(u16, Vec<Sample>)>,
}

impl Averager {
    /// Adds what the mirror `role` measures at `now_s`; returns the
    /// interval that ended before it, if any. A changed `rate_s` ends the
    /// current interval at once (ALL-10: a faster rate is taken up without
    /// waiting out the slower one).
    pub fn add(
        &mut self,
        now_s: i64,
        rate_s: u32,
        role: u16,
        samples: &[Sample],
    ) -> Option<Interval> {
        let start = interval_start(now_s, rate_s);
        let ended = match self.start_s {
            Some(s) if s != start || rate_s != self.rate_s => self.finish(now_s),
            _ => None,
        };
        if self.start_s.is_none() {
            self.start_s = Some(start);
            self.rate_s = rate_s;
        }
        for s in samples {
            let a = self.acc.entry((role, s.quantity)).or_default();
            a.sum += s.value;
            a.n += 1;
            a.last = s.value;
        }
        ended
    }

    /// The interval so far, ended at `now_s` at the latest.
    fn finish(&mut self, now_s: i64) -> Option<Interval> {
        let start = self.start_s.take()?;
        let full = start + i64::from(self.rate_s);
        let end = full.min(now_s.max(start + 1));
        let acc = std::mem::take(&mut self.acc);
        let mut by_role: BTreeMap<u16, Vec<Sample>> = BTreeMap::new();
        for ((role, quantity), a) in acc {
            if a.n == 0 {
                continue;
            }
            let value = match quantity {
                Quantity::StoredEnergy => a.last,
                _ => a.sum / f64::from(a.n),
            };
            by_role
                .entry(role)
                .or_default()
                .push(Sample { quantity, value });
        }
        if by_role.is_empty() {
            return None;
        }
        // An interval cut short by a new rate keeps whole minutes where it
        // can (CSIP-AUS's readings last a multiple of 60 s).
        let mut duration = end - start;
        if duration >= 60 {
            duration -= duration % 60;
        }
        Some(Interval {
            start_s: start,
            duration_s: u32::try_from(duration.max(1)).unwrap_or(u32::MAX),
            by_role: by_role.into_iter().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(value: f64) -> Vec<Sample> {
        vec![Sample {
            quantity: Quantity::ActivePower,
            value,
        }]
    }

    #[test]
    fn intervals_start_on_the_minute_and_average_their_samples() {
        assert_eq!(interval_start(1_700_000_059, 60), 1_700_000_040);
        let mut a = Averager::default();
        let t0 = 1_700_000_040;
        assert!(a.add(t0 + 5, 60, 3, &w(100.0)).is_none());
        assert!(a.add(t0 + 6, 60, 3, &w(300.0)).is_none());
        let stored = [Sample {
            quantity: Quantity::StoredEnergy,
            value: 5_000.0,
        }];
        a.add(t0 + 7, 60, 0x49, &stored);
        a.add(
            t0 + 8,
            60,
            0x49,
            &[Sample {
                quantity: Quantity::StoredEnergy,
                value: 4_990.0,
            }],
        );
        let i = a.add(t0 + 60, 60, 3, &w(0.0)).unwrap();
        assert_eq!((i.start_s, i.duration_s), (t0, 60));
        assert_eq!(i.by_role[0], (3, w(200.0)));
        assert_eq!(i.by_role[1].1[0].value, 4_990.0);
    }

    #[test]
    fn a_new_rate_ends_the_interval_at_once() {
        let mut a = Averager::default();
        let t0 = 1_700_000_100; // on a 300 s boundary
        a.add(t0 + 10, 300, 3, &w(1.0));
        let i = a.add(t0 + 130, 60, 3, &w(1.0)).unwrap();
        assert_eq!((i.start_s, i.duration_s), (t0, 120));
        assert_eq!(a.start_s, Some(interval_start(t0 + 130, 60)));
    }
}
