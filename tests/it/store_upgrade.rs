//! A database written by the previous layout (samples as rows of `raw`, small
//! commits staged as rows of `recent`, migrations 0001 to 0003) opens with
//! this one and keeps its data: every answer, the latest values, and the rule
//! that the first sample sent for a (series, ts) wins.

use crate::store_support::*;
use rusqlite::{params, Connection};
use sitegate::model::Property;
use sitegate::store::{align, Agg, Aggregation, SeriesQuery, HOUR_MS, MINUTE_MS};

/// The previous layout's migrations, as a database of that time recorded them.
const OLD_MIGRATIONS: [(&str, &str); 3] = [
    (
        "0001_measurements",
        include_str!("../../src/store/migrations/0001_measurements.sql"),
    ),
    (
        "0002_steering",
        include_str!("../../src/store/migrations/0002_steering.sql"),
    ),
    (
        "0003_uplink_outbox",
        include_str!("../../src/store/migrations/0003_uplink_outbox.sql"),
    ),
];

/// Writes what the previous sitegate left: `raw` rows with their rollups for
/// the first hour, `recent` rows (staged, not yet compacted) for the next
/// minute. Returns every sample in send order.
fn previous_layout(path: &std::path::Path) -> Vec<(i64, f64)> {
    let conn = Connection::open(path).expect("open");
    conn.execute_batch("PRAGMA journal_mode = WAL;")
        .expect("wal");
    conn.execute_batch(
        "CREATE TABLE schema_migrations (id TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)",
    )
    .expect("schema_migrations");
    for (id, sql) in OLD_MIGRATIONS {
        conn.execute_batch(sql).expect(id);
        conn.execute(
            "INSERT INTO schema_migrations (id, applied_at) VALUES (?1, 1)",
            [id],
        )
        .expect("record");
    }
    conn.execute_batch("BEGIN").expect("begin");
    conn.execute(
        "INSERT INTO series (id, device, property) VALUES (1, 'dvc_pv1', 'activePower')",
        [],
    )
    .expect("series");
    let raw: Vec<(i64, f64)> = (0..3600)
        .map(|i| (T0 + i * 1000 + 7, f64::from((i % 500) as u16) + 0.5))
        .collect();
    let recent: Vec<(i64, f64)> = (3600..3660)
        .map(|i| (T0 + i * 1000 + 7, f64::from(i as u16)))
        .collect();
    for &(ts, v) in &raw {
        conn.execute(
            "INSERT INTO raw (series, ts, value) VALUES (1, ?1, ?2)",
            params![ts, v],
        )
        .expect("raw");
    }
    for (table, period) in [("rollup_1m", MINUTE_MS), ("rollup_1h", HOUR_MS)] {
        let mut rows: Vec<(i64, Agg)> = Vec::new();
        for &(ts, v) in &raw {
            let b = align(ts, period);
            match rows.last_mut() {
                Some((last, agg)) if *last == b => agg.add(ts, v),
                _ => rows.push((b, Agg::one(ts, v))),
            }
        }
        for (b, a) in rows {
            conn.execute(
                &format!("INSERT INTO {table} VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
                params![
                    b,
                    a.count as i64,
                    a.sum,
                    a.min,
                    a.max,
                    a.first_ts - b,
                    a.first,
                    a.last_ts - b,
                    a.last
                ],
            )
            .expect("rollup");
        }
    }
    for &(ts, v) in &recent {
        conn.execute(
            "INSERT INTO recent (ts, series, value) VALUES (?1, 1, ?2)",
            params![ts, v],
        )
        .expect("recent");
    }
    conn.execute_batch("COMMIT").expect("commit");
    raw.into_iter().chain(recent).collect()
}

#[test]
fn a_database_of_the_previous_layout_opens_and_keeps_its_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path());
    let mut sent = previous_layout(&cfg.path);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = open(&cfg);
        let counts = store
            .read(|c| Ok::<_, sitegate::store::StoreError>(sitegate::store::sample_counts(c)?))
            .await
            .expect("counts");
        assert_eq!(
            (counts.staged, counts.at_rest),
            (0, 3660),
            "the rows of `recent` were compacted at open"
        );
        // A sample resent for a time the old `raw` holds is ignored; a new one
        // is kept.
        let (old_ts, old_v) = sent[10];
        let new_ts = T0 + 3700 * 1000;
        store
            .sample_sender()
            .send(vec![
                sample(0, Property::ActivePower, old_ts, old_v + 1000.0),
                sample(0, Property::ActivePower, new_ts, 42.0),
            ])
            .await
            .expect("send");
        store.flush().await.expect("flush");
        sent.push((new_ts, 42.0));

        let latest = store.latest().await.expect("latest");
        assert_eq!(latest.len(), 1);
        assert_eq!((latest[0].ts_ms, latest[0].value), (new_ts, 42.0));
        let all = store
            .read(|c| {
                Ok::<_, sitegate::store::StoreError>(sitegate::store::stored_samples(c, None)?)
            })
            .await
            .expect("stored");
        let mut expected = sent.clone();
        expected.sort_by_key(|s| s.0);
        let got: Vec<(i64, f64)> = all.iter().map(|s| (s.ts_ms, s.value)).collect();
        assert_eq!(got, expected);

        // Every width and aggregation answers as a fold over what was sent:
        // rollups of the old rows, old rows at the edges, chunks, staged.
        for width in [1_000, 90_000, MINUTE_MS, 15 * MINUTE_MS, HOUR_MS] {
            for aggregation in Aggregation::ALL {
                let q = SeriesQuery {
                    property: Property::ActivePower,
                    start_ms: T0 - 5_000,
                    end_ms: T0 + 2 * HOUR_MS + 123,
                    width_ms: width,
                    aggregation,
                };
                let got = store.time_series("dvc_pv1", q).await.expect("query");
                let want = naive(&sent, q.start_ms, q.end_ms, width, aggregation);
                assert_same(
                    &got,
                    &want,
                    aggregation,
                    &format!("{width} {aggregation:?}"),
                );
            }
        }

        // The old rows expire like any raw sample.
        let report = store
            .enforce_retention(T0 + 36_500 * 86_400_000 + HOUR_MS)
            .await
            .expect("retention");
        assert!(report.expired.total() >= 3600, "{report:?}");
        let old_rows: i64 = store
            .read(|c| {
                Ok::<_, sitegate::store::StoreError>(c.query_row(
                    "SELECT count(*) FROM raw",
                    [],
                    |r| r.get(0),
                )?)
            })
            .await
            .expect("count");
        assert_eq!(old_rows, 0);
        store.close().await.expect("close");
    });
}
