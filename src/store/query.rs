//! Reading measurements back: time-series buckets and the latest value of every
//! series. Blocking functions over a read connection; the handle runs them on
//! blocking threads.
//!
//! The bucket fold follows [`plan`](fn@super::plan): whole rollup periods come from
//! rollup rows, partial ones from raw samples (chunks, and rows an older
//! sitegate left in `raw`), and samples still staged (the ring, and `recent`
//! rows of an older sitegate) are added wherever they fall, all merged with
//! [`Agg::merge`], so the result equals a fold over every stored sample. Each answer reads one snapshot
//! (one read transaction), so a compaction committing meanwhile cannot count a
//! sample twice or not at all. Nothing here writes.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::agg::{align, Agg, Aggregation};
use super::chunks;
use super::plan::{plan, Source, HOUR_MS};
use super::retention;
use super::stage;
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

/// One series' bucket summaries over `[start_ms, end_ms)`, buckets of
/// `width_ms` aligned to multiples of it: what [`summaries`] reads.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryQuery {
    pub device: String,
    pub property: Property,
    pub start_ms: i64,
    pub end_ms: i64,
    pub width_ms: i64,
}

/// The non-empty buckets of each query, whole summaries ([`Agg`]: count,
/// sum, min, max, first and last with their times), ascending; all in one
/// snapshot, so the series agree with each other. An unknown series has none.
pub fn summaries(
    conn: &Connection,
    queries: &[SummaryQuery],
) -> rusqlite::Result<Vec<Vec<(i64, Agg)>>> {
    let snapshot = conn.unchecked_transaction()?;
    let mut out = Vec::with_capacity(queries.len());
    for q in queries {
        out.push(match find_series(&snapshot, &q.device, q.property)? {
            Some(series) => buckets(&snapshot, series, q.start_ms, q.end_ms, q.width_ms)?,
            None => Vec::new(),
        });
    }
    Ok(out)
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
    // Rows come mostly in time order (segments ascend, a chunk ascends); late
    // chunks, older `raw` rows and staged samples may fall anywhere.
    let mut merge = |bucket: i64, agg: Agg| match out.last_mut() {
        Some((b, a)) if *b == bucket => a.merge(&agg),
        Some((b, _)) if *b > bucket => match out.binary_search_by_key(&bucket, |(b, _)| *b) {
            Ok(i) => out[i].1.merge(&agg),
            Err(i) => out.insert(i, (bucket, agg)),
        },
        _ => out.push((bucket, agg)),
    };
    let held = retention::held(conn)?;
    for seg in plan(start, end, width, held) {
        match seg.source {
            Source::Raw => {
                // Rows of the `raw` table (written by sitegate before chunks).
                let mut stmt = conn.prepare_cached(
                    "SELECT ts, value FROM raw WHERE series = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts",
                )?;
                let mut rows = stmt.query(params![series, seg.start, seg.end])?;
                while let Some(row) = rows.next()? {
                    let ts: i64 = row.get(0)?;
                    merge(align(ts, width), Agg::one(ts, row.get(1)?));
                }
                chunks::for_each(conn, series, seg.start, seg.end, |ts, v| {
                    merge(align(ts, width), Agg::one(ts, v));
                })?;
            }
            Source::Minute | Source::Hour => {
                let table = if seg.source == Source::Hour {
                    "rollup_1h"
                } else {
                    "rollup_1m"
                };
                // Whole periods (`plan.rs`).
                let mut stmt = conn.prepare_cached(&rollup_rows_sql(table))?;
                let period = seg.source.period_ms().unwrap_or(HOUR_MS);
                let mut rows = stmt.query(params![series, seg.start, seg.end, period])?;
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
                    merge(align(bucket, width), agg);
                }
            }
        }
    }
    // Staged samples: the ring, and rows an older sitegate left in `recent`.
    let mut recent = conn.prepare_cached(
        "SELECT ts, value FROM recent WHERE ts >= ?2 AND ts < ?3 AND series = ?1",
    )?;
    let mut rows = recent.query(params![series, start, end])?;
    while let Some(row) = rows.next()? {
        let ts: i64 = row.get(0)?;
        merge(align(ts, width), Agg::one(ts, row.get(1)?));
    }
    stage::for_each_staged(conn, Some(series), |_, ts, v| {
        if ts >= start && ts < end {
            merge(align(ts, width), Agg::one(ts, v));
        }
    })?;
    Ok(out)
}

