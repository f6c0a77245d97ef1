//! The staging ring: where a commit of samples lands before compaction.
//!
//! `stage_slot` holds a fixed number of fixed-size blobs (slots). A commit
//! encodes its samples ([`codec`](super::codec)) into as few slots as it needs
//! and *overwrites* free ones, lowest id first, with blobs of the same size:
//! SQLite rewrites such a cell in place, so a commit of a few hundred samples
//! touches one database page, which is one WAL frame: no page is allocated or
//! freed, and no free-list or header page changes. The ring grows (new slots at
//! the end) only when every slot holds staged samples.
//!
//! Each slot carries the sequence number of the commit that wrote it;
//! `store_state.stage_compacted` is the newest sequence number already moved to
//! `raw_chunk` and the rollups. Slots with a larger number are live (staged);
//! the others are free. Compaction writes its rows and raises that number in one
//! transaction, so a crash leaves every sample in exactly one place.
//!
//! The writer keeps the ring's bookkeeping in memory ([`Stage`]); readers use
//! [`for_each_staged`], which needs nothing but the connection. Nothing here
//! begins or commits a transaction.

use std::collections::BTreeSet;

use rusqlite::{params, Connection, OptionalExtension};

use super::codec::{put_value_body, put_varint, split_value, unzigzag, zigzag, Malformed, Reader};
use super::id_hash::IdMap;

/// (series, ts, value).
pub(crate) type Row = (i64, i64, f64);

/// Bytes before the samples in a slot: sequence number (8), sample count (2),
/// base time (8), and in a slot marked [`TIME_STEPS`] the last sample's series
/// (4), so a reader after a later series skips the slot undecoded. The
/// count's top bits say the slot's [`Format`].
const HEADER: usize = 22;
/// The header of a slot an earlier sitegate wrote (no last series).
const HEADER_BEFORE_STEPS: usize = 18;
const COMPACTED_KEY: &str = "stage_compacted";

/// Slot size for a database page size: about 1 KiB, so that whole slots fill a
/// page (four to a 4 KiB page) and no slot needs an overflow page.
pub(crate) fn slot_bytes(page_size: usize) -> usize {
    let per_page = (page_size / 1024).max(1);
    // Per cell: a 2-byte pointer, payload size and rowid varints (3 bytes each at
    // most), the record header (3); the page header takes 8.
    let fit = (page_size - 8) / per_page - 11;
    // A table cell larger than page size - 35 spills to an overflow page.
    fit.min(page_size - 40)
}

/// A slot holding staged samples: its commit's sequence number, its id, and
/// the first and last series in it (samples are sorted by series), so a
/// compaction part reads only the slots that hold its series.
#[derive(Clone, Copy, Debug)]
struct LiveSlot {
    seq: u64,
    slot: i64,
    series: (i64, i64),
}

impl LiveSlot {
    fn holds_any(&self, lo: i64, hi: i64) -> bool {
        self.series.0 < hi && self.series.1 >= lo
    }
}

/// The writer's view of the ring.
pub(crate) struct Stage {
    slot_bytes: usize,
    /// Free slot ids, reused lowest first so consecutive commits share a page.
    free: BTreeSet<i64>,
    /// Live slots (staged samples), by sequence number.
    live: Vec<LiveSlot>,
    next_slot: i64,
    seq: u64,
    compacted: u64,
    staged: usize,
    /// Oldest and newest staged time, and the sample count, per series.
    ranges: IdMap<i64, (i64, i64, usize)>,
}

