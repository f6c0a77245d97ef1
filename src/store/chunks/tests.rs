use super::*;

/// A database with every migration: the index the reads use is the
/// shipped one.
fn db() -> Connection {
    let mut conn = Connection::open_in_memory().expect("db");
    super::super::stable_plans::enable(&conn).expect("stable plans");
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

#[test]
fn a_devices_properties_share_their_times_and_go_together() {
    let conn = db();
    let times: Vec<i64> = (0..300)
        .map(|i| 1_000_000 + i * 1000 + (i * 7) % 23)
        .collect();
    let power: Vec<(i64, f64)> = times.iter().map(|&t| (t, (t % 977) as f64)).collect();
    let volts: Vec<(i64, f64)> = times
        .iter()
        .map(|&t| (t, 230.0 + (t % 9) as f64 / 10.0))
        .collect();
    let other: Vec<(i64, f64)> = times.iter().map(|&t| (t + 1, 1.0)).collect();
    let mut writer = ChunkWriter::default();
    for (series, samples) in [(1, &power), (2, &volts), (3, &volts), (4, &other)] {
        writer.write(&conn, series, samples).expect("write");
    }
    let bodies: Vec<(i64, Vec<u8>)> = conn
        .prepare("SELECT id, body FROM raw_chunk ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("bodies");
    let holders: Vec<Option<i64>> = bodies
        .iter()
        .map(|(_, b)| times_of(b).expect("body"))
        .collect();
    let first = bodies[0].0;
    assert_eq!(holders, [None, Some(first), Some(first), None]);
    for (series, samples) in [(1, &power), (2, &volts), (3, &volts), (4, &other)] {
        assert_eq!(
            &read(&conn, series, 0, i64::MAX),
            samples,
            "series {series}"
        );
    }
    // The chunks of one end time go together, whatever the step's bound.
    let end = times[times.len() - 1];
    assert_eq!(delete_ended_before(&conn, end + 1, 1).expect("delete"), 900);
    assert_eq!(read(&conn, 4, 0, i64::MAX), other);
    assert!(read(&conn, 2, 0, i64::MAX).is_empty());
}
