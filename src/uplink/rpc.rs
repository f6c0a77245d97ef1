//! The RPC bridge: a `{root}/rpc/request` payload becomes an HTTP request to the
//! very router the HTTP listeners serve, so every endpoint answers over MQTT with
//! the same body and the same problem.
//!
//! Who may publish requests is the broker's ACL; with `require_token` the payload
//! must also carry an API token, checked like a bearer token. A request larger
//! than [`MAX_REQUEST`] is answered 413 without being parsed beyond its id.
//! Requests that may change state (POST, DELETE) are answered once per id
//! ([`Dedup`]) and also carry it as `Idempotency-Key` (steering scopes keys per
//! caller, so an id is "once" per token). A GET's answer is kept in memory
//! ([`ReadAnswers`]) so a duplicate read gets its first answer too; reads leave
//! nothing on disk. Requests are marked `api::Transport("mqtt")` for
//! steering's audit log.
//!
//! The ops channel (`{root}/ops/request`) is a second bridge of the same
//! shape ([`Channel::Ops`]): it serves `/admin/...` only, where the RPC
//! channel refuses it, so the broker's ACL on each topic decides who may
//! steer and who may operate. Without a token an ops request runs as caller
//! `mqtt` with the `admin` scope only. Operations are idempotent by id on
//! their own (the id becomes the operation's), and an operation's state
//! changes while it runs, so the ops channel keeps no answers. This file
//! must not interpret endpoints or bodies beyond that path prefix.

use std::sync::Arc;

use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::Request;
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::dedup::{Dedup, Seen};
use super::payload::{self, RpcRequest};
use super::read_answers::{ReadAnswers, ReadKey};
use crate::api::{ApiError, Auth, Caller, ErrorCode, Transport, DEFAULT_BODY_LIMIT};
use crate::config::Scope;
use crate::model::time::now_ms;

/// The name steering's audit log records for requests without a token.
pub const MQTT_CALLER: &str = "mqtt";

/// What the audit log records as the transport of RPC requests.
pub const MQTT_TRANSPORT: Transport = Transport("mqtt");

/// The largest request payload answered: the API's body limit and room for the
/// envelope (id, method, path, token).
pub const MAX_REQUEST: usize = DEFAULT_BODY_LIMIT + 8 * 1024;

/// Which channel a bridge serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    /// `{root}/rpc/request`: the partner API, everything but `/admin/...`.
    Rpc,
    /// `{root}/ops/request`: `/admin/...` only.
    Ops,
}

/// The path prefix of the operations channel's routes.
const ADMIN_PREFIX: &str = "/admin";

impl Channel {
    /// 403 `forbidden` for a path the channel does not serve.
    fn admits(self, path: &str) -> Result<(), ApiError> {
        let admin = path
            .strip_prefix(ADMIN_PREFIX)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?']));
        match (self, admin) {
            (Channel::Rpc, true) => Err(ApiError::forbidden(format!(
                "{path:?} is an operation: the RPC channel serves the partner API only; operations go to the ops channel ({{root}}/ops/request)"
            ))),
            (Channel::Ops, false) => Err(ApiError::forbidden(format!(
                "{path:?} is not an operation: the ops channel serves /admin/... only; the partner API is on {{root}}/rpc/request"
            ))),
            _ => Ok(()),
        }
    }
}

/// Answers RPC payloads.
pub struct Bridge {
    router: Router,
    auth: Arc<Auth>,
    require_token: bool,
    dedup: Dedup,
    reads: ReadAnswers,
    channel: Channel,
}

/// A finished answer: the id it belongs to (if the request had a usable one) and
/// the response payload.
#[derive(Debug)]
pub struct Answer {
    pub id: Option<String>,
    pub payload: Vec<u8>,
    /// The request was over [`MAX_REQUEST`] (answered 413).
    pub oversized: bool,
}

impl Bridge {
    /// The RPC channel's bridge.
    pub fn new(router: Router, auth: Arc<Auth>, require_token: bool, dedup: Dedup) -> Self {
        Self {
            router,
            auth,
            require_token,
            dedup,
            reads: ReadAnswers::default(),
            channel: Channel::Rpc,
        }
    }