impl Stage {
    /// Reads the ring's state (slot headers and the staged samples' times).
    pub fn load(conn: &Connection, page_size: usize) -> rusqlite::Result<Stage> {
        let compacted = compacted(conn)?;
        let mut stage = Stage {
            slot_bytes: slot_bytes(page_size),
            free: BTreeSet::new(),
            live: Vec::new(),
            next_slot: 1,
            seq: compacted,
            compacted,
            staged: 0,
            ranges: IdMap::default(),
        };
        let mut stmt = conn.prepare("SELECT slot, body FROM stage_slot ORDER BY slot")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let slot: i64 = row.get(0)?;
            let body = row.get_ref(1)?.as_blob()?;
            stage.next_slot = stage.next_slot.max(slot + 1);
            let seq = slot_seq(body).map_err(malformed)?;
            stage.seq = stage.seq.max(seq);
            if seq > compacted {
                let ranges = &mut stage.ranges;
                let mut n = 0;
                let mut span = (i64::MAX, i64::MIN);
                decode_slot(body, |series, ts, _| {
                    n += 1;
                    span = (span.0.min(series), span.1.max(series));
                    widen(ranges, series, ts);
                })
                .map_err(malformed)?;
                stage.live.push(LiveSlot {
                    seq,
                    slot,
                    series: span,
                });
                stage.staged += n;
            } else {
                stage.free.insert(slot);
            }
        }
        stage.live.sort_unstable_by_key(|l| (l.seq, l.slot));
        Ok(stage)
    }

    /// Samples staged and not yet compacted.
    pub fn staged(&self) -> usize {
        self.staged
    }

    /// False when no staged sample of `series` can have time `ts`.
    pub fn may_hold(&self, series: i64, ts: i64) -> bool {
        self.ranges
            .get(&series)
            .is_some_and(|&(lo, hi, _)| lo <= ts && ts <= hi)
    }

    /// The newest staged time of `series`.
    pub fn newest(&self, series: i64) -> Option<i64> {
        self.ranges.get(&series).map(|r| r.1)
    }

    /// The newest staged time of any series.
    pub fn newest_of_all(&self) -> Option<i64> {
        self.ranges.values().map(|r| r.1).max()
    }

    /// Cuts the staged series into ascending ranges `[lo, hi)` of at most
    /// `max` samples each (a series with more is a range of its own), so a
    /// compaction can move the ring part by part in bounded memory.
    pub fn partitions(&self, max: usize) -> Vec<(i64, i64)> {
        let mut series: Vec<(i64, usize)> = self.ranges.iter().map(|(&s, r)| (s, r.2)).collect();
        series.sort_unstable();
        let mut out = Vec::new();
        let mut start: Option<(i64, usize)> = None;
        for &(id, n) in &series {
            match &mut start {
                Some((lo, total)) if *total + n > max => {
                    out.push((*lo, id));
                    start = Some((id, n));
                }
                Some((_, total)) => *total += n,
                None => start = Some((id, n)),
            }
        }
        if let Some((lo, _)) = start {
            out.push((lo, i64::MAX));
        }
        out
    }

    /// Stages `rows` (sorted by series, then time; no (series, ts) twice and none
    /// already stored) as one new sequence number.
    pub fn write(&mut self, conn: &Connection, rows: &[Row]) -> rusqlite::Result<()> {
        let Some(base) = rows.iter().map(|r| r.1).min() else {
            return Ok(());
        };
        self.seq += 1;
        let mut slot = SlotWriter::new(self.slot_bytes, self.seq, base);
        // The first and last series of the slot being filled.
        let mut span = (rows[0].0, rows[0].0);
        for &(series, ts, value) in rows {
            if !slot.push(series, ts, value) {
                self.put(conn, slot.finish(), span)?;
                slot = SlotWriter::new(self.slot_bytes, self.seq, base);
                // An empty slot takes any one sample (at most 30 bytes).
                slot.push(series, ts, value);
                span.0 = series;
            }
            span.1 = series;
            widen(&mut self.ranges, series, ts);
        }
        self.put(conn, slot.finish(), span)?;
        self.staged += rows.len();
        Ok(())
    }

    fn put(
        &mut self,
        conn: &Connection,
        body: Vec<u8>,
        series: (i64, i64),
    ) -> rusqlite::Result<()> {
        let slot = match self.free.pop_first() {
            Some(slot) => {
                conn.prepare_cached("UPDATE stage_slot SET body = ?1 WHERE slot = ?2")?
                    .execute(params![body, slot])?;
                slot
            }
            None => {
                let slot = self.next_slot;
                self.next_slot += 1;
                conn.prepare_cached("INSERT INTO stage_slot (slot, body) VALUES (?1, ?2)")?
                    .execute(params![slot, body])?;
                slot
            }
        };
        self.live.push(LiveSlot {
            seq: self.seq,
            slot,
            series,
        });
        Ok(())
    }

    /// The staged samples of the series in `[lo, hi)`, in staging order; only
    /// the slots that hold one of them are read.
    pub fn rows_of(&self, conn: &Connection, lo: i64, hi: i64) -> rusqlite::Result<Vec<Row>> {
        let n = self
            .ranges
            .iter()
            .filter(|(s, _)| (lo..hi).contains(*s))
            .map(|(_, r)| r.2)
            .sum();
        let mut out = Vec::with_capacity(n);
        let mut stmt = conn.prepare_cached("SELECT body FROM stage_slot WHERE slot = ?1")?;
        for live in self.live.iter().filter(|l| l.holds_any(lo, hi)) {
            stmt.query_row([live.slot], |r| {
                decode_slot_range(r.get_ref(0)?.as_blob()?, lo, hi, |s, t, v| {
                    out.push((s, t, v))
                })
                .map_err(malformed)
            })?;
        }
        Ok(out)
    }

    /// Records, inside the compaction's transaction, that every staged sample
    /// has been moved; the live slots become free.
    pub fn mark_compacted(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        if self.live.is_empty() {
            return Ok(());
        }
        conn.prepare_cached(
            "INSERT INTO store_state (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![COMPACTED_KEY, self.seq as i64])?;
        self.compacted = self.seq;
        self.free.extend(self.live.drain(..).map(|l| l.slot));
        self.ranges.clear();
        self.staged = 0;
        Ok(())
    }
}

