//! Operational endpoints that need no token (`/healthz`, `/readyz`, `/metrics`), the 404
//! fallback, and the safety net that turns any stray non-problem error response
//! into problem+json.
//!
//! Nothing here reads device data beyond asking [`Live`](crate::telemetry::Live)
//! which devices were polled.

use axum::extract::{OriginalUri, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::error::{ApiError, ErrorCode, PROBLEM_JSON};
use super::ApiState;

/// `GET /healthz`: 200 `{"status":"ok"}` while the process serves.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: 200 `{"status":"ready"}` once every device was polled once (with
/// success or failure) and every registered check passes. Otherwise 503 as
/// `application/problem+json` with code `not_ready`, a `detail` joining the
/// reasons, and the extension member `"reasons": [..]` listing each one.
pub async fn readyz(State(state): State<ApiState>) -> Response {
    let mut reasons: Vec<String> = state
        .live
        .not_attempted()
        .into_iter()
        .map(|d| format!("device {d}: not polled yet"))
        .collect();
    reasons.extend(state.readiness.unmet());
    if reasons.is_empty() {
        let degraded = state.readiness.degraded();
        if degraded.is_empty() {
            return Json(json!({"status": "ready"})).into_response();
        }
        // Ready for control, with what does not work as it should.
        return Json(json!({"status": "degraded", "degraded": degraded})).into_response();
    }
    ApiError::new(
        ErrorCode::NotReady,
        format!("not ready: {}", reasons.join("; ")),
    )
    .with_extension("reasons", reasons)
    .into_response()
}

/// `GET /metrics`: the Prometheus text of every registered collector; 404
/// `not_found` with `http.metrics = false`.
pub async fn metrics(State(state): State<ApiState>, OriginalUri(uri): OriginalUri) -> Response {
    match &state.metrics {
        Some(registry) => (
            [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
            registry.render(),
        )
            .into_response(),
        None => ApiError::new(
            ErrorCode::NotFound,
            format!(
                "no resource at {:?}: metrics are turned off (http.metrics = false)",
                uri.path()
            ),
        )
        .into_response(),
    }
}

/// Router fallback: 404 `not_found` naming the path.
pub async fn not_found(OriginalUri(uri): OriginalUri) -> ApiError {
    ApiError::not_found(uri.path())
}

/// Largest stray error body kept as the problem's detail.
const MAX_STRAY_BODY: usize = 4096;

/// Outermost layer: an error response that is not problem+json (axum's 405 for a
/// wrong method, a rejection from an extractor someone used directly, a layer's
/// own answer) becomes one, keeping its status (422 becomes 400) and headers
/// (`Allow`, `WWW-Authenticate`, `Retry-After`). Its text becomes the detail.
pub async fn problem_safety_net(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let response = next.run(req).await;
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == PROBLEM_JSON.as_bytes());
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_STRAY_BODY)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let code = ErrorCode::for_status(status);
    let error = match code {
        ErrorCode::MethodNotAllowed => {
            let allow = parts
                .headers
                .get(header::ALLOW)
                .and_then(|v| v.to_str().ok());
            ApiError::method_not_allowed(method.as_str(), uri.path(), allow)
        }
        ErrorCode::NotFound if text.is_empty() => ApiError::not_found(uri.path()),
        _ if text.is_empty() => ApiError::new(
            code,
            status.canonical_reason().unwrap_or("error").to_lowercase(),
        ),
        _ => ApiError::new(code, text),
    };
    // axum answers 422 for JSON that does not fit a type; the contract says 400.
    let error = if status == StatusCode::UNPROCESSABLE_ENTITY {
        error
    } else {
        error.with_status(status)
    };
    // Keep the original headers (all values of each), with our body's type.
    let (problem_parts, body) = error.into_response().into_parts();
    let mut headers = std::mem::take(&mut parts.headers);
    headers.remove(header::CONTENT_LENGTH);
    for (name, value) in &problem_parts.headers {
        if name == header::CONTENT_TYPE || !headers.contains_key(name) {
            headers.insert(name.clone(), value.clone());
        }
    }
    parts.status = problem_parts.status;
    parts.headers = headers;
    Response::from_parts(parts, body)
}

/// On the reserve: health, readiness and metrics pass, anything else is
/// 503 `busy`.
pub async fn reserve_only(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    match req.uri().path() {
        "/healthz" | "/readyz" | "/metrics" => next.run(req).await,
        path => ApiError::new(
            ErrorCode::Busy,
            format!(
                "every connection slot is taken: this connection answers /healthz, /readyz and /metrics only, not {path:?}; try again shortly"
            ),
        )
        .into_response(),
    }
}
