//! What samples cost at rest on data like a real site's (noise on every
//! point every second, a fifth of the devices on float registers): chunks,
//! their keys and the rollups over the samples, at most 5 bytes a sample,
//! every value read back exactly.

use crate::store_support::noisy::{NoisySite, PROPERTIES};
use crate::store_support::{config, T0};
use sitegate::store::{for_each_sample, StoreError, StoreHandle};

const DEVICES: usize = 200;
const SECONDS: i64 = 600;
/// A compaction every 150 s: what 1,000 devices stage before the ring's
/// bound starts one (the smallest chunks a site at 1 Hz gets).
const COMPACT_EVERY_S: i64 = 150;

/// Bytes of the pages of every table and index but the staging ring's.
async fn bytes_at_rest(store: &StoreHandle) -> u64 {
    store
        .read(|c| {
            let bytes: i64 = c.query_row(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE aggregate = TRUE
                 AND name NOT IN ('stage_slot')",
                [],
                |r| r.get(0),
            )?;
            Ok::<_, StoreError>(bytes as u64)
        })
        .await
        .expect("dbstat")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noisy_samples_with_float_models_take_at_most_5_bytes_at_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refs: Vec<String> = (0..DEVICES).map(|d| format!("dvc_{d}")).collect();
    let store = StoreHandle::open(&config(dir.path()), refs.clone()).expect("store opens");
    let tx = store.sample_sender();
    let mut site = NoisySite::new(DEVICES, 35, T0);
    // Every sample of two devices, an integer one and a float one, to read back.
    let watched = [0u16, 4];
    let mut sent: Vec<Vec<(i64, f64)>> = vec![Vec::new(); watched.len() * PROPERTIES.len()];
    let before = bytes_at_rest(&store).await;
    for s in 0..SECONDS {
        let second = site.second(s);
        for x in &second {
            if let Some(w) = watched.iter().position(|&d| d == x.device.0) {
                let p = PROPERTIES.iter().position(|&p| p == x.property);
                sent[w * PROPERTIES.len() + p.expect("a site property")].push((x.ts_ms, x.value));
            }
        }
        tx.send(second).await.expect("send");
        if (s + 1) % COMPACT_EVERY_S == 0 {
            store.flush().await.expect("flush");
            store.compact().await.expect("compact");
        }
    }
    let samples = (SECONDS as usize * site.samples_per_second()) as f64;
    let at_rest = (bytes_at_rest(&store).await - before) as f64 / samples;
    println!("noisy samples at rest: {at_rest:.2} B a sample (chunks, keys, rollups)");
    assert!(at_rest <= 5.0, "{at_rest:.2} B a sample at rest");

    // Exact to the bit.
    let read = store
        .read(move |c| {
            let mut all = Vec::new();
            for &d in &watched {
                for p in PROPERTIES {
                    let mut got = Vec::new();
                    for_each_sample(c, &format!("dvc_{d}"), p, i64::MIN, i64::MAX, |t, v| {
                        got.push((t, v.to_bits()))
                    })?;
                    all.push(got);
                }
            }
            Ok::<_, StoreError>(all)
        })
        .await
        .expect("read back");
    for (i, got) in read.iter().enumerate() {
        let want: Vec<(i64, u64)> = sent[i].iter().map(|&(t, v)| (t, v.to_bits())).collect();
        assert_eq!(got, &want, "series {i}");
    }
    store.close().await.expect("close");
}
