//! The commit hook: how another feature writes its own rows in the same
//! transaction as the samples, without owning a connection or a thread.
//!
//! The writer calls the one [`CommitHook`] given to
//! [`StoreHandle::open_with_hook`](super::StoreHandle::open_with_hook) in every
//! transaction it commits for samples or jobs, with that transaction's sample
//! batches, and tells it afterwards whether the transaction committed. The MQTT
//! outbox is the user: a sample that the store committed is in the outbox too,
//! and the outbox's deletes and evictions ride along in the same commits instead
//! of forcing commits (and fsyncs) of their own.
//!
//! The store knows nothing of the hook's tables or encodings; this file only
//! keeps the batch boundaries the hook needs. It must not depend on any feature.

use rusqlite::Connection;

use crate::model::Sample;

/// One published batch (one poll of one device) inside a transaction.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// The device reference (stable, unlike `DeviceId`).
    pub device: &'a str,
    pub samples: &'a [Sample],
}

/// Writes that ride along in the store writer's transactions. Runs on the writer
/// thread: keep every call short, every sample batch waits for it.
pub trait CommitHook: Send + 'static {
    /// Once, at open, after the migrations and before the first transaction.
    fn open(&mut self, conn: &Connection) -> rusqlite::Result<()>;

    /// Inside each transaction of samples and/or jobs, after its samples were
    /// written and its jobs ran (outside their savepoints). `batches` are the transaction's device
    /// batches in arrival order (none for a transaction of jobs only), holding
    /// only the samples the measurement tables stored: a duplicate of a stored
    /// sample, or a non-finite value, does not reach the hook.
    /// An error rolls the whole transaction back, samples included.
    fn write(&mut self, conn: &Connection, batches: &[Batch<'_>]) -> rusqlite::Result<()>;

    /// After that transaction: `committed` is false when it was rolled back
    /// (whatever `write` did is gone). Called before the jobs of the transaction
    /// are answered.
    fn finished(&mut self, committed: bool);
}

/// Samples waiting for the next commit, with the end of each batch.
#[derive(Default)]
pub(crate) struct Pending {
    pub samples: Vec<Sample>,
    ends: Vec<usize>,
}

impl Pending {
    pub fn push(&mut self, batch: Vec<Sample>) {
        if batch.is_empty() {
            return;
        }
        self.samples.extend(batch);
        self.ends.push(self.samples.len());
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Takes what is pending and leaves room for as much again, so the next
    /// commit's batches are copied in once rather than into a buffer that
    /// doubles from empty (at 1,000 devices, 13,000 samples a second).
    pub fn take(&mut self) -> Pending {
        let room = Pending {
            samples: Vec::with_capacity(self.samples.len()),
            ends: Vec::with_capacity(self.ends.len()),
        };
        std::mem::replace(self, room)
    }

    /// Puts `older` (taken before, not committed) in front of what came
    /// since, then drops the oldest whole batches while more than `limit`
    /// samples wait; returns how many samples were dropped.
    pub fn restore(&mut self, older: Pending, limit: usize) -> usize {
        let newer = std::mem::replace(self, older);
        let base = self.samples.len();
        self.samples.extend(newer.samples);
        self.ends.extend(newer.ends.into_iter().map(|e| e + base));
        let mut dropped = 0;
        while self.samples.len() > limit && !self.ends.is_empty() {
            let first = self.ends.remove(0);
            self.samples.drain(..first);
            for e in &mut self.ends {
                *e -= first;
            }
            dropped += first;
        }
        dropped
    }

    /// The samples whose flag in `kept` is set (one flag per sample, in
    /// order), with their batch boundaries; batches left empty go.
    pub fn only(&self, kept: &[bool]) -> Pending {
        let mut out = Pending::default();
        let mut start = 0;
        for &end in &self.ends {
            let batch = self.samples[start..end]
                .iter()
                .zip(&kept[start..end])
                .filter_map(|(s, &k)| k.then_some(*s));
            out.samples.extend(batch);
            if out.samples.len() > out.ends.last().copied().unwrap_or(0) {
                out.ends.push(out.samples.len());
            }
            start = end;
        }
        out
    }

    /// The batches, named by device reference; `reference` maps a sample's
    /// device id (samples of unknown devices are left out).
    pub fn batches<'a>(&'a self, reference: impl Fn(&Sample) -> Option<&'a str>) -> Vec<Batch<'a>> {
        let mut start = 0;
        let mut out = Vec::with_capacity(self.ends.len());
        for &end in &self.ends {
            let samples = &self.samples[start..end];
            start = end;
            if let Some(device) = samples.first().and_then(&reference) {
                out.push(Batch { device, samples });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceId, Property};

    fn batch(device: u16, n: usize) -> Vec<Sample> {
        (0..n)
            .map(|i| Sample {
                device: DeviceId(device),
                property: Property::ActivePower,
                ts_ms: i as i64,
                value: 1.0,
            })
            .collect()
    }

    #[test]
    fn batches_keep_their_boundaries_and_skip_unknown_devices() {
        let mut p = Pending::default();
        p.push(batch(0, 2));
        p.push(Vec::new());
        p.push(batch(0, 1));
        p.push(batch(7, 3));
        p.push(batch(1, 1));
        assert_eq!(p.len(), 7);
        let names = ["a", "b"];
        let got: Vec<_> = p
            .batches(|s| names.get(usize::from(s.device.0)).copied())
            .iter()
            .map(|b| (b.device, b.samples.len()))
            .collect();
        assert_eq!(got, [("a", 2), ("a", 1), ("b", 1)]);
        let taken = p.take();
        assert!(p.is_empty());
        assert_eq!(taken.len(), 7);
        // A failed commit's samples go back in front, the oldest dropped
        // past the limit, by whole batches.
        p.push(batch(1, 2));
        assert_eq!(p.restore(taken, 6), 3);
        let got: Vec<_> = p
            .batches(|s| names.get(usize::from(s.device.0)).copied())
            .iter()
            .map(|b| (b.device, b.samples.len()))
            .collect();
        assert_eq!(got, [("b", 1), ("b", 2)]);
        assert_eq!(p.len(), 6);
    }

    #[test]
    fn only_keeps_the_flagged_samples_and_drops_emptied_batches() {
        let mut p = Pending::default();
        p.push(batch(0, 3));
        p.push(batch(1, 2));
        p.push(batch(0, 2));
        let kept = [true, false, true, false, false, false, true];
        let only = p.only(&kept);
        let names = ["a", "b"];
        let got: Vec<_> = only
            .batches(|s| names.get(usize::from(s.device.0)).copied())
            .iter()
            .map(|b| {
                (
                    b.device,
                    b.samples.iter().map(|s| s.ts_ms).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(got, [("a", vec![0, 2]), ("a", vec![1])]);
        assert_eq!(only.len(), 3);
    }
}
