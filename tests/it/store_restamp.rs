//! Samples a wrong clock stamped are moved to the times they were taken: only
//! those written since the epoch's mark and stamped within its range, with
//! their raw chunks and minute and hour rollups; another run's samples in the
//! same range stay where they are.

use crate::store_support::*;
use sitegate::model::Property;
use sitegate::store::{Aggregation, Restamp, SeriesQuery, HOUR_MS, MINUTE_MS};

const DAY_MS: i64 = 86_400_000;

fn query(start_ms: i64, end_ms: i64, width_ms: i64) -> SeriesQuery {
    SeriesQuery {
        property: Property::ActivePower,
        start_ms,
        end_ms,
        width_ms,
        aggregation: Aggregation::Mean,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epochs_samples_move_by_the_step_and_nothing_else_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&config(dir.path()));
    let tx = store.sample_sender();
    // Another run's samples, every 10 s over 20 minutes from T0.
    let other: Vec<(i64, f64)> = (0..120).map(|i| (T0 + i * 10_000, 1.0)).collect();
    tx.send(
        other
            .iter()
            .map(|&(ts, v)| sample(0, Property::ActivePower, ts, v))
            .collect(),
    )
    .await
    .expect("send");
    store.flush().await.expect("flush");
    store.compact().await.expect("compact");
    let mark = store.chunk_mark().await.expect("mark");

    // This run's epoch, stamped by a clock 10 days behind: every 10 s over
    // 15 minutes, in the same range (5 s after the other run's).
    let epoch: Vec<(i64, f64)> = (0..90).map(|i| (T0 + 5_000 + i * 10_000, 3.0)).collect();
    for part in epoch.chunks(30) {
        tx.send(
            part.iter()
                .map(|&(ts, v)| sample(0, Property::ActivePower, ts, v))
                .collect(),
        )
        .await
        .expect("send");
        store.flush().await.expect("flush");
        // Some compacted before the step, some still staged at it.
        if part[0].0 == epoch[0].0 {
            store.compact().await.expect("compact");
        }
    }
    let (from_ms, to_ms) = (epoch[0].0, epoch[epoch.len() - 1].0);
    let done = store
        .restamp(Restamp {
            after_chunk: mark,
            from_ms,
            to_ms,
            shift_ms: 10 * DAY_MS,
        })
        .await
        .expect("restamp");
    assert_eq!(done.samples, 90);
    assert_eq!(done.series, 1);
    assert!(done.chunk_mark > mark);

    // The other run's samples alone where both were; the epoch's 10 days
    // later; raw answers and rollups agree with the naive fold.
    let moved: Vec<(i64, f64)> = epoch.iter().map(|&(ts, v)| (ts + 10 * DAY_MS, v)).collect();
    for (samples, start) in [(&other, T0), (&moved, T0 + 10 * DAY_MS)] {
        let end = start + 2 * HOUR_MS;
        for width in [10_000, MINUTE_MS, HOUR_MS] {
            let got = store
                .time_series("dvc_pv1", query(start, end, width))
                .await
                .expect("query");
            let want = naive(samples, start, end, width, Aggregation::Mean);
            assert_same(
                &got,
                &want,
                Aggregation::Mean,
                &format!("width {width} from {start}"),
            );
        }
    }
    // The newest value moved with the epoch.
    let newest = |store: &sitegate::store::StoreHandle| {
        let store = store.clone();
        async move {
            let latest = store.latest().await.expect("latest");
            assert_eq!(latest.len(), 1);
            (latest[0].ts_ms, latest[0].value)
        }
    };
    assert_eq!(newest(&store).await, moved[moved.len() - 1]);
    // Samples that arrive afterwards go on as usual.
    tx.send(vec![sample(
        0,
        Property::ActivePower,
        T0 + 10 * DAY_MS + 1_000_000,
        7.0,
    )])
    .await
    .expect("send");
    store.flush().await.expect("flush");
    store.compact().await.expect("compact");
    let got = store
        .time_series(
            "dvc_pv1",
            query(T0 + 10 * DAY_MS, T0 + 10 * DAY_MS + HOUR_MS, HOUR_MS),
        )
        .await
        .expect("query");
    assert_eq!(got.len(), 1);
    let mut all = moved.clone();
    all.push((T0 + 10 * DAY_MS + 1_000_000, 7.0));
    let mean = all.iter().map(|s| s.1).sum::<f64>() / all.len() as f64;
    assert!((got[0].value - mean).abs() < 1e-9, "{got:?}");
    assert_eq!(newest(&store).await, (T0 + 10 * DAY_MS + 1_000_000, 7.0));
    store.close().await.expect("close");
}
