//! A store to run on when the configured one cannot be opened at all: a
//! folder that is missing, unwritable or read-only, a full disk at creation, a
//! database written by a newer sitegate. No failure of the store may stop the
//! agent from holding the grid limits, so it starts on a small database in
//! its runtime folder (`$RUNTIME_DIRECTORY`, a tmpfs under systemd; else the
//! system's temporary folder), every site at its fallback, and says so on
//! `/readyz` and `/metrics` until it is restarted on the configured store.
//!
//! The configured store's stored signals may go stale while the agent runs
//! elsewhere (a cancel it never sees), so the steering marker beside it is set
//! as soon as its folder takes a write: the next start on it begins at the
//! fallback. This file decides where the temporary store lives and keeps
//! that marker; it opens nothing itself and never touches the configured
//! database.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::StorageConfig;
use crate::util::Backoff;

/// The temporary store's size bound at most: it lives in RAM on most
/// controllers. The store holds it as any cap (the oldest data first, the
/// staging ring and the newest five minutes kept), and its WAL's checkpoint
/// threshold is half of it (`storage.wal_checkpoint_mb`), so that the WAL in
/// RAM too stays smaller than the file. A site whose least cap is more
/// (`config/size_floor.rs`: above about 1,200 devices at 1 Hz) gets that.
pub const MAX_MB: u64 = 32;

/// The store the agent runs on instead of the configured one, and why.
#[derive(Clone, Debug)]
pub struct TemporaryStore {
    /// The settings it is opened with: the configured ones, at its own path
    /// and with at most [`MAX_MB`] or the site's least cap.
    pub storage: StorageConfig,
    /// The configured database.
    pub configured: PathBuf,
    /// Why the configured one could not be opened.
    pub why: String,
}

impl TemporaryStore {
    /// A temporary store in place of `configured`, which failed for `why`,
    /// for a site whose least cap is `least_mb`. Whatever an earlier run left
    /// at its path is removed first: it holds nothing anyone waits for.
    pub fn new(configured: &StorageConfig, least_mb: u64, why: String) -> TemporaryStore {
        let mut storage = configured.clone();
        storage.path = location();
        let configured_wal_mb = storage.wal_checkpoint_bytes() >> 20;
        storage.max_size_mb = storage.max_size_mb.clamp(1, MAX_MB.max(least_mb));
        storage.wal_checkpoint_mb = Some(configured_wal_mb.min(storage.max_size_mb / 2).max(1));
        remove_files(&storage.path);
        TemporaryStore {
            storage,
            configured: configured.path.clone(),
            why,
        }
    }

    /// What `/readyz` says while the agent runs on it.
    pub fn notice(&self) -> String {
        format!(
            "running on a temporary store ({}, at most {} MB, gone at the next start) because {} cannot be opened: {}; every site started at its fallback; restart once that is fixed",
            self.storage.path.display(),
            self.storage.max_size_mb,
            self.configured.display(),
            self.why
        )
    }

    /// Removes its files (after the store is closed).
    pub fn remove(&self) {
        remove_files(&self.storage.path);
    }

    /// Sets the configured store's steering marker, retried with a growing
    /// delay until its folder takes the write (or `cancel`).
    pub async fn keep_configured_marker(self, cancel: CancellationToken) {
        let marker = self.configured.with_extension("steering-pending");
        let backoff = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));
        for attempt in 0u32.. {
            match crate::steering::mark_changes_lost(&marker) {
                Ok(()) => {
                    tracing::info!(marker = %marker.display(), "the configured store's folder takes writes again: its stored signals are marked stale, so a start on it begins at the fallback; restart to move back to it");
                    return;
                }
                Err(e) => {
                    tracing::debug!(marker = %marker.display(), error = %e, "the configured store's steering marker cannot be set yet");
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(backoff.ceiling(attempt)) => {}
            }
        }
    }
}

/// Where the temporary database lives: `$RUNTIME_DIRECTORY/temporary.db`
/// under systemd (one agent per unit), else a name of this process's own in
/// the system's temporary folder (tests run several agents in one process).
fn location() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if let Some(dir) = crate::util::first_dir(std::env::var_os("RUNTIME_DIRECTORY").as_deref()) {
        return dir.join("temporary.db");
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("sitegate-temporary-{}-{n}.db", std::process::id()))
}

fn remove_files(db: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_os_string();
        name.push(suffix);
        match std::fs::remove_file(&name) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %Path::new(&name).display(), error = %e, "cannot remove a temporary store's file")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_bounded_and_named_after_the_configured_store_in_its_notice() {
        let configured = StorageConfig {
            path: PathBuf::from("/nowhere/sitegate.db"),
            max_size_mb: 2048,
            ..StorageConfig::default()
        };
        let t = TemporaryStore::new(&configured, 1, "permission denied".into());
        assert_eq!(t.storage.max_size_mb, MAX_MB);
        // A site that needs more than that gets its least cap.
        let big = TemporaryStore::new(&configured, 54, String::new());
        assert_eq!(big.storage.max_size_mb, 54);
        let small = StorageConfig {
            max_size_mb: 8,
            ..configured.clone()
        };
        assert_eq!(
            TemporaryStore::new(&small, 1, String::new())
                .storage
                .max_size_mb,
            8
        );
        // Its WAL in RAM too is bounded by the cap: half of it.
        let cap = t.storage.max_size_mb << 20;
        assert_eq!(t.storage.wal_checkpoint_bytes(), cap / 2);
        assert_ne!(t.storage.path, configured.path);
        let notice = t.notice();
        assert!(notice.contains("/nowhere/sitegate.db"), "{notice}");
        assert!(notice.contains("permission denied"), "{notice}");
        // Two in one process do not share a file.
        let other = TemporaryStore::new(&configured, 1, String::new());
        assert_ne!(t.storage.path, other.storage.path);
    }
}