    /// The ops channel's bridge (same router, `/admin/...` only).
    pub fn ops(router: Router, auth: Arc<Auth>, require_token: bool, dedup: Dedup) -> Self {
        Self {
            channel: Channel::Ops,
            ..Self::new(router, auth, require_token, dedup)
        }
    }

    /// Answers one request payload. Never fails: every problem is an answer.
    pub async fn answer(&self, raw: &[u8]) -> Answer {
        if raw.len() > MAX_REQUEST {
            let id = payload::rpc_id(raw);
            let err = ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the RPC request is {} bytes, larger than the limit of {MAX_REQUEST} bytes",
                    raw.len()
                ),
            );
            let payload = render(id.as_deref(), err.into_response()).await;
            return Answer {
                id,
                payload,
                oversized: true,
            };
        }
        let request = match payload::parse_rpc_request(raw) {
            Ok(r) => r,
            Err(rejection) => {
                let payload =
                    render(rejection.id.as_deref(), rejection.error.into_response()).await;
                return answer(rejection.id, payload);
            }
        };
        let id = request.id.clone();
        let caller = match self.caller(&request) {
            Ok(c) => c,
            Err(e) => {
                let payload = render(Some(&id), e.into_response()).await;
                return answer(Some(id), payload);
            }
        };
        if let Err(e) = self.channel.admits(&request.path) {
            let payload = render(Some(&id), e.into_response()).await;
            return answer(Some(id), payload);
        }
        if self.channel == Channel::Ops {
            let response = self.call(request, caller).await;
            return answer(Some(id.clone()), render(Some(&id), response).await);
        }
        if !request.method.changes_state() {
            let key = ReadKey {
                caller: caller.name().to_string(),
                id: id.clone(),
            };
            if let Some(first) = self.reads.get(&key, now_ms()) {
                tracing::debug!(rpc_id = %id, "duplicate RPC read: first answer sent again");
                return answer(Some(id), first);
            }
            let response = self.call(request, caller).await;
            let payload = self
                .reads
                .keep(key, render(Some(&id), response).await, now_ms());
            return answer(Some(id), payload);
        }
        let claim = match self.dedup.claim(&id, now_ms()).await {
            Ok(Seen::Answered(payload)) => {
                tracing::debug!(rpc_id = %id, "duplicate RPC request: first answer sent again");
                return answer(Some(id), payload);
            }
            Ok(Seen::New(claim)) => claim,
            Err(e) => {
                // Without the record we cannot promise "once": refuse rather than risk it.
                tracing::error!(rpc_id = %id, error = %e, "RPC dedup record unavailable");
                let err =
                    ApiError::internal("the RPC duplicate record is unavailable; retry later");
                let payload = render(Some(&id), err.into_response()).await;
                return answer(Some(id), payload);
            }
        };
        let response = self.call(request, caller).await;
        let payload = render(Some(&id), response).await;
        if let Err(e) = self.dedup.record(claim, payload.clone(), now_ms()).await {
            tracing::error!(rpc_id = %id, error = %e, "cannot record the RPC answer");
        }
        answer(Some(id), payload)
    }

    /// The answer to a request the uplink has no room for: 429 `rate_limited`
    /// with `detail`, without parsing more than its id. Nothing is recorded, so
    /// a retry with the same id is served as new.
    pub async fn busy(raw: &[u8], detail: String) -> Answer {
        let id = payload::rpc_id(raw);
        let payload = render(
            id.as_deref(),
            ApiError::rate_limited(detail, 1).into_response(),
        )
        .await;
        answer(id, payload)
    }

    fn caller(&self, request: &RpcRequest) -> Result<Caller, ApiError> {
        match &request.token {
            Some(token) => self.auth.authenticate_token(token),
            None if self.require_token => Err(ApiError::unauthorized(
                "this gateway demands an API token in the RPC payload (\"token\")",
                false,
            )),
            None => Ok(match self.channel {
                Channel::Rpc => Caller::new(MQTT_CALLER, &[Scope::Read, Scope::Steer]),
                Channel::Ops => Caller::new(MQTT_CALLER, &[Scope::Admin]),
            }),
        }
    }

    async fn call(&self, request: RpcRequest, caller: Caller) -> Response {
        let mut builder = Request::builder()
            .method(request.method.as_http())
            .uri(&request.path);
        if request.method.changes_state() {
            builder = builder.header("idempotency-key", idempotency_key(&request.id));
        }
        let body = match &request.body {
            Some(b) => {
                builder = builder.header(CONTENT_TYPE, "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        let mut http = match builder.body(body) {
            Ok(r) => r,
            Err(_) => {
                return ApiError::invalid_value(
                    "path",
                    format!("{:?} is not a valid request path", request.path),
                )
                .into_response()
            }
        };
        http.extensions_mut().insert(caller);
        http.extensions_mut().insert(MQTT_TRANSPORT);
        match self.router.clone().oneshot(http).await {
            Ok(r) => r,
            Err(never) => match never {},
        }
    }
}

/// The answer in place of one of `bytes` bytes, over the `max` bytes a
/// message to the broker may carry (`bound` says whose limit:
/// `mqtt.max_outgoing_kb` or the broker's Maximum Packet Size): 413
/// `payload_too_large`, saying so and how to ask for less.
pub async fn answer_too_large(id: Option<&str>, bytes: usize, max: usize, bound: &str) -> Vec<u8> {
    let err = ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!(
            "the answer is {bytes} bytes, more than the {max} bytes a message to the broker may carry \
             ({bound}): ask for less, e.g. a shorter time range or a coarser resolution, \
             or several requests"
        ),
    );
    render(id, err.into_response()).await
}

