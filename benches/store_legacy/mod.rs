//! The previous store layout, kept in the benchmarks only so that its wear can
//! be measured beside the current one in the same run: every commit inserts
//! one row per sample into `recent` (keyed by time), a compaction a minute
//! moves `recent` into `raw` rows (one per sample, keyed by series and time)
//! and upserts the rollups, SQLite checkpoints every 8192 WAL frames. The SQL
//! and pragmas are those of sitegate before migration 0004
//! (`src/store/migrations/0001_measurements.sql` holds its tables).
#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "each benchmark uses a part; a benchmark may panic"
)]

pub mod chunk;

use std::collections::HashSet;
use std::path::Path;

use rusqlite::{params, Connection};
use sitegate::store::Agg;

/// Samples per series from which the previous writer went straight to `raw`.
const DIRECT_PER_SERIES: usize = 32;
/// How often the previous writer compacted `recent`, in seconds.
pub const COMPACT_EVERY_S: i64 = 60;

/// (series id, ts, value).
pub type Row = (i64, i64, f64);

pub struct Legacy {
    conn: Connection,
}

fn upsert(table: &str) -> String {
    format!(
        "INSERT INTO {table} (series, bucket, n, total, lo, hi, first_off, first_v, last_off, last_v)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (series, bucket) DO UPDATE SET
             n = n + excluded.n,
             total = total + excluded.total,
             lo = min(lo, excluded.lo),
             hi = max(hi, excluded.hi),
             first_v = CASE WHEN excluded.first_off < first_off THEN excluded.first_v ELSE first_v END,
             first_off = min(first_off, excluded.first_off),
             last_v = CASE WHEN excluded.last_off > last_off THEN excluded.last_v ELSE last_v END,
             last_off = max(last_off, excluded.last_off)"
    )
}

impl Legacy {
    /// Creates the previous layout's database with `series` series (ids 1..).
    pub fn create(path: &Path, series: i64) -> Legacy {
        let conn = Connection::open(path).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        conn.execute_batch(
            "PRAGMA synchronous = FULL;
             PRAGMA journal_size_limit = 67108864;
             PRAGMA wal_autocheckpoint = 8192;
             PRAGMA cache_size = -8000;
             PRAGMA temp_store = MEMORY;",
        )
        .unwrap();
        conn.execute_batch(include_str!(
            "../../src/store/migrations/0001_measurements.sql"
        ))
        .unwrap();
        for s in 1..=series {
            conn.execute(
                "INSERT INTO series (id, device, property) VALUES (?1, ?2, 'p')",
                params![s, format!("d{s}")],
            )
            .unwrap();
        }
        Legacy { conn }
    }

    /// One writer transaction of samples, as the previous writer made it.
    pub fn commit(&mut self, rows: &[Row]) {
        self.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let series = rows.iter().map(|r| r.0).collect::<HashSet<_>>().len();
        if rows.len() >= DIRECT_PER_SERIES * series.max(1) {
            self.move_recent();
            self.write_raw(rows.to_vec());
        } else {
            let mut in_raw = self
                .conn
                .prepare_cached("SELECT 1 FROM raw WHERE series = ?1 AND ts = ?2")
                .unwrap();
            let mut insert = self
                .conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO recent (ts, series, value) VALUES (?1, ?2, ?3)",
                )
                .unwrap();
            for &(s, ts, v) in rows {
                if !in_raw.exists(params![s, ts]).unwrap() {
                    insert.execute(params![ts, s, v]).unwrap();
                }
            }
        }
        self.conn.execute_batch("COMMIT").unwrap();
    }

    /// The previous compaction: `recent` into `raw` and the rollups.
    pub fn compact(&mut self) {
        self.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        self.move_recent();
        self.conn.execute_batch("COMMIT").unwrap();
    }

    /// Checkpoints the WAL (what SQLite would do at the next 8192 frames).
    pub fn checkpoint(&self) {
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .unwrap();
    }

    fn move_recent(&mut self) {
        let rows: Vec<Row> = {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT series, ts, value FROM recent")
                .unwrap();
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            rows.collect::<Result<_, _>>().unwrap()
        };
        if rows.is_empty() {
            return;
        }
        self.write_raw(rows);
        self.conn.execute_batch("DELETE FROM recent").unwrap();
    }

    fn write_raw(&mut self, mut rows: Vec<Row>) {
        rows.sort_by_key(|&(s, ts, _)| (s, ts));
        let mut insert = self
            .conn
            .prepare_cached("INSERT OR IGNORE INTO raw (series, ts, value) VALUES (?1, ?2, ?3)")
            .unwrap();
        let mut kept = Vec::with_capacity(rows.len());
        for &(s, ts, v) in &rows {
            if insert.execute(params![s, ts, v]).unwrap() > 0 {
                kept.push((s, ts, v));
            }
        }
        for (table, period) in [("rollup_1m", 60_000i64), ("rollup_1h", 3_600_000)] {
            let mut stmt = self.conn.prepare_cached(&upsert(table)).unwrap();
            let mut flush = |(s, b, a): (i64, i64, Agg)| {
                stmt.execute(params![
                    s,
                    b,
                    a.count as i64,
                    a.sum,
                    a.min,
                    a.max,
                    a.first_ts - b,
                    a.first,
                    a.last_ts - b,
                    a.last
                ])
                .unwrap();
            };
            let mut cur: Option<(i64, i64, Agg)> = None;
            for &(s, ts, v) in &kept {
                let b = ts - ts.rem_euclid(period);
                match &mut cur {
                    Some((cs, cb, agg)) if *cs == s && *cb == b => agg.add(ts, v),
                    _ => {
                        if let Some(c) = cur.take() {
                            flush(c);
                        }
                        cur = Some((s, b, Agg::one(ts, v)));
                    }
                }
            }
            if let Some(c) = cur.take() {
                flush(c);
            }
        }
    }
}
