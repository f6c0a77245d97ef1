//! When each resource is polled: at the `pollRate` its last answer gave
//! (a changed rate counts from that answer on, ALL-19 and ALL-20), and
//! after a failure again within a backoff that starts at 5 s and never
//! exceeds 60 s or the rate, so a server that comes back is polled within a
//! minute (ALL-23).
//!
//! Pure: times are monotonic ms passed in.

use std::collections::BTreeMap;

/// A resource the client polls.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Poll {
    DeviceCapability,
    Time,
    EndDevices,
    FunctionSets,
    /// A DERProgramList, by href: its programs, their controls and defaults.
    Programs(String),
    Ders,
    Mirrors,
}

impl Poll {
    /// For metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Poll::DeviceCapability => "dcap",
            Poll::Time => "tm",
            Poll::EndDevices => "edev",
            Poll::FunctionSets => "fsa",
            Poll::Programs(_) => "derp",
            Poll::Ders => "der",
            Poll::Mirrors => "mup",
        }
    }
}

/// 2030.5's pollRate when a resource gives none, s.
pub const DEFAULT_RATE_S: u32 = 900;
/// The fastest a server may ask for, s.
pub const MIN_RATE_S: u32 = 1;
const BACKOFF_FIRST_MS: i64 = 5_000;
const BACKOFF_MAX_MS: i64 = 60_000;

#[derive(Clone, Debug, PartialEq)]
struct Due {
    at_ms: i64,
    rate_s: u32,
    backoff_ms: i64,
}

/// Every resource polled, and when next.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Polls {
    due: BTreeMap<Poll, Due>,
}

impl Polls {
    /// Polls `p` from `now_ms` on (at once), unless it is polled already.
    pub fn add(&mut self, p: Poll, now_ms: i64) {
        self.due.entry(p).or_insert(Due {
            at_ms: now_ms,
            rate_s: DEFAULT_RATE_S,
            backoff_ms: 0,
        });
    }

    /// Polls `p` at once (after a change that calls for it).
    pub fn now(&mut self, p: &Poll, now_ms: i64) {
        if let Some(d) = self.due.get_mut(p) {
            d.at_ms = d.at_ms.min(now_ms);
        }
    }

    /// Stops polling `p`.
    pub fn remove(&mut self, p: &Poll) {
        self.due.remove(p);
    }

    /// Every poll but those `keep` says to keep is dropped.
    pub fn retain(&mut self, keep: impl Fn(&Poll) -> bool) {
        self.due.retain(|p, _| keep(p));
    }

    pub fn contains(&self, p: &Poll) -> bool {
        self.due.contains_key(p)
    }

    /// The polls due at `now_ms`, in order.
    pub fn due(&self, now_ms: i64) -> Vec<Poll> {
        self.due
            .iter()
            .filter(|(_, d)| d.at_ms <= now_ms)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// `p` was answered at `now_ms` with `rate_s` (`None`: it gave none).
    pub fn done(&mut self, p: &Poll, now_ms: i64, rate_s: Option<u32>) {
        if let Some(d) = self.due.get_mut(p) {
            d.rate_s = rate_s.unwrap_or(d.rate_s).max(MIN_RATE_S);
            d.at_ms = now_ms + i64::from(d.rate_s) * 1000;
            d.backoff_ms = 0;
        }
    }

    /// `p` failed at `now_ms`: again after the backoff.
    pub fn failed(&mut self, p: &Poll, now_ms: i64) {
        if let Some(d) = self.due.get_mut(p) {
            d.backoff_ms = (d.backoff_ms * 2).clamp(BACKOFF_FIRST_MS, BACKOFF_MAX_MS);
            let wait = d.backoff_ms.min(i64::from(d.rate_s) * 1000);
            d.at_ms = now_ms + wait;
        }
    }

    /// The rate `p` is polled at, s.
    pub fn rate_s(&self, p: &Poll) -> Option<u32> {
        self.due.get(p).map(|d| d.rate_s)
    }

    /// The earliest next poll.
    pub fn next_ms(&self) -> Option<i64> {
        self.due.values().map(|d| d.at_ms).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_follows_the_rate_of_its_last_answer() {
        let mut p = Polls::default();
        let fsa = Poll::FunctionSets;
        p.add(fsa.clone(), 0);
        assert_eq!(p.due(0), vec![fsa.clone()]);
        p.done(&fsa, 0, Some(300));
        assert!(p.due(299_999).is_empty());
        // ALL-19: the answer at 300 s carries 60: the next poll is 60 s on.
        p.done(&fsa, 300_000, Some(60));
        assert_eq!(p.next_ms(), Some(360_000));
        p.done(&fsa, 360_000, None);
        assert_eq!(
            p.next_ms(),
            Some(420_000),
            "no rate given: the last one stands"
        );
    }

    #[test]
    fn failures_back_off_within_a_minute_and_the_rate() {
        let mut p = Polls::default();
        let d = Poll::DeviceCapability;
        p.add(d.clone(), 0);
        p.done(&d, 0, Some(120));
        let mut t = 120_000;
        let mut waits = Vec::new();
        for _ in 0..6 {
            p.failed(&d, t);
            let next = p.next_ms().unwrap();
            waits.push(next - t);
            t = next;
        }
        assert_eq!(waits, vec![5_000, 10_000, 20_000, 40_000, 60_000, 60_000]);
        p.done(&d, t, None);
        p.failed(&d, t + 120_000);
        assert_eq!(
            p.next_ms(),
            Some(t + 125_000),
            "an answer resets the backoff"
        );
        let fast = Poll::Time;
        p.add(fast.clone(), 0);
        p.done(&fast, 0, Some(2));
        p.failed(&fast, 2_000);
        assert_eq!(p.rate_s(&fast), Some(2));
        assert!(p.due(4_000).contains(&fast), "never slower than the rate");
    }
}
