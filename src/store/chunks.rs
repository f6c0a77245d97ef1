//! Raw samples at rest: `raw_chunk`, one row per series and stretch of time,
//! the samples encoded in a blob ([`codec`](super::codec), about 3 bytes a
//! sample against 22 for a row of the older `raw` table).
//!
//! Compaction appends one chunk per series (a rowid table, so the bodies go to
//! fresh pages one after the other). The index `(start_ts / WINDOW_MS, series,
//! start_ts)` puts time first: the chunks of one compaction start within a
//! window or two, so their entries are appended too, however many series and
//! however much history there are. A reader finds a series' chunks with one
//! seek per window. A chunk covers less than [`CHUNK_SPAN_MS`] and holds at
//! most [`CHUNK_MAX`] samples, so a reader that wants time `t` looks at chunks
//! starting after `t - CHUNK_SPAN_MS` only, and one chunk is quick to decode.
//! Chunks of one series may overlap in time (late samples); a (series, ts) is
//! still stored once: the writer checks before it stages ([`contains`]).
//!
//! A device's properties share their poll's times: [`ChunkWriter`] writes a
//! chunk whose times equal those of the previous series' chunk at the same
//! place as a reference to that chunk (the one holding the times), and
//! readers decode the times from there. Such chunks end at the same time as
//! the chunk holding their times, so whoever deletes chunks deletes every
//! chunk of an end time together ([`delete_ended_before`]), never the times
//! without the chunks that use them.
//!
//! The newest sample of each series is not looked up here but kept in
//! `series_last` (`ingest.rs`), since the index no longer orders by series.
//!
//! Nothing here begins or commits a transaction.

use rusqlite::{params, Connection, OptionalExtension};

use super::chunk_codec::{decode_chunk, decode_shared, encode_chunk, encode_shared, times_of};
use super::stage::malformed;

/// A chunk's last sample is less than this after its first.
pub const CHUNK_SPAN_MS: i64 = 3_600_000;
/// Samples in one chunk at most.
pub const CHUNK_MAX: usize = 4096;
/// The index's time unit (`raw_chunk_by_window`, migration 0006): a chunk is
/// filed under the window its first sample falls in.
pub const WINDOW_MS: i64 = 600_000;

/// Writes the chunks of series after series, one transaction's worth (a
/// compaction's), sharing times between series where they are the same.
#[derive(Default)]
pub(crate) struct ChunkWriter {
    /// The chunks of the series written last: the id of the chunk holding
    /// their times, and the times.
    before: Vec<(i64, Vec<i64>)>,
}

