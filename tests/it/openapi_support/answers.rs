//! The requests of the real-answer test, route by route: at least one success
//! and one error each, every answer checked against the document by
//! [`Checker`].

use reqwest::Method;
use serde_json::{json, Value};
use sitegate::model::time::{format_utc, now_ms};

use super::client::{Body, Checker};

/// Read scope only.
pub const READ: &str = "sgt_test_reader";
/// Read and steer.
pub const STEER: &str = "sgt_test_steerer";
/// Steer scope only.
pub const STEER_ONLY: &str = "sgt_test_steer_only";
/// Admin scope only.
pub const ADMIN: &str = "sgt_test_admin";
const SITE: &str = "/sites/ste_test";
/// More than the 64 KiB body limit.
fn oversized() -> String {
    format!("{{\"pad\": \"{}\"}}", "x".repeat(100_000))
}

/// Device listing and latest values.
pub async fn device_data(c: &mut Checker<'_>) {
    let devices = c.get("/devices", Some(READ), 200).await;
    assert_eq!(devices.as_array().map(Vec::len), Some(4), "{devices}");
    c.get("/devices?site=ste_test", Some(READ), 200).await;
    c.get("/devices", None, 401).await;
    c.get("/devices", Some("sgt_not_known"), 401).await;
    c.get("/devices", Some(STEER_ONLY), 403).await;
    c.get("/devices?site=ste_nowhere", Some(READ), 404).await;
    c.get("/devices?sort=name", Some(READ), 400).await;

    let one = "/devices/dvc_bat/measurement";
    c.get(&format!("{one}?property=soc"), Some(READ), 200).await;
    c.get(one, Some(READ), 400).await;
    c.get(&format!("{one}?property=nonsense"), Some(READ), 400)
        .await;
    c.get(
        "/devices/dvc_nope/measurement?property=soc",
        Some(READ),
        404,
    )
    .await;
    c.get(&format!("{one}?property=soc"), None, 401).await;

    for kind in ["measurements", "measurements/map"] {
        let list = format!("/devices/dvc_grid/{kind}");
        c.get(
            &format!("{list}?properties=totalEnergyConsumed,activePower"),
            Some(READ),
            200,
        )
        .await;
        c.get(&list, Some(READ), 200).await;
        // Known, but nothing measured yet: an empty answer, not an error.
        c.get(&format!("/devices/dvc_dark/{kind}"), Some(READ), 200)
            .await;
        c.get(&format!("{list}?properties=nonsense"), Some(READ), 400)
            .await;
        c.get(&format!("/devices/dvc_nope/{kind}"), Some(READ), 404)
            .await;
        c.get(&list, Some(STEER_ONLY), 403).await;
    }
}

/// The time series; the store must hold samples of `dvc_grid` by now.
pub async fn time_series(c: &mut Checker<'_>) {
    let path = "/devices/dvc_grid/measurements/time-series";
    let now = now_ms();
    let body = |start: i64, extra: Option<(&str, Value)>| {
        let mut b = json!({
            "property": "activePower",
            "range": {"type": "absolute", "start": format_utc(start), "end": format_utc(now + 1000)},
            "resolution": {"value": 1, "unit": "s"},
            "aggregation": "max",
        });
        if let Some((k, v)) = extra {
            b[k] = v;
        }
        b
    };
    let series = c
        .post(path, Some(READ), body(now - 600_000, None), 200)
        .await;
    assert!(
        !series["data"].as_array().is_none_or(Vec::is_empty),
        "no samples: {series}"
    );
    let too_long = now - 31 * 86_400_000;
    c.post(path, Some(READ), body(too_long, None), 400).await;
    c.post(
        path,
        Some(READ),
        body(now - 1000, Some(("limit", json!(5)))),
        400,
    )
    .await;
    c.post(
        "/devices/dvc_nope/measurements/time-series",
        Some(READ),
        body(now - 1000, None),
        404,
    )
    .await;
    c.post(path, None, body(now - 1000, None), 401).await;
    c.post(path, Some(STEER_ONLY), body(now - 1000, None), 403)
        .await;
    let raw = |ct: &'static str, text: String| Body::Raw(ct, text);
    c.expect(
        Method::POST,
        path,
        Some(READ),
        &[],
        raw("text/plain", "{}".into()),
        415,
    )
    .await;
    c.expect(
        Method::POST,
        path,
        Some(READ),
        &[],
        raw("application/json", oversized()),
        413,
    )
    .await;
    c.expect(
        Method::POST,
        path,
        Some(READ),
        &[],
        raw("application/json", "{\"property\":".into()),
        400,
    )
    .await;
}

