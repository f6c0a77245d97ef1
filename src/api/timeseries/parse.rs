//! The time-series request (`openapi.json`, `POST .../measurements/time-series`):
//! validating the JSON body into a [`SeriesQuery`].
//!
//! Pure functions over `serde_json::Value`, so every rule is tested without HTTP.
//! The HTTP handler checks the content type and parses JSON (its own error
//! paths), then calls [`parse_request`] and renders the points. Nothing here reads the
//! store or knows about axum; the store gets the typed [`SeriesQuery`].

use serde_json::{Map, Value};

use crate::api::bounds::RESOLUTION_VALUE_MAX;
use crate::api::extract::json_kind;
use crate::api::time_range::RangeProblem;
use crate::model::{time, Property};
use crate::store::{Aggregation, SeriesQuery};

/// Longest range: 30 days.
pub const MAX_RANGE_MS: i64 = 2_592_000_000;
/// Most buckets one query may span.
pub const MAX_POINTS: i64 = 100_000;
/// Range types this agent answers.
pub const RANGE_TYPES: &[&str] = &["absolute"];
/// Resolution units and their length in ms.
pub const UNITS: &[(&str, i64)] = &[
    ("s", 1_000),
    ("min", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

const TOP_FIELDS: &[&str] = &["property", "range", "resolution", "aggregation"];
const RANGE_FIELDS: &[&str] = &["type", "start", "end"];
const RESOLUTION_FIELDS: &[&str] = &["value", "unit"];

/// Machine codes a bad request can get (spelled as `ErrorCode` in `openapi.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestCode {
    InvalidJson,
    UnknownField,
    MissingField,
    InvalidValue,
    UnknownUnit,
    UnknownProperty,
    InvalidRange,
    RangeTooLong,
    TooManyPoints,
}

/// Why a request was refused (always HTTP 400): code, field at fault, detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestError {
    pub code: RequestCode,
    /// Dotted path of the field at fault (`range.start`), when one is.
    pub field: Option<String>,
    pub detail: String,
}

impl RequestError {
    fn new(code: RequestCode, field: &str, detail: impl Into<String>) -> Self {
        Self {
            code,
            field: (!field.is_empty()).then(|| field.to_string()),
            detail: detail.into(),
        }
    }
}

type Result<T> = std::result::Result<T, RequestError>;

/// Validates a time-series body for a device offering `offered`. Checks run in a
/// fixed order (unknown fields, missing fields, then field by field), so one bad
/// body always gets the same error.
pub fn parse_request(body: &Value, offered: &[Property]) -> Result<SeriesQuery> {
    let obj = body.as_object().ok_or_else(|| {
        RequestError::new(
            RequestCode::InvalidJson,
            "",
            format!("the body must be a JSON object, found {}", json_kind(body)),
        )
    })?;
    check_fields(obj, "", TOP_FIELDS, &["property", "range", "resolution"])?;
    let property = property(&obj["property"], offered)?;
    let (start_ms, end_ms) = range(&obj["range"])?;
    let width_ms = resolution(&obj["resolution"], start_ms, end_ms)?;
    let aggregation = match obj.get("aggregation") {
        None | Some(Value::Null) => Aggregation::default_for(property.kind()),
        Some(v) => aggregation(v)?,
    };
    Ok(SeriesQuery {
        property,
        start_ms,
        end_ms,
        width_ms,
        aggregation,
    })
}

/// Epoch-aligned buckets of `width` that `[start, end)` touches.
pub fn bucket_count(start: i64, end: i64, width: i64) -> i64 {
    if end <= start || width <= 0 {
        return 0;
    }
    (end - 1).div_euclid(width) - start.div_euclid(width) + 1
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn check_fields(
    obj: &Map<String, Value>,
    prefix: &str,
    allowed: &[&str],
    required: &[&str],
) -> Result<()> {
    if let Some(unknown) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        let field = join(prefix, unknown);
        return Err(RequestError::new(
            RequestCode::UnknownField,
            &field,
            format!(
                "unknown field {field:?}; expected one of {}",
                allowed.join(", ")
            ),
        ));
    }
    if let Some(missing) = required.iter().find(|r| !obj.contains_key(**r)) {
        let field = join(prefix, missing);
        return Err(RequestError::new(
            RequestCode::MissingField,
            &field,
            format!("{field} is required"),
        ));
    }
    Ok(())
}

fn object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| {
        RequestError::new(
            RequestCode::InvalidValue,
            field,
            format!("{field} must be an object, found {}", json_kind(v)),
        )
    })
}

fn string<'a>(v: &'a Value, field: &str) -> Result<&'a str> {
    v.as_str().ok_or_else(|| {
        RequestError::new(
            RequestCode::InvalidValue,
            field,
            format!("{field} must be a string, found {}", json_kind(v)),
        )
    })
}