/// The periods `b(bucket)` from `?2` to before `?3`, `?4` apart: with the
/// rollups keyed (bucket, series), a statement joining them reaches one
/// series' rows by one seek per period (`?1` is the series).
pub(crate) const PERIODS_CTE: &str = "WITH RECURSIVE b(bucket) AS (
     SELECT ?2 UNION ALL SELECT bucket + ?4 FROM b WHERE bucket + ?4 < ?3)";

/// The rows of one series in a rollup table for whole periods from `?2` to
/// `?3` (period `?4`): the key is (bucket, series), so one seek per period,
/// the periods made by SQLite itself.
fn rollup_rows_sql(table: &str) -> String {
    format!(
        "{PERIODS_CTE}
         SELECT r.bucket, n, total, lo, hi, first_off, first_v, last_off, last_v
         FROM b CROSS JOIN {table} r ON r.bucket = b.bucket AND r.series = ?1
         ORDER BY r.bucket"
    )
}

/// The newest value of every stored series: from staged or raw samples, or from
/// the hour rollups when the raw ones were already deleted by retention.
pub fn latest(conn: &Connection) -> rusqlite::Result<Vec<LatestValue>> {
    let conn = &conn.unchecked_transaction()?;
    let mut staged: HashMap<i64, (i64, f64)> = HashMap::new();
    stage::for_each_staged(conn, None, |series, ts, v| {
        newer(staged.entry(series).or_insert((ts, v)), (ts, v));
    })?;
    let mut out = Vec::new();
    for (id, device, property) in all_series(conn)? {
        if let Some((ts_ms, value)) = newest_of(conn, id, staged.get(&id).copied())? {
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

/// The newest stored value of one series, as [`latest`] finds it.
pub fn latest_of(
    conn: &Connection,
    device: &str,
    property: Property,
) -> rusqlite::Result<Option<(i64, f64)>> {
    let conn = &conn.unchecked_transaction()?;
    let Some(id) = find_series(conn, device, property)? else {
        return Ok(None);
    };
    let mut staged: Option<(i64, f64)> = None;
    stage::for_each_staged(conn, Some(id), |_, ts, v| {
        newer(staged.get_or_insert((ts, v)), (ts, v));
    })?;
    newest_of(conn, id, staged)
}

/// The newest of the compacted samples (`series_last`, kept by every
/// compaction; rows an older sitegate left in `raw`), the rows it left in
/// `recent`, and `staged`.
fn newest_of(
    conn: &Connection,
    id: i64,
    staged: Option<(i64, f64)>,
) -> rusqlite::Result<Option<(i64, f64)>> {
    let pair = |r: &rusqlite::Row<'_>| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?));
    let one = |sql: &str| conn.prepare_cached(sql)?.query_row([id], pair).optional();
    Ok([
        one("SELECT ts, value FROM series_last WHERE series = ?1")?,
        one("SELECT ts, value FROM raw WHERE series = ?1 ORDER BY ts DESC LIMIT 1")?,
        one("SELECT ts, value FROM recent WHERE series = ?1 ORDER BY ts DESC LIMIT 1")?,
        staged,
    ]
    .into_iter()
    .flatten()
    .reduce(|mut a, b| {
        newer(&mut a, b);
        a
    }))
}

/// Keeps in `a` the later of two (ts, value) pairs (`a` on a tie).
fn newer(a: &mut (i64, f64), b: (i64, f64)) {
    if b.0 > a.0 {
        *a = b;
    }
}

/// Every series this binary knows the property of: (id, device, property). A
/// name it does not know was written by a newer sitegate: skipped.
fn all_series(conn: &Connection) -> rusqlite::Result<Vec<(i64, String, Property)>> {
    let mut stmt = conn.prepare_cached("SELECT id, device, property FROM series ORDER BY id")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, device, property) = row?;
        if let Ok(property) = property.parse::<Property>() {
            out.push((id, device, property));
        }
    }
    Ok(out)
}

/// One stored sample, wherever it is kept.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSample {
    pub device: String,
    pub property: Property,
    pub ts_ms: i64,
    pub value: f64,
}

