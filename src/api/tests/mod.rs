//! Tests of the API through the real router: a `Live` built from a parsed config,
//! filled the way pollers fill it, and requests sent with `tower::ServiceExt`.

mod auth;
mod devices;
mod errors;
mod measurements;
mod ops;
mod timeseries;
mod wire;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;

use super::{hash_token, router, ApiState, PROBLEM_JSON};
use crate::model::{DeviceId, Property, Sample};
use crate::telemetry::{DeviceInfo, Live};

pub const READ: &str = "sgt_reader";
pub const STEER: &str = "sgt_steerer";
pub const BOTH: &str = "sgt_both";

/// Two sites, four devices (one explicit reference, the others derived), three
/// tokens: `reader` (read), `steerer` (steer), `both`.
pub fn config_text(auth: &str) -> String {
    format!(
        r#"
gateway_id = "test"
[http]
listen = ["127.0.0.1:8080"]
auth = "{auth}"
[[http.tokens]]
name = "reader"
sha256 = "{}"
scopes = ["read"]
[[http.tokens]]
name = "steerer"
sha256 = "{}"
scopes = ["steer"]
[[http.tokens]]
name = "both"
sha256 = "{}"
scopes = ["read", "steer"]

[[sites]]
reference = "ste_home"
name = "Home"
[[sites]]
reference = "ste_barn"
name = "Barn"

[[buses]]
name = "lan"
tcp = "127.0.0.1:502"

[[devices]]
reference = "dvc_pv1"
name = "Roof PV"
type = "inverter"
site = "ste_home"
bus = "lan"
unit_id = 1
[[devices]]
reference = "dvc_bat1"
name = "Battery"
type = "battery"
site = "ste_home"
bus = "lan"
unit_id = 2
[[devices]]
name = "Grid Meter"
type = "meter"
site = "ste_home"
bus = "lan"
unit_id = 3
[[devices]]
reference = "dvc_barn_pv"
name = "Barn PV"
type = "inverter"
site = "ste_barn"
bus = "lan"
unit_id = 4
"#,
        hex::encode(hash_token(READ)),
        hex::encode(hash_token(STEER)),
        hex::encode(hash_token(BOTH)),
    )
}

/// A state whose devices have catalogs but no samples and were never polled.
pub fn empty_state(auth: &str) -> ApiState {
    let config = crate::config::parse(&config_text(auth)).expect("test config is valid");
    let live = Arc::new(Live::new(&config.devices));
    ApiState::new(&config, live)
}

pub const T0: i64 = 1_719_474_475_595;

/// The test site after one poll of each device: pv1 and barn online with
/// samples, bat1 online with soc and activePower (not stateOfHealth), the meter
/// failed before ever answering.
pub fn state_with(auth: &str) -> ApiState {
    let state = empty_state(auth);
    let live = &state.live;
    let id = |r: &str| live.find(r).expect("device exists");
    let catalog = |r: &str, props: &[Property]| {
        live.set_catalog(id(r), props.to_vec(), DeviceInfo::default());
    };
    use Property::*;
    catalog("dvc_pv1", &[TotalEnergyProduced, ActivePower]); // out of order on purpose
    catalog(
        "dvc_bat1",
        &[ActivePower, Soc, StateOfHealth, TotalEnergyConsumed],
    );
    catalog("dvc_home_grid_meter", &[ActivePower]);
    catalog("dvc_barn_pv", &[ActivePower]);
    record(
        live,
        id("dvc_pv1"),
        &[(ActivePower, 3200.0), (TotalEnergyProduced, 1.5e6)],
    );
    record(
        live,
        id("dvc_bat1"),
        &[
            (Soc, 65.0),
            (ActivePower, -1250.5),
            (TotalEnergyConsumed, 42.0),
        ],
    );
    live.mark_failed(id("dvc_home_grid_meter"), "connection refused".into());
    record(live, id("dvc_barn_pv"), &[(ActivePower, 0.0)]);
    state
}

pub fn record(live: &Live, device: DeviceId, values: &[(Property, f64)]) {
    let samples: Vec<Sample> = values
        .iter()
        .map(|&(property, value)| Sample {
            device,
            property,
            ts_ms: T0,
            value,
        })
        .collect();
    live.record(device, &samples);
}

/// What came back: status, headers, body parsed as JSON (`Null` when empty).
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    /// The body as sent, for checks of key order and number format.
    pub raw: String,
}

impl Answer {
    /// Asserts a problem+json answer with this status and code; returns the body.
    #[track_caller]
    pub fn problem(&self, status: u16, code: &str) -> &Value {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert_eq!(
            self.headers[header::CONTENT_TYPE],
            PROBLEM_JSON,
            "body: {}",
            self.body
        );
        let b = &self.body;
        assert_eq!(b["code"], code, "body: {b}");
        assert_eq!(b["status"], status, "body: {b}");
        assert_eq!(b["type"], "about:blank", "body: {b}");
        assert!(b["title"].as_str().is_some_and(|t| !t.is_empty()), "{b}");
        assert!(b["detail"].as_str().is_some_and(|d| !d.is_empty()), "{b}");
        b
    }

    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert_eq!(self.status, StatusCode::OK, "body: {}", self.body);
        assert_eq!(self.headers[header::CONTENT_TYPE], "application/json");
        &self.body
    }
}

/// Sends one request through `app`.
pub async fn send(app: &Router, req: Request<Body>) -> Answer {
    let res = app
        .clone()
        .oneshot(req)
        .await
        .expect("router is infallible");
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .expect("body reads");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
    };
    Answer {
        status,
        headers,
        body,
        raw: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// Sends one request whose answer is plain text (test-only handlers).
pub async fn send_text(app: &Router, req: Request<Body>) -> (StatusCode, String) {
    let res = app
        .clone()
        .oneshot(req)
        .await
        .expect("router is infallible");
    let status = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .expect("body reads");
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

pub fn request(method: Method, uri: &str, token: Option<&str>) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    b.body(Body::empty()).expect("valid request")
}

/// `GET uri` with the read token through the standard router.
pub async fn get(state: &ApiState, uri: &str) -> Answer {
    send(
        &router(state.clone()),
        request(Method::GET, uri, Some(READ)),
    )
    .await
}
