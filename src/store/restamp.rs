//! Moving the samples a wrong clock stamped to the times they were taken.
//!
//! When the wall clock steps (`clock/`), the samples this run stamped in the
//! epoch before the step carry times off by the step's size. The caller
//! decides whether they are to be moved (`clock::epoch::correction`); this
//! file moves them, in the writer's transaction: the chunks written since the
//! epoch began (their ids are above a mark taken then) are decoded, the
//! samples stamped within the epoch's range are shifted, the chunks written
//! again, and the minute and hour rollups of both ranges rebuilt from the raw
//! samples. Chunks older than the mark (other runs, other epochs) are never
//! touched.
//!
//! Nothing here begins or commits a transaction.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::chunks;

/// Which samples to move, and by how much.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restamp {
    /// Only chunks with a larger id: written since the epoch began.
    pub after_chunk: i64,
    /// The epoch's range as the wrong clock stamped it (both included).
    pub from_ms: i64,
    pub to_ms: i64,
    /// Added to each of those samples' times.
    pub shift_ms: i64,
}

/// What was moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restamped {
    pub samples: u64,
    pub series: u64,
    /// The largest chunk id afterwards: the mark of the next epoch.
    pub chunk_mark: i64,
}

/// Per series, the time ranges whose rollups are to be rebuilt.
pub(crate) type Rebuild = BTreeMap<i64, Vec<(i64, i64)>>;

/// The largest chunk id now (0 when none).
pub(crate) fn chunk_mark(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT coalesce(max(id), 0) FROM raw_chunk", [], |r| {
        r.get(0)
    })
}

/// Moves the samples `r` names; returns what moved and, per series, the
/// ranges whose rollups must be rebuilt.
pub(crate) fn shift_chunks(
    conn: &Connection,
    r: &Restamp,
) -> rusqlite::Result<(Restamped, Rebuild)> {
    let mut by_series: BTreeMap<i64, Vec<(i64, f64)>> = BTreeMap::new();
    let mut ids = Vec::new();
    let mut moved = 0u64;
    {
        let mut stmt = conn.prepare(
            "SELECT id, series, start_ts, n, body FROM raw_chunk
             WHERE id > ?1 AND end_ts >= ?2 AND start_ts <= ?3",
        )?;
        let mut rows = stmt.query(params![r.after_chunk, r.from_ms, r.to_ms])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let series: i64 = row.get(1)?;
            let first: i64 = row.get(2)?;
            let n: i64 = row.get(3)?;
            let samples = by_series.entry(series).or_default();
            chunks::decode_row(
                conn,
                first,
                usize::try_from(n).unwrap_or(0),
                row.get_ref(4)?.as_blob()?,
                |ts, v| {
                    if ts >= r.from_ms && ts <= r.to_ms {
                        samples.push((ts + r.shift_ms, v));
                        moved += 1;
                    } else {
                        samples.push((ts, v));
                    }
                },
            )?;
            ids.push(id);
        }
    }
    let mut delete = conn.prepare_cached("DELETE FROM raw_chunk WHERE id = ?1")?;
    for id in &ids {
        delete.execute([id])?;
    }
    let mut rebuild = BTreeMap::new();
    let mut writer = chunks::ChunkWriter::default();
    for (series, samples) in &mut by_series {
        samples.sort_by_key(|s| s.0);
        samples.dedup_by_key(|s| s.0);
        writer.write(conn, *series, samples)?;
        rebuild.insert(
            *series,
            vec![
                (r.from_ms, r.to_ms),
                (r.from_ms + r.shift_ms, r.to_ms + r.shift_ms),
            ],
        );
    }
    let done = Restamped {
        samples: moved,
        series: by_series.len() as u64,
        chunk_mark: chunk_mark(conn)?,
    };
    Ok((done, rebuild))
}

/// Every raw sample of `series` with `start <= ts < end`, chunks and the
/// older `raw` rows, by time.
pub(crate) fn raw_samples(
    conn: &Connection,
    series: i64,
    start: i64,
    end: i64,
) -> rusqlite::Result<Vec<(i64, f64)>> {
    let mut out = Vec::new();
    chunks::for_each(conn, series, start, end, |ts, v| out.push((ts, v)))?;
    let mut legacy = conn
        .prepare_cached("SELECT ts, value FROM raw WHERE series = ?1 AND ts >= ?2 AND ts < ?3")?;
    let rows = legacy.query_map(params![series, start, end], |r| Ok((r.get(0)?, r.get(1)?)))?;
    for row in rows {
        out.push(row?);
    }
    out.sort_by_key(|s| s.0);
    Ok(out)
}

/// Sets `series_last` again after a move: per series with chunks written since
/// the epoch began (the moved samples among them), the newer of their newest
/// sample and the one recorded before, unless that one was moved (it is no
/// longer stored at its old time). Chunks of earlier runs are not searched:
/// their times are taken to be older than this run's (their clock was right).
pub(crate) fn renew_series_last(conn: &Connection, r: &Restamp) -> rusqlite::Result<()> {
    // The chunk that ends last, per series: its last sample is the newest.
    let mut last_chunk: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    {
        let mut stmt = conn.prepare("SELECT series, end_ts, id FROM raw_chunk WHERE id > ?1")?;
        let mut rows = stmt.query([r.after_chunk])?;
        while let Some(row) = rows.next()? {
            let (series, end, id): (i64, i64, i64) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let best = last_chunk.entry(series).or_insert((end, id));
            if end > best.0 {
                *best = (end, id);
            }
        }
    }
    let mut body = conn.prepare_cached("SELECT start_ts, n, body FROM raw_chunk WHERE id = ?1")?;
    let mut newest: BTreeMap<i64, (i64, f64)> = BTreeMap::new();
    for (series, (_, id)) in last_chunk {
        let last = body.query_row([id], |row| {
            let mut last = None;
            chunks::decode_row(
                conn,
                row.get(0)?,
                usize::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                row.get_ref(2)?.as_blob()?,
                |ts, v| last = Some((ts, v)),
            )?;
            Ok(last)
        })?;
        if let Some(last) = last {
            newest.insert(series, last);
        }
    }
    let mut recorded =
        conn.prepare_cached("SELECT ts, value FROM series_last WHERE series = ?1")?;
    let mut set = conn.prepare_cached(
        "INSERT INTO series_last (series, ts, value) VALUES (?1, ?2, ?3)
         ON CONFLICT (series) DO UPDATE SET ts = excluded.ts, value = excluded.value",
    )?;
    for (series, (ts, value)) in newest {
        let before: Option<(i64, f64)> = recorded
            .query_row([series], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?;
        let keep = match before {
            Some((t, v)) if t > ts && chunks::contains(conn, series, t)? => (t, v),
            _ => (ts, value),
        };
        set.execute(params![series, keep.0, keep.1])?;
    }
    Ok(())
}