/// Calls `f(ts, value)` for every stored sample of one series with
/// `start <= ts < end` (staged, in chunks, or in the tables of an older
/// sitegate), not in time order. A full read of the range: for checks,
/// exports and naive comparisons, not for request paths.
pub fn for_each_sample(
    conn: &Connection,
    device: &str,
    property: Property,
    start: i64,
    end: i64,
    f: impl FnMut(i64, f64),
) -> rusqlite::Result<()> {
    let conn = &conn.unchecked_transaction()?;
    match find_series(conn, device, property)? {
        Some(id) => samples_of(conn, id, start, end, f),
        None => Ok(()),
    }
}

/// [`for_each_sample`] by series id, inside the caller's read transaction.
fn samples_of(
    conn: &Connection,
    id: i64,
    start: i64,
    end: i64,
    mut f: impl FnMut(i64, f64),
) -> rusqlite::Result<()> {
    let mut legacy = conn.prepare_cached(
        "SELECT ts, value FROM raw WHERE series = ?1 AND ts >= ?2 AND ts < ?3
         UNION ALL SELECT ts, value FROM recent WHERE series = ?1 AND ts >= ?2 AND ts < ?3",
    )?;
    let mut rows = legacy.query(params![id, start, end])?;
    while let Some(row) = rows.next()? {
        f(row.get(0)?, row.get(1)?);
    }
    chunks::for_each(conn, id, start, end, &mut f)?;
    stage::for_each_staged(conn, Some(id), |_, ts, v| {
        if ts >= start && ts < end {
            f(ts, v);
        }
    })
}

/// Every stored sample of `device` (or of every device), by device, property
/// and time (see [`for_each_sample`]).
pub fn stored_samples(
    conn: &Connection,
    device: Option<&str>,
) -> rusqlite::Result<Vec<StoredSample>> {
    let conn = &conn.unchecked_transaction()?;
    let mut out = Vec::new();
    for (id, name, property) in all_series(conn)? {
        if device.is_some_and(|d| d != name) {
            continue;
        }
        let mut samples: Vec<(i64, f64)> = Vec::new();
        samples_of(conn, id, i64::MIN, i64::MAX, |ts, v| samples.push((ts, v)))?;
        samples.sort_by_key(|s| s.0);
        out.extend(samples.into_iter().map(|(ts_ms, value)| StoredSample {
            device: name.clone(),
            property,
            ts_ms,
            value,
        }));
    }
    out.sort_by(|a, b| {
        (&a.device, a.property.name(), a.ts_ms).cmp(&(&b.device, b.property.name(), b.ts_ms))
    });
    Ok(out)
}

/// Where the stored samples are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleCounts {
    /// Committed and waiting for compaction (the staging ring, and rows an
    /// older sitegate left in `recent`).
    pub staged: u64,
    /// In raw-sample chunks (and rows of the older `raw` table).
    pub at_rest: u64,
}

/// Counts the stored samples by where they are, in one snapshot.
pub fn sample_counts(conn: &Connection) -> rusqlite::Result<SampleCounts> {
    let conn = &conn.unchecked_transaction()?;
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
    Ok(SampleCounts {
        staged: stage::staged_count(conn)? + count("SELECT count(*) FROM recent")?.max(0) as u64,
        at_rest: (count("SELECT coalesce(sum(n), 0) FROM raw_chunk")?
            + count("SELECT count(*) FROM raw")?)
        .max(0) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollup_rows_are_found_by_one_seek_per_period() {
        let mut conn = Connection::open_in_memory().expect("db");
        super::super::migrate::migrate(&mut conn, 1).expect("schema");
        for table in ["rollup_1m", "rollup_1h"] {
            let plan: Vec<String> = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {}", rollup_rows_sql(table)))
                .and_then(|mut s| s.query_map([1, 2, 3, 4], |r| r.get(3))?.collect())
                .expect("plan");
            assert!(
                plan.iter()
                    .any(|p| p.contains("PRIMARY KEY (bucket=? AND series=?)")),
                "{table}: {plan:?}"
            );
            assert!(!plan.iter().any(|p| p.starts_with("SCAN r")), "{plan:?}");
        }
    }
}
