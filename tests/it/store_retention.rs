//! Retention: raw samples expire before rollups, both in small steps; the size
//! cap deletes the oldest data first, a minute at a time, raw days beyond the
//! newest before any rollup.

use crate::store_support::*;
use sitegate::model::Property;
use sitegate::store::{
    Aggregation, Reason, Resolution, SeriesQuery, StoreHandle, CHUNK_BLOBS, CHUNK_ROWS,
    CHUNK_SPAN_MS, HOUR_MS,
};

const DAY: i64 = 86_400_000;

/// `per_day` samples a day of each of `series` properties of the first device,
/// for `days` days from T0, then compacted: all at rest.
async fn fill(store: &StoreHandle, days: i64, per_day: i64, series: usize) {
    let step = DAY / per_day;
    for d in 0..days {
        let batch: Vec<_> = Property::ALL[..series]
            .iter()
            .flat_map(|&p| {
                (0..per_day)
                    .map(move |i| sample(0, p, T0 + d * DAY + i * step, (d * 1000 + i) as f64))
            })
            .collect();
        store.sample_sender().send(batch).await.expect("send");
    }
    store.flush().await.expect("flush");
    store.compact().await.expect("compact");
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

/// Raw samples at rest whose chunk starts before `before`.
async fn raw_samples(store: &StoreHandle, before: i64) -> i64 {
    store
        .read(move |c| {
            c.query_row(
                "SELECT coalesce(sum(n), 0) FROM raw_chunk WHERE start_ts < ?1",
                [before],
                |r| r.get(0),
            )
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
    cfg.minute_rollup_retention_days = Some(4);
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        // One sample every 72 s of 12 series: 24 chunks (of an hour each) and
        // 1,200 minute rollups per series and day, so expiring takes several
        // steps of each kind.
        let (per_day, series) = (1_200, 12);
        fill(&store, 6, per_day, series).await;
        assert_eq!(
            raw_samples(&store, i64::MAX).await,
            6 * per_day * series as i64
        );
        let chunks_per_day = DAY / CHUNK_SPAN_MS * series as i64;

        // "Now" is the end of day 6: raw keeps days 4 and 5, rollups days 2..5.
        let now = T0 + 6 * DAY;
        let report = store.enforce_retention(now).await.expect("retention");
        let minute_rows = 2 * per_day * series as i64;
        assert_eq!(
            report.expired.total() as i64,
            4 * per_day * series as i64 + minute_rows + 2 * 24 * series as i64
        );
        let least = (4 * chunks_per_day + CHUNK_BLOBS - 1) / CHUNK_BLOBS
            + (minute_rows + CHUNK_ROWS - 1) / CHUNK_ROWS
            + 1;
        assert!(
            report.steps as i64 >= least,
            "steps of {CHUNK_BLOBS} chunks or {CHUNK_ROWS} rows at most: {report:?}"
        );
        assert_eq!(
            raw_samples(&store, i64::MAX).await,
            2 * per_day * series as i64
        );

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
        assert_eq!((again.expired.total(), again.evicted.total()), (0, 0));
        store.close().await.expect("close");
    });
}

/// The latest value of a series outlives its raw samples (it is in the hour
/// rollups' last sample) and goes when its last hour rollup goes.
#[test]
fn the_latest_value_goes_with_the_last_hour_rollup_not_with_the_raw_samples() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.retention_days = 2;
    cfg.rollup_retention_days = 4;
    cfg.minute_rollup_retention_days = Some(4);
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        // Power every hour of days 0..6; voltage on day 3 only.
        let power =
            (0..6 * 24).map(|h| sample(0, Property::ActivePower, T0 + h * HOUR_MS, h as f64));
        let voltage = (0..24).map(|h| {
            sample(
                0,
                Property::VoltageL1,
                T0 + 3 * DAY + h * HOUR_MS + 5,
                230.0 + h as f64,
            )
        });
        store
            .sample_sender()
            .send(power.chain(voltage).collect())
            .await
            .expect("send");
        store.flush().await.expect("flush");
        store.compact().await.expect("compact");
        let latest = |store: &StoreHandle| {
            let store = store.clone();
            async move {
                let mut l: Vec<_> = store
                    .latest()
                    .await
                    .expect("latest")
                    .into_iter()
                    .map(|v| (v.property, v.ts_ms, v.value))
                    .collect();
                l.sort_by_key(|v| v.1);
                l
            }
        };
        let voltage_last = (Property::VoltageL1, T0 + 3 * DAY + 23 * HOUR_MS + 5, 253.0);
        let power_last = (Property::ActivePower, T0 + 143 * HOUR_MS, 143.0);
        assert_eq!(latest(&store).await, [voltage_last, power_last]);

        // Day 6: voltage's raw samples are gone, its hours are not.
        store
            .enforce_retention(T0 + 6 * DAY)
            .await
            .expect("retention");
        assert_eq!(raw_samples(&store, T0 + 4 * DAY).await, 0);
        assert_eq!(latest(&store).await, [voltage_last, power_last]);

        // Day 8: voltage's hours are gone too; power's last day is kept.
        store
            .enforce_retention(T0 + 8 * DAY)
            .await
            .expect("retention");
        assert_eq!(latest(&store).await, [power_last]);
        store.close().await.expect("close");
    });
}

