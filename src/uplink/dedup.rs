//! RPC duplicate suppression for requests that change state: the first answer
//! to an id is kept for 24 h in the store (`uplink_rpc_seen`), so a redelivery
//! (even after a restart) gets the same answer and the request is applied once.
//! Concurrent duplicates wait for the first one. Look-ups run on the store's read
//! connections, records through its writer.
//!
//! The record is bounded: at most [`MAX_ROWS`] answers of at most
//! [`MAX_BYTES`] together, the oldest forgotten first (counted, and logged at
//! most once a minute); an answer over [`MAX_ANSWER`] is not kept. The store
//! does not count the table against `storage.max_size_mb`, so RPC traffic can
//! never make retention delete measurements. Only the caller decides which
//! requests are recorded (`rpc.rs`: POST and DELETE).
//!
//! Knows nothing of MQTT or HTTP: ids in, answer bytes out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::oneshot;

use super::outbox::sql;
use crate::store::{StoreError, StoreHandle};

/// How long an id is remembered.
pub const WINDOW_MS: i64 = 24 * 3_600_000;
/// Answers kept at most.
pub const MAX_ROWS: u64 = 5_000;
/// Bytes the kept answers count at most (ids, answers, row overhead).
pub const MAX_BYTES: u64 = 2 << 20;
/// A larger answer is not kept (a duplicate runs again; steering's
/// `Idempotency-Key` still applies a change once).
pub const MAX_ANSWER: usize = 64 << 10;
/// At most one log line about forgotten answers per this long.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// The record's size after the last write, and what the bounds made it forget.
#[derive(Debug, Default)]
pub struct DedupStats {
    pub rows: AtomicU64,
    pub bytes: AtomicU64,
    pub dropped: AtomicU64,
    unlogged: Mutex<(u64, Option<Instant>)>,
}

impl DedupStats {
    fn update(&self, t: sql::RpcTrim) {
        self.rows.store(t.rows, Ordering::Relaxed);
        self.bytes.store(t.bytes, Ordering::Relaxed);
        if t.dropped == 0 {
            return;
        }
        let total = self.dropped.fetch_add(t.dropped, Ordering::Relaxed) + t.dropped;
        let mut unlogged = self.unlogged.lock().unwrap_or_else(|e| e.into_inner());
        unlogged.0 += t.dropped;
        if unlogged.1.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
            tracing::warn!(
                dropped = unlogged.0,
                dropped_total = total,
                max_rows = MAX_ROWS,
                max_bytes = MAX_BYTES,
                "RPC duplicate record full: forgot the oldest answers before their 24 h"
            );
            *unlogged = (0, Some(Instant::now()));
        }
    }
}

type Waiters = HashMap<String, Vec<oneshot::Sender<Vec<u8>>>>;

/// Cheap, cloneable handle.
#[derive(Clone)]
pub struct Dedup {
    store: StoreHandle,
    running: Arc<Mutex<Waiters>>,
    stats: Arc<DedupStats>,
}

/// The outcome of [`Dedup::claim`].
pub enum Seen {
    /// First sighting: answer it, then [`Dedup::record`] the claim.
    New(Claim),
    /// Answered before: send these bytes again.
    Answered(Vec<u8>),
}

/// The right to answer an id. Dropping it unrecorded lets waiting duplicates
/// try again.
pub struct Claim {
    id: String,
    running: Arc<Mutex<Waiters>>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Wakes waiters with a closed channel; they retry.
        lock(&self.running).remove(&self.id);
    }
}

