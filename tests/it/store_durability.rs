//! Durability: a child process ingests at a known rate and reports what it sent
//! and every commit the store's writer made (through a commit hook, so the
//! acknowledgements are the writer's own commits on its flush interval, not
//! extra flushes); the test kills it with SIGKILL, reopens the database, and
//! checks it is intact, holds everything acknowledged, and misses at most the
//! unflushed batches.
//!
//! The child is this test binary itself, re-run to run `child_ingest`, a
//! test that is ignored in every other run, with an environment variable
//! naming its database.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

use crate::store_support::*;
use rusqlite::Connection;
use sitegate::model::{time::now_ms, Property};
use sitegate::store::{Batch, CommitHook, StoreHandle};

const CHILD_ENV: &str = "SITEGATE_STORE_DURABILITY_DB";
/// Samples per batch and batches per second: 5,000 samples/s at most (ticks
/// that come late are not made up in a burst).
const BATCH: i64 = 50;
const BATCH_EVERY: Duration = Duration::from_millis(10);
/// The default flush interval.
const FLUSH_INTERVAL_MS: u64 = 1000;
/// What one flush interval collects at that rate.
const PER_FLUSH: i64 = BATCH * FLUSH_INTERVAL_MS as i64 / BATCH_EVERY.as_millis() as i64;
/// Commits by size come only far beyond a flush interval.
const BATCH_SIZE: usize = 20_000;
/// The writer compacts its staging ring into chunks every other commit or so,
/// so a kill may land in a compaction too.
const COMPACT_INTERVAL_S: u64 = 2;

/// Sample `seq` goes to one of these, so a batch holds 10 samples of each of 5
/// series: below the direct-write threshold, so batches are staged in the
/// ring and compacted by the writer (a kill finds both in use).
const PROPERTIES: [Property; 5] = [
    Property::ActivePower,
    Property::ReactivePower,
    Property::Soc,
    Property::VoltageL1,
    Property::Frequency,
];

/// Reports each committed transaction of samples: `COMMITTED n` once samples
/// `0..n` are on disk (a sample's value is its `seq`; batches commit in order).
struct Acknowledge {
    upto: Option<i64>,
}

impl CommitHook for Acknowledge {
    fn open(&mut self, _conn: &Connection) -> rusqlite::Result<()> {
        Ok(())
    }

