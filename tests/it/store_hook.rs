//! The store writer's commit hook: it sees each transaction's batches with their
//! device references and boundaries, writes in the samples' transaction (an
//! error rolls the samples back too), and hears whether the transaction
//! committed before the job that forced it is answered.

use std::sync::{Arc, Mutex};

use crate::store_support::*;
use rusqlite::Connection;
use sitegate::config::StorageConfig;
use sitegate::model::Property;
use sitegate::store::{Batch, CommitHook, StoreHandle};

#[derive(Default)]
struct Log {
    opened: u32,
    /// (device, samples) per batch, per transaction.
    writes: Vec<Vec<(String, usize)>>,
    /// Every sample shown, as (device, ts, value).
    seen: Vec<(String, i64, f64)>,
    finished: Vec<bool>,
}

struct Recorder {
    log: Arc<Mutex<Log>>,
    fail: bool,
}

impl CommitHook for Recorder {
    fn open(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        conn.execute_batch("CREATE TABLE IF NOT EXISTS hooked (device TEXT, n INTEGER)")?;
        self.log.lock().unwrap().opened += 1;
        Ok(())
    }

    fn write(&mut self, conn: &Connection, batches: &[Batch<'_>]) -> rusqlite::Result<()> {
        for b in batches {
            conn.execute(
                "INSERT INTO hooked (device, n) VALUES (?1, ?2)",
                rusqlite::params![b.device, b.samples.len() as i64],
            )?;
        }
        let mut log = self.log.lock().unwrap();
        log.writes.push(
            batches
                .iter()
                .map(|b| (b.device.to_string(), b.samples.len()))
                .collect(),
        );
        for b in batches {
            let shown = b
                .samples
                .iter()
                .map(|s| (b.device.to_string(), s.ts_ms, s.value));
            log.seen.extend(shown);
        }
        drop(log);
        if self.fail && !batches.is_empty() {
            return Err(rusqlite::Error::InvalidQuery);
        }
        Ok(())
    }

    fn finished(&mut self, committed: bool) {
        self.log.lock().unwrap().finished.push(committed);
    }
}

/// Samples wait for a job (or a minute) before they are committed, so each test
/// decides which transaction holds them.
fn open_hooked(dir: &std::path::Path, fail: bool) -> (StoreHandle, Arc<Mutex<Log>>) {
    let log = Arc::new(Mutex::new(Log::default()));
    let hook = Recorder {
        log: log.clone(),
        fail,
    };
    let config = StorageConfig {
        flush_interval_ms: 60_000,
        ..config(dir)
    };
    let store = StoreHandle::open_with_hook(
        &config,
        DEVICES.iter().map(|d| d.to_string()).collect(),
        Some(Box::new(hook)),
    )
    .expect("store opens");
    (store, log)
}

async fn hooked_rows(store: &StoreHandle) -> i64 {
    store
        .read(|c| {
            Ok::<i64, sitegate::store::StoreError>(c.query_row(
                "SELECT count(*) FROM hooked",
                [],
                |r| r.get(0),
            )?)
        })
        .await
        .expect("count")
}

#[tokio::test]
async fn the_hook_writes_each_batch_in_the_samples_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, log) = open_hooked(dir.path(), false);
    assert_eq!(log.lock().unwrap().opened, 1);
    let tx = store.sample_sender();
    let p = Property::ActivePower;
    tx.send(vec![
        sample(0, p, T0, 1.0),
        sample(0, Property::Soc, T0, 50.0),
    ])
    .await
    .expect("send");
    tx.send(vec![sample(1, p, T0, 2.0)]).await.expect("send");
    // An unknown device: stored nowhere, not shown to the hook.
    tx.send(vec![sample(9, p, T0, 3.0)]).await.expect("send");
    tx.send(vec![sample(0, p, T0 + 1000, 4.0)])
        .await
        .expect("send");
    store.flush().await.expect("flush");
    {
        let log = log.lock().unwrap();
        let batches: Vec<_> = log.writes.iter().flatten().cloned().collect();
        let expected = [("dvc_pv1", 2), ("dvc_bat1", 1), ("dvc_pv1", 1)];
        let expected: Vec<_> = expected.iter().map(|(d, n)| (d.to_string(), *n)).collect();
        assert_eq!(batches, expected);
        // Answered after the hook heard of the commit.
        assert_eq!(log.finished.len(), log.writes.len());
        assert!(log.finished.iter().all(|c| *c));
    }
    assert_eq!(hooked_rows(&store).await, 3);
    assert_eq!(store.latest().await.expect("latest").len(), 3);
    // A transaction of jobs only reaches the hook too, with no batches.
    store.flush().await.expect("flush");
    assert_eq!(log.lock().unwrap().writes.last(), Some(&Vec::new()));
    store.close().await.expect("close");
}

