//! Time-series answers against the naive computation: a property test over
//! random samples, ranges, widths and aggregations, plus the named edge cases.

use crate::store_support::*;
use proptest::prelude::*;
use sitegate::model::Property;
use sitegate::store::{
    Aggregation, Point, SeriesQuery, StoreHandle, DIRECT_PER_SERIES, HOUR_MS, MINUTE_MS,
};

/// Widths that exercise every source: raw only (1 s, 7 s, 90 s, 150 s), minute
/// rollups (1, 2, 5, 15 min), hour rollups (1 h, 2 h, 1 d).
const WIDTHS: [i64; 11] = [
    1_000,
    7_000,
    90_000,
    150_000,
    MINUTE_MS,
    2 * MINUTE_MS,
    5 * MINUTE_MS,
    15 * MINUTE_MS,
    HOUR_MS,
    2 * HOUR_MS,
    86_400_000,
];
/// Samples fall in four hours starting 30 minutes before an hour.
const SPAN: i64 = 4 * HOUR_MS;
const BASE: i64 = T0 + 5 * HOUR_MS + 30 * MINUTE_MS;

fn query(
    store: &StoreHandle,
    rt: &tokio::runtime::Runtime,
    device: &str,
    q: SeriesQuery,
) -> Vec<Point> {
    rt.block_on(store.time_series(device, q)).expect("query")
}

fn value_strategy() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-5000i32..5000).prop_map(f64::from),
        (-1000.0f64..1000.0),
        Just(0.0),
        Just(42.5),
    ]
}

#[derive(Debug, Clone)]
struct Ask {
    start: i64,
    len: i64,
    width: i64,
    aggregation: Aggregation,
}

