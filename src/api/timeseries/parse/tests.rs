use serde_json::json;

use super::*;

const OFFERED: &[Property] = &[Property::ActivePower, Property::TotalEnergyProduced];

fn body() -> Value {
    json!({
        "property": "activePower",
        "range": {"type": "absolute", "start": "2024-06-01T00:00:00Z", "end": "2024-06-02T00:00:00Z"},
        "resolution": {"value": 1, "unit": "h"}
    })
}

fn with(path: &[&str], value: Value) -> Value {
    let mut b = body();
    let mut cur = &mut b;
    for key in &path[..path.len() - 1] {
        cur = &mut cur[*key];
    }
    cur[path[path.len() - 1]] = value;
    b
}

fn without(path: &[&str]) -> Value {
    let mut b = body();
    let mut cur = &mut b;
    for key in &path[..path.len() - 1] {
        cur = &mut cur[*key];
    }
    cur.as_object_mut()
        .expect("object")
        .remove(path[path.len() - 1]);
    b
}

/// Asserts the error code and field of a refused body.
fn refused(b: Value, code: RequestCode, field: Option<&str>) -> RequestError {
    let e = parse_request(&b, OFFERED).expect_err("must be refused");
    assert_eq!((e.code, e.field.as_deref()), (code, field), "{}", e.detail);
    e
}

#[test]
fn a_valid_body_becomes_a_query_with_the_kind_default() {
    let q = parse_request(&body(), OFFERED).expect("valid");
    assert_eq!(q.property, Property::ActivePower);
    assert_eq!(q.start_ms, 1_717_200_000_000);
    assert_eq!(q.end_ms, 1_717_286_400_000);
    assert_eq!(q.width_ms, 3_600_000);
    assert_eq!(q.aggregation, Aggregation::Mean);

    let counter = with(&["property"], json!("totalEnergyProduced"));
    assert_eq!(
        parse_request(&counter, OFFERED).expect("valid").aggregation,
        Aggregation::Last
    );
    let explicit = with(&["aggregation"], json!("max"));
    assert_eq!(
        parse_request(&explicit, OFFERED)
            .expect("valid")
            .aggregation,
        Aggregation::Max
    );
}

#[test]
fn offsets_are_read_as_utc() {
    let b = with(&["range", "start"], json!("2024-06-01T02:00:00+02:00"));
    assert_eq!(
        parse_request(&b, OFFERED).expect("valid").start_ms,
        1_717_200_000_000
    );
}

#[test]
fn thirty_days_exactly_pass_and_one_ms_more_is_too_long() {
    let b = with(&["range", "end"], json!("2024-07-01T00:00:00Z"));
    let b = with_resolution(b, 1, "d");
    let q = parse_request(&b, OFFERED).expect("exactly 30 days");
    assert_eq!(q.end_ms - q.start_ms, MAX_RANGE_MS);
    let b = with(&["range", "end"], json!("2024-07-01T00:00:00.001Z"));
    let e = refused(
        with_resolution(b, 1, "d"),
        RequestCode::RangeTooLong,
        Some("range"),
    );
    assert!(e.detail.contains("2592000001"), "{}", e.detail);
}

fn with_resolution(mut b: Value, value: u64, unit: &str) -> Value {
    b["resolution"] = json!({"value": value, "unit": unit});
    b
}

#[test]
fn an_empty_or_reversed_range_is_refused() {
    let b = with(&["range", "end"], json!("2024-06-01T00:00:00Z"));
    let e = refused(b, RequestCode::InvalidRange, Some("range.end"));
    assert!(e.detail.contains("empty"), "{}", e.detail);
    let b = with(&["range", "end"], json!("2024-05-31T23:59:59Z"));
    let e = refused(b, RequestCode::InvalidRange, Some("range.end"));
    assert!(e.detail.contains("reversed"), "{}", e.detail);
}

#[test]
fn too_many_points_are_refused_and_the_limit_itself_passes() {
    // 100,000 one-second buckets exactly (27 h 46 min 40 s).
    let b = with(&["range", "end"], json!("2024-06-02T03:46:40Z"));
    parse_request(&with_resolution(b.clone(), 1, "s"), OFFERED).expect("100,000 buckets");
    // Shifting the same length off the second grid touches one bucket more.
    let mut b = with_resolution(body(), 1, "s");
    b["range"]["start"] = json!("2024-06-01T00:00:00.500Z");
    b["range"]["end"] = json!("2024-06-02T03:46:40.500Z");
    refused(b, RequestCode::TooManyPoints, Some("resolution"));
}

#[test]
fn resolution_units_and_values_are_checked() {
    refused(
        with(&["resolution", "unit"], json!("w")),
        RequestCode::UnknownUnit,
        Some("resolution.unit"),
    );
    refused(
        with(&["resolution", "unit"], json!("ms")),
        RequestCode::UnknownUnit,
        Some("resolution.unit"),
    );
    for bad in [json!(0), json!(-1), json!(1.5), json!("1"), json!(null)] {
        refused(
            with(&["resolution", "value"], bad),
            RequestCode::InvalidValue,
            Some("resolution.value"),
        );
    }
    let q = parse_request(&with_resolution(body(), 15, "min"), OFFERED).expect("15 min");
    assert_eq!(q.width_ms, 900_000);
    let huge = with(&["resolution", "value"], json!(u64::MAX));
    refused(huge, RequestCode::InvalidValue, Some("resolution.value"));
    // Wider than the range: one bucket.
    let q = parse_request(&with_resolution(body(), 400, "d"), OFFERED).expect("wide");
    assert_eq!(q.width_ms, 400 * 86_400_000);
}

