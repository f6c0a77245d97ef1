//! Deleting old data: raw samples (chunks, and rows of the older `raw` table)
//! past `retention_days`, rollups past `rollup_retention_days`, and, while the
//! database holds more than `max_size_mb`, the oldest day of the bulkiest tier first: raw samples, then
//! minute rollups, then hour rollups, each down to its newest day. So a cap that
//! is too small for the configured retention shortens the raw history before it
//! touches the long, cheap rollup history.
//!
//! The size counted against `max_size_mb` leaves out the tables another layer
//! bounds on its own ([`ACCOUNTED_APART`]: the uplink's RPC record), so traffic
//! there can never make retention delete measurements.
//!
//! Work is cut into steps of at most [`CHUNK_ROWS`] rows (or [`CHUNK_BLOBS`]
//! raw-sample chunks, deleted in the order they ended so their pages are freed
//! whole), each its own short transaction on the writer thread, so sample
//! batches and steering writes wait for one small delete at most, never for a
//! whole pass. Deleted pages go to
//! SQLite's free list and are reused; the file does not shrink (no VACUUM: it
//! would rewrite the whole file on flash).

use rusqlite::{params, Connection, OptionalExtension};

use super::agg::align;

/// Most rows one step deletes.
pub const CHUNK_ROWS: i64 = 5_000;
/// Most `raw_chunk` rows one step deletes (each holds up to an hour of one
/// series; ten minutes of a polled series).
pub const CHUNK_BLOBS: i64 = 1_000;
const DAY_MS: i64 = 86_400_000;
/// The tiers, bulkiest first: raw samples (chunks, and rows of the older `raw`
/// table), minute rollups, hour rollups.
const TIERS: [&[&str]; 3] = [&["raw", "raw_chunk"], &["rollup_1m"], &["rollup_1h"]];
/// Tables (with their indexes) bounded by the layer that writes them, not by
/// `max_size_mb`: the uplink's RPC record (`uplink/dedup.rs`, rows and bytes).
pub const ACCOUNTED_APART: [&str; 1] = ["uplink_rpc_seen"];

/// How long data is kept and how big the database may grow.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    pub raw_ms: i64,
    pub minute_ms: i64,
    pub rollup_ms: i64,
    pub max_bytes: u64,
}

/// What a retention run deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Rows deleted because they were past their table's retention (for
    /// raw-sample chunks: the samples they held).
    pub expired_rows: u64,
    /// Rows deleted to bring the database under its size cap (chunks counted
    /// by their samples).
    pub evicted_rows: u64,
    /// Transactions used.
    pub steps: u64,
}

/// Outcome of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Expired(u64),
    Evicted(u64),
    Done,
}