fn answer(id: Option<String>, payload: Vec<u8>) -> Answer {
    Answer {
        id,
        payload,
        oversized: false,
    }
}

/// The `Idempotency-Key` for an RPC id: the id itself when it is a valid key
/// (visible ASCII, which steering takes as is), else `sha256:` and the hex digest
/// of its bytes, so every id (any UTF-8, spaces, control characters) gets a
/// distinct key that fits the header.
pub fn idempotency_key(id: &str) -> String {
    if id.bytes().all(|b| b.is_ascii_graphic()) {
        id.to_string()
    } else {
        use sha2::Digest;
        format!(
            "sha256:{}",
            hex::encode(sha2::Sha256::digest(id.as_bytes()))
        )
    }
}

/// The response payload for a router (or bridge) answer. The body is JSON when it
/// parses as JSON, a string otherwise (`/metrics` text), `null` when empty.
async fn render(id: Option<&str>, response: Response) -> Vec<u8> {
    let status = response.status().as_u16();
    let body = match response.into_body().collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
            }
        }
        Err(e) => Value::String(format!("cannot read the answer: {e}")),
    };
    payload::rpc_response(id, status, &body)
}

#[cfg(test)]
mod tests {
    use super::{idempotency_key, Channel};

    #[test]
    fn each_channel_serves_its_own_paths() {
        for admin in [
            "/admin",
            "/admin/operations",
            "/admin?x=1",
            "/admin/operations/a/bundle",
        ] {
            assert!(Channel::Ops.admits(admin).is_ok(), "{admin}");
            assert!(Channel::Rpc.admits(admin).is_err(), "{admin}");
        }
        for partner in ["/devices", "/administer", "/sites/admin", "/healthz"] {
            assert!(Channel::Rpc.admits(partner).is_ok(), "{partner}");
            assert!(Channel::Ops.admits(partner).is_err(), "{partner}");
        }
    }

    #[test]
    fn every_id_becomes_a_valid_distinct_key() {
        assert_eq!(idempotency_key("r-1"), "r-1");
        let spaced = idempotency_key(" r-1");
        assert_ne!(spaced, idempotency_key("r-1"));
        assert_ne!(spaced, idempotency_key("r-1 "));
        for id in [" r-1", "läuft", "a\nb", "tab\there"] {
            let key = idempotency_key(id);
            assert!(
                key.starts_with("sha256:") && key.len() == 71,
                "{id:?}: {key}"
            );
            assert!(axum::http::HeaderValue::from_str(&key).is_ok());
        }
    }
}