fn widen(ranges: &mut IdMap<i64, (i64, i64, usize)>, series: i64, ts: i64) {
    let r = ranges.entry(series).or_insert((ts, ts, 0));
    r.0 = r.0.min(ts);
    r.1 = r.1.max(ts);
    r.2 += 1;
}

pub(crate) fn malformed(e: Malformed) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Blob, Box::new(e))
}

fn compacted(conn: &Connection) -> rusqlite::Result<u64> {
    let v: Option<i64> = conn
        .prepare_cached("SELECT value FROM store_state WHERE key = ?1")?
        .query_row([COMPACTED_KEY], |r| r.get(0))
        .optional()?;
    Ok(v.unwrap_or(0).max(0) as u64)
}

/// Calls `f(series, ts, value)` for every staged sample of `series` (or of every
/// series when `None`), slot by slot. Reads one consistent state when called
/// inside a read transaction.
pub(crate) fn for_each_staged(
    conn: &Connection,
    series: Option<i64>,
    mut f: impl FnMut(i64, i64, f64),
) -> rusqlite::Result<()> {
    let compacted = compacted(conn)?;
    let mut stmt = conn.prepare_cached("SELECT body FROM stage_slot")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let body = row.get_ref(0)?.as_blob()?;
        if slot_seq(body).map_err(malformed)? <= compacted {
            continue;
        }
        match series {
            None => decode_slot(body, &mut f),
            Some(want) => decode_slot_range(body, want, want.saturating_add(1), &mut f),
        }
        .map_err(malformed)?;
    }
    Ok(())
}

/// How many samples are staged (from the slot headers alone).
pub(crate) fn staged_count(conn: &Connection) -> rusqlite::Result<u64> {
    let compacted = compacted(conn)?;
    let mut stmt = conn.prepare_cached("SELECT body FROM stage_slot")?;
    let mut rows = stmt.query([])?;
    let mut n = 0u64;
    while let Some(row) = rows.next()? {
        let body = row.get_ref(0)?.as_blob()?;
        if slot_seq(body).map_err(malformed)? > compacted {
            n += u64::from(slot_header(body).map_err(malformed)?.0);
        }
    }
    Ok(n)
}

