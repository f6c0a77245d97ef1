//! Raw samples at rest: `raw_chunk`, one row per series and stretch of time,
//! the samples encoded in a blob ([`codec`](super::codec), about 3 bytes a
//! sample against 22 for a row of the older `raw` table).
//!
//! Compaction appends one chunk per series (a rowid table, so the bodies go to
//! fresh pages one after the other); the index `(series, start_ts, end_ts)`
//! finds a series' chunks for a time range. A chunk covers less than
//! [`CHUNK_SPAN_MS`] and holds at most [`CHUNK_MAX`] samples, so a reader that
//! wants time `t` looks at chunks starting after `t - CHUNK_SPAN_MS` only, and
//! one chunk is quick to decode. Chunks of one series may overlap in time (late
//! samples); a (series, ts) is still stored once: the writer checks before it
//! stages ([`contains`]).
//!
//! Nothing here begins or commits a transaction.

use rusqlite::{params, Connection, OptionalExtension};

use super::codec::{decode_chunk, encode_chunk};
use super::stage::malformed;

/// A chunk's last sample is less than this after its first.
pub const CHUNK_SPAN_MS: i64 = 3_600_000;
/// Samples in one chunk at most.
pub const CHUNK_MAX: usize = 4096;

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
/// chunk by chunk (ascending within a chunk; chunks by their start).
pub(crate) fn for_each(
    conn: &Connection,
    series: i64,
    start: i64,
    end: i64,
    mut f: impl FnMut(i64, f64),
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT start_ts, n, body FROM raw_chunk
         WHERE series = ?1 AND start_ts > ?2 AND start_ts < ?3 AND end_ts >= ?4
         ORDER BY start_ts",
    )?;
    let mut rows = stmt.query(params![
        series,
        start.saturating_sub(CHUNK_SPAN_MS),
        end,
        start
    ])?;
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
    Ok(())
}

/// Whether a sample of `series` at `ts` is stored in a chunk.
pub(crate) fn contains(conn: &Connection, series: i64, ts: i64) -> rusqlite::Result<bool> {
    let mut found = false;
    for_each(conn, series, ts, ts.saturating_add(1), |_, _| found = true)?;
    Ok(found)
}

/// The newest chunked sample of `series`.
pub(crate) fn newest(conn: &Connection, series: i64) -> rusqlite::Result<Option<(i64, f64)>> {
    // The chunk that starts last ends at or after its start; one that ends
    // later must start less than a span before that end.
    let last_start: Option<i64> = conn
        .prepare_cached(
            "SELECT start_ts FROM raw_chunk WHERE series = ?1 ORDER BY start_ts DESC LIMIT 1",
        )?
        .query_row([series], |r| r.get(0))
        .optional()?;
    let Some(last_start) = last_start else {
        return Ok(None);
    };
    let mut stmt = conn.prepare_cached(
        "SELECT start_ts, n, body FROM raw_chunk
         WHERE series = ?1 AND start_ts > ?2 ORDER BY end_ts DESC LIMIT 1",
    )?;
    let found = stmt
        .query_row(params![series, last_start - CHUNK_SPAN_MS], |row| {
            let mut newest = None;
            let first: i64 = row.get(0)?;
            let n: i64 = row.get(1)?;
            decode_chunk(
                first,
                n.max(0) as usize,
                row.get_ref(2)?.as_blob()?,
                |ts, v| {
                    newest = Some((ts, v));
                },
            )
            .map_err(malformed)?;
            Ok(newest)
        })
        .optional()?;
    Ok(found.flatten())
}

/// The newest chunked time of `series` (without decoding).
pub(crate) fn newest_ts(conn: &Connection, series: i64) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached(
        "SELECT max(end_ts) FROM raw_chunk WHERE series = ?1 AND start_ts > (
             SELECT max(start_ts) FROM raw_chunk WHERE series = ?1) - ?2",
    )?
    .query_row(params![series, CHUNK_SPAN_MS], |r| r.get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().expect("db");
        conn.execute_batch(
            "CREATE TABLE raw_chunk (id INTEGER PRIMARY KEY, series INTEGER NOT NULL,
                 start_ts INTEGER NOT NULL, end_ts INTEGER NOT NULL, n INTEGER NOT NULL,
                 body BLOB NOT NULL);
             CREATE INDEX raw_chunk_by_series ON raw_chunk (series, start_ts, end_ts);",
        )
        .expect("schema");
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
        assert_eq!(newest(&conn, 9).expect("newest"), Some((20_009_999, 1.0)));
        assert_eq!(newest_ts(&conn, 7).expect("newest"), Some(10_799_000));
        assert_eq!(newest_ts(&conn, 1).expect("newest"), None);
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
        assert_eq!(newest(&conn, 1).expect("newest"), Some((5000, 5.0)));
    }
}