/// Every value up to the stated maximum is taken in every unit (written as an
/// integer or as a whole float); one more is refused naming the maximum.
#[test]
fn resolution_values_are_taken_up_to_their_maximum() {
    let max = RESOLUTION_VALUE_MAX;
    for (unit, ms) in UNITS {
        for value in [json!(max), json!(max as f64), json!(max - 1)] {
            let b = with(&["resolution"], json!({"value": value, "unit": unit}));
            let q = parse_request(&b, OFFERED).unwrap_or_else(|e| panic!("{b}: {}", e.detail));
            assert_eq!(q.width_ms, value.as_f64().unwrap_or_default() as i64 * ms);
            let buckets = bucket_count(q.start_ms, q.end_ms, q.width_ms);
            assert!((1..=2).contains(&buckets), "{buckets}");
        }
        let e = refused(
            with(&["resolution"], json!({"value": max + 1, "unit": unit})),
            RequestCode::InvalidValue,
            Some("resolution.value"),
        );
        assert!(e.detail.contains(&max.to_string()), "{}", e.detail);
    }
}

#[test]
fn property_must_be_one_offered_name() {
    let e = refused(
        with(&["property"], json!("soc")),
        RequestCode::UnknownProperty,
        Some("property"),
    );
    assert!(
        e.detail.contains("activePower") && e.detail.contains("totalEnergyProduced"),
        "{}",
        e.detail
    );
    refused(
        with(&["property"], json!("bogus")),
        RequestCode::UnknownProperty,
        Some("property"),
    );
    refused(
        with(&["property"], json!(["activePower"])),
        RequestCode::InvalidValue,
        Some("property"),
    );
    refused(
        with(&["property"], json!("activePower,totalEnergyProduced")),
        RequestCode::InvalidValue,
        Some("property"),
    );
    refused(
        with(&["property"], json!(7)),
        RequestCode::InvalidValue,
        Some("property"),
    );
}

#[test]
fn bad_dates_name_their_field() {
    refused(
        with(&["range", "start"], json!("2024-06-01")),
        RequestCode::InvalidValue,
        Some("range.start"),
    );
    refused(
        with(&["range", "end"], json!("tomorrow")),
        RequestCode::InvalidValue,
        Some("range.end"),
    );
    refused(
        with(&["range", "end"], json!(1717200000000_i64)),
        RequestCode::InvalidValue,
        Some("range.end"),
    );
}

#[test]
fn only_absolute_ranges_are_supported() {
    let e = refused(
        with(&["range", "type"], json!("relative")),
        RequestCode::InvalidValue,
        Some("range.type"),
    );
    assert!(e.detail.contains("absolute"), "{}", e.detail);
}

#[test]
fn unknown_and_missing_fields_are_named() {
    refused(
        with(&["extra"], json!(1)),
        RequestCode::UnknownField,
        Some("extra"),
    );
    refused(
        with(&["range", "tz"], json!("UTC")),
        RequestCode::UnknownField,
        Some("range.tz"),
    );
    refused(
        with(&["resolution", "step"], json!(1)),
        RequestCode::UnknownField,
        Some("resolution.step"),
    );
    refused(
        without(&["property"]),
        RequestCode::MissingField,
        Some("property"),
    );
    refused(
        without(&["range"]),
        RequestCode::MissingField,
        Some("range"),
    );
    refused(
        without(&["resolution"]),
        RequestCode::MissingField,
        Some("resolution"),
    );
    refused(
        without(&["range", "start"]),
        RequestCode::MissingField,
        Some("range.start"),
    );
    refused(
        without(&["resolution", "unit"]),
        RequestCode::MissingField,
        Some("resolution.unit"),
    );
}

#[test]
fn aggregation_must_be_known_and_null_means_default() {
    refused(
        with(&["aggregation"], json!("avg")),
        RequestCode::InvalidValue,
        Some("aggregation"),
    );
    let q = parse_request(&with(&["aggregation"], Value::Null), OFFERED).expect("null");
    assert_eq!(q.aggregation, Aggregation::Mean);
}

#[test]
fn a_body_that_is_not_an_object_is_refused() {
    refused(json!([1, 2]), RequestCode::InvalidJson, None);
    refused(
        with(&["range"], json!("2024")),
        RequestCode::InvalidValue,
        Some("range"),
    );
}

#[test]
fn bucket_count_counts_touched_aligned_buckets() {
    assert_eq!(bucket_count(0, 3_600_000, 3_600_000), 1);
    assert_eq!(bucket_count(1, 3_600_001, 3_600_000), 2);
    assert_eq!(bucket_count(-1, 1, 1000), 2);
    assert_eq!(bucket_count(5, 5, 1000), 0);
}
