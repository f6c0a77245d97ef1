//! Writing samples inside the writer's open transaction, by one of two paths:
//!
//! - **staged**: a small batch (fewer than [`DIRECT_PER_SERIES`] samples per
//!   series) goes to `recent`, keyed by time, so the commit touches the end of one
//!   b-tree instead of one `raw` page and two rollup pages per series;
//! - **direct**: a large batch first compacts `recent`, then goes to `raw` sorted
//!   by (series, ts) with its rollups, where each touched page holds many of its
//!   samples.
//!
//! [`Ingest::compact`] moves `recent` into `raw` and the rollups. Either way a
//! (series, ts) is stored once: the first one sent wins.
//!
//! Runs on the writer thread only. It must not begin or commit transactions (the
//! writer does) and must not keep state beyond the series-id cache.

use std::collections::{HashMap, HashSet};

use rusqlite::{params, Connection};

use super::agg::{align, Agg};
use super::plan::{HOUR_MS, MINUTE_MS};
use crate::model::{DeviceId, Property, Sample};

const INSERT_RAW: &str = "INSERT OR IGNORE INTO raw (series, ts, value) VALUES (?1, ?2, ?3)";
const IN_RAW: &str = "SELECT 1 FROM raw WHERE series = ?1 AND ts = ?2";
const INSERT_RECENT: &str = "INSERT OR IGNORE INTO recent (ts, series, value) VALUES (?1, ?2, ?3)";

/// Samples per series from which a batch goes straight to `raw`.
pub const DIRECT_PER_SERIES: usize = 32;

/// (series, ts, value).
type Row = (i64, i64, f64);

/// The upsert that folds a batch's summary of one period into a rollup row.
/// Every right-hand side reads the old row, so the CASEs compare old offsets.
fn upsert_sql(table: &str) -> String {
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

/// What one batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IngestStats {
    /// New rows (in `raw` or `recent`).
    pub stored: usize,
    /// Samples whose (series, ts) was already stored: the first one is kept.
    pub duplicates: usize,
    /// NaN or infinite values, and samples of unknown devices: not stored.
    pub rejected: usize,
    /// Of `stored`, the rows that went to `recent` (to be compacted).
    pub staged: usize,
}

/// Maps samples to series ids and writes them. One per writer.
pub(crate) struct Ingest {
    /// Device reference by `DeviceId` index.
    devices: Vec<String>,
    series: HashMap<(u16, Property), i64>,
    upsert_minute: String,
    upsert_hour: String,
}

impl Ingest {
    pub fn new(devices: Vec<String>) -> Self {
        Self {
            devices,
            series: HashMap::new(),
            upsert_minute: upsert_sql("rollup_1m"),
            upsert_hour: upsert_sql("rollup_1h"),
        }
    }

    /// The reference of a device id (config order), if it is known.
    pub fn reference(&self, device: DeviceId) -> Option<&str> {
        self.devices.get(usize::from(device.0)).map(String::as_str)
    }

    /// Writes `samples` inside the caller's transaction, staged or direct.
    pub fn write(
        &mut self,
        conn: &Connection,
        samples: &[Sample],
    ) -> rusqlite::Result<IngestStats> {
        let mut stats = IngestStats::default();
        let mut rows: Vec<Row> = Vec::with_capacity(samples.len());
        for s in samples {
            if !s.value.is_finite() {
                stats.rejected += 1;
                continue;
            }
            match self.series_id(conn, s.device.0, s.property)? {
                Some(id) => rows.push((id, s.ts_ms, s.value)),
                None => stats.rejected += 1,
            }
        }
        let series: HashSet<i64> = rows.iter().map(|r| r.0).collect();
        if rows.len() >= DIRECT_PER_SERIES * series.len().max(1) {
            self.compact(conn)?;
            self.write_raw(conn, rows, &mut stats)?;
        } else {
            self.stage(conn, &rows, &mut stats)?;
        }
        Ok(stats)
    }