fn ask_strategy() -> impl Strategy<Value = Ask> {
    (
        -HOUR_MS..SPAN + HOUR_MS,
        1i64..SPAN + 2 * HOUR_MS,
        0..WIDTHS.len(),
        0..Aggregation::ALL.len(),
    )
        .prop_map(|(start, len, w, a)| Ask {
            start: BASE + start,
            len,
            width: WIDTHS[w],
            aggregation: Aggregation::ALL[a],
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn answers_equal_the_naive_computation(
        // Dense clusters and sparse points; offsets collide now and then
        // (duplicates: the first one sent is kept). Some samples belong to
        // another device: they must not leak into the answer.
        samples in prop::collection::vec(
            (
                prop_oneof![0..SPAN, 0..(2 * MINUTE_MS), (HOUR_MS - 90_000)..(HOUR_MS + 90_000)],
                value_strategy(),
                prop::bool::weighted(0.8),
            ),
            0..600,
        ),
        splits in prop::collection::vec(0usize..600, 0..6),
        compact_after in prop::collection::vec(any::<bool>(), 8),
        // Now and then one bulk batch, large enough to bypass the staging ring:
        // where it starts, its step, the seed of its values and after which
        // batch it is sent.
        bulk in prop::option::weighted(0.4, (0..SPAN, 1i64..4_000, any::<u32>(), 0usize..7)),
        asks in prop::collection::vec(ask_strategy(), 1..12),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(&config(dir.path()));
        let rt = runtime();
        let tx = store.sample_sender();
        let all: Vec<(i64, f64, bool)> = samples.iter().map(|(off, v, pv)| (BASE + off, *v, *pv)).collect();
        // Random batch boundaries, each batch committed on its own: small batches
        // are staged in the ring, the bulk one goes straight to the chunks, and
        // compactions at random points move the staged ones, so rollup rows are
        // merged across transactions and out of time order, and chunks of one
        // series overlap.
        let mut cuts: Vec<usize> = splits.into_iter().filter(|c| *c < all.len()).collect();
        cuts.push(all.len());
        cuts.sort_unstable();
        let mut batches: Vec<Vec<(i64, f64, bool)>> = Vec::new();
        let mut from = 0;
        for cut in cuts {
            batches.push(all[from..cut].to_vec());
            from = cut;
        }
        if let Some((start, step, seed, after)) = bulk {
            let block = (0..DIRECT_PER_SERIES as i64)
                .map(|i| {
                    let v = f64::from((seed.wrapping_mul(i as u32 + 1) >> 7) % 10_000) / 10.0;
                    (BASE + (start + i * step) % SPAN, v, true)
                })
                .collect();
            batches.insert(after.min(batches.len()), block);
        }
        // The naive side sees samples in the order they were sent.
        let pv: Vec<(i64, f64)> = batches.iter().flatten().filter(|s| s.2).map(|s| (s.0, s.1)).collect();
        for (i, batch) in batches.into_iter().enumerate() {
            let batch: Vec<_> = batch
                .iter()
                .map(|&(ts, v, is_pv)| sample(if is_pv { 0 } else { 1 }, Property::ActivePower, ts, v))
                .collect();
            rt.block_on(async {
                tx.send(batch).await.expect("send");
                store.flush().await.expect("flush");
                if compact_after[i] {
                    store.compact().await.expect("compact");
                }
            });
        }
        for ask in asks {
            let q = SeriesQuery {
                property: Property::ActivePower,
                start_ms: ask.start,
                end_ms: ask.start + ask.len,
                width_ms: ask.width,
                aggregation: ask.aggregation,
            };
            let got = query(&store, &rt, DEVICES[0], q);
            let expected = naive(&pv, q.start_ms, q.end_ms, q.width_ms, q.aggregation);
            assert_same(&got, &expected, q.aggregation, &format!("{ask:?}"));
        }
        rt.block_on(store.close()).expect("close");
    }
}

/// One sample per 10 s over a day, on two devices and two properties.
fn day_of_data(store: &StoreHandle, rt: &tokio::runtime::Runtime) -> Vec<(i64, f64)> {
    let mut pv = Vec::new();
    let mut batch = Vec::new();
    for i in 0..8_640i64 {
        let ts = T0 + i * 10_000 + 123;
        let v = (i % 500) as f64 * 1.5;
        pv.push((ts, v));
        batch.push(sample(0, Property::ActivePower, ts, v));
        batch.push(sample(
            0,
            Property::TotalEnergyProduced,
            ts,
            i as f64 * 10.0,
        ));
        batch.push(sample(1, Property::ActivePower, ts, -v));
    }
    rt.block_on(async {
        store.sample_sender().send(batch).await.expect("send");
        store.flush().await.expect("flush");
    });
    pv
}

#[test]
fn buckets_are_epoch_aligned_whatever_the_range_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&config(dir.path()));
    let rt = runtime();
    let pv = day_of_data(&store, &rt);
    let start = T0 + 3 * HOUR_MS + 17 * MINUTE_MS + 4_321;
    let q = SeriesQuery {
        property: Property::ActivePower,
        start_ms: start,
        end_ms: start + 6 * HOUR_MS,
        width_ms: HOUR_MS,
        aggregation: Aggregation::Mean,
    };
    let got = query(&store, &rt, "dvc_pv1", q);
    assert_eq!(got.len(), 7, "a partial first and last hour");
    assert_eq!(got[0].ts_ms, T0 + 3 * HOUR_MS);
    assert!(got.iter().all(|p| p.ts_ms % HOUR_MS == 0));
    assert_same(
        &got,
        &naive(&pv, q.start_ms, q.end_ms, HOUR_MS, Aggregation::Mean),
        Aggregation::Mean,
        "aligned",
    );
    // 15-minute buckets are aligned to quarter hours since the epoch.
    let got = query(
        &store,
        &rt,
        "dvc_pv1",
        SeriesQuery {
            width_ms: 15 * MINUTE_MS,
            ..q
        },
    );
    assert_eq!(got[0].ts_ms, T0 + 3 * HOUR_MS + 15 * MINUTE_MS);
}

#[test]
fn a_range_without_data_has_no_buckets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&config(dir.path()));
    let rt = runtime();
    day_of_data(&store, &rt);
    let q = SeriesQuery {
        property: Property::ActivePower,
        start_ms: T0 - 10 * 86_400_000,
        end_ms: T0 - 86_400_000,
        width_ms: HOUR_MS,
        aggregation: Aggregation::Mean,
    };
    assert!(query(&store, &rt, "dvc_pv1", q).is_empty());
    // A property never stored, and an unknown device, have none either.
    let q = SeriesQuery {
        property: Property::Soc,
        start_ms: T0,
        end_ms: T0 + HOUR_MS,
        ..q
    };
    assert!(query(&store, &rt, "dvc_pv1", q).is_empty());
    let q = SeriesQuery {
        property: Property::ActivePower,
        ..q
    };
    assert!(query(&store, &rt, "dvc_nowhere", q).is_empty());
}

