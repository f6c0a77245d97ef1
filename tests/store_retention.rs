//! Retention: raw samples expire before rollups, both in small chunks; the size
//! cap deletes the oldest day first.

mod store_support;

use sitegate::model::Property;
use sitegate::store::{Aggregation, SeriesQuery, StoreHandle, CHUNK_ROWS, HOUR_MS};
use store_support::*;

const DAY: i64 = 86_400_000;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// `per_day` samples a day for `days` days from T0.
async fn fill(store: &StoreHandle, days: i64, per_day: i64) {
    let step = DAY / per_day;
    for d in 0..days {
        let batch: Vec<_> = (0..per_day)
            .map(|i| {
                sample(
                    0,
                    Property::ActivePower,
                    T0 + d * DAY + i * step,
                    (d * 1000 + i) as f64,
                )
            })
            .collect();
        store.sample_sender().send(batch).await.expect("send");
    }
    store.flush().await.expect("flush");
}

fn day_query(start: i64) -> SeriesQuery {
    SeriesQuery {
        property: Property::ActivePower,
        start_ms: start,
        end_ms: start + DAY,
        width_ms: HOUR_MS,
        aggregation: Aggregation::Mean,
    }
}

async fn raw_rows(store: &StoreHandle) -> i64 {
    store
        .read(|c| {
            c.query_row("SELECT count(*) FROM raw", [], |r| r.get(0))
                .map_err(sitegate::store::StoreError::from)
        })
        .await
        .expect("count")
}

#[test]
fn raw_samples_expire_first_in_chunks_and_rollups_still_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.retention_days = 2;
    cfg.rollup_retention_days = 4;
    let rt = rt();
    rt.block_on(async {
        let store = open(&cfg);
        let per_day = 2 * CHUNK_ROWS; // so expiring one day takes several steps
        fill(&store, 6, per_day).await;
        assert_eq!(raw_rows(&store).await, 6 * per_day);

        // "Now" is the end of day 6: raw keeps days 4 and 5, rollups days 2..5.
        let now = T0 + 6 * DAY;
        let report = store.enforce_retention(now).await.expect("retention");
        assert_eq!(report.expired_rows as i64, 4 * per_day + 2 * (24 + 1440));
        assert!(
            report.steps >= 8,
            "chunks of {CHUNK_ROWS} rows at most: {report:?}"
        );
        assert_eq!(raw_rows(&store).await, 2 * per_day);

        // Whole hours of day 3 still come from the hour rollups; day 1 is gone.
        let day3 = store
            .time_series("dvc_pv1", day_query(T0 + 2 * DAY))
            .await
            .expect("query");
        assert_eq!(day3.len(), 24);
        let day1 = store
            .time_series("dvc_pv1", day_query(T0))
            .await
            .expect("query");
        assert!(day1.is_empty());
        // Nothing left to do on a second run.
        let again = store.enforce_retention(now).await.expect("retention");
        assert_eq!((again.expired_rows, again.evicted_rows), (0, 0));
        store.close().await.expect("close");
    });
}

#[test]
fn the_size_cap_deletes_the_oldest_raw_days_first_and_keeps_hourly_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.retention_days = 3650;
    cfg.rollup_retention_days = 3650;
    cfg.max_size_mb = 1;
    let rt = rt();
    rt.block_on(async {
        let store = open(&cfg);
        fill(&store, 10, 17_280).await; // one sample every 5 s: about 4 MB
        assert!(store.used_bytes().await.expect("size") > 1024 * 1024);
        let report = store
            .enforce_retention(T0 + 10 * DAY)
            .await
            .expect("retention");
        assert!(
            report.evicted_rows > 0 && report.expired_rows == 0,
            "{report:?}"
        );
        assert!(store.used_bytes().await.expect("size") <= 1024 * 1024);

        // The newest day is intact to the sample; the oldest raw day is gone but
        // its hours still answer from the hour rollups.
        let newest = SeriesQuery {
            width_ms: 1_000,
            ..day_query(T0 + 9 * DAY)
        };
        let newest = store.time_series("dvc_pv1", newest).await.expect("query");
        assert_eq!(newest.len(), 17_280);
        let oldest_raw: i64 = store
            .read(move |c| {
                c.query_row("SELECT count(*) FROM raw WHERE ts < ?1", [T0 + DAY], |r| {
                    r.get(0)
                })
                .map_err(sitegate::store::StoreError::from)
            })
            .await
            .expect("count");
        assert_eq!(oldest_raw, 0);
        let day0 = store
            .time_series("dvc_pv1", day_query(T0))
            .await
            .expect("query");
        assert_eq!(day0.len(), 24);
        store.close().await.expect("close");
    });
}