/// The uplink publishes what the hook is given, so the hook sees only what the
/// tables stored: a resent sample (first one wins), a NaN and a repeat inside
/// one transaction stay out, and a batch left with nothing is not shown.
#[tokio::test]
async fn the_hook_sees_only_the_samples_the_store_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, log) = open_hooked(dir.path(), false);
    let tx = store.sample_sender();
    let p = Property::ActivePower;
    tx.send(vec![
        sample(0, p, T0, 1.0),
        sample(0, Property::Soc, T0, 50.0),
    ])
    .await
    .expect("send");
    store.flush().await.expect("flush");
    // The same poll again (a restart inside one poll period), then a batch
    // with one stored sample, one new, one NaN, and a repeat of the new one.
    tx.send(vec![
        sample(0, p, T0, 9.0),
        sample(0, Property::Soc, T0, 51.0),
    ])
    .await
    .expect("send");
    tx.send(vec![
        sample(0, p, T0, 1.0),
        sample(0, p, T0 + 1000, 2.0),
        sample(0, Property::Soc, T0 + 1000, f64::NAN),
    ])
    .await
    .expect("send");
    tx.send(vec![sample(0, p, T0 + 1000, 3.0), sample(1, p, T0, 4.0)])
        .await
        .expect("send");
    store.flush().await.expect("flush");
    {
        let log = log.lock().unwrap();
        let first: Vec<_> = log
            .writes
            .iter()
            .find(|w| !w.is_empty())
            .cloned()
            .expect("a write");
        assert_eq!(first, [("dvc_pv1".to_string(), 2)]);
        let last = log
            .writes
            .iter()
            .rev()
            .find(|w| !w.is_empty())
            .cloned()
            .expect("a write");
        assert_eq!(
            last,
            [("dvc_pv1".to_string(), 1), ("dvc_bat1".to_string(), 1)]
        );
        // Each value as stored: the first one sent for its instant.
        let seen: Vec<_> = log
            .seen
            .iter()
            .map(|(d, t, v)| (d.as_str(), *t - T0, *v))
            .collect();
        assert_eq!(
            seen,
            [
                ("dvc_pv1", 0, 1.0),
                ("dvc_pv1", 0, 50.0),
                ("dvc_pv1", 1000, 2.0),
                ("dvc_bat1", 0, 4.0)
            ]
        );
    }
    assert_eq!(hooked_rows(&store).await, 3);
    let latest = store.latest().await.expect("latest");
    assert_eq!(latest.len(), 3, "{latest:?}");
    store.close().await.expect("close");
}

#[tokio::test]
async fn a_failing_hook_rolls_back_its_samples() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, log) = open_hooked(dir.path(), true);
    store
        .sample_sender()
        .send(vec![sample(0, Property::ActivePower, T0, 1.0)])
        .await
        .expect("send");
    // The job of the failed transaction hears why it failed.
    let err = store.flush().await.expect_err("the hook fails");
    assert!(
        matches!(err, sitegate::store::StoreError::Sqlite(_)),
        "{err:?}"
    );
    assert_eq!(log.lock().unwrap().finished, [false]);
    assert!(store.latest().await.expect("latest").is_empty());
    assert_eq!(hooked_rows(&store).await, 0);
    store.close().await.expect("close");
}
