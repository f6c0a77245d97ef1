//! Deleting old data: raw samples (chunks, and rows of the older `raw` table)
//! past `retention_days`, rollups past `rollup_retention_days`, and, while the
//! pages in use exceed `max_size_mb`, the oldest data first, a minute at a
//! time: raw samples and minute rollups older than their newest day; when a
//! day does not fit, raw samples older than the kept window
//! ([`KEPT_NEWEST_MS`] before the newest sample), then minute rollups, then
//! hour rollups. The staging ring, the raw samples of the kept window and
//! the rollup rows of the periods it touches are never deleted to meet the
//! cap; `check-config` refuses a cap that cannot hold them
//! (`config/size_floor.rs`).
//!
//! A rollup level whose oldest periods were deleted (in full or in part)
//! answers only from the first period it still holds whole ([`held`],
//! recorded in `store_state`); before that, the finer level answers
//! (`plan.rs`). So rollups may go while raw samples of their periods remain.
//!
//! The size counted against `max_size_mb` leaves out the tables another layer
//! bounds on its own ([`ACCOUNTED_APART`]: the uplink's RPC record), so traffic
//! there can never make retention delete measurements.
//!
//! Work is cut into steps of at most [`CHUNK_ROWS`] rows (or [`CHUNK_BLOBS`]
//! raw-sample chunks, deleted in the order they ended so their pages are freed
//! whole). A retention pass runs each step in its own short transaction on
//! the writer thread, so sample batches and steering writes wait for one
//! small delete at most, never for a whole pass; the cap's deletes around a
//! compaction run in the compaction's transaction ([`Policy::evict_in_tx`]).
//! Each step says what it deleted from which [`Resolution`], for the
//! counters (`retention_stats.rs`). Deleted pages go to
//! SQLite's free list and are reused; the file does not shrink (no VACUUM: it
//! would rewrite the whole file on flash).

use rusqlite::{params, Connection, OptionalExtension};

use super::plan::{Held, HOUR_MS, MINUTE_MS};
pub use crate::config::size_floor::KEPT_NEWEST_MS;

/// Most rows one step deletes.
pub const CHUNK_ROWS: i64 = 5_000;
/// Most `raw_chunk` rows one step deletes (each holds up to an hour of one
/// series; ten minutes of a polled series).
pub const CHUNK_BLOBS: i64 = 1_000;
/// The tiers, bulkiest first: raw samples (chunks, and rows of the older `raw`
/// table), minute rollups, hour rollups.
const TIERS: [&[&str]; 3] = [&["raw", "raw_chunk"], &["rollup_1m"], &["rollup_1h"]];
const DAY_MS: i64 = 86_400_000;
/// `store_state` keys: from when each rollup level holds its periods whole.
const MINUTE_FROM: &str = "rollup_1m_from";
const HOUR_FROM: &str = "rollup_1h_from";
/// Tables (with their indexes) bounded by the layer that writes them, not by
/// `max_size_mb`: the uplink's RPC record (`uplink/dedup.rs`, rows and bytes).
pub const ACCOUNTED_APART: [&str; 1] = ["uplink_rpc_seen"];

/// The resolutions the store keeps, finest first: raw samples, minute and
/// hour rollups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    Raw,
    Minute,
    Hour,
}

impl Resolution {
    pub const ALL: [Resolution; 3] = [Resolution::Raw, Resolution::Minute, Resolution::Hour];

    pub const fn as_str(self) -> &'static str {
        match self {
            Resolution::Raw => "raw",
            Resolution::Minute => "minute",
            Resolution::Hour => "hour",
        }
    }

    fn of_table(table: &str) -> Resolution {
        match table {
            "rollup_1m" => Resolution::Minute,
            "rollup_1h" => Resolution::Hour,
            _ => Resolution::Raw,
        }
    }
}

/// Rows deleted, by resolution (raw samples counted one by one, also where
/// a chunk held them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally(pub [u64; 3]);

impl Tally {
    pub fn add(&mut self, r: Resolution, rows: u64) {
        self.0[r as usize] += rows;
    }

    pub fn of(&self, r: Resolution) -> u64 {
        self.0[r as usize]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

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
    /// Rows deleted because they were past their table's retention.
    pub expired: Tally,
    /// Rows deleted to bring the database under its size cap.
    pub evicted: Tally,
    /// Transactions used.
    pub steps: u64,
    /// The cap was still exceeded with nothing left to delete but the
    /// staging ring and the newest [`KEPT_NEWEST_MS`] of raw samples.
    pub full: bool,
}

/// Outcome of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Expired(Resolution, u64),
    Evicted(Resolution, u64),
    Done,
    /// Over the cap with nothing left to delete but the staging ring and the
    /// kept window.
    Full,
}