/// Sites and the steering state before any change.
pub async fn sites(c: &mut Checker<'_>) {
    c.get("/sites", Some(READ), 200).await;
    c.get("/sites?verbose=1", Some(READ), 400).await;
    c.get("/sites", None, 401).await;
    c.get(SITE, Some(READ), 200).await;
    c.get("/sites/ste_nowhere", Some(READ), 404).await;
    c.get(SITE, Some(STEER_ONLY), 403).await;
    let state = c.get(&format!("{SITE}/steering"), Some(READ), 200).await;
    assert_eq!(state["energyStorageSetting"], Value::Null, "{state}");
    c.get("/sites/ste_nowhere/steering", Some(READ), 404).await;
    c.get(&format!("{SITE}/steering?x=1"), Some(READ), 400)
        .await;
    let history = format!("{SITE}/steering/history");
    c.get(&history, Some(READ), 200).await;
    c.get(&format!("{history}?limit=0"), Some(READ), 400).await;
    c.get("/sites/ste_nowhere/steering/history", Some(READ), 404)
        .await;
    let range = format!(
        "from={}&to={}",
        format_utc(now_ms() - 3_600_000),
        format_utc(now_ms() + 60_000)
    );
    c.get(&format!("{SITE}/energy?{range}"), Some(READ), 200)
        .await;
    // The agent polled for a moment only: a counter read once tells no
    // energy yet, but a power reading holds for its poll interval.
    let energy = c
        .get(
            &format!("{SITE}/energy?{range}&source=integratedPower&interval=day"),
            Some(READ),
            200,
        )
        .await;
    assert!(
        energy["buckets"].as_array().is_some_and(|b| !b.is_empty()),
        "{energy}"
    );
    c.get(
        &format!("{SITE}/energy?{range}&interval=week"),
        Some(READ),
        400,
    )
    .await;
    c.get(
        &format!("/sites/ste_nowhere/energy?{range}"),
        Some(READ),
        404,
    )
    .await;
}

