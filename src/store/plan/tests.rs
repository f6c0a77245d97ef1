use super::*;

fn check(start: i64, end: i64, width: i64, expected: &[(Source, i64, i64)]) {
    let got: Vec<_> = plan(start, end, width, Held::ALL)
        .into_iter()
        .map(|s| (s.source, s.start, s.end))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn aligned_hours_use_only_hour_rollups() {
    check(0, 2 * HOUR_MS, HOUR_MS, &[(Source::Hour, 0, 2 * HOUR_MS)]);
}

#[test]
fn unaligned_edges_step_down_to_minutes_then_raw() {
    let start = HOUR_MS - MINUTE_MS - 500;
    let end = 3 * HOUR_MS + 2 * MINUTE_MS + 7;
    check(
        start,
        end,
        HOUR_MS,
        &[
            (Source::Raw, start, HOUR_MS - MINUTE_MS),
            (Source::Minute, HOUR_MS - MINUTE_MS, HOUR_MS),
            (Source::Hour, HOUR_MS, 3 * HOUR_MS),
            (Source::Minute, 3 * HOUR_MS, 3 * HOUR_MS + 2 * MINUTE_MS),
            (Source::Raw, 3 * HOUR_MS + 2 * MINUTE_MS, end),
        ],
    );
}

#[test]
fn widths_not_a_multiple_of_a_minute_read_raw() {
    check(0, 10 * HOUR_MS, 90_000, &[(Source::Raw, 0, 10 * HOUR_MS)]);
    check(5, 20_000, 1_000, &[(Source::Raw, 5, 20_000)]);
}

#[test]
fn minute_multiples_never_use_hours_unless_width_divides() {
    check(
        0,
        2 * HOUR_MS,
        5 * MINUTE_MS,
        &[(Source::Minute, 0, 2 * HOUR_MS)],
    );
    check(
        -30_000,
        90_000,
        MINUTE_MS,
        &[
            (Source::Raw, -30_000, 0),
            (Source::Minute, 0, MINUTE_MS),
            (Source::Raw, MINUTE_MS, 90_000),
        ],
    );
}

#[test]
fn a_range_inside_one_period_is_raw() {
    check(10, 20, HOUR_MS, &[(Source::Raw, 10, 20)]);
    check(20, 10, HOUR_MS, &[]);
}

#[test]
fn a_level_answers_only_from_what_it_holds_whole() {
    // Minutes deleted up to 00:05, hours up to 02:00.
    let held = Held {
        minute_from: 5 * MINUTE_MS,
        hour_from: 2 * HOUR_MS,
    };
    let got: Vec<_> = plan(0, 3 * HOUR_MS, HOUR_MS, held)
        .into_iter()
        .map(|s| (s.source, s.start, s.end))
        .collect();
    assert_eq!(
        got,
        [
            (Source::Raw, 0, 5 * MINUTE_MS),
            (Source::Minute, 5 * MINUTE_MS, 2 * HOUR_MS),
            (Source::Hour, 2 * HOUR_MS, 3 * HOUR_MS),
        ]
    );
    // A boundary inside a period counts from the next whole one.
    let held = Held {
        minute_from: 90_000,
        hour_from: i64::MIN,
    };
    let got: Vec<_> = plan(0, 3 * MINUTE_MS, MINUTE_MS, held)
        .into_iter()
        .map(|s| (s.source, s.start, s.end))
        .collect();
    assert_eq!(
        got,
        [
            (Source::Raw, 0, 2 * MINUTE_MS),
            (Source::Minute, 2 * MINUTE_MS, 3 * MINUTE_MS),
        ]
    );
}
