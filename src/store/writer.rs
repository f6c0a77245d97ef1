//! The writer thread: the only thread that writes to SQLite. Other layers'
//! writes run here too, as SQL on this thread's connection: `execute` jobs in
//! a transaction of their own, and the commit hook (the uplink's outbox) in the
//! samples' transaction.
//!
//! It owns the write connection and serves two bounded channels: sample batches
//! (from [`Telemetry`](crate::telemetry::Telemetry)) and jobs (closures run in a
//! transaction, retention, close). Samples wait in memory until the oldest of
//! them is `flush_interval` old (counted from when it reached the channel: a
//! batch that waited there while the writer was busy has used up that time) or
//! `batch_size` are pending (the writer takes queued batches every
//! `DRAIN_EVERY`, 100 ms, rather than waking for each), then one transaction
//! writes them with their rollups. **A power cut loses at most the samples
//! not yet committed: those of the last `flush_interval`, and those of the
//! transaction being written**; a job's reply is sent only after the COMMIT
//! that holds it (with `synchronous = FULL`, after the fsync).
//!
//! It runs a current-thread tokio runtime of its own to wait on channels and
//! timers, so blocking SQLite calls never stall the agent's runtime. It must not
//! hold a transaction open between commits. An optional [`CommitHook`] writes
//! its rows in every sample or job transaction (`hook.rs`).

use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::cap::Cap;
use super::hook::{CommitHook, Pending};
use super::ingest::Ingest;
use super::retention::{Policy, Resolution, RetentionReport, Step, Tally};
use super::retention_stats::Reason;
use super::stats::StoreStats;
use super::StoreError;
use crate::model::{time::now_ms, Sample};

/// Staged samples from which the writer compacts at once, whatever the
/// interval: a reader scans every staged slot for the series it is asked
/// about, so this bounds its work (about 10 MB of slots). Large enough that a
/// compaction moves minutes of samples of each series even at 1,000 devices
/// (chunks of a useful size, few compactions to share a chunk index window);
/// the compaction itself holds [`COMPACT_PART`](super::ingest::COMPACT_PART)
/// samples in memory at once. A small `max_size_mb` lowers it: the ring
/// takes at most a fifth of the cap (`cap.rs`).
pub const STAGED_MAX: usize = crate::config::size_floor::STAGED_MAX;

/// While samples wait for their commit, how often the writer takes the
/// batches queued since: one wake-up of its thread per interval instead of
/// one per poll (at 1,000 devices, 10 instead of 1,000 a second). The sample
/// queue ([`SAMPLE_QUEUE`](super::SAMPLE_QUEUE)) must hold what arrives in
/// between, or publishers wait.
const DRAIN_EVERY: Duration = Duration::from_millis(100);

/// Called once the transaction holding a job committed (or failed).
pub(crate) type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A job's work: runs inside the transaction, says whether it succeeded (else its
/// savepoint is rolled back) and how to answer after the commit.
pub(crate) type Work = Box<dyn FnOnce(&Connection) -> (bool, Reply) + Send>;