fn slot_seq(body: &[u8]) -> Result<u64, Malformed> {
    let bytes: [u8; 8] = body
        .get(..8)
        .ok_or(Malformed)?
        .try_into()
        .map_err(|_| Malformed)?;
    Ok(u64::from_le_bytes(bytes))
}

/// The count's top bit marks a slot whose header ends with its last series and
/// whose times are steps from the sample before (the first from the base),
/// zigzag-coded. Slots without it (written by an earlier sitegate, compacted
/// at the next start) hold each time after the base.
const TIME_STEPS: u16 = 0x8000;
/// With [`TIME_STEPS`]: the slot's samples are packed (migration `0010`). A
/// sample starts with one varint, `series step << 4 | new time << 3 | tag`:
/// the step from the sample before (samples are sorted by series; one
/// device's properties are a step of one apart), whether a time step follows
/// (a device's properties share their poll's time: only its first sample
/// carries one), and the value's tag (its decimals `k`, or raw). Then the time
/// step if any, then the value's body (the zigzag mantissa, or 8 bytes). A
/// device's property with a four-digit value costs three bytes, against five
/// in a slot marked [`TIME_STEPS`] alone (a time step and the tag in the
/// value's varint).
const PACKED: u16 = 0x4000;
/// With [`TIME_STEPS`] and [`PACKED`]: the value's tag has four bits
/// (migration `0011`), `series step << 5 | new time << 4 | tag`, so a value
/// that is exactly a float32 (a float register's reading) is its 4 bytes
/// ([`F32_TAG`](super::codec::F32_TAG)), not 8.
const FLOAT32: u16 = 0x2000;
/// Most samples a slot written now may hold (the count's bits below its flags).
const COUNT_MAX: u16 = FLOAT32 - 1;

/// How a slot's samples are laid out, from its count's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// Each time after the base; no last series in the header.
    Offsets,
    /// [`TIME_STEPS`]: time steps, value tags in the value's varint.
    Steps,
    /// [`TIME_STEPS`] | [`PACKED`]: three-bit tags (float32s raw).
    Packed,
    /// [`TIME_STEPS`] | [`PACKED`] | [`FLOAT32`]: what a slot is written as.
    PackedF32,
}

impl Format {
    /// The format and the sample count of a slot header's count field.
    fn of(count: u16) -> (Format, u16) {
        if count & TIME_STEPS == 0 {
            (Format::Offsets, count)
        } else if count & PACKED == 0 {
            (Format::Steps, count & !TIME_STEPS)
        } else if count & FLOAT32 == 0 {
            (Format::Packed, count & COUNT_MAX)
        } else {
            (Format::PackedF32, count & COUNT_MAX)
        }
    }
}

/// Fills one slot: header, then per sample its head, time step and value.
struct SlotWriter {
    buf: Vec<u8>,
    size: usize,
    count: u16,
    series: i64,
    ts: i64,
    one: Vec<u8>,
}

impl SlotWriter {
    fn new(size: usize, seq: u64, base: i64) -> Self {
        let mut buf = Vec::with_capacity(size);
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(&0u16.to_le_bytes());
        buf.extend_from_slice(&base.to_le_bytes());
        // The last series, set by `finish`.
        buf.extend_from_slice(&[0; 4]);
        Self {
            buf,
            size,
            count: 0,
            series: 0,
            ts: base,
            one: Vec::with_capacity(32),
        }
    }

