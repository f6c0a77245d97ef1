//! Reading measurements back: time-series buckets and the latest value of every
//! series. Blocking functions over a read connection; the handle runs them on
//! blocking threads.
//!
//! The bucket fold follows [`plan`](super::plan): whole rollup periods come from
//! rollup rows, partial ones from raw samples, merged with [`Agg::merge`], so the
//! result equals a fold over the raw samples. Nothing here writes.

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
    let Some(series) = find_series(conn, device, q.property)? else {
        return Ok(Vec::new());
    };
    Ok(buckets(conn, series, q.start_ms, q.end_ms, q.width_ms)?
        .into_iter()
        .map(|(ts_ms, agg)| Point {
            ts_ms,
            value: agg.value(q.aggregation),
        })
        .collect())
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

/// Per-bucket summaries of one series over `[start, end)`, ascending.
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
    Ok(out)
}

/// The newest value of every stored series: from raw samples, or from the hour
/// rollups when the raw ones were already deleted by retention.
pub fn latest(conn: &Connection) -> rusqlite::Result<Vec<LatestValue>> {
    let mut series = conn.prepare("SELECT id, device, property FROM series ORDER BY id")?;
    let rows: Vec<(i64, String, String)> = series
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut raw =
        conn.prepare("SELECT ts, value FROM raw WHERE series = ?1 ORDER BY ts DESC LIMIT 1")?;
    let mut hour = conn.prepare(
        "SELECT bucket + last_off, last_v FROM rollup_1h WHERE series = ?1 ORDER BY bucket DESC LIMIT 1",
    )?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, device, property) in rows {
        // A name this binary does not know was written by a newer one: skip it.
        let Ok(property) = property.parse::<Property>() else {
            continue;
        };
        let newest: Option<(i64, f64)> = match raw
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
        {
            Some(v) => Some(v),
            None => hour
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?,
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
