//! `POST /devices/{ref}/measurements/time-series` through the real router, with a
//! store in a temp folder: the answer's shape and every refusal `openapi.json` names.

use axum::body::Body;
use axum::http::{header, Method, Request};
use serde_json::{json, Value};

use super::{send, state_with, Answer, READ, STEER};
use crate::api::{router, ApiState};
use crate::config::StorageConfig;
use crate::model::{Property, Sample};
use crate::store::StoreHandle;

/// 2024-06-01T00:00:00Z.
const DAY0: i64 = 1_717_200_000_000;
const PATH: &str = "/devices/dvc_pv1/measurements/time-series";

/// The router over `state_with` plus a store holding, for dvc_pv1, one
/// activePower and one totalEnergyProduced sample a minute for two days.
async fn app() -> (axum::Router, tempfile::TempDir, StoreHandle) {
    let dir = tempfile::tempdir().expect("tempdir");
    let state: ApiState = state_with("tokens");
    let config = StorageConfig {
        path: dir.path().join("api.db"),
        retention_days: 36_500,
        rollup_retention_days: 36_500,
        minute_rollup_retention_days: Some(36_500),
        ..StorageConfig::default()
    };
    let devices = state
        .live
        .devices()
        .iter()
        .map(|d| d.reference.clone())
        .collect();
    let store = StoreHandle::open(&config, devices).expect("store");
    let pv = state.live.find("dvc_pv1").expect("pv1");
    let mut batch = Vec::new();
    for i in 0..2 * 1440i64 {
        let ts = DAY0 + i * 60_000;
        let value = if i % 2 == 0 { 1000.0 } else { 2000.0 };
        for (property, value) in [
            (Property::ActivePower, value),
            (Property::TotalEnergyProduced, i as f64),
        ] {
            batch.push(Sample {
                device: pv,
                property,
                ts_ms: ts,
                value,
            });
        }
    }
    store.sample_sender().send(batch).await.expect("send");
    store.flush().await.expect("flush");
    (router(state.with_store(store.clone())), dir, store)
}

fn post(body: &str, content_type: Option<&str>, token: Option<&str>) -> Request<Body> {
    let mut b = Request::builder().method(Method::POST).uri(PATH);
    if let Some(ct) = content_type {
        b = b.header(header::CONTENT_TYPE, ct);
    }
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    b.body(Body::from(body.to_string())).expect("request")
}

async fn ask(app: &axum::Router, body: Value) -> Answer {
    send(
        app,
        post(&body.to_string(), Some("application/json"), Some(READ)),
    )
    .await
}

fn body(start: &str, end: &str, value: u64, unit: &str) -> Value {
    json!({
        "property": "activePower",
        "range": {"type": "absolute", "start": start, "end": end},
        "resolution": {"value": value, "unit": unit}
    })
}

#[tokio::test]
async fn hourly_means_and_counter_lasts() {
    let (app, _dir, store) = app().await;
    let a = ask(
        &app,
        body("2024-06-01T00:30:00Z", "2024-06-01T03:00:00Z", 1, "h"),
    )
    .await;
    let b = a.ok();
    assert_eq!(
        b["time"],
        json!([
            "2024-06-01T00:00:00Z",
            "2024-06-01T01:00:00Z",
            "2024-06-01T02:00:00Z"
        ])
    );
    assert_eq!(b["data"], json!([1500, 1500, 1500]));

    let mut counter = body("2024-06-01T00:00:00Z", "2024-06-01T02:00:00Z", 1, "h");
    counter["property"] = json!("totalEnergyProduced");
    assert_eq!(
        ask(&app, counter.clone()).await.ok()["data"],
        json!([59, 119])
    );
    counter["aggregation"] = json!("first");
    assert_eq!(ask(&app, counter).await.ok()["data"], json!([0, 60]));

    let mut max = body("2024-06-01T00:00:00Z", "2024-06-01T00:03:00Z", 2, "min");
    max["aggregation"] = json!("max");
    let b = ask(&app, max).await;
    assert_eq!(b.ok()["data"], json!([2000, 1000]));
    assert_eq!(
        b.ok()["time"],
        json!(["2024-06-01T00:00:00Z", "2024-06-01T00:02:00Z"])
    );
    store.close().await.expect("close");
}

#[tokio::test]
async fn a_range_without_data_is_empty() {
    let (app, _dir, store) = app().await;
    let a = ask(
        &app,
        body("2023-01-01T00:00:00Z", "2023-01-02T00:00:00Z", 1, "h"),
    )
    .await;
    assert_eq!(a.ok(), &json!({"time": [], "data": []}));
    store.close().await.expect("close");
}

#[tokio::test]
async fn thirty_days_pass_and_one_ms_more_is_range_too_long() {
    let (app, _dir, store) = app().await;
    let a = ask(
        &app,
        body("2024-06-01T00:00:00Z", "2024-07-01T00:00:00Z", 1, "d"),
    )
    .await;
    assert_eq!(
        a.ok()["time"],
        json!(["2024-06-01T00:00:00Z", "2024-06-02T00:00:00Z"])
    );
    let a = ask(
        &app,
        body("2024-06-01T00:00:00Z", "2024-07-01T00:00:00.001Z", 1, "d"),
    )
    .await;
    assert_eq!(a.problem(400, "range_too_long")["field"], "range");
    store.close().await.expect("close");
}