impl ChunkWriter {
    /// Writes the samples of one series, `ts` strictly ascending, as chunks.
    pub fn write(
        &mut self,
        conn: &Connection,
        series: i64,
        samples: &[(i64, f64)],
    ) -> rusqlite::Result<()> {
        let mut insert = conn.prepare_cached(
            "INSERT INTO raw_chunk (series, start_ts, end_ts, n, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        let mut written = Vec::new();
        let mut rest = samples;
        while let Some(&(start, _)) = rest.first() {
            let len = rest
                .iter()
                .take(CHUNK_MAX)
                .take_while(|s| s.0 - start < CHUNK_SPAN_MS)
                .count();
            let (chunk, tail) = rest.split_at(len);
            let end = chunk[len - 1].0;
            let times: Vec<i64> = chunk.iter().map(|s| s.0).collect();
            let same = self
                .before
                .get(written.len())
                .filter(|(_, before)| *before == times)
                .map(|(holder, _)| *holder);
            let body = match same {
                Some(holder) => encode_shared(holder, chunk),
                None => encode_chunk(chunk),
            };
            insert.execute(params![series, start, end, len as i64, body])?;
            written.push((same.unwrap_or_else(|| conn.last_insert_rowid()), times));
            rest = tail;
        }
        self.before = written;
        Ok(())
    }
}

/// Writes the samples of one series, `ts` strictly ascending, as chunks of
/// their own.
#[cfg(test)]
pub(crate) fn write(
    conn: &Connection,
    series: i64,
    samples: &[(i64, f64)],
) -> rusqlite::Result<()> {
    ChunkWriter::default().write(conn, series, samples)
}

/// Calls `f(ts, value)` for each sample of the chunk row (`start`, `n`,
/// `body`), reading the times from the chunk that holds them when the body
/// does not.
pub(crate) fn decode_row(
    conn: &Connection,
    start: i64,
    n: usize,
    body: &[u8],
    f: impl FnMut(i64, f64),
) -> rusqlite::Result<()> {
    let Some(holder) = times_of(body).map_err(malformed)? else {
        return decode_chunk(start, n, body, f).map_err(malformed);
    };
    let mut times = Vec::with_capacity(n);
    conn.prepare_cached("SELECT start_ts, n, body FROM raw_chunk WHERE id = ?1")?
        .query_row([holder], |r| {
            let n = usize::try_from(r.get::<_, i64>(1)?).unwrap_or(0);
            decode_chunk(r.get(0)?, n, r.get_ref(2)?.as_blob()?, |t, _| times.push(t))
                .map_err(malformed)
        })?;
    if times.len() != n || times.first() != Some(&start) {
        return Err(malformed(super::codec::Malformed));
    }
    decode_shared(&times, body, f).map_err(malformed)
}

/// Deletes at most about `limit` chunks that ended before `cutoff`, those
/// that ended first, and with the last end time deleted every chunk of that
/// end time (the chunks sharing times end together). Returns the samples
/// deleted.
pub(crate) fn delete_ended_before(
    conn: &Connection,
    cutoff: i64,
    limit: i64,
) -> rusqlite::Result<u64> {
    let last: Option<i64> = conn
        .prepare_cached(
            "SELECT end_ts FROM raw_chunk WHERE end_ts < ?1 ORDER BY end_ts LIMIT 1 OFFSET ?2",
        )?
        .query_row(params![cutoff, limit - 1], |r| r.get(0))
        .optional()?;
    let upto = last.map_or(cutoff, |t| t.saturating_add(1));
    let mut delete = conn.prepare_cached("DELETE FROM raw_chunk WHERE end_ts < ?1 RETURNING n")?;
    let mut samples = 0u64;
    let mut rows = delete.query([upto])?;
    while let Some(row) = rows.next()? {
        samples += row.get::<_, i64>(0)?.max(0) as u64;
    }
    Ok(samples)
}

/// Calls `f(ts, value)` for every sample of `series` with `start <= ts < end`,
/// chunk by chunk (ascending within a chunk; chunks by window, then start).
pub(crate) fn for_each(
    conn: &Connection,
    series: i64,
    start: i64,
    end: i64,
    mut f: impl FnMut(i64, f64),
) -> rusqlite::Result<()> {
    if start >= end {
        return Ok(());
    }
    // The window expression is the index's own, so each window is one seek.
    let mut stmt = conn.prepare_cached(
        "SELECT start_ts, n, body FROM raw_chunk
         WHERE start_ts / 600000 = ?1 AND series = ?2
           AND start_ts > ?3 AND start_ts < ?4 AND end_ts >= ?5
         ORDER BY start_ts",
    )?;
    let after = start.saturating_sub(CHUNK_SPAN_MS);
    // Only the windows chunks are filed under: a chunk starts at most a span
    // before it ends (the ends are indexed).
    let (Some(first_end), Some(last_end)) = conn
        .prepare_cached(
            "SELECT (SELECT min(end_ts) FROM raw_chunk), (SELECT max(end_ts) FROM raw_chunk)",
        )?
        .query_row([], |r| {
            Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?))
        })?
    else {
        return Ok(());
    };
    let from = window_of(after.max(first_end.saturating_sub(CHUNK_SPAN_MS)));
    let to = window_of((end - 1).min(last_end));
    for window in from..=to {
        let mut rows = stmt.query(params![window, series, after, end, start])?;
        while let Some(row) = rows.next()? {
            let first: i64 = row.get(0)?;
            let n: i64 = row.get(1)?;
            decode_row(
                conn,
                first,
                n.max(0) as usize,
                row.get_ref(2)?.as_blob()?,
                |ts, v| {
                    if ts >= start && ts < end {
                        f(ts, v);
                    }
                },
            )?;
        }
    }
    Ok(())
}

/// The index window of a time, as SQLite's integer division computes it
/// (towards zero).
fn window_of(ts: i64) -> i64 {
    ts / WINDOW_MS
}

/// Whether a sample of `series` at `ts` is stored in a chunk.
pub(crate) fn contains(conn: &Connection, series: i64, ts: i64) -> rusqlite::Result<bool> {
    let mut found = false;
    for_each(conn, series, ts, ts.saturating_add(1), |_, _| found = true)?;
    Ok(found)
}

#[cfg(test)]
mod tests;
