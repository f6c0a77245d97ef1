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
//! The newest sample of each series is not looked up here but kept in
//! `series_last` (`ingest.rs`), since the index no longer orders by series.
//!
//! Nothing here begins or commits a transaction.

use rusqlite::{params, Connection};

use super::codec::{decode_chunk, encode_chunk};
use super::stage::malformed;

/// A chunk's last sample is less than this after its first.
pub const CHUNK_SPAN_MS: i64 = 3_600_000;
/// Samples in one chunk at most.
pub const CHUNK_MAX: usize = 4096;
/// The index's time unit (`raw_chunk_by_window`, migration 0006): a chunk is
/// filed under the window its first sample falls in.
pub const WINDOW_MS: i64 = 600_000;

/// Writes the samples of one series, `ts` strictly ascending, as chunks.
pub(crate) fn write(
    conn: &Connection,
    series: i64,
    samples: &[(i64, f64)],
) -> rusqlite::Result<()> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO raw_chunk (series, start_ts, end_ts, n, body) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut rest = samples;
    while let Some(&(start, _)) = rest.first() {
        let len = rest
            .iter()
            .take(CHUNK_MAX)
            .take_while(|s| s.0 - start < CHUNK_SPAN_MS)
            .count();
        let (chunk, tail) = rest.split_at(len);
        let end = chunk[len - 1].0;
        insert.execute(params![series, start, end, len as i64, encode_chunk(chunk)])?;
        rest = tail;
    }
    Ok(())
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
            decode_chunk(
                first,
                n.max(0) as usize,
                row.get_ref(2)?.as_blob()?,
                |ts, v| {
                    if ts >= start && ts < end {
                        f(ts, v);
                    }
                },
            )
            .map_err(malformed)?;
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
mod tests {
    use super::*;

    /// A database with every migration: the index the reads use is the
    /// shipped one.
    fn db() -> Connection {
        let mut conn = Connection::open_in_memory().expect("db");
        super::super::migrate::migrate(&mut conn, 1).expect("schema");
        conn
    }

    fn read(conn: &Connection, series: i64, start: i64, end: i64) -> Vec<(i64, f64)> {
        let mut out = Vec::new();
        for_each(conn, series, start, end, |t, v| out.push((t, v))).expect("read");
        out
    }

    #[test]
    fn long_runs_are_cut_by_span_and_count_and_read_back_by_range() {
        let conn = db();
        // Three hours at 1 Hz: cut by the span into three chunks.
        let samples: Vec<(i64, f64)> = (0..10_800).map(|i| (i * 1000, (i % 50) as f64)).collect();
        write(&conn, 7, &samples).expect("write");
        let spans: Vec<(i64, i64, i64)> = conn
            .prepare("SELECT start_ts, end_ts, n FROM raw_chunk ORDER BY start_ts")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect()
            })
            .expect("chunks");
        assert!(spans
            .iter()
            .all(|&(s, e, n)| e - s < CHUNK_SPAN_MS && n as usize <= CHUNK_MAX));
        assert_eq!(spans.iter().map(|s| s.2).sum::<i64>(), 10_800);
        assert_eq!(read(&conn, 7, 0, i64::MAX), samples);
        assert_eq!(
            read(&conn, 7, 3_599_500, 3_602_000),
            samples[3600..3602].to_vec()
        );
        assert!(read(&conn, 8, 0, i64::MAX).is_empty());
        // 10 kHz: cut by count.
        let dense: Vec<(i64, f64)> = (0..10_000).map(|i| (20_000_000 + i, 1.0)).collect();
        write(&conn, 9, &dense).expect("write");
        assert_eq!(read(&conn, 9, 0, i64::MAX).len(), 10_000);
        assert!(contains(&conn, 9, 20_000_000 + 4096).expect("contains"));
        assert!(!contains(&conn, 9, 19_999_999).expect("contains"));
    }

    #[test]
    fn a_series_is_found_by_one_seek_per_window() {
        let conn = db();
        let plan: Vec<String> = conn
            .prepare(
                "EXPLAIN QUERY PLAN SELECT start_ts, n, body FROM raw_chunk
                 WHERE start_ts / 600000 = ?1 AND series = ?2
                   AND start_ts > ?3 AND start_ts < ?4 AND end_ts >= ?5",
            )
            .and_then(|mut s| s.query_map([1, 2, 3, 4, 5], |r| r.get(3))?.collect())
            .expect("plan");
        assert!(
            plan.iter()
                .any(|p| p.contains("raw_chunk_by_window") && p.contains("<expr>=? AND series=?")),
            "{plan:?}"
        );
        assert_eq!(WINDOW_MS, 600_000, "the migration's index says 600000");
        // A chunk that starts just before a window's end is found from the next.
        write(&conn, 3, &[(WINDOW_MS - 1, 1.0), (WINDOW_MS + 1, 2.0)]).expect("write");
        assert_eq!(
            read(&conn, 3, WINDOW_MS, 2 * WINDOW_MS),
            [(WINDOW_MS + 1, 2.0)]
        );
    }

    #[test]
    fn a_late_chunk_that_overlaps_is_found_too() {
        let conn = db();
        write(&conn, 1, &[(1000, 1.0), (5000, 5.0)]).expect("write");
        write(&conn, 1, &[(3000, 3.0)]).expect("write");
        let mut got = read(&conn, 1, 0, 10_000);
        got.sort_by_key(|s| s.0);
        assert_eq!(got, [(1000, 1.0), (3000, 3.0), (5000, 5.0)]);
        assert!(contains(&conn, 1, 3000).expect("contains"));
    }
}
