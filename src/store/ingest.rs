//! Writing samples inside the writer's open transaction, by one of two paths:
//!
//! - **staged**: a batch with fewer than [`DIRECT_PER_SERIES`] samples per series
//!   (every flush of a polling site) goes to the staging ring
//!   ([`stage`](super::stage)): one page per commit of a few hundred samples;
//! - **direct**: a large batch (bulk ingest) first compacts the ring, then goes
//!   straight to `raw_chunk` with its rollups.
//!
//! [`Ingest::compact`] moves the ring (and rows an older sitegate left in
//! `recent`) into `raw_chunk` and the rollups: per series one chunk and one
//! upsert per touched minute and hour. Either way a (series, ts) is stored
//! once, the first one sent wins: a sample newer than everything stored for its
//! series is new; an older one is looked up (chunks, `raw`, `recent`, ring).
//!
//! Runs on the writer thread only. It must not begin or commit transactions
//! (the writer does); after a rollback the writer calls [`Ingest::reload`],
//! since the ring's bookkeeping here may be ahead of the database.

use super::id_hash::{IdMap, IdSet};
use std::collections::hash_map::Entry;

use rusqlite::{params, Connection, OptionalExtension};

use super::agg::{align, Agg};
use super::chunks;
use super::plan::{HOUR_MS, MINUTE_MS};
use super::query::PERIODS_CTE;
use super::restamp::{self, Restamp, Restamped};
use super::stage::{Row, Stage};
use crate::model::{DeviceId, Property, Sample};

const IN_RAW: &str = "SELECT 1 FROM raw WHERE series = ?1 AND ts = ?2";
const IN_RECENT: &str = "SELECT 1 FROM recent WHERE ts = ?1 AND series = ?2";

/// Staged samples one part of a compaction moves at most: the rows held in
/// memory at once (24 bytes each, 1.2 MB, and half that again for their
/// sort). The peak RSS of a compaction grows with it (at 250,000: 8 to 10 MB
/// above the steady RSS in runs at 1,000 devices); each part rescans the
/// ring's list of live slots to find the ones holding its series, and
/// decodes the slots at its edges again.
pub const COMPACT_PART: usize = 50_000;

/// Samples per series from which a batch goes straight to `raw_chunk`: below
/// it, one chunk and two rollup pages per series would cost more than staging
/// the batch and compacting it with the next ones.
pub const DIRECT_PER_SERIES: usize = 1024;

/// Keeps the newest sample of a series (`series_last`, migration 0006).
const SERIES_LAST_SQL: &str = "INSERT INTO series_last (series, ts, value) VALUES (?1, ?2, ?3)
     ON CONFLICT (series) DO UPDATE SET ts = excluded.ts, value = excluded.value
     WHERE excluded.ts > series_last.ts";

