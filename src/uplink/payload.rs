//! The JSON bodies of the uplink (`docs/mqtt.md`): status, measurement batches, RPC requests
//! and responses.
//!
//! Pure: bytes in, bytes out. Bodies that the HTTP API also serves (device listing,
//! measurement elements, problems) come from `api` so both transports agree; this
//! file must not invent its own shapes for them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{ApiError, MeasurementView};
use crate::model::{Property, Sample};
use crate::telemetry::Reading;

/// `{root}/status` while connected.
pub fn status_online(version: &str, started_at_ms: i64) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Online<'a> {
        online: bool,
        version: &'a str,
        started_at: i64,
    }
    to_vec(&Online {
        online: true,
        version,
        started_at: started_at_ms,
    })
}

/// `{root}/status` as the will (and on a clean shutdown).
pub fn status_offline() -> Vec<u8> {
    br#"{"online":false}"#.to_vec()
}

/// One device's batch: `{"reference", "measurements": [...], "seq"}`, elements
/// shaped as in `GET /devices/{ref}/measurements`, in the order given.
pub fn measurements(reference: &str, samples: &[Sample], seq: u64) -> Vec<u8> {
    #[derive(Serialize)]
    struct Batch<'a> {
        reference: &'a str,
        measurements: Vec<MeasurementView>,
        seq: u64,
    }
    to_vec(&Batch {
        reference,
        measurements: samples
            .iter()
            .map(|s| view(s.property, s.ts_ms, s.value))
            .collect(),
        seq,
    })
}

fn view(property: Property, ts_ms: i64, value: f64) -> MeasurementView {
    MeasurementView::new(property, Reading { ts_ms, value })
}

fn to_vec<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs (strings, integers, finite-or-null numbers)
    // into a Vec cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

/// The methods an RPC request may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum RpcMethod {
    #[serde(rename = "GET")]
    Get,
    #[serde(rename = "POST")]
    Post,
    #[serde(rename = "DELETE")]
    Delete,
}

impl RpcMethod {
    pub fn as_http(self) -> axum::http::Method {
        match self {
            RpcMethod::Get => axum::http::Method::GET,
            RpcMethod::Post => axum::http::Method::POST,
            RpcMethod::Delete => axum::http::Method::DELETE,
        }
    }

    /// Whether the request may change state (and so must never run twice).
    pub fn changes_state(self) -> bool {
        !matches!(self, RpcMethod::Get)
    }
}

/// A parsed `{root}/rpc/request` payload.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcRequest {
    pub id: String,
    pub method: RpcMethod,
    /// Path and query, starting with `/`.
    pub path: String,
    pub body: Option<Value>,
    pub token: Option<String>,
}

/// Why a request payload could not be used. With `id` known the answer goes to
/// its response topic; without one only an MQTT 5 response topic can carry it.
#[derive(Debug)]
pub struct RpcRejection {
    pub id: Option<String>,
    pub error: ApiError,
}

const RPC_FIELDS: &[&str] = &["id", "method", "path", "body", "token"];

/// Parses and checks a request payload. Every problem is an [`ApiError`] of the
/// same kind the HTTP API would give (`invalid_json`, `missing_field`, ...).
pub fn parse_rpc_request(payload: &[u8]) -> Result<RpcRequest, RpcRejection> {
    let reject = |id: Option<String>, error| RpcRejection { id, error };
    let value: Value = serde_json::from_slice(payload).map_err(|e| {
        reject(
            None,
            ApiError::invalid_json(format!("the RPC request is not JSON: {e}")),
        )
    })?;
    let Value::Object(mut map) = value else {
        return Err(reject(
            None,
            ApiError::invalid_json("the RPC request must be a JSON object"),
        ));
    };
    let id = match map.remove("id") {
        Some(Value::String(id)) if super::topics::valid_rpc_id(&id) => id,
        Some(other) => {
            return Err(reject(
                None,
                ApiError::invalid_value(
                    "id",
                    format!("{other} is not an RPC id: a string of 1 to 128 characters without '/', '+', '#'"),
                ),
            ))
        }
        None => return Err(reject(None, ApiError::missing_field("id"))),
    };
    let with_id = |error| reject(Some(id.clone()), error);
    if let Some(unknown) = map.keys().find(|k| !RPC_FIELDS.contains(&k.as_str())) {
        return Err(with_id(ApiError::unknown_field(
            unknown.clone(),
            RPC_FIELDS,
        )));
    }
    let method = match map.remove("method") {
        None => return Err(with_id(ApiError::missing_field("method"))),
        Some(m) => serde_json::from_value::<RpcMethod>(m.clone()).map_err(|_| {
            with_id(ApiError::invalid_value(
                "method",
                format!("{m} is not one of \"GET\", \"POST\", \"DELETE\""),
            ))
        })?,
    };
    let path = match map.remove("path") {
        Some(Value::String(p)) if p.starts_with('/') => p,
        Some(other) => {
            return Err(with_id(ApiError::invalid_value(
                "path",
                format!("{other} is not a path starting with '/'"),
            )))
        }
        None => return Err(with_id(ApiError::missing_field("path"))),
    };
    let body = match map.remove("body") {
        None | Some(Value::Null) => None,
        Some(b) => Some(b),
    };
    let token = match map.remove("token") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t),
        Some(other) => {
            return Err(with_id(ApiError::invalid_value(
                "token",
                format!("{other} is not a string"),
            )))
        }
    };
    Ok(RpcRequest {
        id,
        method,
        path,
        body,
        token,
    })
}

/// The id of a request payload that is not parsed as a whole (too large): the
/// top-level `"id"` when the payload is a JSON object with a usable one. The
/// other members are skipped without being kept.
pub fn rpc_id(payload: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct IdOnly {
        id: Option<Value>,
    }
    match serde_json::from_slice::<IdOnly>(payload).ok()?.id? {
        Value::String(id) if super::topics::valid_rpc_id(&id) => Some(id),
        _ => None,
    }
}

/// `{"id", "status", "body"}`; `id` is `null` when the request had none usable.
pub fn rpc_response(id: Option<&str>, status: u16, body: &Value) -> Vec<u8> {
    #[derive(Serialize)]
    struct Response<'a> {
        id: Option<&'a str>,
        status: u16,
        body: &'a Value,
    }
    to_vec(&Response { id, status, body })
}

#[cfg(test)]
mod tests;
