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
    let id = OpId::parse(&id).map_err(|e| ApiError::invalid_value("id", e))?;
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
    let allowed: &[&str] = match kind {
        OpKind::Logs => &["lines", "level", "maxBytes"],
        OpKind::Bundle | OpKind::Restart | OpKind::ConfigGet => &[],
        OpKind::Scan => &["bus", "units", "timeoutMs", "site"],
        OpKind::ConfigHistory => &["limit"],
        OpKind::ConfigPut => &["toml", "patch", "patchToml", "allowLessSafe"],
    };
    if let Some(k) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::unknown_field(format!("args.{k}"), allowed));
    }
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
            timeout_ms: count(args, "timeoutMs", SCAN_TIMEOUT_MS_DEFAULT as usize, 5_000)? as u64,
            site: text(args, "site")?,
        },
        OpKind::ConfigGet => OpRequest::ConfigGet,
        OpKind::ConfigHistory => OpRequest::ConfigHistory {
            limit: count(args, "limit", CONFIG_HISTORY_DEFAULT, CONFIG_HISTORY_MAX)?,
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
    Ok((id, request))
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

fn text(args: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match args.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
        Some(v) => Err(ApiError::invalid_value(
            format!("args.{key}"),
            format!("args.{key} must be a non-empty string, found {v}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(body: Value) -> Result<(OpId, OpRequest), (String, Option<String>)> {
        operation(&body, &HeaderMap::new())
            .map_err(|e| (e.code().as_str().to_string(), e.field().map(str::to_string)))
    }

    #[test]
    fn requests_resolve_their_defaults() {
        let (id, r) = check(json!({"id": "op-1", "kind": "logs"})).expect("ok");
        assert_eq!(id.as_str(), "op-1");
        assert_eq!(
            r,
            OpRequest::Logs {
                lines: LOG_LINES_DEFAULT,
                level: Level::INFO,
                max_bytes: LOG_BYTES_DEFAULT
            }
        );
        let (_, r) =
            check(json!({"id": "s", "kind": "scan", "args": {"bus": "pv", "units": "1-3"}}))
                .expect("ok");
        assert_eq!(
            r,
            OpRequest::Scan {
                bus: "pv".into(),
                units: "1-3".into(),
                timeout_ms: SCAN_TIMEOUT_MS_DEFAULT,
                site: None
            }
        );
        let mut headers = HeaderMap::new();
        headers.insert("idempotency-key", "from-header".parse().expect("value"));
        let (id, _) = operation(&json!({"kind": "bundle"}), &headers).expect("ok");
        assert_eq!(id.as_str(), "from-header");
    }

    #[test]
    fn a_toml_merge_patch_is_a_patch() {
        let (_, r) = check(json!({"id": "p", "kind": "config.put", "args": {"patchToml": "[ops]\nrollback_after_s = 30\n", "allowLessSafe": true}}))
            .expect("ok");
        let (_, j) = check(json!({"id": "p", "kind": "config.put", "args": {"patch": {"ops": {"rollback_after_s": 30}}, "allowLessSafe": true}}))
            .expect("ok");
        assert_eq!(r, j);
        let e = operation(
            &json!({"id": "p", "kind": "config.put", "args": {"patchToml": "[ops]\nrollback_after_s = 3 0\n"}}),
            &HeaderMap::new(),
        )
        .expect_err("bad TOML");
        let detail = e.detail().to_string();
        assert!(
            detail.starts_with(
                "args.patchToml is not valid TOML at line 2, column 20 (\"rollback_after_s = 3 0\"): "
            ),
            "{detail}"
        );
        assert!(detail.contains("rollback_after_s = 3 0"), "{detail}");
        let e = operation(
            &json!({"id": "p", "kind": "config.put", "args": {"toml": "", "patchToml": ""}}),
            &HeaderMap::new(),
        )
        .expect_err("two");
        assert!(
            e.detail().ends_with("not args.toml and args.patchToml"),
            "{}",
            e.detail()
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases = [
            (json!({"kind": "logs"}), "missing_field", "id"),
            (json!({"id": "a/b", "kind": "logs"}), "invalid_value", "id"),
            (json!({"id": "a"}), "missing_field", "kind"),
            (
                json!({"id": "a", "kind": "reboot"}),
                "invalid_value",
                "kind",
            ),
            (
                json!({"id": "a", "kind": "logs", "x": 1}),
                "unknown_field",
                "x",
            ),
            (
                json!({"id": "a", "kind": "logs", "args": {"lines": 0}}),
                "invalid_value",
                "args.lines",
            ),
            (
                json!({"id": "a", "kind": "logs", "args": {"lines": 1001}}),
                "invalid_value",
                "args.lines",
            ),
            (
                json!({"id": "a", "kind": "logs", "args": {"level": "loud"}}),
                "invalid_value",
                "args.level",
            ),
            (
                json!({"id": "a", "kind": "logs", "args": {"maxBytes": 300000}}),
                "invalid_value",
                "args.maxBytes",
            ),
            (
                json!({"id": "a", "kind": "restart", "args": {"now": true}}),
                "unknown_field",
                "args.now",
            ),
            (
                json!({"id": "a", "kind": "scan"}),
                "missing_field",
                "args.bus",
            ),
            (
                json!({"id": "a", "kind": "scan", "args": {"bus": 3}}),
                "invalid_value",
                "args.bus",
            ),
            (
                json!({"id": "a", "kind": "config.put"}),
                "missing_field",
                "args.toml",
            ),
            (
                json!({"id": "a", "kind": "config.put", "args": {"toml": 1}}),
                "invalid_value",
                "args.toml",
            ),
            (
                json!({"id": "a", "kind": "config.put", "args": {"patch": "x"}}),
                "invalid_value",
                "args.patch",
            ),
            (
                json!({"id": "a", "kind": "config.put", "args": {"patch": {}, "toml": ""}}),
                "invalid_value",
                "args.patch",
            ),
            (
                json!({"id": "a", "kind": "config.put", "args": {"patch": {"a": [null]}}}),
                "invalid_value",
                "args.patch.a[0]",
            ),
            (
                json!({"id": "a", "kind": "config.put", "args": {"patchToml": "[ops]\nx = ", "patch": {}}}),
                "invalid_value",
                "args.patchToml",
            ),
            (
                json!({"id": "a", "kind": "config.put", "args": {"patchToml": {"ops": {}}}}),
                "invalid_value",
                "args.patchToml",
            ),
            (
                json!({"id": "a", "kind": "config.put", "args": {"patchToml": "[ops]\nrollback_after_s = "}}),
                "invalid_value",
                "args.patchToml",
            ),
            (
                json!({"id": "a", "kind": "config.put", "args": {"toml": "", "allowLessSafe": "yes"}}),
                "invalid_value",
                "args.allowLessSafe",
            ),
            (
                json!({"id": "a", "kind": "config.history", "args": {"limit": 201}}),
                "invalid_value",
                "args.limit",
            ),
            (
                json!({"id": "a", "kind": "config.get", "args": {"x": 1}}),
                "unknown_field",
                "args.x",
            ),
        ];
        for (body, code, field) in cases {
            let (c, f) = check(body.clone()).expect_err(&body.to_string());
            assert_eq!((c.as_str(), f.as_deref()), (code, Some(field)), "{body}");
        }
    }
}