// The map holds plain data; a panic elsewhere leaves it usable.
fn lock(m: &Mutex<Waiters>) -> std::sync::MutexGuard<'_, Waiters> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Dedup {
    pub fn new(store: StoreHandle) -> Self {
        Self {
            store,
            running: Arc::default(),
            stats: Arc::default(),
        }
    }

    pub fn stats(&self) -> &DedupStats {
        &self.stats
    }

    /// Whether `id` was answered in the last 24 h; waits while another copy of
    /// it is being answered.
    pub async fn claim(&self, id: &str, now_ms: i64) -> Result<Seen, StoreError> {
        loop {
            let wait = {
                let mut running = lock(&self.running);
                match running.get_mut(id) {
                    Some(waiters) => {
                        let (tx, rx) = oneshot::channel();
                        waiters.push(tx);
                        Some(rx)
                    }
                    None => {
                        running.insert(id.to_string(), Vec::new());
                        None
                    }
                }
            };
            match wait {
                Some(rx) => match rx.await {
                    Ok(answer) => return Ok(Seen::Answered(answer)),
                    Err(_) => continue, // the first copy gave up; try again
                },
                None => break,
            }
        }
        let claim = Claim {
            id: id.to_string(),
            running: self.running.clone(),
        };
        let key = id.to_string();
        let since = now_ms - WINDOW_MS;
        match self
            .store
            .read(move |c| Ok::<_, StoreError>(sql::rpc_seen(c, &key, since)?))
            .await?
        {
            Some(answer) => {
                self.wake(&claim.id, &answer);
                Ok(Seen::Answered(answer))
            }
            None => Ok(Seen::New(claim)),
        }
    }

    /// Stores the first answer (durably, within the bounds) and hands it to
    /// waiting duplicates. An answer over [`MAX_ANSWER`] only goes to them.
    pub async fn record(
        &self,
        claim: Claim,
        answer: Vec<u8>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        if answer.len() > MAX_ANSWER {
            tracing::debug!(rpc_id = %claim.id, bytes = answer.len(), "RPC answer too large to keep for duplicates");
            self.wake(&claim.id, &answer);
            return Ok(());
        }
        let (id, bytes) = (claim.id.clone(), answer.clone());
        let stored = self
            .store
            .execute(move |c| {
                sql::rpc_record(c, &id, now_ms, &bytes)?;
                Ok::<_, StoreError>(sql::rpc_trim(c, now_ms - WINDOW_MS, MAX_ROWS, MAX_BYTES)?)
            })
            .await;
        self.wake(&claim.id, &answer);
        stored.map(|t| self.stats.update(t))
    }

    fn wake(&self, id: &str, answer: &[u8]) {
        if let Some(waiters) = lock(&self.running).remove(id) {
            for w in waiters {
                let _ = w.send(answer.to_vec());
            }
        }
    }

    /// Forgets ids older than the window, and the oldest beyond the bounds (a
    /// record written by an older version may hold more).
    pub async fn prune(&self, now_ms: i64) -> Result<(), StoreError> {
        let trim = self
            .store
            .execute(move |c| {
                Ok::<_, StoreError>(sql::rpc_trim(c, now_ms - WINDOW_MS, MAX_ROWS, MAX_BYTES)?)
            })
            .await?;
        self.stats.update(trim);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a temp folder; keep the folder alive as long as the store.
    fn store() -> (tempfile::TempDir, StoreHandle) {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = crate::config::StorageConfig {
            path: dir.path().join("d.db"),
            ..crate::config::StorageConfig::default()
        };
        let store = StoreHandle::open(&config, Vec::new()).expect("store");
        (dir, store)
    }

    #[tokio::test]
    async fn first_answer_is_returned_to_duplicates_within_the_window() {
        let (_dir, store) = store();
        let d = Dedup::new(store);
        let Seen::New(claim) = d.claim("a", 1000).await.unwrap() else {
            panic!("first sighting")
        };
        // A concurrent duplicate waits for the first answer.
        let d2 = d.clone();
        let waiting = tokio::spawn(async move { d2.claim("a", 1001).await });
        tokio::task::yield_now().await;
        d.record(claim, b"one".to_vec(), 1000).await.unwrap();
        match waiting.await.unwrap().unwrap() {
            Seen::Answered(a) => assert_eq!(a, b"one"),
            Seen::New(_) => panic!("duplicate was treated as new"),
        }
        match d.claim("a", 1000 + WINDOW_MS).await.unwrap() {
            Seen::Answered(a) => assert_eq!(a, b"one"),
            Seen::New(_) => panic!("still inside the window"),
        }
        assert!(matches!(
            d.claim("a", 1001 + WINDOW_MS).await.unwrap(),
            Seen::New(_)
        ));
    }

    #[tokio::test]
    async fn an_abandoned_claim_lets_the_duplicate_answer() {
        let (_dir, store) = store();
        let d = Dedup::new(store);
        let Seen::New(claim) = d.claim("b", 0).await.unwrap() else {
            panic!("first sighting")
        };
        let d2 = d.clone();
        let waiting =
            tokio::spawn(async move { d2.claim("b", 0).await.map(|s| matches!(s, Seen::New(_))) });
        tokio::task::yield_now().await;
        drop(claim);
        assert!(waiting.await.unwrap().unwrap());
    }
}
