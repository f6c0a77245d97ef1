//! Steering over HTTP: every validation rule with its code and field, scopes,
//! idempotent replays, dry runs, and the site listing.

use crate::steering_support::*;
use serde_json::{json, Value};

fn path(p: &str) -> String {
    format!("/sites/{SITE}/steering{p}")
}

async fn refused(rig: &Rig, p: &str, body: Value, status: u16, code: &str, field: Option<&str>) {
    let (s, v) = rig.post(&path(p), STEER, &body).await;
    assert_eq!(s, status, "{body} -> {v}");
    assert_eq!(v["code"], code, "{body} -> {v}");
    assert_eq!(v["field"].as_str(), field, "{body} -> {v}");
    assert!(!v["detail"].as_str().unwrap_or("").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_errors_name_code_and_field() {
    let rig = Rig::start(&config_text(500, 30)).await;
    let t = now_ms() + 3_600_000;
    let e = json!({"value": 1, "unit": "kW"});
    refused(
        &rig,
        "/ess",
        json!({"setting": e}),
        400,
        "missing_field",
        Some("validUntil"),
    )
    .await;
    refused(
        &rig,
        "/ess",
        json!({"setting": e, "validUntil": now_ms() - 1000}),
        400,
        "expired",
        Some("validUntil"),
    )
    .await;
    refused(
        &rig,
        "/ess",
        json!({"setting": e, "validFrom": t, "validUntil": t}),
        400,
        "invalid_value",
        Some("validUntil"),
    )
    .await;
    refused(
        &rig,
        "/ess",
        json!({"setting": e, "validUntil": now_ms() + 32 * 86_400_000i64}),
        400,
        "invalid_value",
        Some("validUntil"),
    )
    .await;
    refused(
        &rig,
        "/ess",
        json!({"setting": {"value": 1, "unit": "kw"}, "validUntil": t}),
        400,
        "unknown_unit",
        Some("setting.unit"),
    )
    .await;
    refused(
        &rig,
        "/curtailment",
        json!({"setting": {"value": -5, "unit": "kW"}, "validUntil": t}),
        400,
        "invalid_value",
        Some("setting.value"),
    )
    .await;
    refused(
        &rig,
        "/curtailment",
        json!({"setting": {"value": 120, "unit": "%"}, "validUntil": t}),
        400,
        "invalid_value",
        Some("setting.value"),
    )
    .await;
    refused(
        &rig,
        "/ess",
        json!({"setting": {"value": 1e308, "unit": "MW"}, "validUntil": t}),
        400,
        "invalid_value",
        Some("setting.value"),
    )
    .await;
    refused(
        &rig,
        "",
        json!({"energyStorageSetting": e, "validUntil": t, "extra": 1}),
        400,
        "unknown_field",
        Some("extra"),
    )
    .await;
    refused(
        &rig,
        "",
        json!({"energyStorageSetting": {"value": 1, "unit": "W", "speed": 2}, "validUntil": t}),
        400,
        "unknown_field",
        Some("energyStorageSetting.speed"),
    )
    .await;
    refused(
        &rig,
        "",
        json!({"validUntil": t}),
        400,
        "missing_field",
        None,
    )
    .await;
    // The simulated batteries start at 50 % SoC: discharging to 80 % moves away.
    refused(
        &rig,
        "/ess",
        json!({"setting": {"value": 10, "unit": "kW", "untilSoc": 80}, "validUntil": t}),
        400,
        "invalid_value",
        Some("setting.untilSoc"),
    )
    .await;
    let (s, v) = rig
        .post(
            "/sites/ste_nowhere/steering/ess",
            STEER,
            &json!({"setting": e, "validUntil": t}),
        )
        .await;
    assert_eq!(
        (s, v["code"].as_str()),
        (404, Some("site_not_found")),
        "{v}"
    );
    // Wrong content type, invalid JSON, oversized body.
    let url = format!("{}{}", rig.base, path("/ess"));
    let (s, v) = rig
        .send(
            rig.http
                .post(&url)
                .header("content-type", "text/plain")
                .body("{}"),
            STEER,
        )
        .await;
    assert_eq!(
        (s, v["code"].as_str()),
        (415, Some("unsupported_media_type"))
    );
    let (s, v) = rig
        .send(
            rig.http
                .post(&url)
                .header("content-type", "application/json")
                .body("{\"setting\":"),
            STEER,
        )
        .await;
    assert_eq!((s, v["code"].as_str()), (400, Some("invalid_json")));
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(100_000));
    let (s, v) = rig
        .send(
            rig.http
                .post(&url)
                .header("content-type", "application/json")
                .body(big),
            STEER,
        )
        .await;
    assert_eq!((s, v["code"].as_str()), (413, Some("payload_too_large")));
    // Nothing of it reached the signal.
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"], Value::Null);
    assert_eq!(st["productionCurtailment"], Value::Null);
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_idempotency_and_dry_runs() {
    let rig = Rig::start(&config_text(500, 30)).await;
    let t = now_ms() + 3_600_000;
    let body = json!({"setting": {"value": 80, "unit": "kW"}, "validUntil": t});

    // Read-only token: 403 on every change; no token: 401.
    let (s, v) = rig.post(&path("/ess"), READ, &body).await;
    assert_eq!((s, v["code"].as_str()), (403, Some("forbidden")));
    let (s, _) = rig.delete(&path(""), READ).await;
    assert_eq!(s, 403);
    let (s, _) = rig.post(&path("/ess"), "sgt_wrong", &body).await;
    assert_eq!(s, 401);
    let (s, _) = rig.get(&path(""), READ).await;
    assert_eq!(s, 200);

    // Dry run: the allocation, nothing stored, nothing written. A battery
    // whose poll just timed out on a loaded machine is offline and gets no
    // share, so the dry run is asked again (it changes nothing) until both
    // batteries are in it. A device's first command (its release) is
    // written once it answers (`report::due`: nothing written before), a
    // write of the agent's own: the writes are watched from a second after
    // both are in, over one more dry run.
    let started = tokio::time::Instant::now();
    let mut writes = None;
    let v = loop {
        let (s, v) = rig.post(&path("/ess?dryRun=true"), STEER, &body).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["requestId"], Value::Null);
        let setpoint = |reference: &str| {
            v["allocation"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["deviceReference"] == reference)
                .map(|a| a["setpoint"].clone())
        };
        let both = ["dvc_bat_a", "dvc_bat_b"]
            .map(|r| setpoint(r) == Some(json!({"value": 40000, "unit": "W"})));
        if both == [true, true] && writes.is_some() {
            break v;
        }
        if both == [true, true] {
            // Both in: a second (two control intervals of 500 ms) for the agent's own
            // first writes to them (their release) to go out before the watch starts.
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            writes = Some(rig.sim.subscribe_writes());
            continue;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "80 kW are not split 40/40 over two 200 kW batteries: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let alloc = v["allocation"].as_array().unwrap();
    let pv_a = alloc
        .iter()
        .find(|a| a["deviceReference"] == "dvc_pv_a")
        .unwrap();
    assert_eq!(pv_a["setpoint"], Value::Null);
    // Longer than a control interval (500 ms): a write the dry run had caused
    // would have reached a device by now.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let mut writes = writes.expect("watched");
    if let Ok(w) = writes.try_recv() {
        panic!("a dry run wrote to a device: {w:?}");
    }
    assert_eq!(rig.state().await["energyStorageSetting"], Value::Null);
    let (_, h) = rig.get(&path("/history"), READ).await;
    assert!(h.as_array().unwrap().iter().all(|e| e["type"] != "request"));

    // Idempotency-Key: the replay gives the first answer and applies nothing
    // twice; the key belongs to its operation and body.
    let send_to = |p: &str, b: &Value| {
        rig.http
            .post(format!("{}{}", rig.base, path(p)))
            .header("Idempotency-Key", "key-1")
            .json(b)
    };
    let send = |b: &Value| send_to("/ess", b);
    let (s, first) = rig.send(send(&body), STEER).await;
    assert_eq!(s, 200);
    let (s, again) = rig.send(send(&body), STEER).await;
    assert_eq!(s, 200);
    assert_eq!(again, first);
    let other = json!({"setting": {"value": 10, "unit": "kW"}, "validUntil": t});
    let curtail = json!({"setting": {"value": 50, "unit": "%"}, "validUntil": t});
    for (p, b, why) in [
        ("/ess", &other, "with another body"),
        ("/curtailment", &curtail, "not this operation"),
        ("", &other, "not this operation"),
    ] {
        let (s, v) = rig.send(send_to(p, b), STEER).await;
        assert_eq!(
            (s, v["code"].as_str(), v["field"].as_str()),
            (422, Some("idempotency_key_reused"), Some("Idempotency-Key")),
            "{p}: {v}"
        );
        let detail = v["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(&format!("POST {}", path("/ess"))),
            "{detail}"
        );
        assert!(detail.contains(why), "{detail}");
    }
    assert_eq!(rig.state().await["productionCurtailment"], Value::Null);
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"]["requestId"], first["requestId"]);
    assert_eq!(st["energyStorageSetting"]["setting"]["value"], 80.0);
    let (_, h) = rig.get(&path("/history"), READ).await;
    let requests = h
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "request")
        .count();
    assert_eq!(requests, 1);
    // Another key applies.
    let (s, third) = rig
        .send(
            rig.http
                .post(format!("{}{}", rig.base, path("/ess")))
                .header("Idempotency-Key", "key-2")
                .json(&other),
            STEER,
        )
        .await;
    assert_eq!(s, 200);
    assert_ne!(third["requestId"], first["requestId"]);
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_are_listed() {
    let rig = Rig::start(&config_text(500, 30)).await;
    let (s, v) = rig.get("/sites", READ).await;
    assert_eq!(s, 200);
    assert_eq!(v.as_array().unwrap().len(), 1);
    let (s, site) = rig.get(&format!("/sites/{SITE}"), READ).await;
    assert_eq!(s, 200);
    assert_eq!(site["siteReference"], SITE);
    assert_eq!(site["devices"].as_array().unwrap().len(), 5);
    assert_eq!(
        site["gridConnection"]["maxImport"],
        json!({"value": 10_000_000, "unit": "W"})
    );
    assert_eq!(
        site["fulfilment"],
        json!({"ess": "proportional", "curtailment": "proportional"})
    );
    assert_eq!(site["ratedProductionPower"]["value"], 400_000.0);
    let (s, v) = rig.get("/sites/ste_nowhere", READ).await;
    assert_eq!((s, v["code"].as_str()), (404, Some("site_not_found")));
    let (s, v) = rig.get("/sites/ste_nowhere/steering", READ).await;
    assert_eq!((s, v["code"].as_str()), (404, Some("site_not_found")));
    let (s, v) = rig.delete(&path("?component=bogus"), STEER).await;
    assert_eq!((s, v["field"].as_str()), (400, Some("component")));
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_come_back_exactly_as_sent() {
    let rig = Rig::start(&config_text(500, 30)).await;
    // A number whose nearest double a fast, not correctly rounded JSON float
    // parser misses by one unit in the last place: the answer echoes the
    // request, so it must carry the same number.
    let value = "442.48327198322477";
    assert_eq!(
        value.parse::<f64>().map(|v| v.to_string()),
        Ok(value.into())
    );
    let body = format!(
        r#"{{"setting": {{"value": {value}, "unit": "W"}}, "validUntil": {}}}"#,
        now_ms() + 600_000
    );
    let answer = rig
        .http
        .post(format!("{}{}", rig.base, path("/ess")))
        .bearer_auth(STEER)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("HTTP answer");
    assert_eq!(answer.status(), 200);
    let text = answer.text().await.expect("body");
    assert!(
        text.contains(&format!(r#""value":{value}"#)),
        "the answer changed the number: {text}"
    );
    let state = rig.get_raw(&path(""), READ).await;
    assert!(
        state.contains(&format!(r#""value":{value}"#)),
        "the state changed the number: {state}"
    );
    rig.shutdown().await;
}
