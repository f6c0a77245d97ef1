use super::super::codec::{put_value_body, split_value};
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

/// A slot as sitegate wrote it with migration `0010`: [`PACKED`] with
/// three-bit tags, a float32 as its 8 bytes.
fn packed_slot_0010(seq: u64, base: i64, rows: &[Row]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&seq.to_le_bytes());
    let count = u16::try_from(rows.len()).expect("a few rows") | TIME_STEPS | PACKED;
    body.extend_from_slice(&count.to_le_bytes());
    body.extend_from_slice(&base.to_le_bytes());
    let last = rows.last().map_or(0, |r| r.0);
    body.extend_from_slice(&u32::try_from(last).expect("small").to_le_bytes());
    let (mut series, mut ts) = (0, base);
    for &(s, t, v) in rows {
        let (tag, value) = split_value(v, false);
        let new_time = t != ts;
        put_varint(
            &mut body,
            ((s - series) as u64) << 4 | u64::from(new_time) << 3 | tag,
        );
        if new_time {
            put_varint(&mut body, zigzag(t - ts));
        }
        put_value_body(&mut body, value);
        (series, ts) = (s, t);
    }
    body.resize(slot_bytes(4096), 0);
    body
}

#[test]
fn float32_readings_take_four_bytes_and_slots_of_0010_still_read() {
    let conn = ring();
    let mut stage = Stage::load(&conn, 4096).expect("load");
    let base = 1_717_200_000_000;
    // A float device's poll: full-precision float32s, one -0.
    let floats: Vec<Row> = (0..13)
        .map(|p| (1 + p, base, f64::from(1234.567f32 + p as f32 * 0.731)))
        .chain([(14, base, f64::from(-0.0f32))])
        .collect();
    stage.write(&conn, &floats).expect("write");
    let bits = |r: &[Row]| {
        r.iter()
            .map(|x| (x.0, x.1, x.2.to_bits()))
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&staged(&conn, None)), bits(&floats));
    let mut slot = SlotWriter::new(1 << 20, 1, base);
    assert!(floats.iter().all(|&(s, t, v)| slot.push(s, t, v)));
    let per_sample = (slot.buf.len() - HEADER) as f64 / floats.len() as f64;
    assert!(per_sample <= 5.0, "{per_sample:.2} bytes a float32 sample");

    // A slot of the format before, beside the current ones.
    let old = packed_slot_0010(
        stage.seq + 1,
        base + 1000,
        &[
            (20, base + 1000, f64::from(0.1f32)),
            (21, base + 1001, 49.99),
        ],
    );
    conn.execute(
        "INSERT INTO stage_slot (slot, body) VALUES (?1, ?2)",
        params![500, old],
    )
    .expect("old slot");
    let mut all = staged(&conn, None);
    all.sort_by_key(|r| r.0);
    let mut want = floats.clone();
    want.extend([
        (20, base + 1000, f64::from(0.1f32)),
        (21, base + 1001, 49.99),
    ]);
    assert_eq!(bits(&all), bits(&want));
    assert_eq!(
        Stage::load(&conn, 4096).expect("reload").staged(),
        want.len()
    );
}
