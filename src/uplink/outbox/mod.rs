//! The durable telemetry outbox of `spec/mqtt.md`: every measurement batch is a
//! row with a gap-free `seq`, deleted only after the broker's PUBACK, capped by age
//! and size with oldest-first eviction.
//!
//! [`Outbox`] is the handle the uplink and the sample path share. It owns no
//! connection: its statements (`sql.rs`) run on [`Db`]'s thread. It must not know
//! about MQTT or topics; it only stores, hands out in order, and forgets.

mod codec;
mod db;
mod spool;
pub mod sql;

pub use codec::{decode, encode};
pub use db::{Db, DbError};
pub use spool::spool;
pub use sql::Row;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::model::Sample;

/// The outbox's limits (`mqtt.outbox_max_age_h`, `mqtt.outbox_max_mb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    pub max_age_ms: i64,
    pub max_bytes: u64,
}

impl Cap {
    pub fn from_config(c: &crate::config::MqttConfig) -> Self {
        Self {
            max_age_ms: (c.outbox_max_age_h as i64).saturating_mul(3_600_000),
            max_bytes: c.outbox_max_mb.saturating_mul(1024 * 1024),
        }
    }
}

/// A snapshot of the outbox's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutboxStats {
    /// Rows waiting for a PUBACK.
    pub rows: u64,
    /// What they count against the size cap.
    pub bytes: u64,
    /// Rows evicted by the cap since start.
    pub evicted: u64,
    /// The highest seq assigned so far.
    pub last_seq: u64,
}

#[derive(Default)]
struct Meter {
    rows: AtomicU64,
    bytes: AtomicU64,
    evicted: AtomicU64,
}

/// Cheap, cloneable handle to the outbox.
#[derive(Clone)]
pub struct Outbox {
    db: Db,
    cap: Cap,
    meter: Arc<Meter>,
    last_seq: Arc<watch::Sender<u64>>,
}

impl Outbox {
    /// Reads the current totals and applies the cap once.
    pub async fn open(db: Db, cap: Cap) -> Result<Outbox, DbError> {
        let (rows, bytes, last) = db.execute(|c| sql::totals(c)).await?;
        let meter = Meter::default();
        meter.rows.store(rows, Ordering::Relaxed);
        meter.bytes.store(bytes, Ordering::Relaxed);
        let outbox = Outbox {
            db,
            cap,
            meter: Arc::new(meter),
            last_seq: Arc::new(watch::channel(last).0),
        };
        outbox.enforce_cap(crate::model::time::now_ms()).await?;
        Ok(outbox)
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Stores one message per `(device reference, samples)` in one transaction;
    /// returns after COMMIT. Evicts right away when that crossed the size cap.
    pub async fn append(
        &self,
        batches: Vec<(String, Vec<Sample>)>,
        now_ms: i64,
    ) -> Result<(), DbError> {
        let this = self.clone();
        self.db
            .execute(move |conn| {
                let tx = conn.transaction()?;
                let (mut last, mut bytes) = (0, 0);
                for (device, samples) in &batches {
                    let body = encode(samples);
                    last = sql::append(&tx, now_ms, device, &body)?;
                    bytes += sql::cost(device, &body);
                }
                tx.commit()?;
                this.meter
                    .rows
                    .fetch_add(batches.len() as u64, Ordering::Relaxed);
                let total = this.meter.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
                if last > 0 {
                    this.last_seq.send_replace(last);
                }
                if total > this.cap.max_bytes {
                    this.evict_now(conn, now_ms)?;
                }
                Ok(())
            })
            .await
    }

    /// Rows with `after < seq <= upto` in seq order, at most `limit`.
    pub async fn fetch(&self, after: u64, upto: u64, limit: usize) -> Result<Vec<Row>, DbError> {
        self.db
            .execute(move |c| sql::fetch(c, after, upto, limit))
            .await
    }

    /// Forgets acknowledged rows. Does not wait: jobs run in order, so a later
    /// [`fetch`](Self::fetch) never sees them.
    pub fn remove(&self, seqs: Vec<u64>) {
        if seqs.is_empty() {
            return;
        }
        let meter = self.meter.clone();
        let submitted = self.db.submit(move |conn| match sql::remove(conn, &seqs) {
            Ok((rows, bytes)) => {
                meter.rows.fetch_sub(rows, Ordering::Relaxed);
                meter.bytes.fetch_sub(bytes, Ordering::Relaxed);
            }
            // The rows stay and are sent again: the cloud drops duplicates by seq.
            Err(e) => tracing::warn!(error = %e, "cannot delete acknowledged outbox rows"),
        });
        if submitted.is_err() {
            tracing::warn!("outbox database stopped; acknowledged rows stay");
        }
    }

    /// Applies the age and size cap now; returns the rows evicted.
    pub async fn enforce_cap(&self, now_ms: i64) -> Result<u64, DbError> {
        let this = self.clone();
        self.db
            .execute(move |conn| this.evict_now(conn, now_ms))
            .await
    }

    fn evict_now(&self, conn: &rusqlite::Connection, now_ms: i64) -> rusqlite::Result<u64> {
        let bytes = self.meter.bytes.load(Ordering::Relaxed);
        let min_created = now_ms.saturating_sub(self.cap.max_age_ms);
        let (rows, freed) = sql::evict(conn, min_created, bytes, self.cap.max_bytes)?;
        if rows > 0 {
            self.meter.rows.fetch_sub(rows, Ordering::Relaxed);
            self.meter.bytes.fetch_sub(freed, Ordering::Relaxed);
            let total = self.meter.evicted.fetch_add(rows, Ordering::Relaxed) + rows;
            tracing::warn!(
                evicted = rows,
                evicted_bytes = freed,
                evicted_total = total,
                max_age_h = self.cap.max_age_ms / 3_600_000,
                max_bytes = self.cap.max_bytes,
                "outbox over its cap: dropped the oldest telemetry"
            );
        }
        Ok(rows)
    }

    /// Changes after every append; holds the highest seq assigned.
    pub fn appended(&self) -> watch::Receiver<u64> {
        self.last_seq.subscribe()
    }

    pub fn stats(&self) -> OutboxStats {
        OutboxStats {
            rows: self.meter.rows.load(Ordering::Relaxed),
            bytes: self.meter.bytes.load(Ordering::Relaxed),
            evicted: self.meter.evicted.load(Ordering::Relaxed),
            last_seq: *self.last_seq.borrow(),
        }
    }
}