    /// Appends a sample if it fits (an empty slot always takes one).
    fn push(&mut self, series: i64, ts: i64, value: f64) -> bool {
        self.one.clear();
        // Series ids are the store's own rowids, counted from 1 and sorted
        // here: a step is never negative and far below 2^58, so the head's
        // five low bits never push one out.
        let step = (series - self.series) as u64;
        let new_time = ts != self.ts;
        let (tag, body) = split_value(value, true);
        put_varint(&mut self.one, step << 5 | u64::from(new_time) << 4 | tag);
        if new_time {
            put_varint(&mut self.one, zigzag(ts.wrapping_sub(self.ts)));
        }
        put_value_body(&mut self.one, body);
        if self.count > 0
            && (self.buf.len() + self.one.len() > self.size || self.count == COUNT_MAX)
        {
            return false;
        }
        self.buf.extend_from_slice(&self.one);
        self.count += 1;
        self.series = series;
        self.ts = ts;
        true
    }

    fn finish(mut self) -> Vec<u8> {
        let flags = TIME_STEPS | PACKED | FLOAT32;
        self.buf[8..10].copy_from_slice(&(self.count | flags).to_le_bytes());
        // A series id past u32 (never, in practice) reads as "any": no skip.
        let last = u32::try_from(self.series).unwrap_or(u32::MAX);
        self.buf[18..22].copy_from_slice(&last.to_le_bytes());
        self.buf.resize(self.size.max(self.buf.len()), 0);
        self.buf
    }
}

/// Calls `f(series, ts, value)` for each sample of a slot.
fn decode_slot(body: &[u8], mut f: impl FnMut(i64, i64, f64)) -> Result<(), Malformed> {
    decode_slot_range(body, i64::MIN, i64::MAX, &mut f)
}

/// As [`decode_slot`] for the series in `[lo, hi)`: samples are sorted by
/// series, so decoding stops at `hi`.
fn decode_slot_range(
    body: &[u8],
    lo: i64,
    hi: i64,
    mut f: impl FnMut(i64, i64, f64),
) -> Result<(), Malformed> {
    let (count, format, base, mut r) = slot_header(body)?;
    if format != Format::Offsets && i64::from(last_series(body)?) < lo {
        return Ok(());
    }
    let mut series = 0i64;
    let mut ts = base;
    for _ in 0..count {
        // A packed sample's head carries its time flag and value tag below
        // the series step; the older formats' first varint is the step alone.
        let head = r.varint()?;
        let (step, new_time, tag) = match format {
            Format::PackedF32 => (head >> 5, head & 16 != 0, Some(head & 15)),
            Format::Packed => (head >> 4, head & 8 != 0, Some(head & 7)),
            Format::Steps | Format::Offsets => (head, true, None),
        };
        series = series.wrapping_add(step as i64);
        if series >= hi {
            break;
        }
        ts = match format {
            _ if !new_time => ts,
            Format::Packed | Format::PackedF32 | Format::Steps => {
                ts.wrapping_add(unzigzag(r.varint()?))
            }
            Format::Offsets => base.wrapping_add(r.varint()? as i64),
        };
        let v = match tag {
            Some(tag) => r.value_body(tag)?,
            None => r.value()?,
        };
        if series >= lo {
            f(series, ts, v);
        }
    }
    Ok(())
}

/// A slot's sample count, its [`Format`], its base time, and a reader at its
/// first sample.
fn slot_header(body: &[u8]) -> Result<(u16, Format, i64, Reader<'_>), Malformed> {
    let head = body.get(..HEADER_BEFORE_STEPS).ok_or(Malformed)?;
    let (format, count) = Format::of(u16::from_le_bytes([head[8], head[9]]));
    let mut base = [0u8; 8];
    base.copy_from_slice(&head[10..18]);
    let header = match format {
        Format::Offsets => HEADER_BEFORE_STEPS,
        Format::Steps | Format::Packed | Format::PackedF32 => HEADER,
    };
    Ok((
        count,
        format,
        i64::from_le_bytes(base),
        Reader::new(body.get(header..).ok_or(Malformed)?),
    ))
}

/// The series of the last sample of a slot marked [`TIME_STEPS`].
fn last_series(body: &[u8]) -> Result<u32, Malformed> {
    let bytes: [u8; 4] = body
        .get(18..HEADER)
        .ok_or(Malformed)?
        .try_into()
        .map_err(|_| Malformed)?;
    Ok(u32::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests;
