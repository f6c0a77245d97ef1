//! Durability: a child process ingests at a known rate and reports what it sent
//! and what `flush` acknowledged; the test kills it with SIGKILL, reopens the
//! database, and checks it is intact and misses at most the unflushed tail.
//!
//! The child is this test binary itself, re-run with an environment variable
//! that turns `child_ingest` from a no-op into the ingesting process.

mod store_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sitegate::model::{time::now_ms, Property};
use store_support::*;

const CHILD_ENV: &str = "SITEGATE_STORE_DURABILITY_DB";
/// Samples per batch and batches per second: 25,000 samples/s.
const BATCH: i64 = 50;
const BATCH_EVERY: Duration = Duration::from_millis(2);
const FLUSH_INTERVAL_MS: u64 = 100;

/// Sample `seq` goes to one of these, so a batch holds 10 samples of each of 5
/// series: below the direct-write threshold, so batches are staged in `recent`
/// and compacted every minute (a kill finds both tables in use).
const PROPERTIES: [Property; 5] = [
    Property::ActivePower,
    Property::ReactivePower,
    Property::Soc,
    Property::VoltageL1,
    Property::Frequency,
];

/// The child: ingests sample `seq` at `ts = base + seq` forever.
#[test]
fn child_ingest() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return; // not the child: nothing to do
    };
    let mut cfg = config(std::path::Path::new(&path));
    cfg.flush_interval_ms = FLUSH_INTERVAL_MS;
    cfg.batch_size = 1_000_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = open(&cfg);
        let base = now_ms() - 3_600_000;
        say(&format!("BASE {base}"));
        let sent = Arc::new(AtomicI64::new(0));
        {
            // Acknowledgements: everything sent before a flush began is durable
            // once it returns.
            let (store, sent) = (store.clone(), sent.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    let before = sent.load(Ordering::SeqCst);
                    store.flush().await.expect("flush");
                    say(&format!("ACK {before}"));
                    // Compactions too (the writer's own come once a minute), so
                    // the kill may land in one.
                    store.compact().await.expect("compact");
                }
            });
        }
        let tx = store.sample_sender();
        let mut seq = 0i64;
        let mut tick = tokio::time::interval(BATCH_EVERY);
        loop {
            tick.tick().await;
            let batch = (seq..seq + BATCH)
                .map(|s| sample(0, PROPERTIES[(s % 5) as usize], base + s, s as f64))
                .collect();
            tx.send(batch).await.expect("send");
            seq += BATCH;
            sent.store(seq, Ordering::SeqCst);
            say(&format!("SENT {seq}"));
        }
    });
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The number after `tag` (libtest may print "test child_ingest ... " before the
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
    acked: i64,
}

impl Progress {
    fn absorb(&mut self, line: &str) {
        if let Some(b) = value(line, "BASE ") {
            self.base = Some(b);
        }
        if let Some(s) = value(line, "SENT ") {
            self.sent = self.sent.max(s);
        }
        if let Some(a) = value(line, "ACK ") {
            self.acked = self.acked.max(a);
        }
    }
}

#[test]
fn sigkill_while_ingesting_loses_at_most_the_unflushed_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args(["--exact", "child_ingest", "--nocapture", "--test-threads=1"])
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
    // Run until the child has acknowledged a few flushes.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut sent_long_ago = None;
    let mut marked_at = Instant::now();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the child reports");
        p.absorb(&line);
        let (s, a) = (p.sent, p.acked);
        if sent_long_ago.is_none() && a > 0 && s > 20_000 {
            // Everything sent up to here was sent at least two seconds before
            // the kill: the flush interval (100 ms) must have committed it.
            sent_long_ago = Some(s);
            marked_at = Instant::now();
        }
        if sent_long_ago.is_some() && marked_at.elapsed() >= Duration::from_millis(2_000) {
            break;
        }
        assert!(Instant::now() < deadline, "the child did not get going");
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    while let Ok(line) = lines.try_recv() {
        p.absorb(&line);
    }
    let Progress { base, sent, acked } = p;
    let base = base.expect("the child said its base");
    let sent_long_ago = sent_long_ago.expect("marked");

    let db = dir.path().join("store.db");
    let conn = rusqlite::Connection::open(&db).expect("the database opens");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    let (rows, first, last): (i64, Option<i64>, Option<i64>) = conn
        .query_row(
            "SELECT count(*), min(ts), max(ts) FROM (SELECT ts FROM raw UNION ALL SELECT ts FROM recent)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("count");
    // Batches commit in order: what survived is a prefix without holes.
    assert_eq!(first, Some(base));
    assert_eq!(last, Some(base + rows - 1));
    assert!(rows >= acked, "acknowledged {acked}, found {rows}");
    assert!(
        rows >= sent_long_ago,
        "sent two seconds before the kill {sent_long_ago}, found {rows}"
    );
    // At 25,000 samples/s, what may be missing is what was sent since the last
    // flush (100 ms, 2,500 samples) plus scheduling slack on a busy machine:
    // never two seconds' worth.
    assert!(sent - rows <= 50_000, "sent {sent}, found {rows}");
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
    let staged: i64 = rt
        .block_on(store.read(|c| {
            c.query_row("SELECT count(*) FROM recent", [], |r| r.get(0))
                .map_err(sitegate::store::StoreError::from)
        }))
        .expect("count");
    assert_eq!(staged, 0, "opening compacts what was staged");
    rt.block_on(store.close()).expect("close");
}