/// Every steering change, accepted and refused, then the state and history
/// they leave.
pub async fn steering(c: &mut Checker<'_>) {
    let now = now_ms();
    let until = now + 3_600_000;
    let later = now + 1_800_000;
    let site = format!("{SITE}/steering");
    let ess = format!("{SITE}/steering/ess");
    let curtailment = format!("{SITE}/steering/curtailment");
    let grid_limit = format!("{SITE}/steering/grid-limit");
    let discharge = json!({"setting": {"value": 1, "unit": "kW"}, "validUntil": until});

    let dry = c
        .post(
            &format!("{ess}?dryRun=true"),
            Some(STEER),
            discharge.clone(),
            200,
        )
        .await;
    assert_eq!(dry["requestId"], Value::Null, "{dry}");
    let both = json!({"energyStorageSetting": {"value": -1, "unit": "kW"},
                      "productionCurtailment": {"value": 5, "unit": "kW"}, "validUntil": until});
    c.post(&site, Some(STEER), both, 200).await;
    c.post(
        &site,
        Some(STEER),
        json!({"gridLimit": {"maxImport": {"value": 1, "unit": "kW"}}, "validUntil": until}),
        200,
    )
    .await;
    c.post(
        &site,
        Some(STEER),
        json!({"maximizeGridImport": true, "validFrom": later, "validUntil": until}),
        200,
    )
    .await;
    c.post(
        &curtailment,
        Some(STEER),
        json!({"setting": {"value": 50, "unit": "%"}, "validFrom": later, "validUntil": until}),
        200,
    )
    .await;
    c.post(
        &grid_limit,
        Some(STEER),
        json!({"setting": {"maxExport": {"value": 0, "unit": "W"}}, "validFrom": later, "validUntil": until}),
        200,
    )
    .await;
    let keyed = [("Idempotency-Key", "openapi-1")];
    let first = c
        .expect(
            Method::POST,
            &ess,
            Some(STEER),
            &keyed,
            Body::Json(discharge.clone()),
            200,
        )
        .await;
    let again = c
        .expect(
            Method::POST,
            &ess,
            Some(STEER),
            &keyed,
            Body::Json(discharge.clone()),
            200,
        )
        .await;
    assert_eq!(first, again, "a repeated key answers the first answer");
    // The same key with another body: 422, as the document says.
    c.expect(
        Method::POST,
        &ess,
        Some(STEER),
        &keyed,
        Body::Json(json!({"setting": {"mode": "idle"}, "validUntil": until})),
        422,
    )
    .await;

    c.post(&site, Some(STEER), json!({"validUntil": until}), 400)
        .await;
    c.post(
        &ess,
        Some(STEER),
        json!({"setting": {"value": 1, "unit": "kW"}, "validUntil": now - 1000}),
        400,
    )
    .await;
    c.post(
        &curtailment,
        Some(STEER),
        json!({"setting": {"value": 120, "unit": "%"}, "validUntil": until}),
        400,
    )
    .await;
    c.post(
        &grid_limit,
        Some(STEER),
        json!({"setting": {"maxImport": {"value": -1, "unit": "kW"}}, "validUntil": until}),
        400,
    )
    .await;
    for path in [&site, &ess, &curtailment, &grid_limit] {
        c.post(path, Some(READ), discharge.clone(), 403).await;
        c.post(path, None, discharge.clone(), 401).await;
        let elsewhere = path.replace("ste_test", "ste_nowhere");
        c.post(&elsewhere, Some(STEER), discharge.clone(), 404)
            .await;
        let raw = Body::Raw("text/plain", "{}".into());
        c.expect(Method::POST, path, Some(STEER), &[], raw, 415)
            .await;
        let raw = Body::Raw("application/json", oversized());
        c.expect(Method::POST, path, Some(STEER), &[], raw, 413)
            .await;
    }

    let state = c.get(&site, Some(READ), 200).await;
    assert_ne!(state["energyStorageSetting"], Value::Null, "{state}");
    assert_eq!(
        state["scheduled"].as_array().map(Vec::len),
        Some(3),
        "{state}"
    );
}

