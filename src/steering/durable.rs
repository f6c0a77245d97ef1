//! Control never waits on the disk: every change of a site's signal takes
//! effect in memory at once, and its commit (timelines, audit record,
//! idempotency answer) goes into a queue that one task writes, in order, when
//! the store allows: at once in the normal case, retried with backoff while
//! the disk is full, read-only or failing. A caller waits for its commit a
//! short while ([`DURABLE_WAIT`]) and is then told whether it is durable.
//!
//! While anything waits, a small marker file beside the database (allocated
//! at start, so writing it needs no free space) says so; an agent that starts
//! and finds it set cannot trust the stored timelines, so it starts every site
//! at its fallback (`docs/steering.md`, "When the disk fails").
//!
//! Changes are kept in memory only: a queue the process loses is the one case
//! the marker covers. This file owns the writer task; it decides nothing about
//! steering itself.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use super::persist::{Commit, PersistError, SteeringStore};
use super::request::Answer;
use crate::util::Backoff;

/// How long a change waits for its commit before it is answered as not yet
/// durable (it has taken effect either way).
pub const DURABLE_WAIT: Duration = Duration::from_secs(2);

/// Changes kept at most while the disk refuses them; past it the oldest are
/// merged away: a newer commit replaces the same components' timelines, so
/// only the audit records of the dropped ones are lost (and counted).
pub const MAX_PENDING: usize = 4096;

/// The marker's size: allocated once, overwritten in place.
const MARKER_LEN: usize = 512;
const MARKER_CLEAR: &[u8] = b"sitegate steering: every change is durable\n";
const MARKER_SET: &[u8] = b"sitegate steering: changes wait to be written\n";