fn property(v: &Value, offered: &[Property]) -> Result<Property> {
    if v.is_array() {
        return Err(RequestError::new(
            RequestCode::InvalidValue,
            "property",
            "property must be exactly one property name, not an array",
        ));
    }
    let name = string(v, "property")?;
    if name.contains(',') {
        return Err(RequestError::new(
            RequestCode::InvalidValue,
            "property",
            format!("property must be exactly one property name, not a list: {name:?}"),
        ));
    }
    match name.parse::<Property>() {
        Ok(p) if offered.contains(&p) => Ok(p),
        _ => {
            let names: Vec<&str> = offered.iter().map(|p| p.name()).collect();
            Err(RequestError::new(
                RequestCode::UnknownProperty,
                "property",
                format!(
                    "unknown property {name:?}; this device offers: {}",
                    names.join(", ")
                ),
            ))
        }
    }
}

fn range(v: &Value) -> Result<(i64, i64)> {
    let obj = object(v, "range")?;
    check_fields(obj, "range", RANGE_FIELDS, &["type", "start", "end"])?;
    let ty = string(&obj["type"], "range.type")?;
    if !RANGE_TYPES.contains(&ty) {
        return Err(RequestError::new(
            RequestCode::InvalidValue,
            "range.type",
            format!(
                "unsupported range type {ty:?}; supported types: {}",
                RANGE_TYPES.join(", ")
            ),
        ));
    }
    let instant = |field: &str| -> Result<i64> {
        let s = string(&obj[field.trim_start_matches("range.")], field)?;
        time::parse_rfc3339(s).map_err(|e| {
            RequestError::new(RequestCode::InvalidValue, field, format!("{field}: {e}"))
        })
    };
    let start = instant("range.start")?;
    let end = instant("range.end")?;
    let names = ("range.start", "range.end");
    match crate::api::time_range::check(start, end, MAX_RANGE_MS, "30 days", names) {
        Ok(()) => {}
        Err(RangeProblem::Backwards(detail)) => {
            return Err(RequestError::new(
                RequestCode::InvalidRange,
                "range.end",
                detail,
            ))
        }
        Err(RangeProblem::TooLong(detail)) => {
            return Err(RequestError::new(
                RequestCode::RangeTooLong,
                "range",
                detail,
            ))
        }
    }
    Ok((start, end))
}

/// The largest whole f64 that converts to u64 exactly (2^53).
const MAX_WHOLE: f64 = 9_007_199_254_740_992.0;

fn resolution(v: &Value, start: i64, end: i64) -> Result<i64> {
    let obj = object(v, "resolution")?;
    check_fields(obj, "resolution", RESOLUTION_FIELDS, &["value", "unit"])?;
    let unit_name = string(&obj["unit"], "resolution.unit")?;
    let Some(&(_, unit_ms)) = UNITS.iter().find(|(n, _)| *n == unit_name) else {
        let names: Vec<&str> = UNITS.iter().map(|(n, _)| *n).collect();
        return Err(RequestError::new(
            RequestCode::UnknownUnit,
            "resolution.unit",
            format!(
                "unknown resolution unit {unit_name:?}; expected one of {}",
                names.join(", ")
            ),
        ));
    };
    let value = &obj["value"];
    // A whole number, written as an integer or not (`1.0`): the seed types
    // it as a number.
    let count = value
        .as_u64()
        .or_else(|| {
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && (1.0..=MAX_WHOLE).contains(f))
                .map(|f| f as u64)
        })
        .filter(|n| (1..=RESOLUTION_VALUE_MAX).contains(n))
        .ok_or_else(|| {
            RequestError::new(
                RequestCode::InvalidValue,
                "resolution.value",
                format!("resolution.value must be a whole number from 1 to {RESOLUTION_VALUE_MAX} (the most days whose width in ms fits a 64-bit integer), found {value}"),
            )
        })?;
    // At most RESOLUTION_VALUE_MAX days in ms: within i64 for every unit.
    let width = count as i64 * unit_ms;
    let buckets = bucket_count(start, end, width);
    if buckets > MAX_POINTS {
        return Err(RequestError::new(
            RequestCode::TooManyPoints,
            "resolution",
            format!("{buckets} buckets of {count} {unit_name} in the range; at most {MAX_POINTS} are allowed"),
        ));
    }
    Ok(width)
}

fn aggregation(v: &Value) -> Result<Aggregation> {
    let name = string(v, "aggregation")?;
    Aggregation::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Aggregation::ALL.iter().map(|a| a.name()).collect();
        RequestError::new(
            RequestCode::InvalidValue,
            "aggregation",
            format!(
                "unknown aggregation {name:?}; expected one of {}",
                names.join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests;
