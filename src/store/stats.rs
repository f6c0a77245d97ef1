//! The store's counters: commits with their duration, samples committed or
//! dropped, bytes appended to the write-ahead log, and (read at scrape time)
//! the writer's queue depths, the database file size and the memory SQLite
//! holds; what retention deleted is `retention_stats.rs`'s. The writer
//! counts; `/metrics` reads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::{RetentionStats, StoreHandle, JOB_QUEUE, SAMPLE_QUEUE};
use crate::metrics::{Collect, Encoder, Histogram, Kind};

#[derive(Debug, Default)]
pub struct StoreStats {
    commits_ok: AtomicU64,
    commits_failed: AtomicU64,
    samples_committed: AtomicU64,
    samples_dropped: AtomicU64,
    wal_bytes: AtomicU64,
    commit_duration: Histogram,
    /// Samples waiting in memory for a commit.
    buffered: AtomicU64,
    /// Damaged databases set aside at start.
    set_aside: AtomicU64,
    /// The agent runs on a temporary store: the configured one cannot be opened.
    temporary: AtomicBool,
    /// Retention by age is held (the wall clock is not synchronised).
    age_retention_held: AtomicBool,
    /// What the background integrity check found, if damage.
    damage: Mutex<Option<String>>,
    /// Why commits fail now (`None` while they succeed).
    failing: Mutex<Option<String>>,
    /// What retention deleted and how far back the data reaches.
    pub retention: RetentionStats,
}

impl StoreStats {
    /// One writer transaction: `samples` in it, how long BEGIN to COMMIT took.
    pub(super) fn record_commit(&self, ok: bool, samples: usize, took: Duration) {
        if ok {
            self.commits_ok.fetch_add(1, Ordering::Relaxed);
            self.samples_committed
                .fetch_add(samples as u64, Ordering::Relaxed);
        } else {
            // Its samples wait for the next commit; dropped ones are counted
            // by `record_dropped`.
            self.commits_failed.fetch_add(1, Ordering::Relaxed);
        }
        self.commit_duration.observe_duration(took);
    }

    /// Samples dropped past the buffer while commits fail.
    pub(super) fn record_dropped(&self, samples: usize) {
        self.samples_dropped
            .fetch_add(samples as u64, Ordering::Relaxed);
    }

    pub(super) fn record_set_aside(&self) {
        self.set_aside.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn record_damage_found(&self, reason: String) {
        *self
            .damage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason);
    }

