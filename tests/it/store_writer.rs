//! The writer's contract: `execute` jobs commit before they answer and roll back
//! alone, samples sent before a job are committed with it, data and the latest
//! values survive a restart, a closed store says so, a device added at run
//! time has its samples stored (and none before).

use crate::store_support::*;
use rusqlite::OptionalExtension;
use sitegate::model::Property;
use sitegate::store::{StoreError, StoreHandle};

const CREATE_AUDIT: &str =
    "CREATE TABLE IF NOT EXISTS test_audit (id INTEGER PRIMARY KEY, what TEXT NOT NULL)";

#[derive(Debug, thiserror::Error)]
enum JobError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("refused: {0}")]
    Refused(String),
}

async fn count_audit(store: &StoreHandle) -> i64 {
    store
        .read(|c| {
            Ok::<i64, JobError>(c.query_row("SELECT count(*) FROM test_audit", [], |r| r.get(0))?)
        })
        .await
        .expect("count")
}

#[test]
fn execute_answers_after_commit_and_rolls_back_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        store
            .execute(|c| Ok::<_, JobError>(c.execute_batch(CREATE_AUDIT)?))
            .await
            .expect("create table");
        let id = store
            .execute(|c| {
                c.execute("INSERT INTO test_audit (what) VALUES ('steer 5 kW')", [])?;
                Ok::<_, JobError>(c.last_insert_rowid())
            })
            .await
            .expect("insert");
        assert_eq!(id, 1);
        // Visible to a fresh reader as soon as execute returned.
        assert_eq!(count_audit(&store).await, 1);

        // Samples sent before a failing job are committed; the job's row is not.
        store
            .sample_sender()
            .send(vec![sample(0, Property::Soc, T0, 50.0)])
            .await
            .expect("send");
        let refused = store
            .execute(|c| {
                c.execute("INSERT INTO test_audit (what) VALUES ('half done')", [])?;
                Err::<(), _>(JobError::Refused("no".into()))
            })
            .await;
        assert!(matches!(refused, Err(JobError::Refused(_))));
        assert_eq!(count_audit(&store).await, 1);
        let latest = store.latest().await.expect("latest");
        assert_eq!(latest.len(), 1);
        assert_eq!((latest[0].ts_ms, latest[0].value), (T0, 50.0));

        // A panicking job is rolled back and answered with an error; the writer
        // goes on.
        let panicked = store
            .execute(|c| -> Result<(), JobError> {
                c.execute("INSERT INTO test_audit (what) VALUES ('boom')", [])?;
                panic!("a bug in a job");
            })
            .await;
        assert!(matches!(panicked, Err(JobError::Store(StoreError::Closed))));
        assert_eq!(count_audit(&store).await, 1);
        store.flush().await.expect("writer still runs");
        store.close().await.expect("close");
    });
}

#[test]
fn data_and_latest_values_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        let tx = store.sample_sender();
        tx.send(vec![
            sample(0, Property::ActivePower, T0, 100.0),
            sample(0, Property::ActivePower, T0 + 1000, 200.0),
            sample(1, Property::Soc, T0 + 500, 64.5),
        ])
        .await
        .expect("send");
        // Closing commits what is pending without an explicit flush.
        store.close().await.expect("close");
        assert!(matches!(store.flush().await, Err(StoreError::Closed)));
        assert!(tx
            .send(vec![sample(0, Property::Soc, T0, 1.0)])
            .await
            .is_err());

        let store = open(&cfg);
        let mut latest = store.latest().await.expect("latest");
        latest.sort_by(|a, b| a.device.cmp(&b.device));
        let got: Vec<_> = latest
            .iter()
            .map(|l| (l.device.as_str(), l.property, l.ts_ms, l.value))
            .collect();
        assert_eq!(
            got,
            vec![
                ("dvc_bat1", Property::Soc, T0 + 500, 64.5),
                ("dvc_pv1", Property::ActivePower, T0 + 1000, 200.0),
            ]
        );
        // Migrations ran once: the second open applied nothing new.
        let applied: i64 = store
            .read(|c| {
                Ok::<_, JobError>(c.query_row(
                    "SELECT count(*) FROM schema_migrations",
                    [],
                    |r| r.get(0),
                )?)
            })
            .await
            .expect("count");
        assert!(applied >= 1);
        store.close().await.expect("close");
    });
}

#[test]
fn device_references_not_ids_name_the_series() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let rt = runtime();
    rt.block_on(async {
        let store = StoreHandle::open(&cfg, vec!["dvc_a".into(), "dvc_b".into()]).expect("open");
        store
            .sample_sender()
            .send(vec![sample(1, Property::Soc, T0, 10.0)])
            .await
            .expect("send");
        store.close().await.expect("close");
        // After a config change the same device has another index.
        let store = StoreHandle::open(&cfg, vec!["dvc_b".into(), "dvc_c".into()]).expect("open");
        store
            .sample_sender()
            .send(vec![sample(0, Property::Soc, T0 + 1000, 11.0)])
            .await
            .expect("send");
        store.flush().await.expect("flush");
        let series: Option<String> = store
            .read(|c| {
                Ok::<_, JobError>(
                    c.query_row("SELECT group_concat(device) FROM series", [], |r| r.get(0))
                        .optional()?,
                )
            })
            .await
            .expect("read");
        assert_eq!(series.as_deref(), Some("dvc_b"));
        let latest = store.latest().await.expect("latest");
        assert_eq!(latest.len(), 1);
        assert_eq!(latest[0].value, 11.0);
        store.close().await.expect("close");
    });
}