impl Policy {
    /// Runs one step at `now_ms` inside its own transaction.
    pub fn step(&self, conn: &Connection, now_ms: i64) -> rusqlite::Result<Step> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = self.step_in_tx(conn, now_ms);
        match result {
            Ok(_) => conn.execute_batch("COMMIT")?,
            Err(_) => {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
        result
    }

    fn step_in_tx(&self, conn: &Connection, now_ms: i64) -> rusqlite::Result<Step> {
        let series = series_ids(conn)?;
        for (tier, tables) in TIERS.iter().enumerate() {
            let keep = match tier {
                0 => self.raw_ms,
                1 => self.minute_ms,
                _ => self.rollup_ms,
            };
            for table in *tables {
                let n = delete_chunk(conn, table, &series, now_ms.saturating_sub(keep))?;
                if n > 0 {
                    return Ok(Step::Expired(n));
                }
            }
        }
        if capped_bytes(conn)? > self.max_bytes {
            for tables in TIERS {
                let mut oldest_day: Option<i64> = None;
                for table in tables {
                    if let Some(t) = oldest(conn, table, &series)? {
                        oldest_day = Some(oldest_day.map_or(t, |o: i64| o.min(t)));
                    }
                }
                let Some(oldest) = oldest_day else {
                    continue;
                };
                // Whole days, and never the newest day of a tier.
                let cutoff = (align(oldest, DAY_MS) + DAY_MS).min(align(now_ms - DAY_MS, DAY_MS));
                for table in tables {
                    let n = delete_chunk(conn, table, &series, cutoff)?;
                    if n > 0 {
                        return Ok(Step::Evicted(n));
                    }
                }
            }
            tracing::warn!(
                max_bytes = self.max_bytes,
                "storage.max_size_mb is smaller than one day of data; nothing more to delete"
            );
        }
        Ok(Step::Done)
    }

    /// Runs steps until nothing is left to do.
    pub fn run(&self, conn: &Connection, now_ms: i64) -> rusqlite::Result<RetentionReport> {
        let mut report = RetentionReport::default();
        loop {
            report.steps += 1;
            match self.step(conn, now_ms)? {
                Step::Expired(n) => report.expired_rows += n,
                Step::Evicted(n) => report.evicted_rows += n,
                Step::Done => return Ok(report),
            }
        }
    }
}

/// Bytes in pages that hold data (the file minus its free list).
pub(crate) fn used_bytes(conn: &Connection) -> rusqlite::Result<u64> {
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(((pages - free).max(0) * size) as u64)
}

/// What counts against `max_size_mb`: [`used_bytes`] without the pages of the
/// tables in [`ACCOUNTED_APART`] (read from `dbstat`, walking only their small
/// b-trees).
pub(crate) fn capped_bytes(conn: &Connection) -> rusqlite::Result<u64> {
    let mut objects = conn.prepare_cached("SELECT name FROM sqlite_schema WHERE tbl_name = ?1")?;
    let mut size = conn.prepare_cached(
        "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?1 AND aggregate = TRUE",
    )?;
    let mut apart = 0u64;
    for table in ACCOUNTED_APART {
        let names = objects
            .query_map([table], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        for name in names {
            apart += size.query_row([&name], |r| r.get::<_, i64>(0))?.max(0) as u64;
        }
    }
    Ok(used_bytes(conn)?.saturating_sub(apart))
}

fn series_ids(conn: &Connection) -> rusqlite::Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached("SELECT id FROM series ORDER BY id")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    rows.collect()
}

/// Deletes at most `CHUNK_ROWS` rows (`CHUNK_BLOBS` chunks) older than
/// `cutoff`. A chunk is older than `cutoff` when its last sample is; for
/// chunks the count returned is of samples. Rows an older sitegate left in
/// `raw` (keyed by series first) go series by series; each probe and delete
/// is a range scan of the primary key.
fn delete_chunk(
    conn: &Connection,
    table: &str,
    series: &[i64],
    cutoff: i64,
) -> rusqlite::Result<u64> {
    if table == "raw_chunk" {
        return delete_chunks(conn, cutoff);
    }
    if table != "raw" {
        return delete_rollups(conn, table, cutoff);
    }
    let mut nth = conn.prepare_cached(
        "SELECT ts FROM raw WHERE series = ?1 AND ts < ?2 ORDER BY ts LIMIT 1 OFFSET ?3",
    )?;
    let mut deleted = 0i64;
    for &s in series {
        let budget = CHUNK_ROWS - deleted;
        if budget <= 0 {
            break;
        }
        let upto: Option<i64> = nth
            .query_row(params![s, cutoff, budget - 1], |r| r.get(0))
            .optional()?;
        let n = match upto {
            Some(t) => conn
                .prepare_cached("DELETE FROM raw WHERE series = ?1 AND ts <= ?2")?
                .execute(params![s, t])?,
            None => conn
                .prepare_cached("DELETE FROM raw WHERE series = ?1 AND ts < ?2")?
                .execute(params![s, cutoff])?,
        };
        deleted += n as i64;
    }
    Ok(deleted as u64)
}

/// Deletes the oldest rows of a rollup table (keyed by bucket first, so the
/// rows deleted fill whole pages). When hour rollups go, so does the newest
/// sample recorded for a series none of whose hours is left (`series_last`):
/// nothing stored remains to show it.
fn delete_rollups(conn: &Connection, table: &str, cutoff: i64) -> rusqlite::Result<u64> {
    let n = conn
        .prepare_cached(&format!(
            "DELETE FROM {table} WHERE (bucket, series) IN (
                 SELECT bucket, series FROM {table} WHERE bucket < ?1
                 ORDER BY bucket, series LIMIT ?2)"
        ))?
        .execute(params![cutoff, CHUNK_ROWS])?;
    if table == "rollup_1h" && n > 0 {
        conn.prepare_cached(
            "DELETE FROM series_last
             WHERE ts < (SELECT coalesce(min(bucket), 9223372036854775807) FROM rollup_1h)",
        )?
        .execute([])?;
    }
    Ok(n as u64)
}

/// Deletes the chunks that ended first, across series, so the pages they fill
/// (written one compaction after another) are freed whole. Returns the samples
/// deleted.
fn delete_chunks(conn: &Connection, cutoff: i64) -> rusqlite::Result<u64> {
    let mut delete = conn.prepare_cached(
        "DELETE FROM raw_chunk WHERE id IN (
             SELECT id FROM raw_chunk WHERE end_ts < ?1 ORDER BY end_ts LIMIT ?2)
         RETURNING n",
    )?;
    let mut samples = 0u64;
    let mut rows = delete.query(params![cutoff, CHUNK_BLOBS])?;
    while let Some(row) = rows.next()? {
        samples += row.get::<_, i64>(0)?.max(0) as u64;
    }
    Ok(samples)
}

/// The oldest time held by `table`; for chunks, the earliest last time of a
/// chunk (so a cutoff after it deletes that chunk).
fn oldest(conn: &Connection, table: &str, series: &[i64]) -> rusqlite::Result<Option<i64>> {
    if table == "raw_chunk" {
        return conn
            .prepare_cached("SELECT min(end_ts) FROM raw_chunk")?
            .query_row([], |r| r.get(0));
    }
    if table != "raw" {
        return conn
            .prepare_cached(&format!("SELECT min(bucket) FROM {table}"))?
            .query_row([], |r| r.get(0));
    }
    let mut stmt =
        conn.prepare_cached("SELECT ts FROM raw WHERE series = ?1 ORDER BY ts LIMIT 1")?;
    let mut oldest: Option<i64> = None;
    for &s in series {
        if let Some(t) = stmt.query_row([s], |r| r.get::<_, i64>(0)).optional()? {
            oldest = Some(oldest.map_or(t, |o| o.min(t)));
        }
    }
    Ok(oldest)
}
