//! The measurement store: every polled sample in SQLite on the controller's flash,
//! minute and hour rollups kept as data arrives, retention, and the reads behind
//! the time-series endpoint and the restart of the latest-value cache.
//!
//! **Only this module opens SQLite connections.** One writer thread owns the
//! write connection ([`writer`]); async code holds a cheap [`StoreHandle`] that
//! sends sample batches and jobs over bounded channels and awaits oneshot
//! replies. Other layers keep tables in the same database and run their own SQL
//! on connections this module lends: in a transaction of the writer
//! ([`StoreHandle::execute`], answered after COMMIT; the uplink's outbox rows
//! through the commit hook, [`CommitHook`], in the samples' own transaction)
//! or on a read connection ([`StoreHandle::read`]). Reads run on tokio's
//! blocking threads, never on the runtime threads, at most four at once with
//! 64 waiting (past that a read is refused as busy), and a read whose caller
//! stops waiting is interrupted (`reader.rs`). Schema changes are migrations ([`migrate`] says how to add
//! one). See `docs/store.md` for the layout, the durability bound and the figures.

mod agg;
mod blocks;
mod cache;
mod cap;
mod chunk_codec;
mod chunks;
mod codec;
pub mod diagnose;
mod error;
mod hook;
mod id_hash;
mod ingest;
pub mod integrity;
mod migrate;
mod plan;
mod query;
mod reader;
mod restamp;
mod retention;
mod retention_stats;
mod sqlite_memory;
mod stable_plans;
mod stage;
mod stats;
mod writer;

pub use agg::{align, Agg, Aggregation};
pub use chunks::{CHUNK_MAX, CHUNK_SPAN_MS};
pub use error::StoreError;
pub use hook::{Batch, CommitHook};
pub use ingest::{IngestStats, DIRECT_PER_SERIES};
pub use plan::{plan, Held, Segment, Source, HOUR_MS, MINUTE_MS};
pub use query::{
    for_each_sample, latest_of, sample_counts, stored_samples, LatestValue, Point, SampleCounts,
    SeriesQuery, StoredSample, SummaryQuery,
};
pub use reader::{
    MAX_RUNNING as MAX_READS_RUNNING, MAX_WAITING as MAX_READS_WAITING,
    OWN_TURNS as OWN_READS_RUNNING,
};
pub use restamp::{Restamp, Restamped};
pub use retention::{Resolution, RetentionReport, Tally, CHUNK_BLOBS, CHUNK_ROWS, KEPT_NEWEST_MS};
pub use retention_stats::{Reason, RetentionStats};
pub use writer::STAGED_MAX;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::config::StorageConfig;
use crate::liveness::{Heartbeat, Pulse};
use crate::model::time::now_ms;
use crate::telemetry::SampleTx;
use reader::{Lane, Readers};
pub use stats::StoreStats;
use writer::{Job, Reply, Work, Writer};

/// Sample batches queued for the writer at most; publishers wait beyond that
/// (backpressure, nothing dropped). A batch is one poll of one device. The
/// writer takes them every 100 ms while a commit is due (`writer.rs`,
/// `DRAIN_EVERY`), so this holds 10,240 polls a second without a wait.
pub const SAMPLE_QUEUE: usize = 1024;
/// Jobs queued at most; `execute` callers wait beyond that.
pub const JOB_QUEUE: usize = 64;

const MS_PER_DAY: i64 = 86_400_000;

/// Cheap, cloneable handle to the store. Dropping every clone stops the writer
/// after a last commit; [`StoreHandle::close`] does it explicitly and waits.
#[derive(Clone)]
pub struct StoreHandle {
    samples: SampleTx,
    jobs: mpsc::Sender<Job>,
    readers: Readers,
    writer: Arc<Mutex<Option<JoinHandle<()>>>>,
    stats: Arc<StoreStats>,
    path: PathBuf,
    pulse: Pulse,
}

impl StoreHandle {
    /// Opens (or creates) the database, applies migrations and starts the writer
    /// thread. `devices` are the device references by `DeviceId` index (config
    /// order): samples name devices by id, the store keeps the stable reference.
    ///
    /// Blocking (migrations may take a while): call it from `spawn_blocking` or
    /// before the runtime serves anything.
    pub fn open(config: &StorageConfig, devices: Vec<String>) -> Result<StoreHandle, StoreError> {
        Self::open_with_hook(config, devices, None)
    }