#[test]
fn counters_take_the_last_value_and_devices_stay_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&config(dir.path()));
    let rt = runtime();
    day_of_data(&store, &rt);
    let q = SeriesQuery {
        property: Property::TotalEnergyProduced,
        start_ms: T0,
        end_ms: T0 + 86_400_000,
        width_ms: HOUR_MS,
        aggregation: Aggregation::default_for(Property::TotalEnergyProduced.kind()),
    };
    let got = query(&store, &rt, "dvc_pv1", q);
    assert_eq!(got.len(), 24);
    // Hour h holds samples 360h..360h+359; the last is 360h+359, valued ×10.
    for (h, p) in got.iter().enumerate() {
        assert_eq!(p.value, (360 * h as i64 + 359) as f64 * 10.0);
    }
    let pv = query(
        &store,
        &rt,
        "dvc_pv1",
        SeriesQuery {
            property: Property::ActivePower,
            aggregation: Aggregation::Max,
            ..q
        },
    );
    let bat = query(
        &store,
        &rt,
        "dvc_bat1",
        SeriesQuery {
            property: Property::ActivePower,
            aggregation: Aggregation::Min,
            ..q
        },
    );
    assert_eq!(pv.len(), bat.len());
    for (a, b) in pv.iter().zip(&bat) {
        assert_eq!(a.value, -b.value);
    }
}

#[test]
fn thirty_days_at_one_hour_come_from_rollups_and_match_raw() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&config(dir.path()));
    let rt = runtime();
    // One sample a minute for 31 days.
    let mut all = Vec::new();
    let batch: Vec<_> = (0..31 * 1440i64)
        .map(|i| {
            let ts = T0 + i * MINUTE_MS + (i * 7) % 60_000;
            let v = ((i * 37) % 1000) as f64 / 4.0;
            all.push((ts, v));
            sample(0, Property::ActivePower, ts, v)
        })
        .collect();
    rt.block_on(async {
        store.sample_sender().send(batch).await.expect("send");
        store.flush().await.expect("flush");
    });
    let start = T0 + 12_345_678;
    for aggregation in Aggregation::ALL {
        for width in [HOUR_MS, MINUTE_MS, 86_400_000] {
            let q = SeriesQuery {
                property: Property::ActivePower,
                start_ms: start,
                end_ms: start + 2_592_000_000,
                width_ms: width,
                aggregation,
            };
            let got = query(&store, &rt, "dvc_pv1", q);
            assert_same(
                &got,
                &naive(&all, q.start_ms, q.end_ms, width, aggregation),
                aggregation,
                "30 days",
            );
        }
    }
}

#[test]
fn duplicates_keep_the_first_and_non_finite_values_are_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&config(dir.path()));
    let rt = runtime();
    let batch = vec![
        sample(0, Property::Soc, T0, 10.0),
        sample(0, Property::Soc, T0, 99.0),
        sample(0, Property::Soc, T0 + 1, f64::NAN),
        sample(0, Property::Soc, T0 + 2, f64::INFINITY),
        sample(7, Property::Soc, T0 + 3, 1.0),
        sample(0, Property::Soc, T0 + 4, 20.0),
    ];
    rt.block_on(async {
        store.sample_sender().send(batch).await.expect("send");
        store.flush().await.expect("flush");
    });
    let q = SeriesQuery {
        property: Property::Soc,
        start_ms: T0,
        end_ms: T0 + HOUR_MS,
        width_ms: HOUR_MS,
        aggregation: Aggregation::Mean,
    };
    let got = query(&store, &rt, "dvc_pv1", q);
    assert_eq!(
        got,
        vec![Point {
            ts_ms: T0,
            value: 15.0
        }]
    );
    let got = query(
        &store,
        &rt,
        "dvc_pv1",
        SeriesQuery {
            width_ms: 1_000,
            ..q
        },
    );
    assert_eq!(
        got,
        vec![Point {
            ts_ms: T0,
            value: 15.0
        }]
    );
}