    fn write(&mut self, _conn: &Connection, batches: &[Batch<'_>]) -> rusqlite::Result<()> {
        self.upto = batches
            .iter()
            .flat_map(|b| b.samples)
            .map(|s| s.value as i64 + 1)
            .max();
        Ok(())
    }

    fn finished(&mut self, committed: bool) {
        // After the COMMIT (synchronous = FULL: after its fsync).
        if let (true, Some(n)) = (committed, self.upto.take()) {
            say(&format!("COMMITTED {n}"));
        }
    }
}

/// The child: ingests sample `seq` at `ts = base + seq` forever.
#[test]
#[ignore = "the ingesting child of sigkill_while_ingesting_loses_at_most_the_unflushed_tail, run by it"]
fn child_ingest() {
    let path = std::env::var(CHILD_ENV)
        .unwrap_or_else(|_| panic!("{CHILD_ENV} names the child's database"));
    let mut cfg = config(std::path::Path::new(&path));
    cfg.flush_interval_ms = FLUSH_INTERVAL_MS;
    cfg.batch_size = BATCH_SIZE;
    cfg.compact_interval_s = COMPACT_INTERVAL_S;
    let rt = runtime();
    rt.block_on(async {
        let devices = DEVICES.iter().map(|d| d.to_string()).collect();
        let store =
            StoreHandle::open_with_hook(&cfg, devices, Some(Box::new(Acknowledge { upto: None })))
                .expect("store opens");
        let base = now_ms() - 3_600_000;
        say(&format!("BASE {base}"));
        let tx = store.sample_sender();
        let mut seq = 0i64;
        let mut tick = tokio::time::interval(BATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let batch = (seq..seq + BATCH)
                .map(|s| sample(0, PROPERTIES[(s % 5) as usize], base + s, s as f64))
                .collect();
            tx.send(batch).await.expect("send");
            seq += BATCH;
            say(&format!("SENT {seq}"));
        }
    });
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `child_ingest` as libtest names it: its module path without the crate.
fn child_test_name() -> String {
    let module = module_path!();
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    format!("{module}::child_ingest")
}

/// The number after `tag` (libtest may print "test store_durability::child_ingest ... " before the
/// first line).
fn value(line: &str, tag: &str) -> Option<i64> {
    let at = line.find(tag)?;
    line[at + tag.len()..].trim().parse().ok()
}

/// What the child reported so far.
#[derive(Default)]
struct Progress {
    base: Option<i64>,
    sent: i64,
    /// Samples on disk by the writer's last reported commit.
    acked: i64,
    commits: usize,
}

impl Progress {
    fn absorb(&mut self, line: &str) {
        if let Some(b) = value(line, "BASE ") {
            self.base = Some(b);
        }
        if let Some(s) = value(line, "SENT ") {
            self.sent = self.sent.max(s);
        }
        if let Some(a) = value(line, "COMMITTED ") {
            self.acked = self.acked.max(a);
            self.commits += 1;
        }
    }
}

#[test]
fn sigkill_while_ingesting_loses_at_most_the_unflushed_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            &child_test_name(),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("piped stdout");
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });

    let mut p = Progress::default();
    // Run for a few of the writer's commits, then up to one flush interval
    // more (a varying number of batches), so the kill lands anywhere between
    // two commits or in one.
    let more = now_ms() % (PER_FLUSH / BATCH + 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut kill_at = None;
    while kill_at.is_none_or(|n| p.sent < n) {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the child reports");
        p.absorb(&line);
        if kill_at.is_none() && p.commits >= 4 {
            kill_at = Some(p.sent + more * BATCH);
        }
        assert!(Instant::now() < deadline, "the child did not get going");
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    while let Ok(line) = lines.try_recv() {
        p.absorb(&line);
    }
    let Progress {
        base, sent, acked, ..
    } = p;
    let base = base.expect("the child said its base");

    let db = dir.path().join("store.db");
    let conn = rusqlite::Connection::open(&db).expect("the database opens");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    // Every place a sample may be in: the staging ring and the chunks.
    let stored = sitegate::store::stored_samples(&conn, None).expect("stored samples");
    let rows = stored.len() as i64;
    let first = stored.iter().map(|s| s.ts_ms).min();
    let last = stored.iter().map(|s| s.ts_ms).max();
    let distinct = stored
        .iter()
        .map(|s| s.ts_ms)
        .collect::<std::collections::HashSet<_>>()
        .len() as i64;
    assert_eq!(distinct, rows, "no sample is stored twice");
    // Batches commit in order: what survived is a prefix without holes.
    assert_eq!(first, Some(base));
    assert_eq!(last, Some(base + rows - 1));
    // Everything the writer acknowledged is there.
    assert!(rows >= acked, "acknowledged {acked}, found {rows}");
    // What may be missing is what was not committed yet: the batch the writer
    // was collecting (at most one flush interval of samples, counted from when
    // they reached its channel) and the batch whose COMMIT the kill interrupted
    // (one more interval's: a commit takes milliseconds here, some hundreds at
    // worst on a loaded machine, less than an interval). One child batch more
    // for where the intervals' edges fall between two sends.
    let unflushed = 2 * PER_FLUSH + BATCH;
    // The figure docs/store.md quotes (shown with --nocapture).
    let _ = writeln!(
        std::io::stderr(),
        "sent {sent}, acknowledged {acked}, stored {rows}: {} missing",
        sent - rows
    );
    assert!(
        sent - rows <= unflushed,
        "sent {sent}, found {rows}: {} missing, more than the unflushed {unflushed}",
        sent - rows
    );
    drop(conn);

    // The store itself opens on it again and answers.
    let store = open(&config(dir.path()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let latest = rt.block_on(store.latest()).expect("latest");
    assert_eq!(latest.len(), 5);
    assert_eq!(latest.iter().map(|l| l.ts_ms).max(), Some(base + rows - 1));
    let staged =
        rt.block_on(store.read(|c| {
            sitegate::store::sample_counts(c).map_err(sitegate::store::StoreError::from)
        }))
        .expect("count")
        .staged;
    assert_eq!(staged, 0, "opening compacts what was staged");
    rt.block_on(store.close()).expect("close");
}
