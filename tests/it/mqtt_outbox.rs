//! The outbox in the store: every committed batch is an outbox row with the next
//! seq (in the samples' transaction), acknowledged rows go with the next commit,
//! and past its age or size the oldest rows go first, in chunks, with a count.

use std::path::Path;
use std::time::Duration;

use sitegate::config::StorageConfig;
use sitegate::model::time::now_ms;
use sitegate::model::{DeviceId, Property, Sample};
use sitegate::store::StoreHandle;
use sitegate::uplink::outbox::{self, EVICT_CHUNK};
use sitegate::uplink::{Cap, Outbox};

const NO_CAP: Cap = Cap {
    max_age_ms: i64::MAX,
    max_bytes: u64::MAX,
};

fn poll(device: u16, ts_ms: i64) -> Vec<Sample> {
    [Property::ActivePower, Property::Soc, Property::Frequency]
        .iter()
        .enumerate()
        .map(|(i, &property)| Sample {
            device: DeviceId(device),
            property,
            ts_ms,
            value: 1000.5 + i as f64,
        })
        .collect()
}

fn open(dir: &Path, cap: Cap) -> Outbox {
    let config = StorageConfig {
        path: dir.join("o.db"),
        flush_interval_ms: 50,
        ..StorageConfig::default()
    };
    let (sink, state) = outbox::sink(cap);
    let devices = vec!["dvc_a".to_string(), "dvc_b".to_string()];
    let store = StoreHandle::open_with_hook(&config, devices, Some(Box::new(sink))).expect("open");
    Outbox::new(store, state)
}

/// Sends one poll per timestamp of device 0 and commits them.
async fn append(outbox: &Outbox, ts: impl IntoIterator<Item = i64>) {
    let tx = outbox.store().sample_sender();
    for t in ts {
        tx.send(poll(0, t)).await.expect("send");
    }
    outbox.store().flush().await.expect("flush");
}

async fn seqs(outbox: &Outbox) -> Vec<u64> {
    outbox
        .fetch(0, u64::MAX, 100_000)
        .await
        .expect("fetch")
        .iter()
        .map(|r| r.seq)
        .collect()
}

#[tokio::test]
async fn committed_samples_are_in_the_outbox_and_acks_go_with_the_next_commit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let outbox = open(dir.path(), NO_CAP);
    let tx = outbox.store().sample_sender();
    tx.send(poll(0, 1000)).await.expect("send");
    tx.send(poll(1, 1000)).await.expect("send");
    outbox.store().flush().await.expect("flush");
    // Both the measurements and their outbox rows are committed.
    assert_eq!(outbox.store().latest().await.expect("latest").len(), 6);
    let rows = outbox.fetch(0, u64::MAX, 10).await.expect("fetch");
    let got: Vec<_> = rows.iter().map(|r| (r.seq, r.device.as_str())).collect();
    assert_eq!(got, [(1, "dvc_a"), (2, "dvc_b")]);
    assert_eq!(
        outbox::decode(DeviceId(0), &rows[0].body).expect("decodes"),
        poll(0, 1000)
    );
    assert_eq!(outbox.stats().rows, 2);
    assert_eq!(outbox.stats().last_seq, 2);

    outbox.remove(vec![1]);
    // Not deleted before a transaction takes it along.
    assert_eq!(seqs(&outbox).await, [1, 2]);
    append(&outbox, [2000]).await;
    assert_eq!(seqs(&outbox).await, [2, 3]);
    assert_eq!(outbox.stats().rows, 2);
    outbox.remove(vec![2]);
    outbox.commit_removals().await.expect("commit");
    assert_eq!(seqs(&outbox).await, [3]);
}

#[tokio::test]
async fn the_size_cap_evicts_oldest_first_and_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cap = Cap {
        max_age_ms: i64::MAX,
        max_bytes: 2_000,
    };
    let outbox = open(dir.path(), cap);
    for i in 0..10 {
        append(&outbox, (0..10).map(|j| (i * 10 + j) * 1000)).await;
    }
    let stats = outbox.stats();
    assert!(stats.bytes <= cap.max_bytes, "{stats:?}");
    assert!(stats.evicted > 0, "{stats:?}");
    assert_eq!(stats.rows + stats.evicted, 100, "{stats:?}");
    assert_eq!(stats.last_seq, 100);
    // What is left is the newest rows, contiguous up to the last.
    let left = seqs(&outbox).await;
    assert_eq!(left, ((stats.evicted + 1)..=100).collect::<Vec<_>>());
}

#[tokio::test]
async fn the_age_cap_evicts_what_is_too_old_in_chunks() {
    let hour = 3_600_000;
    let dir = tempfile::tempdir().expect("temp dir");
    let cap = Cap {
        max_age_ms: 2 * hour,
        max_bytes: u64::MAX,
    };
    let outbox = open(dir.path(), cap);
    let old = EVICT_CHUNK as i64 + 10;
    append(&outbox, (0..old).map(|i| i * 1000)).await;
    // The newest old row; the next rows must be committed at a later millisecond.
    let old_created = outbox
        .fetch(old as u64 - 1, u64::MAX, 1)
        .await
        .expect("fetch")[0]
        .created_ms;
    wait_for_clock(|| now_ms() > old_created + 1).await;
    append(&outbox, [old * 1000, old * 1000 + 1000]).await;
    let new_created = outbox.fetch(old as u64, u64::MAX, 1).await.expect("fetch")[0].created_ms;
    assert!(new_created > old_created + 1);

    // As of two hours after the new rows: only the old ones are too old, and
    // there are more of them than one transaction evicts.
    let evicted = outbox
        .enforce_cap(new_created + 2 * hour - 1)
        .await
        .expect("cap");
    assert_eq!(evicted, old as u64);
    assert_eq!(seqs(&outbox).await, [old as u64 + 1, old as u64 + 2]);
    assert_eq!(outbox.stats().evicted, old as u64);
    assert_eq!(outbox.stats().rows, 2);
}

/// Waits for a condition on the clock (a few milliseconds).
async fn wait_for_clock(cond: impl Fn() -> bool) {
    while !cond() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn seq_and_rows_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let outbox = open(dir.path(), NO_CAP);
        append(&outbox, [1000, 2000]).await;
        outbox.remove(vec![1]);
        outbox.commit_removals().await.expect("commit");
        assert_eq!(seqs(&outbox).await, [2]);
        outbox.store().close().await.expect("close");
    }
    let outbox = open(dir.path(), NO_CAP);
    assert_eq!(outbox.stats().last_seq, 2);
    assert_eq!(outbox.stats().rows, 1);
    append(&outbox, [3000]).await;
    assert_eq!(seqs(&outbox).await, [2, 3]);
}