    /// [`open`](Self::open) with a [`CommitHook`] that writes its own rows in
    /// every transaction of the writer (the MQTT outbox). Its `open` runs here,
    /// after the migrations; an error there fails the open.
    pub fn open_with_hook(
        config: &StorageConfig,
        devices: Vec<String>,
        mut hook: Option<Box<dyn CommitHook>>,
    ) -> Result<StoreHandle, StoreError> {
        let path = config.path.clone();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let stats = Arc::new(StoreStats::default());
        // A damaged file is set aside, never deleted: the agent runs on with
        // a new one (steering at its fallback), and `/readyz` says so.
        let full_max_bytes = config.full_check_max_mb.saturating_mul(1024 * 1024);
        let check_later = path.exists() && !integrity::full_at_start(&path, full_max_bytes);
        match integrity::check(&path, full_max_bytes) {
            Ok(None) => {}
            Ok(Some(aside)) => {
                tracing::error!(reason = %aside.reason, set_aside = %aside.to.display(), "the database is damaged: set aside, starting on a new one");
                stats.record_set_aside();
            }
            Err(source) => {
                return Err(StoreError::SetAside {
                    path: path.display().to_string(),
                    source,
                })
            }
        }
        let cache_kib = cache::writer_cache_kib(devices.len(), config.compact_interval_s);
        let max_bytes = config.max_size_mb.saturating_mul(1024 * 1024);
        let mut conn = open_writer(&path, &stats, cache_kib, config.wal_checkpoint_bytes())?;
        migrate::migrate(&mut conn, now_ms())?;
        if let Some(hook) = &mut hook {
            hook.open(&conn)?;
        }

        let heartbeat = Heartbeat::new("store writer");
        let pulse = heartbeat.pulse();
        let ingest = ingest::Ingest::new(&conn, devices)?;
        let mut writer = Writer {
            conn,
            ingest,
            flush_interval: Duration::from_millis(config.flush_interval_ms.max(1)),
            compact_interval: Duration::from_secs(config.compact_interval_s.max(1)),
            retention_every: Duration::from_secs(config.retention_interval_s.max(1)),
            batch_size: config.batch_size.max(1),
            buffer_samples: config.buffer_samples.max(1),
            path: path.clone(),
            policy: retention::Policy {
                raw_ms: i64::from(config.retention_days) * MS_PER_DAY,
                minute_ms: i64::from(config.minute_rollup_days()) * MS_PER_DAY,
                rollup_ms: i64::from(config.rollup_retention_days) * MS_PER_DAY,
                max_bytes,
            },
            cap: cap::Cap::new(max_bytes),
            hook,
            stats: stats.clone(),
            heartbeat,
        };
        // What a crash (or an older sitegate's `recent`) left staged goes to
        // the chunks before anything reads or writes.
        if let Err(e) = writer.compact() {
            tracing::error!(error = %e, "compacting staged samples at start failed");
        }
        let (samples, samples_rx) = mpsc::channel(SAMPLE_QUEUE);
        let (jobs, jobs_rx) = mpsc::channel(JOB_QUEUE);
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer.run(samples_rx, jobs_rx))
            .map_err(StoreError::WriterStart)?;
        if check_later {
            spawn_background_check(path.clone(), stats.clone());
        }
        Ok(StoreHandle {
            samples,
            jobs,
            readers: Readers::new(path.clone()),
            writer: Arc::new(Mutex::new(Some(thread))),
            stats,
            path,
            pulse,
        })
    }

    /// The writer thread's heartbeat, for the watchdog.
    pub fn pulse(&self) -> &Pulse {
        &self.pulse
    }

    /// The writer's counters.
    pub fn stats(&self) -> &StoreStats {
        &self.stats
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// False once the writer stopped (after [`close`](Self::close)).
    pub fn is_open(&self) -> bool {
        !self.jobs.is_closed()
    }

    /// The sender that [`Telemetry`](crate::telemetry::Telemetry) hands every
    /// published batch to.
    pub fn sample_sender(&self) -> SampleTx {
        self.samples.clone()
    }

    /// Runs `f` on the writer inside a transaction and answers after COMMIT
    /// (durable on disk). Sample batches whose `send` completed before this call
    /// are committed in the same transaction or an earlier one.
    ///
    /// `f` gets the writer connection inside an open transaction (it must not
    /// BEGIN/COMMIT itself) and runs on the writer thread, so keep it short: every
    /// sample batch waits for it. When `f` returns `Err`, its writes are rolled back
    /// (the samples of the same transaction are kept) and the error is returned.
    pub async fn execute<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<T, E>>();
        let work: Work = Box::new(move |conn: &Connection| {
            let result = f(conn);
            let ok = result.is_ok();
            let reply: Reply = Box::new(move |committed: Result<(), StoreError>| {
                let answer = match committed {
                    Ok(()) => result,
                    Err(e) => Err(E::from(e)),
                };
                let _ = tx.send(answer);
            });
            (ok, reply)
        });
        self.jobs
            .send(Job::Execute(work))
            .await
            .map_err(|_| E::from(StoreError::Closed))?;
        rx.await.map_err(|_| E::from(StoreError::Closed))?
    }

    /// Commits every sample sent so far; returns once they are on disk.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.execute(|_| Ok::<(), StoreError>(())).await
    }

    /// Runs `f` on a read connection on a blocking thread, for a request
    /// (bounded: refused as [`StoreError::Busy`] past the bound).
    pub async fn read<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        self.readers.run(Lane::Requests, f).await
    }

    /// Reads for requests waiting for a turn now (at most
    /// [`MAX_READS_WAITING`]).
    pub fn reads_waiting(&self) -> usize {
        self.readers.waiting()
    }

    /// Runs `f` on a read connection on a blocking thread for the agent's own
    /// delivery path, in a turn requests never take: however many requests
    /// read, this waits only for another read of its own. For a fixed few
    /// callers (the uplink reading its outbox), never for a request.
    pub async fn read_own<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    {
        self.readers.run(Lane::Own, f).await
    }

    /// The non-empty buckets of a time-series query for one device, ascending.
    pub async fn time_series(
        &self,
        device: &str,
        q: SeriesQuery,
    ) -> Result<Vec<Point>, StoreError> {
        let device = device.to_string();
        self.read(move |conn| Ok(query::time_series(conn, &device, &q)?))
            .await
    }

    /// Whole bucket summaries of several series, read in one snapshot (the
    /// energy view's counters and powers), each ascending.
    pub async fn summaries(
        &self,
        queries: Vec<SummaryQuery>,
    ) -> Result<Vec<Vec<(i64, Agg)>>, StoreError> {
        self.read(move |conn| Ok(query::summaries(conn, &queries)?))
            .await
    }

    /// The newest stored value of every series (to fill the latest-value cache at
    /// start).
    pub async fn latest(&self) -> Result<Vec<LatestValue>, StoreError> {
        self.read(|conn| Ok(query::latest(conn)?)).await
    }

    /// Runs retention (expiry and size cap) to completion as of `now_ms`, in
    /// small transactions. The writer also does this by itself every minute.
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<RetentionReport, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.jobs
            .send(Job::Retention { now_ms, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Stores the samples of device `id` (added at run time, the next id)
    /// under `reference` from now on; answers once the writer knows it.
    pub async fn add_device(
        &self,
        id: crate::model::DeviceId,
        reference: String,
    ) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.jobs
            .send(Job::AddDevice {
                id,
                reference,
                reply,
            })
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Moves the staged samples into raw-sample chunks and the rollups now (the
    /// writer does it every `compact_interval_s`, at open and at close);
    /// returns how many.
    pub async fn compact(&self) -> Result<usize, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.jobs
            .send(Job::Compact(reply))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Moves the samples a wrong clock stamped to the times they were taken
    /// (`restamp.rs`); compacts first.
    pub async fn restamp(&self, r: Restamp) -> Result<Restamped, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.jobs
            .send(Job::Restamp(r, reply))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// The largest raw-chunk id now: chunks written later are above it.
    pub async fn chunk_mark(&self) -> Result<i64, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.jobs
            .send(Job::ChunkMark(reply))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Bytes in database pages holding data (the file minus its free pages).
    pub async fn used_bytes(&self) -> Result<u64, StoreError> {
        self.read(|conn| Ok(retention::used_bytes(conn)?)).await
    }

    /// Commits what is pending, stops the writer and waits for its thread.
    /// Later `execute` calls fail with [`StoreError::Closed`]; later sample sends
    /// are dropped by the publisher (the channel is closed).
    pub async fn close(&self) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        if self.jobs.send(Job::Close(reply)).await.is_ok() {
            let _ = rx.await;
        }
        let thread = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .map_err(StoreError::WriterJoin)?
                .map_err(|_| StoreError::WriterPanicked)?;
        }
        Ok(())
    }
}

