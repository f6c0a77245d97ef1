//! Where steering keeps what must survive a restart: the component timelines, the
//! audit log, the idempotency keys and what the devices' control registers
//! held when first found. A trait, so the service does not care
//! whether it is SQLite (`sqlite/`, through the store's writer) or memory (tests).
//!
//! A [`Commit`] is atomic: timelines, audit record and idempotency answer are
//! written together or not at all, and `commit` returns only once they are durable.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::audit::AuditEvent;
use super::request::Answer;
use super::signal::StoredEntry;
use super::value::Component;
use crate::modbus::control::Originals;
use crate::store::StoreError;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How long an `Idempotency-Key` is remembered.
pub const IDEMPOTENCY_MS: i64 = 24 * 3600 * 1000;

/// A failure to persist or to read back; a change was not applied.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PersistError {
    /// Too many store reads run and wait already: nothing was read; asking
    /// again shortly may succeed.
    #[error("steering store: the store is busy: {running} reads run and {waiting} wait")]
    Busy { running: usize, waiting: usize },
    /// The store is closed (the agent is stopping) or dropped the job.
    #[error("steering store: the store is closed or the job was dropped")]
    Closed,
    /// The store failed the job (SQLite, a read that did not finish).
    #[error("steering store: {0}")]
    Store(Arc<StoreError>),
    /// A [`MemoryStore`] told to fail its commits (tests of the failure paths).
    #[error("steering store: commits are set to fail")]
    Refused,
}

impl From<StoreError> for PersistError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Busy { running, waiting } => PersistError::Busy { running, waiting },
            StoreError::Closed => PersistError::Closed,
            other => PersistError::Store(Arc::new(other)),
        }
    }
}

/// One accepted change of a site.
#[derive(Clone, Debug, PartialEq)]
pub struct Commit {
    pub site: String,
    /// These components' stored entries are replaced by `entries`.
    pub components: Vec<Component>,
    pub entries: Vec<StoredEntry>,
    pub audit: AuditEvent,
    /// `(caller, key, answer)` to replay for the same key.
    pub idempotency: Option<(String, String, Answer)>,
}

/// What a device's control registers held when the agent first found them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FoundRegisters {
    pub originals: Originals,
    pub found_ms: i64,
    /// The agent may have left values of its own there (a setpoint was
    /// written and not released since).
    pub steered: bool,
}

pub trait SteeringStore: Send + Sync + 'static {
    /// Every device's registers as first found, by device reference.
    fn found_registers(
        &self,
    ) -> BoxFuture<'_, Result<HashMap<String, FoundRegisters>, PersistError>>;

    /// Keeps (replaces) a device's registers as first found.
    fn keep_found(
        &self,
        device: String,
        found: FoundRegisters,
    ) -> BoxFuture<'_, Result<(), PersistError>>;

    /// Makes a change durable.
    fn commit(&self, c: Commit) -> BoxFuture<'_, Result<(), PersistError>>;

    /// Every stored entry, by site reference.
    fn load(&self) -> BoxFuture<'_, Result<Vec<(String, StoredEntry)>, PersistError>>;

    /// The answer first given to `(caller, key)` at or after `since_ms`.
    fn replay(
        &self,
        caller: String,
        key: String,
        since_ms: i64,
    ) -> BoxFuture<'_, Result<Option<Answer>, PersistError>>;

    /// Appends device-write records.
    fn record(&self, events: Vec<AuditEvent>) -> BoxFuture<'_, Result<(), PersistError>>;

    /// The newest `limit` records of a site, newest first.
    fn history(
        &self,
        site: String,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<AuditEvent>, PersistError>>;
}

/// Keeps everything in memory: for tests and for running without a database.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    entries: Vec<(String, StoredEntry)>,
    audit: Vec<AuditEvent>,
    keys: HashMap<(String, String), (i64, Answer)>,
    found: HashMap<String, FoundRegisters>,
    /// Makes every commit fail (tests of "no partial state").
    fail: bool,
}

impl MemoryStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        // Plain data; a panic elsewhere cannot leave it half-changed.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes every later commit fail.
    pub fn fail_commits(&self, fail: bool) {
        self.lock().fail = fail;
    }
}

impl SteeringStore for MemoryStore {
    fn found_registers(
        &self,
    ) -> BoxFuture<'_, Result<HashMap<String, FoundRegisters>, PersistError>> {
        Box::pin(async move { Ok(self.lock().found.clone()) })
    }

    fn keep_found(
        &self,
        device: String,
        found: FoundRegisters,
    ) -> BoxFuture<'_, Result<(), PersistError>> {
        Box::pin(async move {
            self.lock().found.insert(device, found);
            Ok(())
        })
    }

    fn commit(&self, c: Commit) -> BoxFuture<'_, Result<(), PersistError>> {
        Box::pin(async move {
            let mut m = self.lock();
            if m.fail {
                return Err(PersistError::Refused);
            }
            m.entries
                .retain(|(s, e)| !(s == &c.site && c.components.contains(&e.component)));
            m.entries
                .extend(c.entries.into_iter().map(|e| (c.site.clone(), e)));
            if let Some((caller, key, answer)) = c.idempotency {
                m.keys.insert((caller, key), (c.audit.at_ms, answer));
            }
            m.audit.push(c.audit);
            Ok(())
        })
    }

    fn load(&self) -> BoxFuture<'_, Result<Vec<(String, StoredEntry)>, PersistError>> {
        Box::pin(async move { Ok(self.lock().entries.clone()) })
    }

    fn replay(
        &self,
        caller: String,
        key: String,
        since_ms: i64,
    ) -> BoxFuture<'_, Result<Option<Answer>, PersistError>> {
        Box::pin(async move {
            Ok(self
                .lock()
                .keys
                .get(&(caller, key))
                .filter(|(at, _)| *at >= since_ms)
                .map(|(_, v)| v.clone()))
        })
    }

    fn record(&self, events: Vec<AuditEvent>) -> BoxFuture<'_, Result<(), PersistError>> {
        Box::pin(async move {
            self.lock().audit.extend(events);
            Ok(())
        })
    }

    fn history(
        &self,
        site: String,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<AuditEvent>, PersistError>> {
        Box::pin(async move {
            let m = self.lock();
            let mut of_site: Vec<&AuditEvent> = m.audit.iter().filter(|e| e.site == site).collect();
            // Newest first by time; among equal times, the later recorded first.
            of_site.reverse();
            of_site.sort_by_key(|e| std::cmp::Reverse(e.at_ms));
            Ok(of_site.into_iter().take(limit).cloned().collect())
        })
    }
}
