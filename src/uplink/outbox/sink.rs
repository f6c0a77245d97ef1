//! The outbox's writer half: a [`CommitHook`] that the store writer calls in every
//! transaction. It appends one row per device batch (so a sample the store
//! committed is in the outbox too), deletes the rows acknowledged since the last
//! commit, and evicts at most [`EVICT_CHUNK`] of the oldest rows when the outbox
//! is over its cap. Counters change only after the commit.
//!
//! Evictions are logged at most once a minute, each line with the count since
//! the last; the count held back is logged by the next commit after the minute
//! (the upkeep task makes one at least every minute) or when the store closes.
//!
//! Everything that writes the outbox table goes through here, on the writer
//! thread, so the counters never race with the rows. No MQTT, no topics.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use rusqlite::Connection;

use super::{codec, sql, Shared};
use crate::model::time::now_ms;
use crate::store::{Batch, CommitHook};

/// Most rows one transaction evicts; the upkeep task asks for more
/// transactions while there is more to do.
pub const EVICT_CHUNK: u64 = 5_000;
/// At most one eviction log line per this long (with the count since the last).
const LOG_EVERY: Duration = Duration::from_secs(60);

/// What the current transaction did, applied to the counters once it commits.
#[derive(Default)]
struct Txn {
    appended: u64,
    appended_bytes: u64,
    last_seq: Option<u64>,
    /// Acknowledged seqs taken for this transaction (given back on rollback).
    taken: Vec<u64>,
    removed: u64,
    removed_bytes: u64,
    evicted: sql::Evicted,
}

/// Hand it to [`StoreHandle::open_with_hook`](crate::store::StoreHandle::open_with_hook).
pub struct OutboxSink {
    shared: Arc<Shared>,
    /// Marks rows stamped while the wall clock is known not to be
    /// synchronised (`codec::encode_row`).
    clock: Option<crate::clock::ClockWatch>,
    txn: Txn,
    unlogged: u64,
    last_log: Option<Instant>,
}

impl OutboxSink {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            clock: None,
            txn: Txn::default(),
            unlogged: 0,
            last_log: None,
        }
    }

    fn log_evictions(&mut self, rows: u64) {
        self.unlogged += rows;
        if self.unlogged == 0 || self.last_log.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            return;
        }
        let cap = self.shared.cap;
        tracing::warn!(
            evicted = self.unlogged,
            evicted_total = self.shared.evicted.load(Ordering::Relaxed),
            max_age_h = cap.max_age_ms / 3_600_000,
            max_bytes = cap.max_bytes,
            "outbox over its cap: dropped the oldest telemetry"
        );
        self.unlogged = 0;
        self.last_log = Some(Instant::now());
    }
}

impl Drop for OutboxSink {
    /// The store is closing (the writer drops its hook last): what the rate
    /// limit held back is said now, so the log lines add up to the counter.
    fn drop(&mut self) {
        if self.unlogged > 0 {
            self.last_log = None;
            self.log_evictions(0);
        }
    }
}

impl OutboxSink {
    /// Rows written while `clock` is known not to be synchronised say so:
    /// their messages carry it (`docs/mqtt.md`).
    pub fn marking_clock(mut self, clock: crate::clock::ClockWatch) -> Self {
        self.clock = Some(clock);
        self
    }
}

impl CommitHook for OutboxSink {
    fn open(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let (rows, bytes, last) = sql::totals(conn)?;
        self.shared.rows.store(rows, Ordering::Relaxed);
        self.shared.bytes.store(bytes, Ordering::Relaxed);
        self.shared.last_seq.send_replace(last);
        Ok(())
    }

    fn write(&mut self, conn: &Connection, batches: &[Batch<'_>]) -> rusqlite::Result<()> {
        let now = now_ms();
        let unsynchronised = self
            .clock
            .as_ref()
            .is_some_and(|c| c.sync().is_unsynchronised());
        let t = &mut self.txn;
        for b in batches {
            let body = codec::encode_row(b.samples, unsynchronised);
            t.last_seq = Some(sql::append(conn, now, b.device, &body)?);
            t.appended += 1;
            t.appended_bytes += sql::cost(b.device, &body);
        }
        t.taken = self.shared.take_removals();
        if !t.taken.is_empty() {
            (t.removed, t.removed_bytes) = sql::remove(conn, &t.taken)?;
        }
        let bytes = (self.shared.bytes.load(Ordering::Relaxed) + t.appended_bytes)
            .saturating_sub(t.removed_bytes);
        let age_at = match self.shared.age_at.swap(0, Ordering::Relaxed) {
            0 => now,
            at => at,
        };
        let cap = self.shared.cap;
        t.evicted = sql::evict(
            conn,
            age_at.saturating_sub(cap.max_age_ms),
            bytes,
            cap.max_bytes,
            EVICT_CHUNK,
        )?;
        Ok(())
    }

    fn finished(&mut self, committed: bool) {
        let t = std::mem::take(&mut self.txn);
        let s = &self.shared;
        if !committed {
            // Nothing happened; acknowledged rows are deleted next time.
            s.give_back_removals(t.taken);
            return;
        }
        let added = t.appended_bytes;
        let gone = t.removed_bytes + t.evicted.bytes;
        s.rows.fetch_add(t.appended, Ordering::Relaxed);
        s.rows
            .fetch_sub(t.removed + t.evicted.rows, Ordering::Relaxed);
        s.bytes.fetch_add(added, Ordering::Relaxed);
        s.bytes.fetch_sub(gone, Ordering::Relaxed);
        s.evicted.fetch_add(t.evicted.rows, Ordering::Relaxed);
        if let Some(seq) = t.last_seq {
            s.last_seq.send_replace(seq);
        }
        s.more_to_evict.store(t.evicted.more, Ordering::Relaxed);
        if t.evicted.more {
            s.wake.notify_one();
        }
        self.log_evictions(t.evicted.rows);
    }
}