    /// The damage the background integrity check found, if it did.
    pub fn damage_found(&self) -> Option<String> {
        self.damage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Holds retention by age while `on` (the size bound still applies): a
    /// clock that runs ahead would delete samples that are not yet old.
    /// Returns whether this changed anything.
    pub fn hold_age_retention(&self, on: bool) -> bool {
        self.age_retention_held.swap(on, Ordering::Relaxed) != on
    }

    pub(super) fn age_retention_held(&self) -> bool {
        self.age_retention_held.load(Ordering::Relaxed)
    }

    /// This store stands in for the configured one, which cannot be opened
    /// (`agent/temporary_store.rs`).
    pub fn mark_temporary(&self) {
        self.temporary.store(true, Ordering::Relaxed);
    }

    pub(super) fn set_buffered(&self, samples: usize) {
        self.buffered.store(samples as u64, Ordering::Relaxed);
    }

    fn failing_lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        // One string; keep serving it after a panic elsewhere.
        self.failing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A commit failed for `why`; true when this starts a spell of failures.
    pub(super) fn failing(&self, why: &str) -> bool {
        self.failing_lock().replace(why.to_string()).is_none()
    }

    /// A commit succeeded: the reason of the spell it ends, if one did.
    pub(super) fn recovered(&self) -> Option<String> {
        self.failing_lock().take()
    }

    /// Why commits fail now; `None` while they succeed.
    pub fn problem(&self) -> Option<String> {
        self.failing_lock().clone()
    }

    /// Samples waiting in memory for a commit.
    pub fn buffered(&self) -> u64 {
        self.buffered.load(Ordering::Relaxed)
    }

    /// `frames` whole pages (and their 24-byte frame headers) appended to the WAL.
    pub(super) fn record_wal_frames(&self, frames: u64, page_size: u64) {
        self.wal_bytes
            .fetch_add(frames * (page_size + 24), Ordering::Relaxed);
    }

    pub fn samples_committed(&self) -> u64 {
        self.samples_committed.load(Ordering::Relaxed)
    }

    /// Bytes the writer appended to the write-ahead log since the store opened.
    pub fn wal_bytes(&self) -> u64 {
        self.wal_bytes.load(Ordering::Relaxed)
    }
}

impl Collect for StoreHandle {
    fn collect(&self, out: &mut Encoder) {
        let s = &self.stats;
        s.collect_writes(out);
        s.collect_state(out);
        out.family(
            "sitegate_store_reads_waiting",
            Kind::Gauge,
            "Reads for requests waiting for one of their read turns (bounded; past the bound a read is refused as busy). The agent's own outbox reads have a turn of their own and are not counted.",
        )
        .sample(&[], self.reads_waiting() as f64);
        out.family(
            "sitegate_store_refused_reads_total",
            Kind::Counter,
            "Reads refused because the store's read turns and queue were full.",
        )
        .sample(&[], self.readers.refused() as f64);
        out.family(
            "sitegate_store_wal_written_bytes_total",
            Kind::Counter,
            "Bytes the store appended to its write-ahead log (whole pages plus frame headers); checkpoints copy those pages into the database file once more.",
        )
        .sample(&[], s.wal_bytes() as f64);
        out.family(
            "sitegate_store_commit_duration_seconds",
            Kind::Histogram,
            "Time of one writer transaction, fsync included.",
        )
        .histogram(&[], &s.commit_duration.snapshot());
        s.retention.collect(out);
        let sample_depth = SAMPLE_QUEUE.saturating_sub(self.samples.capacity());
        let job_depth = JOB_QUEUE.saturating_sub(self.jobs.capacity());
        out.family(
            "sitegate_store_queue_depth",
            Kind::Gauge,
            "Items waiting for the writer: sample batches (bound 1024) and jobs (bound 64).",
        )
        .sample(&[("queue", "samples")], sample_depth as f64)
        .sample(&[("queue", "jobs")], job_depth as f64);
        if let Some((now, highest)) = super::sqlite_memory::held() {
            out.family(
                "sitegate_store_sqlite_memory_bytes",
                Kind::Gauge,
                "Memory SQLite holds: the page caches of the writer and the readers (bounded by their cache_size), prepared statements; now, and the most since start.",
            )
            .sample(&[("at", "now")], now as f64)
            .sample(&[("at", "peak")], highest as f64);
        }
        collect_file_sizes(&self.path, out);
    }
}

impl StoreStats {
    /// The writer's transactions, the samples it committed or dropped, and
    /// those it holds.
    fn collect_writes(&self, out: &mut Encoder) {
        out.family(
            "sitegate_store_commits_total",
            Kind::Counter,
            "Writer transactions, by result.",
        )
        .sample(
            &[("result", "ok")],
            self.commits_ok.load(Ordering::Relaxed) as f64,
        )
        .sample(
            &[("result", "failed")],
            self.commits_failed.load(Ordering::Relaxed) as f64,
        );
        out.family(
        "sitegate_store_samples_total",
        Kind::Counter,
        "Samples written (committed), or dropped from the buffer they wait in while commits fail (past storage.buffer_samples).",
    )
    .sample(&[("result", "committed")], self.samples_committed() as f64)
    .sample(
        &[("result", "dropped")],
        self.samples_dropped.load(Ordering::Relaxed) as f64,
    );
        out.family(
        "sitegate_store_buffered_samples",
        Kind::Gauge,
        "Samples waiting in memory for their commit (a failing commit leaves them there, up to storage.buffer_samples).",
    )
    .sample(&[], self.buffered() as f64);
    }

    /// The database's state: set aside at start, found damaged, temporary,
    /// failing.
    fn collect_state(&self, out: &mut Encoder) {
        out.family(
        "sitegate_store_set_aside_total",
        Kind::Counter,
        "Damaged databases found at start and set aside (renamed, never deleted); the store started on a new one.",
    )
    .sample(&[], self.set_aside.load(Ordering::Relaxed) as f64);
        out.family(
        "sitegate_store_damage_found",
        Kind::Gauge,
        "1 once the background integrity check found the database damaged; the next start sets it aside. /readyz says why.",
    )
    .sample(&[], f64::from(u8::from(self.damage_found().is_some())));
        out.family(
        "sitegate_store_temporary",
        Kind::Gauge,
        "1 while the agent runs on a temporary store because the configured one cannot be opened; /readyz says why.",
    )
    .sample(&[], f64::from(u8::from(self.temporary.load(Ordering::Relaxed))));
        out.family(
        "sitegate_store_failing",
        Kind::Gauge,
        "1 while the store's commits fail (a full, read-only or failing disk); /readyz says why.",
    )
    .sample(&[], f64::from(u8::from(self.problem().is_some())));
    }
}

/// The size of the database file at `path` and of its write-ahead log, each
/// when it exists.
fn collect_file_sizes(path: &std::path::Path, out: &mut Encoder) {
    let mut size = out.family(
        "sitegate_store_file_bytes",
        Kind::Gauge,
        "Size of the database file and of its write-ahead log.",
    );
    for (file, suffix) in [("db", ""), ("wal", "-wal")] {
        let mut path = path.to_path_buf().into_os_string();
        path.push(suffix);
        if let Ok(m) = std::fs::metadata(&path) {
            size.sample(&[("file", file)], m.len() as f64);
        }
    }
}
