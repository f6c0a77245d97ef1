//! The outbox cap: past its age or size the oldest rows go first, and the count
//! says how many.

use sitegate::model::{DeviceId, Property, Sample};
use sitegate::uplink::{Cap, Db, Outbox};

fn poll(ts_ms: i64) -> Vec<Sample> {
    [Property::ActivePower, Property::Soc, Property::Frequency]
        .iter()
        .enumerate()
        .map(|(i, &property)| Sample {
            device: DeviceId(0),
            property,
            ts_ms,
            value: 1000.5 + i as f64,
        })
        .collect()
}

async fn seqs(outbox: &Outbox) -> Vec<u64> {
    outbox
        .fetch(0, u64::MAX, 10_000)
        .await
        .expect("fetch")
        .iter()
        .map(|r| r.seq)
        .collect()
}

#[tokio::test]
async fn the_size_cap_evicts_oldest_first_and_counts() {
    let cap = Cap {
        max_age_ms: i64::MAX,
        max_bytes: 2_000,
    };
    let outbox = Outbox::open(Db::in_memory().expect("db"), cap)
        .await
        .expect("open");
    for i in 0..100 {
        outbox
            .append(vec![("dvc_a".into(), poll(i * 1000))], i * 1000)
            .await
            .expect("append");
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
async fn the_age_cap_evicts_what_is_too_old() {
    let hour = 3_600_000;
    let cap = Cap {
        max_age_ms: 2 * hour,
        max_bytes: u64::MAX,
    };
    let outbox = Outbox::open(Db::in_memory().expect("db"), cap)
        .await
        .expect("open");
    for h in 0..5 {
        outbox
            .append(vec![("dvc_a".into(), poll(h * hour))], h * hour)
            .await
            .expect("append");
    }
    assert_eq!(outbox.enforce_cap(4 * hour).await.expect("cap"), 2);
    assert_eq!(seqs(&outbox).await, [3, 4, 5]);
    assert_eq!(outbox.stats().evicted, 2);
}

#[tokio::test]
async fn seq_and_rows_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("o.db");
    let cap = Cap {
        max_age_ms: i64::MAX,
        max_bytes: u64::MAX,
    };
    {
        let outbox = Outbox::open(Db::open(&path).expect("db"), cap)
            .await
            .expect("open");
        outbox
            .append(vec![("a".into(), poll(1)), ("b".into(), poll(1))], 1)
            .await
            .expect("append");
        outbox.remove(vec![1]);
        assert_eq!(seqs(&outbox).await, [2]);
    }
    let outbox = Outbox::open(Db::open(&path).expect("db"), cap)
        .await
        .expect("reopen");
    assert_eq!(outbox.stats().last_seq, 2);
    assert_eq!(outbox.stats().rows, 1);
    outbox
        .append(vec![("a".into(), poll(2))], 2)
        .await
        .expect("append");
    assert_eq!(seqs(&outbox).await, [2, 3]);
}