impl Policy {
    /// Runs one step at `now_ms` inside its own transaction, deleting for the
    /// cap nothing newer than `keep_from`, while more than `max_bytes` is in
    /// use.
    pub fn step(&self, conn: &Connection, now_ms: i64, keep_from: i64) -> rusqlite::Result<Step> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = self.step_in_tx(conn, now_ms, keep_from);
        match result {
            Ok(_) => conn.execute_batch("COMMIT")?,
            Err(_) => {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
        result
    }

    fn step_in_tx(&self, conn: &Connection, now_ms: i64, keep_from: i64) -> rusqlite::Result<Step> {
        let series = raw_series(conn)?;
        for (tier, tables) in TIERS.iter().enumerate() {
            let keep = match tier {
                0 => self.raw_ms,
                1 => self.minute_ms,
                _ => self.rollup_ms,
            };
            for table in *tables {
                let n = delete_chunk(conn, table, &series, now_ms.saturating_sub(keep))?;
                if n > 0 {
                    return Ok(Step::Expired(Resolution::of_table(table), n));
                }
            }
        }
        if capped_bytes(conn)? <= self.max_bytes {
            return Ok(Step::Done);
        }
        Ok(match evict(conn, &series, keep_from)? {
            Some((r, n)) => Step::Evicted(r, n),
            None => Step::Full,
        })
    }

    /// Runs steps until nothing is left to do (or only the kept window is).
    pub fn run(
        &self,
        conn: &Connection,
        now_ms: i64,
        keep_from: i64,
    ) -> rusqlite::Result<RetentionReport> {
        let mut report = RetentionReport::default();
        loop {
            report.steps += 1;
            match self.step(conn, now_ms, keep_from)? {
                Step::Expired(r, n) => report.expired.add(r, n),
                Step::Evicted(r, n) => report.evicted.add(r, n),
                Step::Done => return Ok(report),
                Step::Full => {
                    report.full = true;
                    return Ok(report);
                }
            }
        }
    }
}

/// The series the older `raw` table is walked by, series by series: only
/// while it still holds rows (a database of an earlier sitegate); else none.
fn raw_series(conn: &Connection) -> rusqlite::Result<Vec<i64>> {
    let has_raw = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM raw)")?
        .query_row([], |r| r.get::<_, bool>(0))?;
    if has_raw {
        series_ids(conn)
    } else {
        Ok(Vec::new())
    }
}

impl Policy {
    /// Deletes for the cap inside the caller's transaction (a compaction's)
    /// until the pages in use are under it with `room` bytes to spare;
    /// returns the rows deleted and whether only the ring and the kept window
    /// were left. In the compaction's transaction, before it writes, the
    /// pages the deletes free take its new rows and go to the WAL once, with
    /// them; freed in a transaction of their own they went there twice, as
    /// freed and as filled again.
    pub fn evict_in_tx(
        &self,
        conn: &Connection,
        keep_from: i64,
        room: u64,
    ) -> rusqlite::Result<(Tally, bool)> {
        let series = raw_series(conn)?;
        let mut deleted = Tally::default();
        while capped_bytes(conn)?.saturating_add(room) > self.max_bytes {
            match evict(conn, &series, keep_from)? {
                Some((r, n)) => deleted.add(r, n),
                None => return Ok((deleted, true)),
            }
        }
        Ok((deleted, false))
    }
}