/// The audit log once it holds a device write, then ending steering.
pub async fn history_and_end(c: &mut Checker<'_>) {
    // The event list after the steering changes: their signals started
    // (the list looks once a second).
    let mut events = Value::Null;
    for _ in 0..100 {
        events = c.get("/events?limit=200", Some(READ), 200).await;
        if events.as_array().is_some_and(|e| !e.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        events.as_array().is_some_and(|e| !e.is_empty()),
        "no events after the steering changes: {events}"
    );
    c.get("/events?limit=0", Some(READ), 400).await;
    c.get("/events?since=1", Some(READ), 400).await;
    c.get("/events", None, 401).await;
    let history = format!("{SITE}/steering/history");
    let mut writes = false;
    for _ in 0..100 {
        let records = c.get(&format!("{history}?limit=50"), Some(READ), 200).await;
        writes = records
            .as_array()
            .is_some_and(|r| r.iter().any(|e| e["type"] == "write"));
        if writes {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(writes, "no device write in the history after 10 s");

    let site = format!("{SITE}/steering");
    let del = |q: &str| format!("{site}{q}");
    c.expect(
        Method::DELETE,
        &del("?component=bogus"),
        Some(STEER),
        &[],
        Body::None,
        400,
    )
    .await;
    c.expect(Method::DELETE, &del(""), Some(READ), &[], Body::None, 403)
        .await;
    c.expect(Method::DELETE, &del(""), None, &[], Body::None, 401)
        .await;
    c.expect(
        Method::DELETE,
        "/sites/ste_nowhere/steering",
        Some(STEER),
        &[],
        Body::None,
        404,
    )
    .await;
    c.expect(
        Method::DELETE,
        &del("?component=ess"),
        Some(STEER),
        &[],
        Body::None,
        200,
    )
    .await;
    let state = c
        .expect(Method::DELETE, &del(""), Some(STEER), &[], Body::None, 200)
        .await;
    assert_eq!(state["productionCurtailment"], Value::Null, "{state}");
    assert_eq!(state["scheduled"], json!([]), "{state}");
}

/// The operations under `/admin`: start, repeat, read, list, a bundle's chunks.
pub async fn operations(c: &mut Checker<'_>) {
    let ops = "/admin/operations";
    let logs = json!({"id": "oa-logs", "kind": "logs", "args": {"lines": 5, "level": "info"}});
    let first = c.post(ops, Some(ADMIN), logs.clone(), 202).await;
    assert_eq!(first["state"], "succeeded", "{first}");
    let again = c.post(ops, Some(ADMIN), logs, 200).await;
    assert_eq!(again["acceptedAt"], first["acceptedAt"]);
    c.post(
        ops,
        Some(ADMIN),
        json!({"id": "oa-logs", "kind": "logs", "args": {"lines": 6}}),
        422,
    )
    .await;
    c.post(
        ops,
        Some(ADMIN),
        json!({"id": "oa-x", "kind": "reboot"}),
        400,
    )
    .await;
    c.post(ops, Some(STEER), json!({"id": "oa-y", "kind": "logs"}), 403)
        .await;
    c.post(ops, None, json!({"id": "oa-y", "kind": "logs"}), 401)
        .await;
    c.get(ops, Some(ADMIN), 200).await;
    c.get(&format!("{ops}?limit=0"), Some(ADMIN), 400).await;
    c.get(ops, Some(READ), 403).await;
    c.get(&format!("{ops}/oa-logs"), Some(ADMIN), 200).await;
    c.get(&format!("{ops}/oa-none"), Some(ADMIN), 404).await;
    let bundle = c
        .post(
            ops,
            Some(ADMIN),
            json!({"id": "oa-bundle", "kind": "bundle"}),
            202,
        )
        .await;
    if bundle["state"] != "succeeded" {
        for _ in 0..100 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            if c.get(&format!("{ops}/oa-bundle"), Some(ADMIN), 200).await["state"] == "succeeded" {
                break;
            }
        }
    }
    let chunk = c
        .get(&format!("{ops}/oa-bundle/bundle"), Some(ADMIN), 200)
        .await;
    assert!(
        chunk["data"]
            .as_str()
            .is_some_and(|d| d.starts_with("# sitegate support bundle")),
        "{chunk}"
    );
    // Past the bundle's own count but within the most any bundle has: not
    // there; beyond that: a value the schema refuses too.
    let most = sitegate::api::bounds::BUNDLE_CHUNK_MAX;
    c.get(
        &format!("{ops}/oa-bundle/bundle?chunk={most}"),
        Some(ADMIN),
        404,
    )
    .await;
    let beyond = c
        .get(
            &format!("{ops}/oa-bundle/bundle?chunk={}", most + 1),
            Some(ADMIN),
            400,
        )
        .await;
    assert_eq!(beyond["field"], "chunk", "{beyond}");
    c.get(&format!("{ops}/oa-logs/bundle"), Some(ADMIN), 404)
        .await;
}