#[tokio::test]
async fn every_refusal_has_its_code_and_field() {
    let (app, _dir, store) = app().await;
    let ok = body("2024-06-01T00:00:00Z", "2024-06-02T00:00:00Z", 1, "h");
    let with = |path: &[&str], v: Value| {
        let mut b = ok.clone();
        let mut cur = &mut b;
        for k in &path[..path.len() - 1] {
            cur = &mut cur[*k];
        }
        cur[path[path.len() - 1]] = v;
        b
    };
    let cases: Vec<(Value, &str, Option<&str>)> = vec![
        (
            with(&["resolution"], json!({"value": 1, "unit": "s"})),
            "ok",
            None,
        ),
        (
            with(&["range", "end"], json!("2024-06-03T00:00:00.000Z")),
            "ok",
            None,
        ),
        (
            body("2024-06-01T00:00:00Z", "2024-06-03T00:00:00Z", 1, "s"),
            "too_many_points",
            Some("resolution"),
        ),
        (
            with(&["property"], json!("soc")),
            "unknown_property",
            Some("property"),
        ),
        (
            with(&["property"], json!("watts")),
            "unknown_property",
            Some("property"),
        ),
        (
            with(&["property"], json!(["activePower"])),
            "invalid_value",
            Some("property"),
        ),
        (
            with(&["property"], json!("activePower,totalEnergyProduced")),
            "invalid_value",
            Some("property"),
        ),
        (
            with(&["range", "start"], json!("2024-06-01")),
            "invalid_value",
            Some("range.start"),
        ),
        (
            with(&["range", "end"], json!("2024-13-01T00:00:00Z")),
            "invalid_value",
            Some("range.end"),
        ),
        (
            with(&["range", "type"], json!("relative")),
            "invalid_value",
            Some("range.type"),
        ),
        (
            with(&["resolution", "unit"], json!("week")),
            "unknown_unit",
            Some("resolution.unit"),
        ),
        (
            with(&["resolution", "value"], json!(0)),
            "invalid_value",
            Some("resolution.value"),
        ),
        (
            with(&["aggregation"], json!("median")),
            "invalid_value",
            Some("aggregation"),
        ),
        (
            with(&["properties"], json!("x")),
            "unknown_field",
            Some("properties"),
        ),
        (
            json!({"property": "activePower", "range": ok["range"].clone()}),
            "missing_field",
            Some("resolution"),
        ),
    ];
    for (b, code, field) in cases {
        let a = ask(&app, b.clone()).await;
        if code == "ok" {
            a.ok();
            continue;
        }
        let p = a.problem(400, code);
        assert_eq!(p["field"].as_str(), field, "{b}: {p}");
        if code == "unknown_property" {
            let detail = p["detail"].as_str().unwrap_or_default();
            assert!(
                detail.contains("activePower") && detail.contains("totalEnergyProduced"),
                "{detail}"
            );
        }
        if field == Some("range.type") {
            assert!(
                p["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("absolute"),
                "{p}"
            );
        }
    }
    store.close().await.expect("close");
}

#[tokio::test]
async fn transport_errors_auth_and_unknown_devices() {
    let (app, _dir, store) = app().await;
    let ok = body("2024-06-01T00:00:00Z", "2024-06-02T00:00:00Z", 1, "h").to_string();
    send(&app, post(&ok, Some("text/plain"), Some(READ)))
        .await
        .problem(415, "unsupported_media_type");
    send(
        &app,
        post("{\"property\": ", Some("application/json"), Some(READ)),
    )
    .await
    .problem(400, "invalid_json");
    send(&app, post(&ok, Some("application/json"), None))
        .await
        .problem(401, "unauthorized");
    send(&app, post(&ok, Some("application/json"), Some(STEER)))
        .await
        .problem(403, "forbidden");
    let mut req = post(&ok, Some("application/json"), Some(READ));
    *req.uri_mut() = "/devices/dvc_nope/measurements/time-series"
        .parse()
        .expect("uri");
    send(&app, req).await.problem(404, "device_not_found");
    store.close().await.expect("close");
}

#[tokio::test]
async fn readiness_reports_a_closed_store() {
    let (app, _dir, store) = app().await;
    let readyz = || {
        Request::builder()
            .uri("/readyz")
            .body(Body::empty())
            .expect("request")
    };
    // Devices not polled yet are reasons of their own; the store is not one.
    let a = send(&app, readyz()).await;
    let reasons = a.body["reasons"].to_string();
    assert!(!reasons.contains("store"), "{reasons}");
    store.close().await.expect("close");
    let a = send(&app, readyz()).await;
    let reasons = a.problem(503, "not_ready")["reasons"].to_string();
    assert!(
        reasons.contains("store: the measurement store is closed"),
        "{reasons}"
    );
    // Reads use their own connections: what was committed is still answered.
    let b = body("2024-06-01T00:00:00Z", "2024-06-02T00:00:00Z", 1, "h");
    assert_eq!(
        ask(&app, b).await.ok()["data"].as_array().map(Vec::len),
        Some(24)
    );
}
