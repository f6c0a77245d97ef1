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
/// Most samples a slot written now may hold (the count's bits below its flags).
const COUNT_MAX: u16 = PACKED - 1;

/// How a slot's samples are laid out, from its count's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// Each time after the base; no last series in the header.
    Offsets,
    /// [`TIME_STEPS`]: time steps, value tags in the value's varint.
    Steps,
    /// [`TIME_STEPS`] | [`PACKED`].
    Packed,
}

impl Format {
    /// The format and the sample count of a slot header's count field.
    fn of(count: u16) -> (Format, u16) {
        if count & TIME_STEPS == 0 {
            (Format::Offsets, count)
        } else if count & PACKED == 0 {
            (Format::Steps, count & !TIME_STEPS)
        } else {
            (Format::Packed, count & COUNT_MAX)
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
        // here: a step is never negative and far below 2^59, so the head's
        // four low bits never push one out.
        let step = (series - self.series) as u64;
        let new_time = ts != self.ts;
        let (tag, body) = split_value(value);
        put_varint(&mut self.one, step << 4 | u64::from(new_time) << 3 | tag);
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
        self.buf[8..10].copy_from_slice(&(self.count | TIME_STEPS | PACKED).to_le_bytes());
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
        let step = match format {
            Format::Packed => head >> 4,
            Format::Steps | Format::Offsets => head,
        };
        series = series.wrapping_add(step as i64);
        if series >= hi {
            break;
        }
        ts = match format {
            Format::Packed if head & 8 == 0 => ts,
            Format::Packed | Format::Steps => ts.wrapping_add(unzigzag(r.varint()?)),
            Format::Offsets => base.wrapping_add(r.varint()? as i64),
        };
        let v = match format {
            Format::Packed => r.value_body(head & 7)?,
            Format::Steps | Format::Offsets => r.value()?,
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
        Format::Steps | Format::Packed => HEADER,
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
mod tests {
    use super::*;
    use crate::store::codec::put_value;

    fn ring() -> Connection {
        let conn = Connection::open_in_memory().expect("db");
        conn.execute_batch(
            "CREATE TABLE stage_slot (slot INTEGER PRIMARY KEY, body BLOB NOT NULL);
             CREATE TABLE store_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;",
        )
        .expect("schema");
        conn
    }

    fn staged(conn: &Connection, series: Option<i64>) -> Vec<Row> {
        let mut out = Vec::new();
        for_each_staged(conn, series, |s, t, v| out.push((s, t, v))).expect("read");
        out
    }

    #[test]
    fn slots_fit_whole_in_a_page() {
        for page in [512usize, 1024, 2048, 4096, 8192, 65536] {
            let slot = slot_bytes(page);
            let per_page = (page / 1024).max(1);
            assert!(per_page * (slot + 11) + 8 <= page, "{page}: {slot}");
            assert!(slot + 3 <= page - 35, "{page}: {slot} would overflow");
        }
        assert_eq!(slot_bytes(4096), 1011);
    }

    #[test]
    fn commits_reuse_free_slots_and_compaction_frees_them() {
        let conn = ring();
        let mut stage = Stage::load(&conn, 4096).expect("load");
        // 400 samples of 3 series: more than one slot.
        let rows: Vec<Row> = (0..400)
            .map(|i| {
                (
                    1 + i / 150,
                    1_717_200_000_000 + (i % 150) * 1000,
                    (i as f64) / 10.0,
                )
            })
            .collect();
        stage.write(&conn, &rows).expect("write");
        let slots: i64 = conn
            .query_row("SELECT count(*) FROM stage_slot", [], |r| r.get(0))
            .expect("count");
        assert!(slots >= 2, "{slots}");
        assert_eq!(staged(&conn, None), rows);
        assert_eq!(staged(&conn, Some(2)), rows[150..300].to_vec());
        assert!(stage.may_hold(1, rows[0].1) && !stage.may_hold(1, rows[0].1 - 1));
        assert_eq!(
            stage.rows_of(&conn, i64::MIN, i64::MAX).expect("rows"),
            rows
        );
        // Parts of at most 200 samples: each series whole, in order.
        assert_eq!(stage.partitions(200), [(1, 2), (2, 3), (3, i64::MAX)]);
        assert_eq!(stage.partitions(300), [(1, 3), (3, i64::MAX)]);
        assert_eq!(stage.partitions(100), [(1, 2), (2, 3), (3, i64::MAX)]);
        assert_eq!(
            stage.rows_of(&conn, 2, 3).expect("rows"),
            rows[150..300].to_vec()
        );

        stage.mark_compacted(&conn).expect("compacted");
        assert!(staged(&conn, None).is_empty());
        assert_eq!(stage.staged(), 0);
        // The next commits overwrite the same slots: no new rows.
        stage.write(&conn, &rows[..10]).expect("write");
        stage.write(&conn, &rows[10..20]).expect("write");
        let after: i64 = conn
            .query_row("SELECT count(*) FROM stage_slot", [], |r| r.get(0))
            .expect("count");
        assert_eq!(after, slots);
        let lengths: Vec<i64> = conn
            .prepare("SELECT DISTINCT length(body) FROM stage_slot")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("lengths");
        assert_eq!(lengths, [1011], "every slot keeps its size");

        // A fresh writer (a restart) sees the same state.
        let again = Stage::load(&conn, 4096).expect("reload");
        assert_eq!(again.staged(), 20);
        assert_eq!(
            again.rows_of(&conn, i64::MIN, i64::MAX).expect("rows"),
            rows[..20].to_vec()
        );
        assert_eq!(again.seq, stage.seq);
    }

    #[test]
    fn times_are_steps_and_slots_of_an_earlier_sitegate_still_read() {
        let conn = ring();
        let mut stage = Stage::load(&conn, 4096).expect("load");
        // Three devices' properties polled a few ms apart, out of order too.
        let base = 1_717_200_000_000;
        let rows: Vec<Row> = vec![
            (1, base + 40, 1.0),
            (2, base + 40, 2.0),
            (3, base + 40, 3.5),
            (4, base, 4.0),
            (5, base + 1000, -5.0),
            (6, base + 999, 6.0),
        ];
        stage.write(&conn, &rows).expect("write");
        assert_eq!(staged(&conn, None), rows);
        // The first earlier slot: the count without a flag, each time after
        // the base.
        let mut old = Vec::new();
        old.extend_from_slice(&(stage.seq + 1).to_le_bytes());
        old.extend_from_slice(&2u16.to_le_bytes());
        old.extend_from_slice(&base.to_le_bytes());
        for (step, off, v) in [(7u64, 500u64, 7.0), (1, 20, 8.0)] {
            put_varint(&mut old, step);
            put_varint(&mut old, off);
            put_value(&mut old, v);
        }
        old.resize(slot_bytes(4096), 0);
        // The second: time steps, and the value's tag in its varint.
        let steps = steps_slot(
            stage.seq + 2,
            base,
            &[(9, base + 7, 9.5), (10, base + 7, 0.1 + 0.2)],
        );
        for (slot, body) in [(99, &old), (100, &steps)] {
            conn.execute(
                "INSERT INTO stage_slot (slot, body) VALUES (?1, ?2)",
                params![slot, body],
            )
            .expect("old slot");
        }
        let mut all = staged(&conn, None);
        all.sort_by_key(|r| r.0);
        let mut want = rows.clone();
        want.extend([
            (7, base + 500, 7.0),
            (8, base + 20, 8.0),
            (9, base + 7, 9.5),
            (10, base + 7, 0.1 + 0.2),
        ]);
        assert_eq!(all, want);
        assert_eq!(staged_count(&conn).expect("count"), 10);
        assert_eq!(Stage::load(&conn, 4096).expect("reload").staged(), 10);
    }

    /// A slot as sitegate wrote it before samples were packed: [`TIME_STEPS`]
    /// alone, each sample its series step, time step and value.
    fn steps_slot(seq: u64, base: i64, rows: &[Row]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&seq.to_le_bytes());
        let count = u16::try_from(rows.len()).expect("a few rows") | TIME_STEPS;
        body.extend_from_slice(&count.to_le_bytes());
        body.extend_from_slice(&base.to_le_bytes());
        let last = rows.last().map_or(0, |r| r.0);
        body.extend_from_slice(&u32::try_from(last).expect("small").to_le_bytes());
        body.extend(steps_samples(base, rows));
        body.resize(slot_bytes(4096), 0);
        body
    }

    /// The samples of a [`steps_slot`].
    fn steps_samples(base: i64, rows: &[Row]) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut series, mut ts) = (0, base);
        for &(s, t, v) in rows {
            put_varint(&mut out, (s - series) as u64);
            put_varint(&mut out, zigzag(t - ts));
            put_value(&mut out, v);
            (series, ts) = (s, t);
        }
        out
    }

    /// Samples as a site's polls give them: `devices` devices of 13
    /// properties, each device's polled `ms` apart: values of a few digits
    /// with a decimal or none, an energy counter, a power factor.
    fn polls(devices: i64, ms: i64) -> Vec<Row> {
        let base = 1_717_200_000_000;
        let mut rows = Vec::new();
        for d in 0..devices {
            for p in 0..13 {
                let value = match p {
                    0 => 12_345_678.0 + d as f64,
                    1 => -(4_321.0 + d as f64),
                    2 => 230.1,
                    3 => 49.98,
                    4 => 0.95,
                    _ => 1_500.0 + (d * p) as f64,
                };
                rows.push((1 + d * 13 + p, base + d * ms, value));
            }
        }
        rows
    }

    #[test]
    fn packed_samples_read_back_exactly_in_fewer_bytes() {
        let conn = ring();
        let mut stage = Stage::load(&conn, 4096).expect("load");
        let mut rows = polls(40, 3);
        // A time going back, a series far from the one before.
        rows.push((100_000, rows[0].1 - 250, f64::MAX));
        rows.push((100_001, rows[0].1 + 86_400_000, -0.0));
        stage.write(&conn, &rows).expect("write");
        let back = staged(&conn, None);
        assert_eq!(back, rows);
        // Bit for bit: -0.0 and the largest f64 are no short decimals.
        let bits = |r: &[Row]| r.iter().map(|x| x.2.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&rows));
        assert_eq!(
            stage.rows_of(&conn, 14, 27).expect("device 1"),
            rows[13..26].to_vec()
        );

        // What the samples of such polls cost, against the slot format before.
        let rows = polls(20, 3);
        let base = rows[0].1;
        let mut slot = SlotWriter::new(1 << 20, 1, base);
        assert!(rows.iter().all(|&(s, t, v)| slot.push(s, t, v)));
        let packed = (slot.buf.len() - HEADER) as f64 / rows.len() as f64;
        let before = steps_samples(base, &rows).len() as f64 / rows.len() as f64;
        assert!(packed <= 3.5, "packed: {packed:.2} bytes a sample");
        assert!(packed <= 0.7 * before, "{packed:.2} against {before:.2}");
    }