pub(crate) enum Job {
    Execute(Work),
    Retention {
        now_ms: i64,
        reply: oneshot::Sender<Result<RetentionReport, StoreError>>,
    },
    Compact(oneshot::Sender<Result<usize, StoreError>>),
    Restamp(
        super::restamp::Restamp,
        oneshot::Sender<Result<super::restamp::Restamped, StoreError>>,
    ),
    ChunkMark(oneshot::Sender<Result<i64, StoreError>>),
    /// A device added at run time: its samples are stored from now on.
    AddDevice {
        id: crate::model::DeviceId,
        reference: String,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    Close(oneshot::Sender<()>),
}

pub(crate) struct Writer {
    pub conn: Connection,
    pub ingest: Ingest,
    pub flush_interval: Duration,
    /// How often staged samples are compacted into chunks and rollups.
    pub compact_interval: Duration,
    /// How often a retention pass starts (`storage.retention_interval_s`; the
    /// first one this long after start, so opening the store stays quick).
    pub retention_every: Duration,
    pub batch_size: usize,
    /// Samples kept at most while commits fail (`storage.buffer_samples`).
    pub buffer_samples: usize,
    /// The database file, for the OS cause of a failure.
    pub path: std::path::PathBuf,
    pub policy: Policy,
    /// The size cap's bookkeeping (the ring's bound, the room a compaction
    /// needs).
    pub cap: Cap,
    pub hook: Option<Box<dyn CommitHook>>,
    pub stats: std::sync::Arc<StoreStats>,
    pub heartbeat: crate::liveness::Heartbeat,
}

impl Writer {
    /// Runs until a `Close` job or until every job sender is gone.
    pub fn run(self, samples: mpsc::Receiver<Vec<Sample>>, jobs: mpsc::Receiver<Job>) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!(error = %e, "store writer cannot start its runtime");
                return;
            }
        };
        rt.block_on(self.serve(samples, jobs));
        tracing::info!("store writer stopped");
    }

    /// The writer's loop: jobs first (each after committing what is
    /// pending), sample batches committed at their flush deadline or once
    /// `batch_size` wait, compaction and retention at their intervals.
    async fn serve(
        mut self,
        mut samples: mpsc::Receiver<Vec<Sample>>,
        mut jobs: mpsc::Receiver<Job>,
    ) {
        self.measure_oldest();
        let mut next_compaction = Instant::now() + self.compact_interval;
        let mut pending = Pending::default();
        let mut deadline: Option<Instant> = None;
        let mut next_drain = Instant::now();
        let mut samples_open = true;
        let mut next_retention = Instant::now() + self.retention_every;
        let mut retention_at: Option<i64> = None;
        let mut beat = crate::liveness::Heartbeat::ticker();
        loop {
            self.heartbeat.beat();
            // Set by every branch that keeps the writer busy (SQLite work):
            // when it began. The sample channel was empty then (the job
            // branch drains it first; the others run only when it had
            // nothing), so batches found afterwards arrived during the work.
            let mut busy_from: Option<Instant> = None;
            tokio::select! {
                biased;
                job = jobs.recv() => {
                    busy_from = Some(Instant::now());
                    drain(&mut samples, &mut pending);
                    if self.run_job(job, &mut pending).is_break() {
                        break;
                    }
                    deadline = None;
                }
                // Woken by the first batch of a commit only: the others
                // are collected every DRAIN_EVERY (below), not one wake-up
                // of this thread per poll.
                batch = samples.recv(), if samples_open && deadline.is_none() => match batch {
                    Some(batch) => {
                        deadline = Some(Instant::now() + self.flush_interval);
                        next_drain = Instant::now() + DRAIN_EVERY;
                        pending.push(batch);
                    }
                    None => samples_open = false,
                },
                _ = tokio::time::sleep_until(next_drain), if deadline.is_some() => {
                    drain(&mut samples, &mut pending);
                    if pending.len() >= self.batch_size {
                        busy_from = Some(Instant::now());
                        self.commit(&mut pending, None);
                        deadline = None;
                    }
                    next_drain = Instant::now() + DRAIN_EVERY;
                }
                _ = sleep_until(deadline), if deadline.is_some() => {
                    drain(&mut samples, &mut pending);
                    busy_from = Some(Instant::now());
                    self.commit(&mut pending, None);
                    deadline = None;
                }
                _ = tokio::time::sleep_until(next_compaction) => {
                    busy_from = Some(Instant::now());
                    let result = if self.ingest.staged() > 0 { self.compact() } else { Ok(0) };
                    if let Err(e) = result {
                        tracing::error!(error = %e, "compacting staged samples failed; retrying later");
                    }
                    self.measure_oldest_when_due();
                    next_compaction = Instant::now() + self.compact_interval;
                }
                _ = tokio::time::sleep_until(next_retention), if retention_at.is_none() => {
                    // While age retention is held, the pass runs at the
                    // start of time: nothing is old, the size bound holds.
                    retention_at = Some(if self.stats.age_retention_held() { i64::MIN } else { now_ms() });
                    next_retention = Instant::now() + self.retention_every;
                }
                _ = beat.tick() => {}
                _ = std::future::ready(()), if retention_at.is_some() => {
                    busy_from = Some(Instant::now());
                    retention_at = self.retention_step(retention_at.unwrap_or_default());
                }
            }
            deadline = self.next_deadline(deadline, busy_from, &mut samples, &mut pending);
        }
    }

    /// Runs one job (`None`: every job sender is gone), committing the
    /// pending samples first where the job needs it; `Break` when the
    /// writer stops.
    fn run_job(&mut self, job: Option<Job>, pending: &mut Pending) -> ControlFlow<()> {
        match job {
            Some(Job::Execute(work)) => self.commit(pending, Some(work)),
            Some(Job::Retention { now_ms, reply }) => {
                self.commit(pending, None);
                let _ = reply.send(self.retention(now_ms));
            }
            Some(Job::Compact(reply)) => {
                self.commit(pending, None);
                let _ = reply.send(self.compact());
            }
            Some(Job::Restamp(r, reply)) => {
                self.commit(pending, None);
                let _ = reply.send(self.restamp(&r));
            }
            Some(Job::ChunkMark(reply)) => {
                let _ = reply.send(super::restamp::chunk_mark(&self.conn).map_err(Into::into));
            }
            Some(Job::AddDevice {
                id,
                reference,
                reply,
            }) => {
                let _ = reply.send(self.ingest.add_device(id, reference));
            }
            Some(Job::Close(reply)) => {
                self.commit(pending, None);
                if let Err(e) = self.compact() {
                    tracing::error!(error = %e, "compacting at shutdown failed");
                }
                let _ = reply.send(());
                return ControlFlow::Break(());
            }
            None => {
                self.commit(pending, None);
                let _ = self.compact();
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    /// The flush deadline after a turn of the loop: samples a failed commit
    /// left waiting get one again, and batches that arrived while the
    /// writer was busy (since `busy_from`) count from when the work began.
    fn next_deadline(
        &self,
        mut deadline: Option<Instant>,
        busy_from: Option<Instant>,
        samples: &mut mpsc::Receiver<Vec<Sample>>,
        pending: &mut Pending,
    ) -> Option<Instant> {
        // Samples a failed commit left waiting retry on the next flush.
        if deadline.is_none() && !pending.is_empty() {
            deadline = Some(Instant::now() + self.flush_interval);
        }
        // Batches that waited in the channel while the writer was busy
        // count their flush interval from when the work began, not from
        // when the writer got round to them: so no sample waits longer
        // than `flush_interval` for its commit to begin, unless the
        // writer is busy when it is due.
        if let Some(began) = busy_from {
            if pending.is_empty() {
                drain(samples, pending);
                if !pending.is_empty() {
                    deadline = Some(began + self.flush_interval);
                }
            }
        }
        deadline
    }

    /// Moves the staged samples into chunks and the rollups in one transaction,
    /// in which the oldest data is deleted first to make room for it under the
    /// cap, and whatever is still over after it. Also run by
    /// [`StoreHandle::open`](super::StoreHandle::open) before the thread
    /// starts, for what a crash or a shutdown left staged.
    pub fn compact(&mut self) -> Result<usize, StoreError> {
        let room = self.cap.room_for(self.ingest.staged());
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = self.compact_in_tx(room);
        let result = result.and_then(|r| self.conn.execute_batch("COMMIT").map(|()| r));
        if result.is_err() {
            self.rolled_back();
        }
        // The parts' rows are freed now: give their pages back (memory.rs).
        crate::memory::give_back();
        let (moved, full) = result?;
        if full {
            self.warn_full();
        }
        Ok(moved)
    }

    /// The compaction inside its transaction: first what the cap deletes to
    /// make `room` for it (`room_for`, what the last one added), so that it
    /// writes into the pages the deletes free; then the compaction; then, in
    /// the same transaction, whatever is still over: no commit leaves more
    /// than the cap in use. Returns the samples moved and whether only the
    /// ring and the kept window were left.
    fn compact_in_tx(&mut self, room: u64) -> rusqlite::Result<(usize, bool)> {
        let keep_from = Cap::keep_from(self.ingest.newest_of_all(&self.conn)?);
        let (made_room, full_before) = self.policy.evict_in_tx(&self.conn, keep_from, room)?;
        let before = super::retention::used_bytes(&self.conn)?;
        let moved = self.ingest.compact(&self.conn)?;
        let after = super::retention::used_bytes(&self.conn)?;
        self.cap.measured(before, after, moved);
        let (deleted, full) = if after > self.cap.max_bytes {
            self.policy.evict_in_tx(&self.conn, keep_from, 0)?
        } else {
            (Tally::default(), full_before)
        };
        self.deleted(Reason::Cap, made_room);
        self.deleted(Reason::Cap, deleted);
        Ok((moved, full))
    }

    /// Runs retention to completion as of `now_ms` (age, and the cap), in
    /// small transactions.
    fn retention(&mut self, now_ms: i64) -> Result<RetentionReport, StoreError> {
        let keep_from = Cap::keep_from(self.ingest.newest_of_all(&self.conn)?);
        let report = self.policy.run(&self.conn, now_ms, keep_from)?;
        self.deleted(Reason::Age, report.expired);
        self.deleted(Reason::Cap, report.evicted);
        self.measure_oldest();
        if report.full {
            self.warn_full();
        }
        Ok(report)
    }

    /// Counts what retention deleted; measures how far back each resolution
    /// reaches now (at most once a minute), and while
    /// the cap deletes, says so in the log once an hour.
    fn deleted(&mut self, why: Reason, rows: Tally) {
        if rows.total() == 0 {
            return;
        }
        self.stats.retention.record(why, &rows);
        tracing::debug!(reason = ?why, raw = rows.of(Resolution::Raw), minute = rows.of(Resolution::Minute),
            hour = rows.of(Resolution::Hour), "retention deleted rows");
        self.measure_oldest_when_due();
        if why == Reason::Cap && self.cap.log_reach(Instant::now()) {
            let reach = |r| {
                self.stats
                    .retention
                    .oldest(r)
                    .map_or("none".to_string(), crate::model::time::format_utc)
            };
            tracing::info!(max_bytes = self.cap.max_bytes, raw_from = %reach(Resolution::Raw),
                minute_from = %reach(Resolution::Minute), hour_from = %reach(Resolution::Hour),
                "storage.max_size_mb: the oldest data is being deleted; the history now reaches back to these times");
        }
    }

    /// [`Self::measure_oldest`], at most once a minute.
    fn measure_oldest_when_due(&mut self) {
        if self.cap.measure_oldest(Instant::now()) {
            self.measure_oldest();
        }
    }

    /// Measures from when each resolution holds data (`/metrics`).
    fn measure_oldest(&mut self) {
        match super::retention::oldest_held(&self.conn) {
            Ok(held) => self.stats.retention.set_oldest(held),
            Err(e) => {
                tracing::warn!(error = %e, "cannot measure how far back the stored history reaches")
            }
        }
    }

    fn warn_full(&mut self) {
        if self.cap.warn_full(tokio::time::Instant::now()) {
            tracing::warn!(
                max_bytes = self.cap.max_bytes,
                "storage.max_size_mb holds no more than the staging ring and the newest 5 minutes of raw samples, which are kept: the database is over it (check-config says what this site needs)"
            );
        }
    }

    /// Moves the samples a wrong clock stamped, in one transaction.
    fn restamp(
        &mut self,
        r: &super::restamp::Restamp,
    ) -> Result<super::restamp::Restamped, StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = self
            .ingest
            .restamp(&self.conn, r)
            .and_then(|n| self.conn.execute_batch("COMMIT").map(|()| n));
        if result.is_err() {
            self.rolled_back();
        }
        Ok(result?)
    }

    /// After a failed transaction: roll back (if SQLite has not) and forget the
    /// bookkeeping that assumed it would commit.
    fn rolled_back(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        if let Err(e) = self.ingest.reload(&self.conn) {
            tracing::error!(error = %e, "cannot read the staging ring back after a rollback");
        }
    }

    /// One step of the running retention pass; `None` when the pass is over.
    fn retention_step(&mut self, at: i64) -> Option<i64> {
        let step = self
            .ingest
            .newest_of_all(&self.conn)
            .and_then(|newest| self.policy.step(&self.conn, at, Cap::keep_from(newest)));
        match step {
            Ok(Step::Expired(r, n)) => {
                self.deleted(Reason::Age, one(r, n));
                Some(at)
            }
            Ok(Step::Evicted(r, n)) => {
                self.deleted(Reason::Cap, one(r, n));
                Some(at)
            }
            Ok(Step::Done) => {
                self.measure_oldest();
                None
            }
            Ok(Step::Full) => {
                self.warn_full();
                self.measure_oldest();
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "retention step failed; retrying at the next pass");
                None
            }
        }
    }

    /// Writes `pending` and runs `work` in one transaction, then answers the job.
    /// On failure the transaction is rolled back: its samples are dropped (and
    /// logged with their count) and the job is told why.
    fn commit(&mut self, pending: &mut Pending, work: Option<Work>) {
        if pending.is_empty() && work.is_none() {
            return;
        }
        let samples = pending.take();
        let mut reply: Option<Reply> = None;
        let started = Instant::now();
        let result = self.transaction(&samples, work, &mut reply);
        self.stats
            .record_commit(result.is_ok(), samples.len(), started.elapsed());
        match &result {
            Ok(()) => {
                if let Some(was) = self.stats.recovered() {
                    tracing::info!(after = %was, "store commits succeed again");
                }
            }
            Err(e) => {
                self.rolled_back();
                // The samples wait for the next commit, within the buffer.
                let n = samples.len();
                let dropped = pending.restore(samples, self.buffer_samples);
                self.stats.record_dropped(dropped);
                if let StoreError::Sqlite(se) = e {
                    if super::integrity::is_damage(se) {
                        // The next start checks the whole file and sets it
                        // aside if it is damaged.
                        let _ = std::fs::write(super::integrity::flag_path(&self.path), b"");
                    }
                }
                let cause = super::diagnose::cause(&self.path);
                let why = match &cause {
                    Some(c) => format!("{e} ({c})"),
                    None => e.to_string(),
                };
                if self.stats.failing(&why) {
                    tracing::error!(error = %e, cause = ?cause, samples = n, buffered = pending.len(), "store commit failed: samples wait in memory and are committed when the disk allows");
                }
                if dropped > 0 {
                    tracing::warn!(
                        dropped,
                        limit = self.buffer_samples,
                        "store buffer full while commits fail: oldest samples dropped"
                    );
                }
            }
        }
        self.stats.set_buffered(pending.len());
        if let Some(hook) = &mut self.hook {
            hook.finished(result.is_ok());
        }
        if let Some(reply) = reply {
            reply(result);
        }
        if self.ingest.staged() >= self.cap.staged_max {
            if let Err(e) = self.compact() {
                tracing::error!(error = %e, "compacting staged samples failed; retrying later");
            }
        }
    }

    fn transaction(
        &mut self,
        pending: &Pending,
        work: Option<Work>,
        reply: &mut Option<Reply>,
    ) -> Result<(), StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        // What the hook is given: only what the tables stored.
        let mut stored = None;
        if !pending.is_empty() {
            let mut kept = Vec::new();
            let stats = self.ingest.write(&self.conn, &pending.samples, &mut kept)?;
            if stats.duplicates + stats.rejected > 0 {
                tracing::debug!(
                    duplicates = stats.duplicates,
                    rejected = stats.rejected,
                    "samples not stored"
                );
                stored = Some(pending.only(&kept));
            }
        }
        let stored = stored.as_ref().unwrap_or(pending);
        if let Some(work) = work {
            self.conn.execute_batch("SAVEPOINT job")?;
            let conn = &self.conn;
            let (ok, answer) = match catch_unwind(AssertUnwindSafe(|| work(conn))) {
                Ok(outcome) => outcome,
                Err(_) => {
                    tracing::error!("a store job panicked; its writes are rolled back");
                    let answer: Reply = Box::new(|_| {});
                    (false, answer)
                }
            };
            *reply = Some(answer);
            if !ok {
                self.conn.execute_batch("ROLLBACK TO job")?;
            }
            self.conn.execute_batch("RELEASE job")?;
        }
        // After the job, so that a hook error reaches the job's caller as such.
        if let Some(hook) = &mut self.hook {
            let ingest = &self.ingest;
            hook.write(&self.conn, &stored.batches(|s| ingest.reference(s.device)))?;
        }
        self.conn.execute_batch("COMMIT")?;
        Ok(())
    }
}

/// Moves every batch already queued into `pending`, so a job submitted after a
/// send completed is committed together with (or after) those samples.
fn drain(samples: &mut mpsc::Receiver<Vec<Sample>>, pending: &mut Pending) {
    while let Ok(batch) = samples.try_recv() {
        pending.push(batch);
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// `rows` deleted at `r` alone.
fn one(r: Resolution, rows: u64) -> Tally {
    let mut t = Tally::default();
    t.add(r, rows);
    t
}
