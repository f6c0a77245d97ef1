//! The store's read bound on a real database file: at most four reads run at
//! once and 64 wait, any further read is refused as busy at once (no thread and
//! no connection for it); and a read whose caller stops waiting is interrupted
//! inside SQLite, so its blocking thread comes back at once, and the pooled
//! connection still serves the next read. The agent's own reads (the uplink
//! reading its outbox) run in a turn of their own while requests hold every
//! other turn and fill the queue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use crate::store_support::hold_reads;
use sitegate::config::StorageConfig;
use sitegate::store::{
    StoreError, StoreHandle, MAX_READS_RUNNING, MAX_READS_WAITING, OWN_READS_RUNNING,
};

fn open(dir: &tempfile::TempDir) -> StoreHandle {
    let config = StorageConfig {
        path: dir.path().join("readers.db"),
        ..StorageConfig::default()
    };
    StoreHandle::open(&config, vec!["dvc_a".into()]).expect("open the store")
}

/// A read that counts itself in `at_once` while it sleeps for `hold`, and
/// keeps the most seen at once in `most`.
fn counted(
    at_once: &Arc<AtomicUsize>,
    most: &Arc<AtomicUsize>,
    hold: Duration,
) -> impl FnOnce(&rusqlite::Connection) -> Result<(), StoreError> + Send + 'static {
    let (at_once, most) = (at_once.clone(), most.clone());
    move |_| {
        let now = at_once.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        // The read holds its turn (and its connection's thread) for `hold` of real
        // time, so that reads started together overlap and `most` sees the bound.
        std::thread::sleep(hold);
        at_once.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_past_the_bound_are_refused_and_never_run_more_than_four() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let extra = 10;
    let total = MAX_READS_RUNNING + MAX_READS_WAITING + extra;
    let mut tasks = Vec::new();
    for _ in 0..total {
        let (store, read) = (
            store.clone(),
            counted(&running, &most, Duration::from_millis(150)),
        );
        tasks.push(tokio::spawn(async move { store.read(read).await }));
    }
    let mut ok = 0;
    let mut busy = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(()) => ok += 1,
            Err(StoreError::Busy { running, waiting }) => {
                assert_eq!((running, waiting), (MAX_READS_RUNNING, MAX_READS_WAITING));
                busy += 1;
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        MAX_READS_RUNNING,
        "reads at once"
    );
    assert_eq!(ok + busy, total);
    assert!(busy >= 1, "{busy} refused of {total}");
    assert!(
        ok >= MAX_READS_RUNNING + MAX_READS_WAITING - 4,
        "{ok} served"
    );
    // The bound frees up: the next read runs.
    store
        .read(|c| Ok::<i64, StoreError>(c.query_row("SELECT 1", [], |r| r.get(0))?))
        .await
        .expect("a read after the burst");
    store.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_whose_caller_stops_waiting_is_interrupted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    let ended: Arc<Mutex<Option<(Instant, String)>>> = Arc::new(Mutex::new(None));
    let slot = ended.clone();
    let endless = store.read(move |c| {
        // Counts forever unless interrupted.
        let r = c.query_row(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n",
            [],
            |r| r.get::<_, i64>(0),
        );
        let what = match &r {
            Ok(v) => format!("finished with {v}"),
            Err(e) => e.to_string(),
        };
        *slot.lock().unwrap() = Some((Instant::now(), what));
        r.map_err(StoreError::from)
    });
    let gave_up = tokio::time::timeout(Duration::from_millis(300), endless).await;
    assert!(gave_up.is_err(), "the endless read cannot finish");
    let dropped_at = Instant::now();
    let deadline = dropped_at + Duration::from_secs(5);
    let (at, what) = loop {
        if let Some(e) = ended.lock().unwrap().clone() {
            break e;
        }
        assert!(Instant::now() < deadline, "the read was not interrupted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(what.contains("interrupt"), "{what}");
    assert!(at.duration_since(dropped_at) < Duration::from_secs(2));
    // Its turn and its connection serve the next reads.
    for _ in 0..MAX_READS_RUNNING + 1 {
        let one = store
            .read(|c| Ok::<i64, StoreError>(c.query_row("SELECT 1", [], |r| r.get(0))?))
            .await
            .expect("a read after the interrupt");
        assert_eq!(one, 1);
    }
    store.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_own_reads_run_while_requests_hold_every_turn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir);
    // Every request turn held, and the queue behind them full.
    let release = hold_reads(&store, MAX_READS_RUNNING).await;
    let queued: Vec<_> = (0..MAX_READS_WAITING)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.read(|_| Ok::<(), StoreError>(())).await })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.reads_waiting() < MAX_READS_WAITING {
        assert!(Instant::now() < deadline, "the queue never filled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A request is refused...
    let refused = store
        .read(|_| Ok::<(), StoreError>(()))
        .await
        .expect_err("past the bound");
    assert!(matches!(refused, StoreError::Busy { .. }), "{refused}");
    // ...and the agent's own reads still run, one at a time.
    let (own_at_once, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let own: Vec<_> = (0..3)
        .map(|_| {
            let (store, read) = (
                store.clone(),
                counted(&own_at_once, &most, Duration::from_millis(50)),
            );
            tokio::spawn(async move { store.read_own(read).await })
        })
        .collect();
    for t in own {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("an own read is not held up by requests")
            .expect("task")
            .expect("own read");
    }
    assert_eq!(most.load(Ordering::SeqCst), OWN_READS_RUNNING);
    assert_eq!(
        store.reads_waiting(),
        MAX_READS_WAITING,
        "requests still queued"
    );
    drop(release);
    for t in queued {
        t.await.expect("task").expect("queued read");
    }
    store.close().await.expect("close");
}
