//! The durable telemetry outbox (`docs/mqtt.md`): every measurement batch is a
//! row with a gap-free `seq`, written in the store's transaction with its samples,
//! deleted only after the broker's PUBACK, capped by age and size with
//! oldest-first eviction.
//!
//! The outbox owns no connection and no thread: its table lives in the store
//! (migration `0003_uplink_outbox`). [`OutboxSink`] is the store writer's commit
//! hook and does every write; [`Outbox`] is the cheap handle the uplink holds: it
//! reads on the store's read connections and asks for deletes and evictions,
//! which ride on the writer's next transaction. It must not know about MQTT or
//! topics; it only stores, hands out in order, and forgets.
//!
//! ```text
//! let (sink, state) = outbox::sink(cap);
//! let store = StoreHandle::open_with_hook(&storage, devices, Some(Box::new(sink)))?;
//! let outbox = Outbox::new(store.clone(), state);
//! ```

mod codec;
mod sink;
pub mod sql;
mod upkeep;

pub use codec::{decode, decode_row, encode, encode_row};
pub use sink::{OutboxSink, EVICT_CHUNK};
pub use sql::Row;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Notify};

use crate::store::{StoreError, StoreHandle};

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
    /// Rows stored (waiting for a PUBACK, or acknowledged and not deleted yet).
    pub rows: u64,
    /// What they count against the size cap.
    pub bytes: u64,
    /// Rows evicted by the cap since start.
    pub evicted: u64,
    /// The highest seq assigned so far.
    pub last_seq: u64,
}

/// What the sink and the handles share. Counters change only on the writer
/// thread, after a commit.
struct Shared {
    cap: Cap,
    rows: AtomicU64,
    bytes: AtomicU64,
    evicted: AtomicU64,
    last_seq: watch::Sender<u64>,
    /// Acknowledged seqs for the next transaction to delete.
    removals: Mutex<Vec<u64>>,
    /// When non-zero, the next transaction checks the age cap as of this time
    /// instead of now.
    age_at: AtomicI64,
    /// The last transaction stopped evicting at its chunk limit.
    more_to_evict: AtomicBool,
    /// Wakes the upkeep task: removals waiting, or more to evict.
    wake: Notify,
}

impl Shared {
    fn removals(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        // A Vec of plain numbers stays usable after a panic elsewhere.
        self.removals.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_removals(&self) -> Vec<u64> {
        std::mem::take(&mut *self.removals())
    }

    fn give_back_removals(&self, seqs: Vec<u64>) {
        if !seqs.is_empty() {
            self.removals().extend(seqs);
            self.wake.notify_one();
        }
    }
}

/// The other half of [`sink`](fn@sink): turns into an [`Outbox`] once the store is open.
pub struct OutboxState(Arc<Shared>);

/// A new outbox: the commit hook for the store, and the state for [`Outbox::new`].
pub fn sink(cap: Cap) -> (OutboxSink, OutboxState) {
    let shared = Arc::new(Shared {
        cap,
        rows: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        evicted: AtomicU64::new(0),
        last_seq: watch::channel(0).0,
        removals: Mutex::new(Vec::new()),
        age_at: AtomicI64::new(0),
        more_to_evict: AtomicBool::new(false),
        wake: Notify::new(),
    });
    (OutboxSink::new(shared.clone()), OutboxState(shared))
}

/// Cheap, cloneable handle to the outbox.
#[derive(Clone)]
pub struct Outbox {
    store: StoreHandle,
    shared: Arc<Shared>,
}

impl Outbox {
    /// `store` must have been opened with the sink that came with `state`.
    pub fn new(store: StoreHandle, state: OutboxState) -> Outbox {
        Outbox {
            store,
            shared: state.0,
        }
    }

    pub fn store(&self) -> &StoreHandle {
        &self.store
    }

    pub fn cap(&self) -> Cap {
        self.shared.cap
    }

    /// Rows with `after < seq <= upto` in seq order, at most `limit`, as
    /// committed (a read snapshot). In the store's own read turn: requests
    /// reading the history cannot hold delivery up.
    pub async fn fetch(&self, after: u64, upto: u64, limit: usize) -> Result<Vec<Row>, StoreError> {
        self.store
            .read_own(move |c| Ok(sql::fetch(c, after, upto, limit)?))
            .await
    }

    /// Forgets acknowledged rows. Does not wait: the writer's next transaction
    /// deletes them (the upkeep task makes sure one comes soon).
    pub fn remove(&self, seqs: Vec<u64>) {
        if !seqs.is_empty() {
            self.shared.removals().extend(seqs);
            self.shared.wake.notify_one();
        }
    }

    /// Deletes the rows given to [`remove`](Self::remove) now; returns after
    /// the commit.
    pub async fn commit_removals(&self) -> Result<(), StoreError> {
        if self.shared.removals().is_empty() {
            return Ok(());
        }
        self.store.flush().await
    }

    /// Applies the age cap as of `now_ms` and the size cap, a chunk per
    /// transaction, until nothing is over; returns the rows evicted meanwhile.
    pub async fn enforce_cap(&self, now_ms: i64) -> Result<u64, StoreError> {
        let before = self.shared.evicted.load(Ordering::Relaxed);
        loop {
            self.shared.age_at.store(now_ms, Ordering::Relaxed);
            self.store.flush().await?;
            if !self.shared.more_to_evict.load(Ordering::Relaxed) {
                break;
            }
        }
        Ok(self.shared.evicted.load(Ordering::Relaxed) - before)
    }

    /// Changes after every commit that appended; holds the highest seq.
    pub fn appended(&self) -> watch::Receiver<u64> {
        self.shared.last_seq.subscribe()
    }

    pub fn stats(&self) -> OutboxStats {
        let s = &self.shared;
        OutboxStats {
            rows: s.rows.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            evicted: s.evicted.load(Ordering::Relaxed),
            last_seq: *s.last_seq.borrow(),
        }
    }
}
