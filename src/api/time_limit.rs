//! The request time limit (`http.request_timeout_ms`): a request not answered
//! in time gets 503 `timeout`.
//!
//! A request that may change something (any method but GET and HEAD) runs on a
//! task of its own and is never cancelled halfway: a steering change that is
//! committing when the limit passes still completes (memory and disk stay in
//! step), and the client may retry with the same `Idempotency-Key` to get its
//! answer. GET and HEAD handlers only read, so they are simply dropped: no
//! task per request on the hot path of the latest-value reads.
//!
//! Changes in flight are bounded: at most [`MAX_CHANGES_IN_FLIGHT`] run at once
//! over HTTP and MQTT together (one past its time limit still counts until it
//! ends); past that a change is answered 429 `rate_limited` with `Retry-After`
//! before anything of it runs, so a stalled store cannot pile up tasks.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorCode};

/// Changes (any method but GET and HEAD) running at once.
pub const MAX_CHANGES_IN_FLIGHT: usize = 64;

/// The time limit and the slots of changes in flight, shared by every clone of
/// the router.
#[derive(Clone, Debug)]
pub struct TimeLimit {
    limit: Duration,
    changes: Arc<Semaphore>,
}

impl TimeLimit {
    pub fn new(limit: Duration) -> Self {
        Self {
            limit,
            changes: Arc::new(Semaphore::new(MAX_CHANGES_IN_FLIGHT)),
        }
    }

    /// Changes running now.
    pub fn changes_in_flight(&self) -> usize {
        MAX_CHANGES_IN_FLIGHT - self.changes.available_permits()
    }
}

pub async fn limit_time(State(t): State<TimeLimit>, req: Request, next: Next) -> Response {
    let limit = t.limit;
    let method = req.method().clone();
    // A cheap clone (shared bytes): only read when something goes wrong.
    let uri = req.uri().clone();
    let path = uri.path();
    let answered = if method == Method::GET || method == Method::HEAD {
        tokio::time::timeout(limit, next.run(req)).await
    } else {
        let Ok(slot) = t.changes.clone().try_acquire_owned() else {
            tracing::warn!(%method, %path, max = MAX_CHANGES_IN_FLIGHT, "changes in flight at their bound: refused");
            return ApiError::rate_limited(
                format!(
                    "{method} {path}: {MAX_CHANGES_IN_FLIGHT} changes are running already; retry with the same Idempotency-Key"
                ),
                1,
            )
            .into_response();
        };
        let handler = tokio::spawn(async move {
            let response = next.run(req).await;
            drop(slot);
            response
        });
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use axum::routing::post;
    use axum::{middleware, Router};
    use tokio::sync::Notify;

    use super::*;

    /// Changes that never end hold their slots past the time limit; the next
    /// one is refused 429 at once, and the slots come back when they end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_past_the_bound_are_refused_until_slots_free() {
        let open = Arc::new(AtomicBool::new(false));
        let release = Arc::new(Notify::new());
        let t = TimeLimit::new(Duration::from_millis(200));
        let (o, r) = (open.clone(), release.clone());
        let app = Router::new()
            .route(
                "/change",
                post(move || {
                    let (o, r) = (o.clone(), r.clone());
                    async move {
                        while !o.load(Ordering::SeqCst) {
                            r.notified().await;
                        }
                        "done"
                    }
                }),
            )
            .layer(middleware::from_fn_with_state(t.clone(), limit_time));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/change", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::new();

        let mut held = tokio::task::JoinSet::new();
        for _ in 0..MAX_CHANGES_IN_FLIGHT {
            let (client, url) = (client.clone(), url.clone());
            held.spawn(async move { client.post(url).send().await.unwrap().status() });
        }
        while let Some(status) = held.join_next().await {
            assert_eq!(status.unwrap(), 503, "a change over its time limit");
        }
        assert_eq!(t.changes_in_flight(), MAX_CHANGES_IN_FLIGHT);

        let refused = client.post(&url).send().await.unwrap();
        assert_eq!(refused.status(), 429);
        assert_eq!(refused.headers()["retry-after"], "1");
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["code"], "rate_limited");
        assert_eq!(t.changes_in_flight(), MAX_CHANGES_IN_FLIGHT);

        open.store(true, Ordering::SeqCst);
        release.notify_waiters();
        for _ in 0..100 {
            if t.changes_in_flight() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(t.changes_in_flight(), 0);
        let again = client.post(&url).send().await.unwrap();
        assert_eq!(again.status(), 200);
        server.abort();
    }
}
