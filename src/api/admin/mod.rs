//! `/admin/...`: the operations channel over HTTP, for tokens with the
//! `admin` scope (the uplink's `{root}/ops/request` reaches the same routes).
//! Start an operation, read one, read the audit history, fetch a bundle's
//! chunks.
//!
//! Handlers parse, call [`crate::ops::Ops`], and render; they must not run
//! or decide anything themselves.

mod parse;
mod patch;
pub mod render;

use std::time::Duration;

use axum::extract::{RawQuery, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use super::bounds::BUNDLE_CHUNK_MAX;
use super::error::{ApiError, ErrorCode};
use super::extract::read_json;
use super::{ApiPath, ApiState, Caller, QueryParams, Transport, DEFAULT_BODY_LIMIT};
use crate::ops::{OpId, Ops, OpsError, Source, AUDIT_KEEP};

/// How long `POST /admin/operations` waits for a new operation to end
/// before it answers with the state it is in.
pub const POST_WAIT: Duration = Duration::from_secs(2);
const DEFAULT_HISTORY: usize = 50;

impl From<OpsError> for ApiError {
    fn from(e: OpsError) -> Self {
        match e {
            OpsError::NotFound(id) => ApiError::new(
                ErrorCode::NotFound,
                format!("no operation {:?} (neither running nor in the audit history)", id.as_str()),
            ),
            OpsError::Invalid { field, detail } => {
                ApiError::invalid_value(format!("args.{field}"), format!("args.{field}: {detail}"))
            }
            e @ OpsError::IdReused { .. } => {
                ApiError::for_field(ErrorCode::IdempotencyKeyReused, "id", e.to_string())
            }
            e @ OpsError::Busy { .. } => ApiError::rate_limited(e.to_string(), 5),
            e @ (OpsError::NoBundle(_) | OpsError::NoChunk { .. }) => {
                ApiError::new(ErrorCode::NotFound, e.to_string())
            }
            OpsError::Store(crate::store::StoreError::Busy { running, waiting }) => {
                ApiError::rate_limited(
                    format!("the store is busy: {running} reads run and {waiting} wait; try again shortly"),
                    1,
                )
            }
            e @ (OpsError::Store(_) | OpsError::Corrupt(_)) => {
                tracing::error!(error = %e, "operations audit history unavailable");
                ApiError::internal(format!("the operations' audit history is unavailable: {e}"))
            }
        }
    }
}

fn ops(state: &ApiState) -> Result<&Ops, ApiError> {
    state
        .ops
        .as_ref()
        .ok_or_else(|| ApiError::internal("operations are not served by this agent"))
}

fn op_id(raw: &str) -> Result<OpId, ApiError> {
    parse::op_id(raw, "operation_id")
}

/// `POST /admin/operations`: 202 with a new operation (as it stands after at
/// most [`POST_WAIT`]), 200 with the operation its id already names.
pub async fn post_operation(
    State(state): State<ApiState>,
    caller: Caller,
    req: Request,
) -> Result<Response, ApiError> {
    let transport = req.extensions().get::<Transport>().map_or("http", |t| t.0);
    let headers = req.headers().clone();
    let body = read_json(req, DEFAULT_BODY_LIMIT).await?;
    let (id, request) = parse::operation(&body, &headers)?;
    let ops = ops(&state)?;
    let source = Source {
        transport: transport.to_string(),
        caller: caller.name().to_string(),
    };
    let (op, new) = ops.submit(id, request, source).await?;
    if !new {
        return Ok(Json(render::operation(&op)).into_response());
    }
    let op = ops.settled(&op.id, POST_WAIT).await?;
    Ok((StatusCode::ACCEPTED, Json(render::operation(&op))).into_response())
}

/// `GET /admin/operations?limit=N`: the audit history, newest first.
pub async fn list_operations(
    State(state): State<ApiState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let q = QueryParams::parse(query.as_deref(), &["limit"])?;
    let limit = q.count("limit", AUDIT_KEEP, DEFAULT_HISTORY)?;
    let ops = ops(&state)?.history(limit).await?;
    Ok(Json(Value::Array(
        ops.iter().map(render::operation).collect(),
    )))
}

/// `GET /admin/operations/{operation_id}`.
pub async fn get_operation(
    State(state): State<ApiState>,
    ApiPath(id): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    QueryParams::parse(query.as_deref(), &[])?;
    let op = ops(&state)?.get(&op_id(&id)?).await?;
    Ok(Json(render::operation(&op)))
}

/// A bundle's chunk index: 0 to [`BUNDLE_CHUNK_MAX`], the most any bundle
/// has (a chunk past the bundle's own count is `not_found` later).
fn chunk_index(s: &str) -> Result<usize, ApiError> {
    s.parse::<usize>()
        .ok()
        .filter(|n| *n <= BUNDLE_CHUNK_MAX)
        .ok_or_else(|| {
            ApiError::invalid_value(
                "chunk",
                format!("chunk must be an integer from 0 to {BUNDLE_CHUNK_MAX} (a bundle has at most {} chunks), found {s:?}", BUNDLE_CHUNK_MAX + 1),
            )
        })
}

/// `GET /admin/operations/{operation_id}/bundle?chunk=N`: one chunk of a
/// bundle operation's text (chunk 0 by default).
pub async fn get_bundle_chunk(
    State(state): State<ApiState>,
    ApiPath(id): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let q = QueryParams::parse(query.as_deref(), &["chunk"])?;
    let index = match q.optional("chunk")? {
        None => 0,
        Some(s) => chunk_index(s)?,
    };
    let id = op_id(&id)?;
    let chunk = ops(&state)?.bundle_chunk(&id, index)?;
    Ok(Json(render::chunk(id.as_str(), &chunk)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_indexes_are_taken_up_to_the_most_a_bundle_has() {
        for s in ["0", "1", "21"] {
            assert_eq!(chunk_index(s).ok(), s.parse().ok(), "{s}");
        }
        for s in ["22", "999", "-1", "x", "1.5", ""] {
            let e = chunk_index(s).expect_err(s);
            assert_eq!(
                (e.code(), e.field()),
                (ErrorCode::InvalidValue, Some("chunk"))
            );
            assert!(e.detail().contains("0 to 21"), "{}", e.detail());
        }
    }

    #[test]
    fn operation_ids_in_the_path_follow_the_ids_rule() {
        assert!(op_id("op-42").is_ok());
        for bad in [".", "..", "a/b", "a b", ""] {
            let e = op_id(bad).expect_err(bad);
            assert_eq!(e.field(), Some("operation_id"), "{bad}");
        }
    }
}