    /// Moves every row of `recent` into `raw` and the rollups; returns how many.
    pub fn compact(&mut self, conn: &Connection) -> rusqlite::Result<usize> {
        let rows: Vec<Row> = {
            let mut stmt = conn.prepare_cached("SELECT series, ts, value FROM recent")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        if rows.is_empty() {
            return Ok(0);
        }
        let mut stats = IngestStats::default();
        self.write_raw(conn, rows, &mut stats)?;
        conn.prepare_cached("DELETE FROM recent")?.execute([])?;
        Ok(stats.stored)
    }

    fn stage(
        &mut self,
        conn: &Connection,
        rows: &[Row],
        stats: &mut IngestStats,
    ) -> rusqlite::Result<()> {
        let mut in_raw = conn.prepare_cached(IN_RAW)?;
        let mut insert = conn.prepare_cached(INSERT_RECENT)?;
        for &(series, ts, value) in rows {
            if in_raw.exists(params![series, ts])?
                || insert.execute(params![ts, series, value])? == 0
            {
                stats.duplicates += 1;
            } else {
                stats.stored += 1;
                stats.staged += 1;
            }
        }
        Ok(())
    }

    fn write_raw(
        &mut self,
        conn: &Connection,
        mut rows: Vec<Row>,
        stats: &mut IngestStats,
    ) -> rusqlite::Result<()> {
        // Stable: of two samples with the same (series, ts) the one sent first is
        // inserted first and kept. Sorted rows also keep b-tree writes local.
        rows.sort_by_key(|&(series, ts, _)| (series, ts));
        let mut insert = conn.prepare_cached(INSERT_RAW)?;
        let mut minute = Rollup::new(conn, &self.upsert_minute, MINUTE_MS)?;
        let mut hour = Rollup::new(conn, &self.upsert_hour, HOUR_MS)?;
        for &(series, ts, value) in &rows {
            if insert.execute(params![series, ts, value])? == 0 {
                stats.duplicates += 1;
                continue;
            }
            stats.stored += 1;
            minute.add(series, ts, value)?;
            hour.add(series, ts, value)?;
        }
        minute.flush()?;
        hour.flush()
    }

    fn series_id(
        &mut self,
        conn: &Connection,
        device: u16,
        property: Property,
    ) -> rusqlite::Result<Option<i64>> {
        if let Some(id) = self.series.get(&(device, property)) {
            return Ok(Some(*id));
        }
        let Some(reference) = self.devices.get(usize::from(device)) else {
            return Ok(None);
        };
        let id = series_id(conn, reference, property)?;
        self.series.insert((device, property), id);
        Ok(Some(id))
    }
}

/// The id of a series, created when new.
pub(crate) fn series_id(
    conn: &Connection,
    device: &str,
    property: Property,
) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO series (device, property) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
    )?
    .execute(params![device, property.name()])?;
    conn.prepare_cached("SELECT id FROM series WHERE device = ?1 AND property = ?2")?
        .query_row(params![device, property.name()], |r| r.get(0))
}

/// Accumulates sorted rows of one rollup level and upserts each finished period.
struct Rollup<'c> {
    stmt: rusqlite::CachedStatement<'c>,
    period: i64,
    current: Option<(i64, i64, Agg)>,
}

impl<'c> Rollup<'c> {
    fn new(conn: &'c Connection, sql: &str, period: i64) -> rusqlite::Result<Self> {
        Ok(Self {
            stmt: conn.prepare_cached(sql)?,
            period,
            current: None,
        })
    }

    fn add(&mut self, series: i64, ts: i64, value: f64) -> rusqlite::Result<()> {
        let bucket = align(ts, self.period);
        match &mut self.current {
            Some((s, b, agg)) if *s == series && *b == bucket => agg.add(ts, value),
            _ => {
                self.flush()?;
                self.current = Some((series, bucket, Agg::one(ts, value)));
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> rusqlite::Result<()> {
        if let Some((series, bucket, a)) = self.current.take() {
            self.stmt.execute(params![
                series,
                bucket,
                a.count as i64,
                a.sum,
                a.min,
                a.max,
                a.first_ts - bucket,
                a.first,
                a.last_ts - bucket,
                a.last
            ])?;
        }
        Ok(())
    }
}
