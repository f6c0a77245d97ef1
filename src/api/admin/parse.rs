//! The body of `POST /admin/operations` into an operation id and a typed
//! [`OpRequest`], every problem naming its field and value.
//!
//! It must not run anything or check against the running config (the
//! operations layer does: a bus that does not exist).

use axum::http::HeaderMap;
use serde_json::{Map, Value};
use tracing::Level;

use crate::api::error::{ApiError, ErrorCode};
use crate::api::extract::json_kind;
use crate::ops::{
    parse_level, ConfigChange, OpId, OpKind, OpRequest, CONFIG_HISTORY_DEFAULT, CONFIG_HISTORY_MAX,
    LOG_BYTES_DEFAULT, LOG_BYTES_MAX, LOG_LINES_DEFAULT, LOG_LINES_MAX, SCAN_TIMEOUT_MS_DEFAULT,
    SCAN_UNITS_DEFAULT,
};

const FIELDS: &[&str] = &["id", "kind", "args"];
/// The longest wait for one unit's answer in a scan (the operations layer
/// checks the same bound).
const SCAN_TIMEOUT_MS_MAX: usize = 5_000;

/// An operation id (`ops::OpId`: 1 to 128 characters of `A-Z a-z 0-9 . _ -
/// : ~`), neither `.` nor `..`: an id is a path segment of
/// `/admin/operations/{id}`, where those two are dot segments a URL resolves
/// away. `field` names where it came from (`id`, `operation_id`).
pub fn op_id(raw: &str, field: &str) -> Result<OpId, ApiError> {
    if raw == "." || raw == ".." {
        return Err(ApiError::invalid_value(
            field,
            format!("{raw:?} is not an operation id: \".\" and \"..\" are dot segments, which a URL path cannot carry"),
        ));
    }
    OpId::parse(raw).map_err(|e| ApiError::invalid_value(field, e))
}

/// The operation's id (the body's `id`, else the `Idempotency-Key` header,
/// which the ops channel sets to the request's id) and its request.
pub fn operation(body: &Value, headers: &HeaderMap) -> Result<(OpId, OpRequest), ApiError> {
    let obj = body.as_object().ok_or_else(|| {
        ApiError::invalid_value(
            "",
            "the body must be a JSON object {\"kind\", \"args\"?, \"id\"?}",
        )
    })?;
    if let Some(k) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::unknown_field(k.clone(), FIELDS));
    }
    let id = body_id(obj, headers)?;
    let kind = match obj.get("kind") {
        None => return Err(ApiError::missing_field("kind")),
        Some(Value::String(s)) => OpKind::parse(s).ok_or_else(|| {
            ApiError::invalid_value(
                "kind",
                format!("{s:?} is not an operation: logs, bundle, restart, scan, config.get, config.history or config.put"),
            )
        })?,
        Some(other) => {
            return Err(ApiError::invalid_value(
                "kind",
                format!("kind must be a string, found {other}"),
            ))
        }
    };
    let empty = Map::new();
    let args = match obj.get("args") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(ApiError::invalid_value(
                "args",
                format!("args must be an object, found {other}"),
            ))
        }
    };
    let allowed = allowed_args(kind);
    if let Some(k) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::unknown_field(format!("args.{k}"), allowed));
    }
    Ok((id, request(kind, args)?))
}

/// The body's `id`, else the `Idempotency-Key` header, as an operation id.
fn body_id(obj: &Map<String, Value>, headers: &HeaderMap) -> Result<OpId, ApiError> {
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ApiError::invalid_value(
                "id",
                format!("id must be a string, found {other}"),
            ))
        }
        None => match headers.get("idempotency-key").and_then(|v| v.to_str().ok()) {
            Some(key) => key.trim().to_string(),
            None => {
                return Err(ApiError::for_field(
                    ErrorCode::MissingField,
                    "id",
                    "the field \"id\" is required but missing: give the operation an id (the body's \"id\" or an Idempotency-Key header); a repeated id returns the operation instead of running it again",
                ))
            }
        },
    };
    op_id(&id, "id")
}

/// The request of `kind` from its `args` (already closed to the members
/// [`allowed_args`] names).
fn request(kind: OpKind, args: &Map<String, Value>) -> Result<OpRequest, ApiError> {
    let request = match kind {
        OpKind::Logs => OpRequest::Logs {
            lines: count(args, "lines", LOG_LINES_DEFAULT, LOG_LINES_MAX)?,
            level: level(args)?,
            max_bytes: count(args, "maxBytes", LOG_BYTES_DEFAULT, LOG_BYTES_MAX)?,
        },
        OpKind::Bundle => OpRequest::Bundle,
        OpKind::Restart => OpRequest::Restart,
        OpKind::Scan => OpRequest::Scan {
            bus: text(args, "bus")?.ok_or_else(|| ApiError::missing_field("args.bus"))?,
            units: text(args, "units")?.unwrap_or_else(|| SCAN_UNITS_DEFAULT.into()),
            timeout_ms: count(
                args,
                "timeoutMs",
                SCAN_TIMEOUT_MS_DEFAULT as usize,
                SCAN_TIMEOUT_MS_MAX,
            )? as u64,
            site: text(args, "site")?,
        },
        OpKind::ConfigGet => OpRequest::ConfigGet,
        OpKind::ConfigHistory => OpRequest::ConfigHistory {
            limit: count(args, "limit", CONFIG_HISTORY_DEFAULT, CONFIG_HISTORY_MAX)?,
        },
        OpKind::GridEvents => OpRequest::GridEvents {
            since_ms: epoch_ms(args, "since")?,
            until_ms: epoch_ms(args, "until")?,
        },
        OpKind::ConfigPut => OpRequest::ConfigPut {
            change: config_change(args)?,
            allow_less_safe: match args.get("allowLessSafe") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(v) => {
                    return Err(ApiError::invalid_value(
                        "args.allowLessSafe",
                        format!("args.allowLessSafe must be true or false, found {v}"),
                    ))
                }
            },
        },
    };
    Ok(request)
}

