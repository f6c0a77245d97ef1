//! `GET /events?limit=N`: what happened on the site, newest first (the
//! agent's event list, `crate::events`): each with its time, the device or
//! site it concerns, its kind and a detail.
//!
//! Renders the list; it must not keep or decide events.

use axum::extract::{RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::query::QueryParams;
use super::ApiState;
use crate::events::{Event, Subject, KEPT};

/// `GET /events`.
pub async fn list(
    State(state): State<ApiState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let q = QueryParams::parse(query.as_deref(), &["limit"])?;
    let limit = q.count("limit", KEPT, KEPT)?;
    let log = state
        .events
        .as_ref()
        .ok_or_else(|| ApiError::internal("the event list is not running"))?;
    let events = log.newest_first();
    Ok(Json(Value::Array(
        events.iter().take(limit).map(render).collect(),
    )))
}

/// One event: `deviceReference` or `siteReference` by what it concerns
/// (neither for the agent's own).
pub fn render(e: &Event) -> Value {
    let mut v = json!({
        "timestamp": e.at_ms,
        "kind": e.kind.wire_name(),
        "detail": e.detail,
    });
    match &e.subject {
        Subject::Device(d) => v["deviceReference"] = json!(d),
        Subject::Site(s) => v["siteReference"] = json!(s),
        Subject::Agent => {}
    }
    v
}
