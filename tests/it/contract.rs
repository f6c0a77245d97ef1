//! The partner contract to the letter, over HTTP: rule 3 as the spec reads
//! it, numbers as a partner reads them, and the edges of time ranges and
//! validities.

use crate::steering_support::*;
use serde_json::{json, Value};
use std::time::Duration;

fn steering(p: &str) -> String {
    format!("/sites/{SITE}/steering{p}")
}

/// Rule 3 sets maximize grid import to false only for a request carrying both
/// the storage setting and the curtailment; a request with one of them
/// leaves it as it is (rule 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_3_needs_both_storage_and_curtailment() {
    let rig = Rig::start(&config_text(500, 30)).await;
    let until = now_ms() + 600_000;
    let mgi = |st: &Value| st["maximizeGridImport"]["value"].clone();
    let (s, v) = rig
        .post(
            &steering(""),
            STEER,
            &json!({"maximizeGridImport": true, "validUntil": until}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    for body in [
        json!({"energyStorageSetting": {"value": 5, "unit": "kW"}, "validUntil": until}),
        json!({"productionCurtailment": {"value": 50, "unit": "%"}, "validUntil": until}),
    ] {
        let (s, v) = rig.post(&steering(""), STEER, &body).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(mgi(&rig.state().await), json!(true), "after {body}");
    }
    let both = json!({
        "energyStorageSetting": {"value": 5, "unit": "kW"},
        "productionCurtailment": {"value": 50, "unit": "%"},
        "validUntil": until,
    });
    let (s, v) = rig.post(&steering(""), STEER, &both).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(mgi(&rig.state().await), json!(false));
    rig.shutdown().await;
}

/// Numbers in one style: no negative zero (an idle battery), whole numbers
/// without a fraction (steering values as measurements), no float noise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_are_written_in_one_style() {
    let rig = Rig::start(&config_text(500, 30)).await;
    let idle = json!({"setting": {"mode": "idle"}, "validUntil": now_ms() + 600_000});
    let (s, v) = rig.post(&steering("/ess"), STEER, &idle).await;
    assert_eq!(s, 200, "{v}");
    let curtail =
        json!({"setting": {"value": 100000.0, "unit": "W"}, "validUntil": now_ms() + 600_000});
    let (s, v) = rig.post(&steering("/curtailment"), STEER, &curtail).await;
    assert_eq!(s, 200, "{v}");
    eventually(
        "the batteries held idle",
        Duration::from_secs(10),
        || async {
            let st = rig.state().await;
            st["devices"].as_array().is_some_and(|d| {
                d.iter()
                    .any(|d| d["deviceReference"] == "dvc_bat_a" && d["setpoint"].is_object())
            })
        },
    )
    .await;
    let text = rig.get_raw(&steering(""), READ).await;
    for bad in ["-0,", "-0}", "-0.0", ".0,", ".0}"] {
        assert!(!text.contains(bad), "{bad:?} in {text}");
    }
    assert!(text.contains(r#""value":100000"#), "{text}");
    rig.shutdown().await;
}

/// Time series: a whole `resolution.value` written as `1.0` is taken (the
/// seed types it as a number), `0.5` is not; an end before or at its start
/// says the range is reversed or empty and names `range.end`; a time past the
/// last instant held is out of range, the limit named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_series_edges() {
    let rig = Rig::start(&config_text(500, 30)).await;
    let path = "/devices/dvc_pv_a/measurements/time-series";
    let now = now_ms();
    let iso = sitegate::model::time::format_utc;
    let ask = |start: i64, end: i64, value: Value| {
        json!({
            "property": "activePower",
            "range": {"type": "absolute", "start": iso(start), "end": iso(end)},
            "resolution": {"value": value, "unit": "s"},
        })
    };
    let (s, v) = rig
        .post(path, READ, &ask(now - 60_000, now, json!(1.0)))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = rig
        .post(path, READ, &ask(now - 60_000, now, json!(0.5)))
        .await;
    assert_eq!(
        (s, v["field"].as_str()),
        (400, Some("resolution.value")),
        "{v}"
    );
    let (s, v) = rig
        .post(path, READ, &ask(now, now - 60_000, json!(1)))
        .await;
    assert_eq!((s, v["field"].as_str()), (400, Some("range.end")), "{v}");
    assert_eq!(v["code"], "invalid_range", "{v}");
    assert!(
        v["detail"].as_str().is_some_and(|d| d.contains("reversed")),
        "{v}"
    );
    let (s, v) = rig.post(path, READ, &ask(now, now, json!(1))).await;
    assert_eq!((s, v["field"].as_str()), (400, Some("range.end")), "{v}");
    assert_eq!(v["code"], "invalid_range", "{v}");
    assert!(
        v["detail"].as_str().is_some_and(|d| d.contains("empty")),
        "{v}"
    );
    // A valid RFC 3339 time past the last instant held names the limit.
    let mut far = ask(now - 60_000, now, json!(1));
    far["range"]["end"] = json!("9999-12-31T22:00:00+01:00");
    let (s, v) = rig.post(path, READ, &far).await;
    assert_eq!((s, v["field"].as_str()), (400, Some("range.end")), "{v}");
    let detail = v["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("outside the range") && detail.contains("9999-12-30T22:00:00Z"),
        "{v}"
    );
    rig.shutdown().await;
}

/// A `validUntil` given in seconds is refused as expired with a hint that
/// names the milliseconds meant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validity_in_seconds_gets_a_hint() {
    let rig = Rig::start(&config_text(500, 30)).await;
    let seconds = now_ms() / 1000 + 600;
    let body = json!({"setting": {"value": 1, "unit": "kW"}, "validUntil": seconds});
    let (s, v) = rig.post(&steering("/ess"), STEER, &body).await;
    assert_eq!((s, v["code"].as_str()), (400, Some("expired")), "{v}");
    let detail = v["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("looks like seconds"), "{detail}");
    assert!(detail.contains(&(seconds * 1000).to_string()), "{detail}");
    rig.shutdown().await;
}

/// A query parameter without a name is refused, with or without a value,
/// and the problem names no field (never `"field": ""`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_parameter_without_a_name_is_refused() {
    let rig = Rig::start(&config_text(500, 30)).await;
    for q in ["?=", "?=x", "?site=ste_e2e&="] {
        let (s, v) = rig.get(&format!("/devices{q}"), READ).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("unknown_field")),
            "{q}: {v}"
        );
        assert!(v.get("field").is_none(), "{q}: {v}");
    }
    let (s, v) = rig.get("/devices?", READ).await;
    assert_eq!(s, 200, "{v}");
    rig.shutdown().await;
}

/// The answer to `DELETE .../steering` shows what the release did to the
/// devices (released, pending until written), never the setpoints from
/// before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_to_an_end_shows_the_release() {
    let rig = Rig::start(&config_text(500, 30)).await;
    for round in 0..5 {
        let until = now_ms() + 600_000;
        let body = json!({"setting": {"value": 5 + round, "unit": "kW"}, "validUntil": until});
        let (s, v) = rig.post(&steering("/ess"), STEER, &body).await;
        assert_eq!(s, 200, "{v}");
        eventually("the discharge applied", Duration::from_secs(10), || async {
            let d = rig.device_state("dvc_bat_a").await;
            d["state"] == "applied" && d["confirmed"] == true
        })
        .await;
        let (s, st) = rig.delete(&steering(""), STEER).await;
        assert_eq!(s, 200, "{st}");
        let battery = st["devices"]
            .as_array()
            .and_then(|d| d.iter().find(|x| x["deviceReference"] == "dvc_bat_a"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(battery["setpoint"], Value::Null, "round {round}: {battery}");
        assert!(
            battery["state"] == "pending" || battery["state"] == "fallback",
            "round {round}: {battery}"
        );
    }
    rig.shutdown().await;
}