/// The upsert that folds a batch's summary of one period into a rollup row.
/// Every right-hand side reads the old row, so the CASEs compare old offsets.
fn upsert_sql(table: &str) -> String {
    format!(
        "INSERT INTO {table} (series, bucket, n, total, lo, hi, first_off, first_v, last_off, last_v)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (bucket, series) DO UPDATE SET
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
    /// New samples (staged or in `raw_chunk`).
    pub stored: usize,
    /// Samples whose (series, ts) was already stored: the first one is kept.
    pub duplicates: usize,
    /// NaN or infinite values, and samples of unknown devices: not stored.
    pub rejected: usize,
    /// Of `stored`, the samples that went to the staging ring.
    pub staged: usize,
}

/// Maps samples to series ids and writes them. One per writer.
pub(crate) struct Ingest {
    /// Device reference by `DeviceId` index.
    devices: Vec<String>,
    series: IdMap<(u16, Property), i64>,
    /// Newest stored time per series, loaded on first use.
    newest: IdMap<i64, i64>,
    stage: Stage,
    page_size: usize,
    upsert_minute: String,
    upsert_hour: String,
}

impl Ingest {
    pub fn new(conn: &Connection, devices: Vec<String>) -> rusqlite::Result<Self> {
        let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        let page_size = usize::try_from(page_size).unwrap_or(4096);
        Ok(Self {
            devices,
            series: IdMap::default(),
            newest: IdMap::default(),
            stage: Stage::load(conn, page_size)?,
            page_size,
            upsert_minute: upsert_sql("rollup_1m"),
            upsert_hour: upsert_sql("rollup_1h"),
        })
    }

    /// Forgets what a rolled-back transaction may have left in memory: the ring's
    /// bookkeeping is read again and the caches start empty.
    pub fn reload(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        self.series.clear();
        self.newest.clear();
        self.stage = Stage::load(conn, self.page_size)?;
        Ok(())
    }

    /// Samples in the staging ring.
    pub fn staged(&self) -> usize {
        self.stage.staged()
    }

    /// The newest sample's time, staged or in a chunk (`i64::MIN` when none).
    pub fn newest_of_all(&self, conn: &Connection) -> rusqlite::Result<i64> {
        let at_rest: Option<i64> = conn
            .prepare_cached("SELECT max(end_ts) FROM raw_chunk")?
            .query_row([], |r| r.get(0))?;
        Ok([at_rest, self.stage.newest_of_all()]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(i64::MIN))
    }

    /// Knows `reference` as device `id` from now on: the next id, or the
    /// one it has already (a repeated add changes nothing).
    pub fn add_device(&mut self, id: DeviceId, reference: String) -> Result<(), super::StoreError> {
        match self.devices.get(id.index()) {
            Some(known) if *known == reference => Ok(()),
            None if self.devices.len() == id.index() => {
                self.devices.push(reference);
                Ok(())
            }
            _ => Err(super::StoreError::DeviceOrder {
                reference,
                id: id.0,
                known: self.devices.len(),
            }),
        }
    }

    /// The reference of a device id (config order), if it is known.
    pub fn reference(&self, device: DeviceId) -> Option<&str> {
        self.devices.get(usize::from(device.0)).map(String::as_str)
    }

    /// Writes `samples` inside the caller's transaction, staged or direct.
    /// Where some sample was not stored (a duplicate or a rejection: the
    /// stats say so), `kept` ends with one flag per sample, in order, whether
    /// it was stored, so what rides along in the same transaction can be
    /// exactly what the tables hold; where every one was, it is left empty.
    /// The common commit (every sample new) pays nothing for it.
    pub fn write(
        &mut self,
        conn: &Connection,
        samples: &[Sample],
        kept: &mut Vec<bool>,
    ) -> rusqlite::Result<IngestStats> {
        let mut stats = IngestStats::default();
        kept.clear();
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
        // Stable: of two samples with the same (series, ts) the one sent first
        // stays first and is kept.
        rows.sort_by_key(|&(series, ts, _)| (series, ts));
        let before = rows.len();
        rows.dedup_by_key(|r| (r.0, r.1));
        stats.duplicates += before - rows.len();
        let rows = self.drop_stored(conn, rows, &mut stats)?;
        if stats.duplicates + stats.rejected > 0 {
            self.flag_kept(conn, samples, &rows, kept)?;
        }
        stats.stored = rows.len();
        // Sorted by series: each new series starts a run.
        let series = rows.chunk_by(|a, b| a.0 == b.0).count();
        if rows.len() >= DIRECT_PER_SERIES * series.max(1) {
            self.compact(conn)?;
            self.write_raw(conn, &rows)?;
        } else {
            self.stage.write(conn, &rows)?;
            stats.staged = rows.len();
        }
        Ok(stats)
    }

    /// Moves every staged sample (and rows left in the older `recent` table)
    /// into `raw_chunk` and the rollups; returns how many. The ring is moved in
    /// parts of whole series of at most [`COMPACT_PART`] samples, in series
    /// order, so memory stays bounded however much is staged; all parts are
    /// one transaction (the caller's).
    pub fn compact(&mut self, conn: &Connection) -> rusqlite::Result<usize> {
        let legacy: Vec<Row> = {
            let mut stmt = conn.prepare_cached("SELECT series, ts, value FROM recent")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        if self.stage.staged() == 0 && legacy.is_empty() {
            return Ok(0);
        }
        if !legacy.is_empty() {
            conn.prepare_cached("DELETE FROM recent")?.execute([])?;
        }
        let mut parts = self.stage.partitions(COMPACT_PART);
        if parts.is_empty() {
            parts.push((i64::MIN, i64::MAX));
        }
        // The older table's rows join the first part and the last, so each of
        // them is in exactly one.
        let last = parts.len() - 1;
        parts[0].0 = i64::MIN;
        parts[last].1 = i64::MAX;
        let mut moved = 0;
        for (lo, hi) in parts {
            let mut rows = self.stage.rows_of(conn, lo, hi)?;
            rows.extend(legacy.iter().filter(|r| (lo..hi).contains(&r.0)));
            // Everything staged was checked against what is stored; sort for
            // the chunks (stable, and a repeated (series, ts) would keep the
            // first).
            rows.sort_by_key(|&(series, ts, _)| (series, ts));
            rows.dedup_by_key(|r| (r.0, r.1));
            self.write_raw(conn, &rows)?;
            moved += rows.len();
        }
        self.stage.mark_compacted(conn)?;
        Ok(moved)
    }

    /// Moves the samples a wrong clock stamped (`restamp.rs`): compacts the
    /// ring first, so that every sample of the epoch is in a chunk, then
    /// rebuilds the rollups of the hours the samples left and entered from
    /// the raw samples (staged samples that come later are merged into them
    /// by their compaction, as always).
    pub fn restamp(&mut self, conn: &Connection, r: &Restamp) -> rusqlite::Result<Restamped> {
        self.compact(conn)?;
        let (done, rebuild) = restamp::shift_chunks(conn, r)?;
        {
            let mut minute = Rollup::new(conn, &self.upsert_minute, MINUTE_MS)?;
            let mut hour = Rollup::new(conn, &self.upsert_hour, HOUR_MS)?;
            for (series, ranges) in rebuild {
                for (lo, hi) in ranges {
                    let start = align(lo, HOUR_MS);
                    let end = align(hi, HOUR_MS).saturating_add(HOUR_MS);
                    for (table, period) in [("rollup_1m", MINUTE_MS), ("rollup_1h", HOUR_MS)] {
                        // One seek per period: the key is (bucket, series).
                        conn.prepare_cached(&format!(
                            "{PERIODS_CTE}
                             DELETE FROM {table} WHERE series = ?1 AND bucket IN (SELECT bucket FROM b)"
                        ))?
                        .execute(params![series, start, end, period])?;
                    }
                    for (ts, v) in restamp::raw_samples(conn, series, start, end)? {
                        minute.add(series, ts, v)?;
                        hour.add(series, ts, v)?;
                    }
                    minute.flush()?;
                    hour.flush()?;
                }
            }
        }
        restamp::renew_series_last(conn, r)?;
        // The newest time per series moved with the samples.
        self.reload(conn)?;
        Ok(done)
    }

    /// One flag per sample of `samples`: whether it is among `rows`, the rows
    /// stored, of which each (series, ts) was one sample's: the first sent
    /// of its (series, ts), as the stable sort and the dedup kept it.
    fn flag_kept(
        &mut self,
        conn: &Connection,
        samples: &[Sample],
        rows: &[Row],
        kept: &mut Vec<bool>,
    ) -> rusqlite::Result<()> {
        let mut unclaimed: IdSet<(i64, i64)> =
            rows.iter().map(|&(series, ts, _)| (series, ts)).collect();
        for s in samples {
            let stored = s.value.is_finite()
                && match self.series_id(conn, s.device.0, s.property)? {
                    Some(id) => unclaimed.remove(&(id, s.ts_ms)),
                    None => false,
                };
            kept.push(stored);
        }
        Ok(())
    }

    /// Drops rows whose (series, ts) is stored already and returns the rest;
    /// `rows` are sorted and unique. Rows newer than everything stored for
    /// their series skip the lookups (the common case: the next poll).
    fn drop_stored(
        &mut self,
        conn: &Connection,
        rows: Vec<Row>,
        stats: &mut IngestStats,
    ) -> rusqlite::Result<Vec<Row>> {
        // Staged times of the series looked up so far, read series by series
        // (the slots holding one series: about one per commit).
        let mut staged: IdMap<i64, IdSet<i64>> = IdMap::default();
        let mut kept = Vec::with_capacity(rows.len());
        for (series, ts, value) in rows {
            let newest = self.newest(conn, series)?;
            let stored = ts <= newest && {
                chunks::contains(conn, series, ts)?
                    || conn.prepare_cached(IN_RAW)?.exists(params![series, ts])?
                    || conn
                        .prepare_cached(IN_RECENT)?
                        .exists(params![ts, series])?
                    || (self.stage.may_hold(series, ts) && {
                        let times = match staged.entry(series) {
                            Entry::Occupied(e) => e.into_mut(),
                            Entry::Vacant(e) => {
                                let rows = self.stage.rows_of(conn, series, series + 1)?;
                                e.insert(rows.into_iter().map(|r| r.1).collect())
                            }
                        };
                        times.contains(&ts)
                    })
            };
            if stored {
                stats.duplicates += 1;
            } else {
                kept.push((series, ts, value));
            }
        }
        for &(series, ts, _) in &kept {
            let n = self.newest.entry(series).or_insert(ts);
            *n = (*n).max(ts);
        }
        Ok(kept)
    }

    /// The newest time stored for `series` anywhere (`i64::MIN` when none).
    fn newest(&mut self, conn: &Connection, series: i64) -> rusqlite::Result<i64> {
        if let Some(&t) = self.newest.get(&series) {
            return Ok(t);
        }
        let raw: Option<i64> = conn
            .prepare_cached("SELECT max(ts) FROM raw WHERE series = ?1")?
            .query_row([series], |r| r.get(0))?;
        let recent: Option<i64> = conn
            .prepare_cached("SELECT max(ts) FROM recent WHERE series = ?1")?
            .query_row([series], |r| r.get(0))?;
        let last: Option<i64> = conn
            .prepare_cached("SELECT ts FROM series_last WHERE series = ?1")?
            .query_row([series], |r| r.get(0))
            .optional()?;
        let t = [last, raw, recent, self.stage.newest(series)]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(i64::MIN);
        self.newest.insert(series, t);
        Ok(t)
    }

    /// Writes rows sorted by (series, ts), unique and not stored yet, as chunks
    /// and rollups, and keeps `series_last`.
    fn write_raw(&mut self, conn: &Connection, rows: &[Row]) -> rusqlite::Result<()> {
        let mut minute = Rollup::new(conn, &self.upsert_minute, MINUTE_MS)?;
        let mut hour = Rollup::new(conn, &self.upsert_hour, HOUR_MS)?;
        let mut last = conn.prepare_cached(SERIES_LAST_SQL)?;
        let mut chunk_writer = chunks::ChunkWriter::default();
        let mut samples: Vec<(i64, f64)> = Vec::new();
        for (i, &(series, ts, value)) in rows.iter().enumerate() {
            samples.push((ts, value));
            minute.add(series, ts, value)?;
            hour.add(series, ts, value)?;
            if rows.get(i + 1).is_none_or(|next| next.0 != series) {
                chunk_writer.write(conn, series, &samples)?;
                last.execute(params![series, ts, value])?;
                samples.clear();
            }
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
