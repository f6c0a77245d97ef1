//! The request time limit (`http.request_timeout_ms`): a request not answered
//! in time gets 503 `timeout`.
//!
//! A request that may change something (any method but GET and HEAD) runs on a
//! task of its own and is never cancelled halfway: a steering change that is
//! committing when the limit passes still completes (memory and disk stay in
//! step), and the client may retry with the same `Idempotency-Key` to get its
//! answer. GET and HEAD handlers only read, so they are simply dropped: no
//! task per request on the hot path of the latest-value reads.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorCode};

pub async fn limit_time(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    // A cheap clone (shared bytes): only read when something goes wrong.
    let uri = req.uri().clone();
    let path = uri.path();
    let answered = if method == Method::GET || method == Method::HEAD {
        tokio::time::timeout(limit, next.run(req)).await
    } else {
        let handler = tokio::spawn(next.run(req));
        match tokio::time::timeout(limit, handler).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => {
                tracing::error!(%method, %path, error = %e, "request handler failed");
                return ApiError::internal("the request handler failed").into_response();
            }
            Err(elapsed) => Err(elapsed),
        }
    };
    match answered {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(%method, %path, limit_ms = limit.as_millis() as u64, "request over its time limit");
            ApiError::new(
                ErrorCode::Timeout,
                format!(
                    "{method} {path} was not answered within {} ms (http.request_timeout_ms); a change it carried may still take effect: retry with the same Idempotency-Key",
                    limit.as_millis()
                ),
            )
            .into_response()
        }
    }
}