/// One step for the cap, oldest first, a minute at a time: raw samples and
/// minute rollups older than their newest day (the day before the newest
/// sample); when that is not enough, raw samples older than `keep_from`;
/// then minute rollups, then hour rollups, whatever their age. Returns what
/// it deleted from which resolution; `None` when none is left.
fn evict(
    conn: &Connection,
    series: &[i64],
    keep_from: i64,
) -> rusqlite::Result<Option<(Resolution, u64)>> {
    let newest_day = keep_from
        .saturating_add(KEPT_NEWEST_MS)
        .saturating_sub(DAY_MS);
    // The rollups of the kept window stay with it: each compaction writes
    // them again for its periods, so deleting them would free nothing for
    // long and rewrite them every time (`size_floor` counts them).
    let stages = [
        ("raw_chunk", newest_day),
        ("raw", newest_day),
        ("rollup_1m", newest_day),
        ("raw_chunk", keep_from),
        ("raw", keep_from),
        ("rollup_1m", keep_from),
        ("rollup_1h", keep_from),
    ];
    for (table, floor) in stages {
        let Some(t) = oldest(conn, table, series)? else {
            continue;
        };
        let n = match table {
            "rollup_1m" | "rollup_1h" => {
                let period = if table == "rollup_1h" {
                    HOUR_MS
                } else {
                    MINUTE_MS
                };
                let cutoff = t.saturating_add(period);
                if cutoff > floor {
                    continue;
                }
                delete_rollups(conn, table, cutoff, keep_from)?
            }
            _ if t < floor => {
                delete_chunk(conn, table, series, t.saturating_add(MINUTE_MS).min(floor))?
            }
            _ => continue,
        };
        if n > 0 {
            return Ok(Some((Resolution::of_table(table), n)));
        }
    }
    Ok(None)
}

/// From when each resolution holds data (epoch ms; `None` where it holds
/// none): the oldest compacted raw sample (the staging ring's are newer),
/// and for each rollup level its first period that it answers from whole
/// ([`held`]). Each is one search of an index.
pub(crate) fn oldest_held(conn: &Connection) -> rusqlite::Result<[Option<i64>; 3]> {
    let chunks: Option<i64> = conn
        .prepare_cached(
            "SELECT min(start_ts) FROM raw_chunk WHERE start_ts / 600000 =
             (SELECT min(start_ts / 600000) FROM raw_chunk)",
        )?
        .query_row([], |r| r.get(0))?;
    let older = oldest(conn, "raw", &raw_series(conn)?)?;
    let raw = match (chunks, older) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let whole = held(conn)?;
    let minute = oldest(conn, "rollup_1m", &[])?.map(|t| t.max(whole.minute_from));
    let hour = oldest(conn, "rollup_1h", &[])?.map(|t| t.max(whole.hour_from));
    Ok([raw, minute, hour])
}

/// From when each rollup level holds its periods whole (`plan.rs`).
pub(crate) fn held(conn: &Connection) -> rusqlite::Result<Held> {
    let mut stmt = conn.prepare_cached("SELECT value FROM store_state WHERE key = ?1")?;
    let mut from = |key: &str| -> rusqlite::Result<i64> {
        Ok(stmt
            .query_row([key], |r| r.get(0))
            .optional()?
            .unwrap_or(i64::MIN))
    };
    Ok(Held {
        minute_from: from(MINUTE_FROM)?,
        hour_from: from(HOUR_FROM)?,
    })
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
        return super::chunks::delete_ended_before(conn, cutoff, CHUNK_BLOBS);
    }
    if table != "raw" {
        return delete_rollups(conn, table, cutoff, i64::MAX);
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
/// rows deleted fill whole pages), and records that the level holds whole
/// periods only after the last one it deleted from. When hour rollups go, so
/// does the newest sample recorded for a series none of whose hours is left
/// (`series_last`) and that is older than `last_floor`: nothing stored
/// remains to show it.
fn delete_rollups(
    conn: &Connection,
    table: &str,
    cutoff: i64,
    last_floor: i64,
) -> rusqlite::Result<u64> {
    let (key, period) = if table == "rollup_1h" {
        (HOUR_FROM, HOUR_MS)
    } else {
        (MINUTE_FROM, MINUTE_MS)
    };
    let mut delete = conn.prepare_cached(&format!(
        "DELETE FROM {table} WHERE (bucket, series) IN (
             SELECT bucket, series FROM {table} WHERE bucket < ?1
             ORDER BY bucket, series LIMIT ?2)
         RETURNING bucket"
    ))?;
    let mut rows = delete.query(params![cutoff, CHUNK_ROWS])?;
    let (mut n, mut newest) = (0u64, i64::MIN);
    while let Some(row) = rows.next()? {
        n += 1;
        newest = newest.max(row.get(0)?);
    }
    if n == 0 {
        return Ok(0);
    }
    conn.prepare_cached(
        "INSERT INTO store_state (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
    )?
    .execute(params![key, newest.saturating_add(period)])?;
    if table == "rollup_1h" {
        conn.prepare_cached(
            "DELETE FROM series_last
             WHERE ts < min(?1, (SELECT coalesce(min(bucket), 9223372036854775807) FROM rollup_1h))",
        )?
        .execute([last_floor])?;
    }
    Ok(n)
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
