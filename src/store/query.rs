//! Reading measurements back: time-series buckets and the latest value of every
//! series. Blocking functions over a read connection; the handle runs them on
//! blocking threads.
//!
//! The bucket fold follows [`plan`](super::plan): whole rollup periods come from
//! rollup rows, partial ones from raw samples, and samples still staged in
//! `recent` are added wherever they fall, all merged with [`Agg::merge`], so the
//! result equals a fold over every stored sample. Each answer reads one snapshot
//! (one read transaction), so a compaction committing meanwhile cannot count a
//! sample twice or not at all. Nothing here writes.

use rusqlite::{params, Connection, OptionalExtension};

use super::agg::{align, Agg, Aggregation};
use super::plan::{plan, Source};
use crate::model::Property;

/// One time-series question about one series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeriesQuery {
    pub property: Property,
    /// Inclusive, epoch ms.
    pub start_ms: i64,
    /// Exclusive, epoch ms.
    pub end_ms: i64,
    /// Bucket width in ms, > 0; buckets are aligned to multiples of it.
    pub width_ms: i64,
    pub aggregation: Aggregation,
}

/// A bucket holding at least one sample: its start and its aggregated value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub ts_ms: i64,
    pub value: f64,
}

/// The newest stored value of a series.
#[derive(Clone, Debug, PartialEq)]
pub struct LatestValue {
    pub device: String,
    pub property: Property,
    pub ts_ms: i64,
    pub value: f64,
}

/// The non-empty buckets of `q` for `device`, ascending. An unknown series has
/// none.
pub fn time_series(
    conn: &Connection,
    device: &str,
    q: &SeriesQuery,
) -> rusqlite::Result<Vec<Point>> {
    let snapshot = conn.unchecked_transaction()?;
    let Some(series) = find_series(&snapshot, device, q.property)? else {
        return Ok(Vec::new());
    };
    Ok(
        buckets(&snapshot, series, q.start_ms, q.end_ms, q.width_ms)?
            .into_iter()
            .map(|(ts_ms, agg)| Point {
                ts_ms,
                value: agg.value(q.aggregation),
            })
            .collect(),
    )
}

/// The series id of (device, property), if anything was ever stored for it.
pub fn find_series(
    conn: &Connection,
    device: &str,
    property: Property,
) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT id FROM series WHERE device = ?1 AND property = ?2")?
        .query_row(params![device, property.name()], |r| r.get(0))
        .optional()
}

/// Per-bucket summaries of one series over `[start, end)`, ascending. Call it
/// inside a read transaction (see the module docs).
pub fn buckets(
    conn: &Connection,
    series: i64,
    start: i64,
    end: i64,
    width: i64,
) -> rusqlite::Result<Vec<(i64, Agg)>> {
    let mut out: Vec<(i64, Agg)> = Vec::new();
    let mut push = |ts: i64, agg: Agg| {
        let bucket = align(ts, width);
        match out.last_mut() {
            Some((b, a)) if *b == bucket => a.merge(&agg),
            _ => out.push((bucket, agg)),
        }
    };
    for seg in plan(start, end, width) {
        match seg.source {
            Source::Raw => {
                let mut stmt = conn.prepare_cached(
                    "SELECT ts, value FROM raw WHERE series = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts",
                )?;
                let mut rows = stmt.query(params![series, seg.start, seg.end])?;
                while let Some(row) = rows.next()? {
                    let ts: i64 = row.get(0)?;
                    push(ts, Agg::one(ts, row.get(1)?));
                }
            }
            Source::Minute | Source::Hour => {
                let table = if seg.source == Source::Hour {
                    "rollup_1h"
                } else {
                    "rollup_1m"
                };
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT bucket, n, total, lo, hi, first_off, first_v, last_off, last_v FROM {table}
                     WHERE series = ?1 AND bucket >= ?2 AND bucket < ?3 ORDER BY bucket"
                ))?;
                let mut rows = stmt.query(params![series, seg.start, seg.end])?;
                while let Some(row) = rows.next()? {
                    let bucket: i64 = row.get(0)?;
                    let agg = Agg {
                        count: row.get::<_, i64>(1)? as u64,
                        sum: row.get(2)?,
                        min: row.get(3)?,
                        max: row.get(4)?,
                        first_ts: bucket + row.get::<_, i64>(5)?,
                        first: row.get(6)?,
                        last_ts: bucket + row.get::<_, i64>(7)?,
                        last: row.get(8)?,
                    };
                    push(bucket, agg);
                }
            }
        }
    }
    let mut recent = conn.prepare_cached(
        "SELECT ts, value FROM recent WHERE ts >= ?2 AND ts < ?3 AND series = ?1",
    )?;
    let mut rows = recent.query(params![series, start, end])?;
    while let Some(row) = rows.next()? {
        let ts: i64 = row.get(0)?;
        let agg = Agg::one(ts, row.get(1)?);
        let bucket = align(ts, width);
        match out.binary_search_by_key(&bucket, |(b, _)| *b) {
            Ok(i) => out[i].1.merge(&agg),
            Err(i) => out.insert(i, (bucket, agg)),
        }
    }
    Ok(out)
}

/// The newest value of every stored series: from staged or raw samples, or from
/// the hour rollups when the raw ones were already deleted by retention.
pub fn latest(conn: &Connection) -> rusqlite::Result<Vec<LatestValue>> {
    let conn = &conn.unchecked_transaction()?;
    let mut series = conn.prepare("SELECT id, device, property FROM series ORDER BY id")?;
    let rows: Vec<(i64, String, String)> = series
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut raw =
        conn.prepare("SELECT ts, value FROM raw WHERE series = ?1 ORDER BY ts DESC LIMIT 1")?;
    let mut hour = conn.prepare(
        "SELECT bucket + last_off, last_v FROM rollup_1h WHERE series = ?1 ORDER BY bucket DESC LIMIT 1",
    )?;
    let mut staged =
        conn.prepare("SELECT ts, value FROM recent WHERE series = ?1 ORDER BY ts DESC LIMIT 1")?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, device, property) in rows {
        // A name this binary does not know was written by a newer one: skip it.
        let Ok(property) = property.parse::<Property>() else {
            continue;
        };
        let pair = |r: &rusqlite::Row<'_>| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?));
        let stored = match raw.query_row([id], pair).optional()? {
            Some(v) => Some(v),
            None => hour.query_row([id], pair).optional()?,
        };
        let staged = staged.query_row([id], pair).optional()?;
        let newest = match (stored, staged) {
            (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
            (a, b) => a.or(b),
        };
        if let Some((ts_ms, value)) = newest {
            out.push(LatestValue {
                device,
                property,
                ts_ms,
                value,
            });
        }
    }
    Ok(out)
}