#[test]
fn the_flush_interval_commits_without_being_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path()); // 50 ms
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        store
            .sample_sender()
            .send(vec![sample(0, Property::Soc, T0, 1.0)])
            .await
            .expect("send");
        let mut seen = false;
        for _ in 0..100 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            if !store.latest().await.expect("latest").is_empty() {
                seen = true;
                break;
            }
        }
        assert!(seen, "the sample was committed by the flush interval");
        store.close().await.expect("close");
    });
}

#[test]
fn small_batches_are_staged_and_compaction_changes_no_answer() {
    use sitegate::store::{Aggregation, SeriesQuery, DIRECT_PER_SERIES};
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        let counts = || {
            let store = store.clone();
            async move {
                let c = store
                    .read(|c| Ok::<_, JobError>(sitegate::store::sample_counts(c)?))
                    .await
                    .expect("count");
                (c.staged, c.at_rest)
            }
        };
        // One sample each of two series: staged.
        let tx = store.sample_sender();
        tx.send(vec![
            sample(0, Property::ActivePower, T0 + 5_000, 10.0),
            sample(1, Property::ActivePower, T0 + 5_000, 20.0),
        ])
        .await
        .expect("send");
        store.flush().await.expect("flush");
        assert_eq!(counts().await, (2, 0));

        let q = SeriesQuery {
            property: Property::ActivePower,
            start_ms: T0,
            end_ms: T0 + 3_600_000,
            width_ms: 60_000,
            aggregation: Aggregation::Mean,
        };
        let staged = store.time_series("dvc_pv1", q).await.expect("query");
        assert_eq!(staged.len(), 1);
        assert_eq!(store.compact().await.expect("compact"), 2);
        assert_eq!(counts().await, (0, 2));
        assert_eq!(
            store.time_series("dvc_pv1", q).await.expect("query"),
            staged
        );

        // A batch with enough samples per series goes straight to the chunks, and
        // the same (series, ts) sent again is ignored wherever the first one lives.
        let big: Vec<_> = (0..DIRECT_PER_SERIES as i64)
            .map(|i| sample(0, Property::ActivePower, T0 + 10_000 + i, 1.0))
            .chain([sample(0, Property::ActivePower, T0 + 5_000, 99.0)])
            .collect();
        tx.send(big).await.expect("send");
        store.flush().await.expect("flush");
        assert_eq!(counts().await, (0, 2 + DIRECT_PER_SERIES as u64));
        tx.send(vec![sample(0, Property::ActivePower, T0 + 10_000, 99.0)])
            .await
            .expect("send");
        store.flush().await.expect("flush");
        assert_eq!(
            counts().await,
            (0, 2 + DIRECT_PER_SERIES as u64),
            "a duplicate of a stored sample is not staged"
        );
        let minute = store.time_series("dvc_pv1", q).await.expect("query");
        // 10 at T0+5 s and DIRECT_PER_SERIES ones; both 99s were ignored.
        let n = DIRECT_PER_SERIES as f64;
        assert!(
            (minute[0].value - (10.0 + n) / (1.0 + n)).abs() < 1e-12,
            "{minute:?}"
        );
        store.close().await.expect("close");
    });
}

#[test]
fn the_wal_counter_moves_with_each_commit_by_whole_frames() {
    use sitegate::metrics::{Collect, Encoder};
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        let tx = store.sample_sender();
        let page: i64 = store
            .read(|c| Ok::<i64, JobError>(c.query_row("PRAGMA page_size", [], |r| r.get(0))?))
            .await
            .expect("page size");
        let frame = page as u64 + 24;
        let mut last = store.stats().wal_bytes();
        for i in 0..5 {
            tx.send(vec![sample(0, Property::ActivePower, T0 + i * 1000, 1.0)])
                .await
                .expect("send");
            store.flush().await.expect("flush");
            let now = store.stats().wal_bytes();
            assert!(now > last, "commit {i} appended nothing: {now}");
            assert_eq!((now - last) % frame, 0, "whole frames of {frame} bytes");
            last = now;
        }
        let mut e = Encoder::new();
        store.collect(&mut e);
        let text = e.finish();
        assert!(
            text.contains(&format!("sitegate_store_wal_written_bytes_total {last}")),
            "{text}"
        );
        store.close().await.expect("close");
    });
}

#[test]
fn a_device_added_at_run_time_has_its_samples_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        let id = sitegate::model::DeviceId(2);
        // Unknown before it is added: rejected, not stored.
        store
            .sample_sender()
            .send(vec![sample(2, Property::ActivePower, T0, 1.0)])
            .await
            .expect("send");
        store.flush().await.expect("flush");
        assert!(store.latest().await.expect("latest").is_empty());
        store
            .add_device(id, "dvc_meter2".into())
            .await
            .expect("the next id");
        store
            .add_device(id, "dvc_meter2".into())
            .await
            .expect("again: nothing changes");
        assert!(matches!(
            store.add_device(id, "dvc_other".into()).await,
            Err(StoreError::DeviceOrder { known: 3, .. })
        ));
        assert!(matches!(
            store
                .add_device(sitegate::model::DeviceId(5), "dvc_far".into())
                .await,
            Err(StoreError::DeviceOrder { id: 5, .. })
        ));
        store
            .sample_sender()
            .send(vec![sample(2, Property::ActivePower, T0 + 1000, 2.0)])
            .await
            .expect("send");
        store.flush().await.expect("flush");
        let latest = store.latest().await.expect("latest");
        assert_eq!(latest.len(), 1);
        assert_eq!(latest[0].device, "dvc_meter2");
        assert_eq!((latest[0].ts_ms, latest[0].value), (T0 + 1000, 2.0));
        store.close().await.expect("close");
    });
}