    #[test]
    fn a_reader_after_a_slots_last_series_skips_it_undecoded() {
        let mut slot = SlotWriter::new(slot_bytes(4096), 1, 1_000);
        for series in [3, 4, 9] {
            assert!(slot.push(series, 1_000, 1.0));
        }
        let mut body = slot.finish();
        assert_eq!(last_series(&body), Ok(9));
        // Samples that cannot be decoded: only a skip gets past them.
        body[HEADER..].fill(0xff);
        let mut seen = 0;
        assert_eq!(
            decode_slot_range(&body, 10, 11, |_, _, _| seen += 1),
            Ok(())
        );
        assert!(decode_slot_range(&body, 9, 10, |_, _, _| seen += 1).is_err());
        assert_eq!(seen, 0);
    }

    #[test]
    fn a_part_reads_only_the_slots_that_hold_its_series() {
        let conn = ring();
        let mut stage = Stage::load(&conn, 4096).expect("load");
        // 600 samples of 3 series: several slots, each series in some of them.
        let rows: Vec<Row> = (0..600)
            .map(|i| {
                (
                    1 + i / 200,
                    1_717_200_000_000 + (i % 200) * 1000,
                    1000.5 + i as f64,
                )
            })
            .collect();
        stage.write(&conn, &rows).expect("write");
        // A reload finds the same spans in the slots themselves.
        let again = Stage::load(&conn, 4096).expect("reload");
        let spans = |st: &Stage| {
            st.live
                .iter()
                .map(|l| (l.slot, l.series))
                .collect::<Vec<_>>()
        };
        assert_eq!(spans(&again), spans(&stage));
        let only_first = stage
            .live
            .iter()
            .find(|l| l.series == (1, 1))
            .expect("a slot of series 1 alone")
            .slot;
        // Damage its samples, and its header's last series so that decoding
        // would not skip it either: only not reading it gets past it.
        let mut body: Vec<u8> = conn
            .query_row(
                "SELECT body FROM stage_slot WHERE slot = ?1",
                [only_first],
                |r| r.get(0),
            )
            .expect("body");
        body[18..HEADER].copy_from_slice(&u32::MAX.to_le_bytes());
        body[HEADER..].fill(0xff);
        conn.execute(
            "UPDATE stage_slot SET body = ?1 WHERE slot = ?2",
            params![body, only_first],
        )
        .expect("damage it");
        assert_eq!(
            stage.rows_of(&conn, 3, 4).expect("series 3"),
            rows[400..].to_vec()
        );
        assert!(stage.rows_of(&conn, 1, 2).is_err());
    }
}