#[test]
fn the_size_cap_deletes_the_oldest_raw_days_first_and_keeps_hourly_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.retention_days = 3650;
    cfg.rollup_retention_days = 3650;
    cfg.minute_rollup_retention_days = Some(3650);
    cfg.max_size_mb = 1;
    let rt = runtime();
    rt.block_on(async {
        let store = open(&cfg);
        // One sample every 5 s for 20 days: about 2 MB, most of it minute
        // rollups, sent in batches of a day (straight to the chunks).
        fill(&store, 20, 17_280, 1).await;
        // The compaction that ends the fill already made room (and deleted
        // what was still over after it); a pass finds nothing expired.
        let report = store
            .enforce_retention(T0 + 20 * DAY)
            .await
            .expect("retention");
        assert_eq!(report.expired.total(), 0, "{report:?}");
        assert!(!report.full, "{report:?}");
        // The cap leaves out the uplink's RPC record (its empty table and
        // indexes here: a few pages).
        let used = store.used_bytes().await.expect("size");
        assert!(used <= 1024 * 1024 + 16 * 1024, "{used}");

        // The newest day is intact to the sample; the oldest raw day is gone but
        // its hours still answer from the hour rollups.
        let newest = SeriesQuery {
            width_ms: 1_000,
            ..day_query(T0 + 19 * DAY)
        };
        let newest = store.time_series("dvc_pv1", newest).await.expect("query");
        assert_eq!(newest.len(), 17_280);
        let oldest_raw = raw_samples(&store, T0 + DAY).await;
        assert_eq!(oldest_raw, 0);
        let day0 = store
            .time_series("dvc_pv1", day_query(T0))
            .await
            .expect("query");
        assert_eq!(day0.len(), 24);

        // What the cap deleted, by resolution, and from when each still
        // holds data: in the counters and on /metrics.
        let kept = store.stats();
        let r = &kept.retention;
        let at_rest = raw_samples(&store, i64::MAX).await;
        assert_eq!(
            r.deleted(Reason::Cap, Resolution::Raw) as i64,
            20 * 17_280 - at_rest,
            "every raw sample not at rest was counted deleted by the cap"
        );
        for res in Resolution::ALL {
            assert_eq!(r.deleted(Reason::Age, res), 0, "{res:?}");
        }
        assert_eq!(r.deleted(Reason::Cap, Resolution::Hour), 0);
        let first_chunk: i64 = store
            .read(|c| {
                c.query_row("SELECT min(start_ts) FROM raw_chunk", [], |r| r.get(0))
                    .map_err(sitegate::store::StoreError::from)
            })
            .await
            .expect("the oldest chunk");
        assert!(first_chunk >= T0 + DAY, "{first_chunk}");
        assert_eq!(r.oldest(Resolution::Raw), Some(first_chunk));
        assert_eq!(r.oldest(Resolution::Hour), Some(T0), "hourly history kept");
        let mut e = sitegate::metrics::Encoder::new();
        sitegate::metrics::Collect::collect(&store, &mut e);
        let text = e.finish();
        let raw_deleted = r.deleted(Reason::Cap, Resolution::Raw);
        for line in [
            format!("sitegate_store_deleted_rows_total{{reason=\"cap\",resolution=\"raw\"}} {raw_deleted}"),
            "sitegate_store_deleted_rows_total{reason=\"age\",resolution=\"raw\"} 0".to_string(),
            format!(
                "sitegate_store_oldest_timestamp_seconds{{resolution=\"raw\"}} {}",
                first_chunk / 1000
            ),
            format!(
                "sitegate_store_oldest_timestamp_seconds{{resolution=\"hour\"}} {}",
                T0 / 1000
            ),
        ] {
            assert!(text.contains(&line), "{line} not in:\n{text}");
        }
        store.close().await.expect("close");
    });
}

/// While retention by age is held (the agent holds it while the clock is not
/// synchronised), the writer's own passes (every `retention_interval_s`, here
/// every second) delete nothing by age; released, the next pass does.
#[test]
fn a_held_retention_by_age_deletes_nothing_until_released() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = sitegate::config::StorageConfig {
        retention_interval_s: 1,
        retention_days: 1,
        rollup_retention_days: 1,
        minute_rollup_retention_days: Some(1),
        ..config(dir.path())
    };
    runtime().block_on(async {
        let store = open(&cfg);
        assert!(store.stats().hold_age_retention(true));
        // Two days of 2024: long expired by the real clock.
        fill(&store, 2, 1440, 1).await;
        let all = raw_samples(&store, i64::MAX).await;
        assert_eq!(all, 2 * 1440);
        // Past three of the writer's passes (a pass that deletes nothing
        // shows nothing to wait on).
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        assert_eq!(raw_samples(&store, i64::MAX).await, all, "held");
        assert!(store.stats().hold_age_retention(false));
        // The next pass deletes them.
        let released = tokio::time::Instant::now();
        while raw_samples(&store, i64::MAX).await != 0 {
            assert!(
                released.elapsed() < std::time::Duration::from_secs(60),
                "released, yet no pass deleted the expired samples"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        store.close().await.expect("close");
    });
}