/// The queue of commits not yet durable, and the writer's state.
pub struct Durable {
    queue: Mutex<VecDeque<(u64, Commit)>>,
    /// The sequence number of the last commit written (or merged away).
    written: watch::Sender<u64>,
    next_seq: AtomicU64,
    wake: Notify,
    marker: Option<Marker>,
    /// Commits that failed at least once, and the last failure.
    failures: AtomicU64,
    dropped: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// What a caller learns about its commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Written to the store.
    Durable,
    /// In effect, waiting to be written.
    Pending,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data; keep serving it after a panic elsewhere.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Durable {
    /// A queue whose marker lives at `marker` (`None`: none, as for a store
    /// in memory).
    pub fn new(marker: Option<&Path>) -> Durable {
        Durable {
            queue: Mutex::new(VecDeque::new()),
            written: watch::channel(0).0,
            next_seq: AtomicU64::new(1),
            wake: Notify::new(),
            marker: marker.and_then(Marker::open),
            failures: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            last_error: Mutex::new(None),
        }
    }

    /// Waits up to [`DURABLE_WAIT`] for the commit `seq` (from
    /// [`Durable::enqueue`]) to be written.
    pub async fn wait(&self, seq: u64) -> Durability {
        let mut written = self.written.subscribe();
        let done = tokio::time::timeout(DURABLE_WAIT, written.wait_for(|w| *w >= seq)).await;
        match done {
            Ok(Ok(_)) => Durability::Durable,
            _ => Durability::Pending,
        }
    }

    /// Queues `c` for the writer; returns its sequence number. Called in the
    /// order the changes took effect (under the site's signal lock), so that
    /// they reach the disk in that order.
    pub fn enqueue(&self, c: Commit) -> u64 {
        let seq = self.next_seq.fetch_add(1, Ordering::SeqCst);
        {
            let mut q = lock(&self.queue);
            q.push_back((seq, c));
            if q.len() > MAX_PENDING {
                // The oldest's timelines are written by a newer one of the
                // same site; only its audit record is lost.
                q.pop_front();
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.wake.notify_one();
        seq
    }

    /// Whether any change of `site` waits to be written.
    pub fn pending(&self, site: &str) -> bool {
        lock(&self.queue).iter().any(|(_, c)| c.site == site)
    }

    /// Changes waiting, over every site.
    pub fn len(&self) -> usize {
        lock(&self.queue).len()
    }

    /// Whether every change is written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answer a waiting change gave to `(caller, key)`, if one did.
    pub fn replay(&self, caller: &str, key: &str) -> Option<Answer> {
        lock(&self.queue).iter().rev().find_map(|(_, c)| {
            c.idempotency
                .as_ref()
                .filter(|(who, k, _)| who == caller && k == key)
                .map(|(_, _, a)| a.clone())
        })
    }

    /// Why the last write failed, while changes wait.
    pub fn problem(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        lock(&self.last_error).clone()
    }

    /// (commits that failed a write, changes dropped past the bound)
    pub fn counts(&self) -> (u64, u64) {
        (
            self.failures.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
        )
    }

    /// Whether the marker said, when opened, that changes were lost.
    pub fn found_lost(&self) -> bool {
        self.marker.as_ref().is_some_and(|m| m.was_set)
    }

    /// Writes the queue, oldest first, until `cancel`; a failed write is
    /// retried with backoff (0.5 s up to 30 s).
    pub async fn run(self: Arc<Self>, store: Arc<dyn SteeringStore>, cancel: CancellationToken) {
        let backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut attempt = 0u32;
        loop {
            let head = lock(&self.queue).front().cloned();
            let Some((seq, commit)) = head else {
                self.set_marker(false);
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = self.wake.notified() => continue,
                }
            };
            match store.commit(commit).await {
                Ok(()) => {
                    if attempt > 0 {
                        tracing::info!(after = attempt, "steering changes written again");
                    }
                    attempt = 0;
                    let mut q = lock(&self.queue);
                    if q.front().is_some_and(|(s, _)| *s == seq) {
                        q.pop_front();
                    }
                    drop(q);
                    self.written.send_replace(seq);
                }
                Err(e) => {
                    self.fail(&e, attempt);
                    let wait = backoff.ceiling(attempt);
                    attempt = attempt.saturating_add(1);
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    fn fail(&self, e: &PersistError, attempt: u32) {
        if attempt == 0 {
            self.failures.fetch_add(1, Ordering::Relaxed);
            self.set_marker(true);
            tracing::error!(error = %e, waiting = self.len(), "steering change not written: it is in effect and kept; retrying");
        }
        *lock(&self.last_error) = Some(e.to_string());
    }

    fn set_marker(&self, on: bool) {
        if let Some(m) = &self.marker {
            m.set(on);
        }
    }
}

/// Sets the marker at `path` (created if missing) as a process that lost
/// changes would have left it: the next start there begins every site at its
/// fallback. For an agent that runs on another store than the one beside
/// `path` (`agent/temporary_store.rs`).
pub fn mark_changes_lost(path: &Path) -> std::io::Result<()> {
    let mut text = MARKER_SET.to_vec();
    text.resize(MARKER_LEN, b' ');
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    f.write_all(&text)?;
    f.sync_data()
}

/// The marker file: allocated at start, overwritten in place.
struct Marker {
    path: PathBuf,
    file: Mutex<File>,
    was_set: bool,
    on: Mutex<Option<bool>>,
}

impl Marker {
    fn open(path: &Path) -> Option<Marker> {
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path);
        let mut file = match opened {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "steering marker cannot be opened: a change lost with the process will not be noticed at the next start");
                return None;
            }
        };
        let mut head = Vec::new();
        let was_set = file
            .read_to_end(&mut head)
            .is_ok_and(|_| head.starts_with(MARKER_SET));
        // Allocated to its full size now, so that writing it later needs no
        // free space.
        let m = Marker {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            was_set,
            on: Mutex::new(None),
        };
        m.write(was_set);
        Some(m)
    }

    fn set(&self, on: bool) {
        let mut cur = lock(&self.on);
        if *cur != Some(on) {
            self.write(on);
            *cur = Some(on);
        }
    }

    fn write(&self, on: bool) {
        let mut text = if on { MARKER_SET } else { MARKER_CLEAR }.to_vec();
        text.resize(MARKER_LEN, b' ');
        let mut f = lock(&self.file);
        let result = f
            .seek(SeekFrom::Start(0))
            .and_then(|_| f.write_all(&text))
            .and_then(|()| f.sync_data());
        if let Err(e) = result {
            tracing::warn!(path = %self.path.display(), error = %e, "steering marker not written");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steering::audit::{AuditEvent, AuditKind, RequestBody};
    use crate::steering::persist::MemoryStore;

    fn commit(site: &str, key: Option<&str>) -> Commit {
        Commit {
            site: site.into(),
            components: Vec::new(),
            entries: Vec::new(),
            audit: AuditEvent {
                site: site.into(),
                at_ms: 0,
                kind: AuditKind::Request {
                    source: "test".into(),
                    token: "t".into(),
                    action: "DELETE".into(),
                    body: RequestBody::Ended(None),
                    request_id: None,
                },
            },
            idempotency: key.map(|k| {
                (
                    "t".to_string(),
                    k.to_string(),
                    Answer {
                        body: super::super::request::RawBody("{}".into()),
                        request_id: "req_1".into(),
                        operation: "POST /sites/ste_a/steering".into(),
                    },
                )
            }),
        }
    }

    fn marker_text(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    #[tokio::test]
    async fn a_change_waits_for_the_disk_in_memory_and_is_written_when_it_allows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.steering-pending");
        let store = Arc::new(MemoryStore::default());
        let durable = Arc::new(Durable::new(Some(&path)));
        assert!(!durable.found_lost());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), MARKER_LEN as u64);
        let cancel = CancellationToken::new();
        let writer = tokio::spawn(durable.clone().run(store.clone(), cancel.clone()));

        // Written at once.
        let seq = durable.enqueue(commit("ste_a", None));
        assert_eq!(durable.wait(seq).await, Durability::Durable);
        assert!(marker_text(&path).starts_with("sitegate steering: every change is durable"));

        // The disk refuses: the change waits, says so, and is found by its key.
        store.fail_commits(true);
        let seq = durable.enqueue(commit("ste_a", Some("k1")));
        assert_eq!(durable.wait(seq).await, Durability::Pending);
        assert!(durable.pending("ste_a"));
        assert!(!durable.pending("ste_b"));
        assert_eq!(durable.len(), 1);
        assert!(durable.replay("t", "k1").is_some());
        assert!(durable.replay("t", "k2").is_none());
        assert!(durable
            .problem()
            .is_some_and(|p| p.contains("commits are set to fail")));
        assert!(marker_text(&path).starts_with("sitegate steering: changes wait to be written"));
        // A later change queues behind it, in order.
        let later = durable.enqueue(commit("ste_b", None));
        assert_eq!(durable.len(), 2);

        // A process that died now would find the marker set.
        assert!(Durable::new(Some(&path)).found_lost());

        // The disk allows again: both are written, the marker clears.
        store.fail_commits(false);
        assert_eq!(durable.wait(later).await, Durability::Durable);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(durable.len(), 0);
        assert_eq!(durable.problem(), None);
        assert!(marker_text(&path).starts_with("sitegate steering: every change is durable"));
        assert_eq!(durable.counts(), (1, 0));
        cancel.cancel();
        writer.await.unwrap();
    }
}