/// The members `args` may hold for `kind` (`openapi.json` closes each
/// kind's `args` to these).
fn allowed_args(kind: OpKind) -> &'static [&'static str] {
    match kind {
        OpKind::Logs => &["lines", "level", "maxBytes"],
        OpKind::Bundle | OpKind::Restart | OpKind::ConfigGet => &[],
        OpKind::Scan => &["bus", "units", "timeoutMs", "site"],
        OpKind::ConfigHistory => &["limit"],
        OpKind::ConfigPut => &["toml", "patch", "patchToml", "allowLessSafe"],
        OpKind::GridEvents => &["since", "until"],
    }
}

/// `args.{key}`: a time in epoch ms, if given.
fn epoch_ms(args: &Map<String, Value>, key: &str) -> Result<Option<i64>, ApiError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().filter(|t| *t >= 0).map(Some).ok_or_else(|| {
            ApiError::invalid_value(
                format!("args.{key}"),
                format!("args.{key} must be a time in epoch ms (an integer from 0), found {v}"),
            )
        }),
    }
}

/// The fields that say what `config.put` changes; exactly one is given.
const CHANGE_FIELDS: [&str; 3] = ["toml", "patch", "patchToml"];

/// `args.toml` (a whole config), `args.patch` (a JSON merge patch over the
/// running config's TOML structure) or `args.patchToml` (a TOML merge
/// patch, the same rules without removal): exactly one.
fn config_change(args: &Map<String, Value>) -> Result<ConfigChange, ApiError> {
    let given: Vec<&str> = CHANGE_FIELDS
        .into_iter()
        .filter(|k| args.contains_key(*k))
        .collect();
    let (field, v) = match given.as_slice() {
        [] => {
            return Err(ApiError::for_field(
                ErrorCode::MissingField,
                "args.toml",
                "config.put needs one of args.toml (the whole config), args.patch (a JSON merge patch) or args.patchToml (a TOML merge patch)",
            ))
        }
        [one] => (*one, &args[*one]),
        [_, second, ..] => {
            return Err(ApiError::invalid_value(
                format!("args.{second}"),
                format!(
                    "give one of args.toml (the whole config), args.patch (a JSON merge patch) or args.patchToml (a TOML merge patch), not {}",
                    given.iter().map(|k| format!("args.{k}")).collect::<Vec<_>>().join(" and ")
                ),
            ))
        }
    };
    match (field, v) {
        ("toml", Value::String(t)) => Ok(ConfigChange::Whole(t.clone())),
        ("toml", v) => Err(ApiError::invalid_value(
            "args.toml",
            format!(
                "args.toml must be the whole config as TOML text, found {}",
                json_kind(v)
            ),
        )),
        ("patch", Value::Object(m)) => super::patch::entries(m)
            .map(ConfigChange::Patch)
            .map_err(|(path, detail)| ApiError::invalid_value(path, detail)),
        ("patch", v) => Err(ApiError::invalid_value(
            "args.patch",
            format!(
                "args.patch must be a JSON merge patch object, found {}",
                json_kind(v)
            ),
        )),
        (_, Value::String(t)) => crate::config::patch::from_toml(t)
            .map(ConfigChange::Patch)
            .map_err(|detail| {
                ApiError::invalid_value("args.patchToml", format!("args.patchToml is {detail}"))
            }),
        (_, v) => Err(ApiError::invalid_value(
            "args.patchToml",
            format!(
                "args.patchToml must be a TOML merge patch as text, found {}",
                json_kind(v)
            ),
        )),
    }
}

/// A whole number from 1 to `max`, written as an integer or not (`5.0`), as
/// JSON Schema's `integer` allows.
fn count(
    args: &Map<String, Value>,
    key: &str,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    match args.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_u64()
            .or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && (1.0..=max as f64).contains(f))
                    .map(|f| f as u64)
            })
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_value(
                    format!("args.{key}"),
                    format!("args.{key} must be an integer from 1 to {max}, found {v}"),
                )
            }),
    }
}

fn level(args: &Map<String, Value>) -> Result<Level, ApiError> {
    match args.get("level") {
        None => Ok(Level::INFO),
        Some(v) => v.as_str().and_then(parse_level).ok_or_else(|| {
            ApiError::invalid_value(
                "args.level",
                format!("args.level must be one of trace, debug, info, warn, error; found {v}"),
            )
        }),
    }
}

/// A non-empty string, trimmed; one of blanks only is kept as it is, so the
/// operations layer names it as the bus, site or units that are not there.
fn text(args: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match args.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(v) => Err(ApiError::invalid_value(
            format!("args.{key}"),
            format!("args.{key} must be a non-empty string, found {v}"),
        )),
    }
}

#[cfg(test)]
mod tests;