/// Page size of a database this binary creates. Every commit rewrites whole
/// pages (plus a 24-byte frame header) in the WAL, so smaller pages write less
/// per commit; see docs/store.md, "Flash wear". An existing database keeps the
/// page size it was created with.
pub const NEW_DB_PAGE_SIZE: u32 = 1024;

/// The full integrity check of a file too large to check before the start,
/// on a thread of its own while the agent runs. Damage found is flagged for
/// the next start (which sets the file aside) and shown on `/readyz`.
fn spawn_background_check(path: PathBuf, stats: Arc<StoreStats>) {
    let spawned = std::thread::Builder::new()
        .name("store-check".into())
        .spawn(move || {
            let started = tokio::time::Instant::now();
            match integrity::background(&path) {
                None => {
                    tracing::info!(path = %path.display(), took_s = started.elapsed().as_secs(), "background integrity check: sound")
                }
                Some(reason) => {
                    tracing::error!(path = %path.display(), %reason, "background integrity check: the database is damaged; it is set aside at the next start");
                    stats.record_damage_found(reason);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the background integrity check: the file is checked in full at the next start only if damage shows");
    }
}

/// The write connection: WAL, fsync at every commit (`synchronous = FULL`: a
/// commit that returned survives a power cut), a checkpoint every
/// `checkpoint_bytes` of WAL (`storage.wal_checkpoint_mb`: a page rewritten by
/// many commits in between, the staging ring's or a rollup's, is copied into
/// the file once per checkpoint), the WAL file bounded a third above that,
/// a page cache of `cache_kib` KiB ([`cache::writer_cache_kib`]), and a count
/// of the bytes appended to the WAL (`stats`).
fn open_writer(
    path: &Path,
    stats: &Arc<StoreStats>,
    cache_kib: u64,
    checkpoint_bytes: u64,
) -> Result<Connection, StoreError> {
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    stable_plans::enable(&conn)?;
    // Takes effect only on a database without pages yet (a new file).
    conn.execute_batch(&format!("PRAGMA page_size = {NEW_DB_PAGE_SIZE}"))?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Pragma {
            expected: "journal_mode wal".into(),
            found: format!("journal_mode {mode}"),
        });
    }
    // The WAL file is cut back to a third more than a checkpoint's worth.
    let journal_limit = checkpoint_bytes + checkpoint_bytes / 3;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = FULL;
         PRAGMA journal_size_limit = {journal_limit};
         PRAGMA cache_size = -{cache_kib};
         PRAGMA temp_store = MEMORY;"
    ))?;
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    let page_size = u64::try_from(page_size).unwrap_or(4096);
    let checkpoint_frames = (checkpoint_bytes / page_size).max(1);
    let stats = stats.clone();
    let mut frames_before = 0u64;
    // Replaces SQLite's own auto-checkpoint hook with the same policy, counting
    // the frames each commit appended. `frames` is the WAL's frame count after
    // the commit; it is smaller than before only after the WAL restarted from
    // its beginning (a checkpoint had copied all of it).
    conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, frames: i32| {
        let frames = u64::try_from(frames).unwrap_or(0);
        let appended = if frames >= frames_before {
            frames - frames_before
        } else {
            frames
        };
        frames_before = frames;
        stats.record_wal_frames(appended, page_size);
        if frames >= checkpoint_frames {
            // PASSIVE: copies what no reader still needs, never waits. A
            // failure is retried at the next commit.
            if let Err(e) = wal.checkpoint() {
                tracing::warn!(error = %e, "WAL checkpoint failed; retrying after the next commit");
            }
        }
        Ok(())
    }))?;
    Ok(conn)
}

/// A read-only connection to the database at `path`, for a command that
/// reads beside a running agent (`sitegate grid-events`); it waits up to 5 s
/// on the writer.
pub fn open_read_only(path: &std::path::Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

/// The schema on a connection of a unit test's own.
#[cfg(test)]
pub(crate) fn migrate_for_tests(conn: &mut Connection) {
    migrate::migrate(conn, 1).expect("the schema");
}
