//! The device-data endpoints end to end: a simulated SunSpec site on real
//! sockets, the agent discovering and polling it, answers over HTTP.

use std::time::Duration;

use crate::common::site::{self, READ_TOKEN, SUMMER_MORNING_MS};
use crate::common::wait_for;
use crate::steering_support::TestSite;
use reqwest::{Method, StatusCode};
use serde_json::Value;

fn property_units(device: &Value) -> Vec<(String, String)> {
    device["properties"]
        .as_array()
        .expect("properties array")
        .iter()
        .map(|p| {
            (
                p["property"].as_str().unwrap().to_string(),
                p["unit"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn offers(device: &Value, property: &str, unit: &str) -> bool {
    property_units(device).contains(&(property.to_string(), unit.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_shows_each_device_with_properties_and_units() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let devices = site.get_ok("/devices").await;
    let devices = devices.as_array().expect("array");
    let refs: Vec<&str> = devices
        .iter()
        .map(|d| d["deviceReference"].as_str().unwrap())
        .collect();
    assert_eq!(refs, ["dvc_pv", "dvc_bat", "dvc_grid"], "config order");

    let (pv, bat, grid) = (&devices[0], &devices[1], &devices[2]);
    assert_eq!(pv["type"], "inverter");
    assert_eq!(bat["type"], "battery");
    assert_eq!(grid["type"], "meter");
    for d in devices {
        assert_eq!(d["siteReference"], "ste_test");
        assert_eq!(d["status"]["online"], true, "{d}");
        assert!(d["status"]["lastSeen"].as_i64().is_some());
    }
    assert!(offers(pv, "activePower", "W"));
    assert!(offers(pv, "totalEnergyProduced", "Wh"));
    assert!(offers(pv, "activePowerLimit", "%"));
    assert!(offers(pv, "frequency", "Hz"));
    assert!(offers(pv, "voltageL1", "V"));
    assert!(offers(pv, "temperature", "°C"));
    assert!(offers(bat, "soc", "%"));
    assert!(offers(bat, "totalEnergyConsumed", "Wh"));
    assert!(offers(bat, "maxChargePower", "W"));
    assert!(offers(grid, "activePower", "W"));
    assert!(offers(grid, "totalEnergyProduced", "Wh"));
    assert!(offers(grid, "totalEnergyConsumed", "Wh"));
    // Points the simulated devices leave "not implemented" are not offered.
    assert!(!property_units(pv).iter().any(|(p, _)| p == "soc"));
    assert!(!property_units(grid).iter().any(|(p, _)| p == "temperature"));

    let (status, filtered) = site
        .call(
            Method::GET,
            "/devices?site=ste_test",
            Some(READ_TOKEN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(filtered.as_array().unwrap().len(), 3);
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measurement_endpoints_answer_with_the_contract_shapes() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;

    let one = site
        .get_ok("/devices/dvc_bat/measurement?property=soc")
        .await;
    assert_eq!(one["property"], "soc");
    assert_eq!(one["unit"], "%");
    assert_eq!(one["reference"], "dvc_bat");
    assert!(one["timestamp"].as_i64().unwrap() > 1_700_000_000_000);
    let soc = one["value"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&soc), "soc {soc}");

    let list = site
        .get_ok("/devices/dvc_grid/measurements?properties=totalEnergyConsumed,activePower")
        .await;
    assert_eq!(list["reference"], "dvc_grid");
    let items = list["measurements"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(
        items[0]["property"], "totalEnergyConsumed",
        "requested order"
    );
    assert_eq!(items[0]["unit"], "Wh");
    assert_eq!(items[1]["property"], "activePower");
    assert!(items[1].get("reference").is_none());
    assert!(items[1]["timestamp"].is_i64());

    let map = site
        .get_ok(
            "/devices/dvc_pv/measurements/map?properties=activePower, activePowerLimit,activePower",
        )
        .await;
    assert_eq!(map["reference"], "dvc_pv");
    let m = map["measurements"].as_object().unwrap();
    assert_eq!(m.len(), 2, "blanks trimmed, duplicates once: {map}");
    assert_eq!(m["activePower"]["unit"], "W");
    assert_eq!(m["activePowerLimit"]["value"], 100, "no limit set: 100 %");
    assert!(m["activePower"].get("timestamp").is_none());

    // No `properties`: every offered property.
    let all = site.get_ok("/devices/dvc_bat/measurements").await;
    assert!(all["measurements"].as_array().unwrap().len() >= 8, "{all}");
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_move_with_simulated_time_and_keep_their_signs() {
    // 600× real time: one real second is ten simulated minutes.
    let site = site::start(&TestSite::small().text(), 600.0, SUMMER_MORNING_MS).await;
    site.ready().await;

    let (t0, e0) = site.latest("dvc_pv", "totalEnergyProduced").await.unwrap();
    let (t1, e1) = wait_for("PV energy to grow", Duration::from_secs(10), || async {
        site.latest("dvc_pv", "totalEnergyProduced")
            .await
            .filter(|(_, e)| *e > e0)
    })
    .await;
    assert!(t1 > t0, "newer sample has a newer timestamp");
    assert!(e1 > e0);

    // Each device's sign as the vocabulary fixes it, read against the
    // simulator's own notion of its power flow.
    for (server, device) in [("pv", "dvc_pv"), ("bat", "dvc_bat"), ("grid", "dvc_grid")] {
        let sim_power = site.sim.device(server, 1).unwrap().state().ac_power_w;
        let (_, api_power) = site.latest(device, "activePower").await.unwrap();
        if sim_power.abs() > 300.0 {
            assert_eq!(
                sim_power.signum(),
                api_power.signum(),
                "{device}: simulator {sim_power} W, API {api_power} W"
            );
        }
    }
    let (_, pv) = site.latest("dvc_pv", "activePower").await.unwrap();
    assert!(pv > 0.0, "PV produces at midday: {pv}");

    // SoC stays within 0..100 while it moves: ten readings a poll (200 ms) apart,
    // 2 s of real time and 20 simulated minutes at 600x.
    let (_, soc0) = site.latest("dvc_bat", "soc").await.unwrap();
    for _ in 0..10 {
        let (_, soc) = site.latest("dvc_bat", "soc").await.unwrap();
        assert!((0.0..=100.0).contains(&soc));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, soc1) = site.latest("dvc_bat", "soc").await.unwrap();
    assert!((0.0..=100.0).contains(&soc0) && (0.0..=100.0).contains(&soc1));
    site.stop().await;
}

async fn problem(site: &site::SmallSite, path: &str, token: Option<&str>) -> (StatusCode, Value) {
    let resp = site
        .http
        .get(format!("{}{path}", site.base))
        .bearer_auth(token.unwrap_or(""))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(content_type, "application/problem+json", "{path}");
    assert_eq!(body["status"], status.as_u16(), "{path}: {body}");
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_reachable_so_far() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let t = Some(READ_TOKEN);
    let cases: &[(&str, Option<&str>, u16, &str)] = &[
        (
            "/devices/dvc_nope/measurement?property=soc",
            t,
            404,
            "device_not_found",
        ),
        (
            "/devices/dvc_pv/measurement?property=soc",
            t,
            400,
            "unknown_property",
        ),
        (
            "/devices/dvc_pv/measurement?property=bogus",
            t,
            400,
            "unknown_property",
        ),
        ("/devices/dvc_pv/measurement", t, 400, "missing_field"),
        (
            "/devices/dvc_pv/measurements?properties=activePower,bogus",
            t,
            400,
            "unknown_property",
        ),
        (
            "/devices/dvc_pv/measurements/map?properties=soc",
            t,
            400,
            "unknown_property",
        ),
        (
            "/devices/dvc_pv/measurement?property=soc&x=1",
            t,
            400,
            "unknown_field",
        ),
        (
            "/devices/dvc_pv/measurement?property=activePower&property=soc",
            t,
            400,
            "invalid_value",
        ),
        ("/devices?site=ste_nope", t, 404, "site_not_found"),
        ("/devices", None, 401, "unauthorized"),
        ("/devices", Some("sgt_wrong"), 401, "unauthorized"),
        ("/nowhere", t, 404, "not_found"),
    ];
    for (path, token, status, code) in cases {
        let (s, body) = problem(&site, path, *token).await;
        assert_eq!(s.as_u16(), *status, "{path}: {body}");
        assert_eq!(body["code"], *code, "{path}: {body}");
        assert!(!body["detail"].as_str().unwrap().is_empty());
    }
    // The unknown-property detail lists what the device offers.
    let (_, body) = problem(&site, "/devices/dvc_pv/measurement?property=soc", t).await;
    assert!(
        body["detail"].as_str().unwrap().contains("activePower"),
        "{body}"
    );
    assert_eq!(body["field"], "property");
    site.stop().await;
}

/// An operating state is named as the device's SunSpec model enumerates it,
/// in all three reads; a property without names carries none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operating_states_are_named_as_their_model_says() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let listing = site.get_ok("/devices").await;
    let pv = &listing[0];
    assert!(offers(pv, "operatingState", ""), "{pv}");
    let single = wait_for("the inverter's state", Duration::from_secs(10), || async {
        let v = site
            .get_ok("/devices/dvc_pv/measurement?property=operatingState")
            .await;
        v["value"].is_number().then_some(v)
    })
    .await;
    // The simulated inverter (model 103) produces: St 4, MPPT.
    assert_eq!(single["value"], 4, "{single}");
    assert_eq!(single["state"], "MPPT", "{single}");
    let list = site
        .get_ok("/devices/dvc_pv/measurements?properties=operatingState,activePower")
        .await;
    assert_eq!(list["measurements"][0]["state"], "MPPT", "{list}");
    assert!(list["measurements"][1].get("state").is_none(), "{list}");
    let map = site
        .get_ok("/devices/dvc_pv/measurements/map?properties=operatingState")
        .await;
    assert_eq!(
        map["measurements"]["operatingState"]["state"], "MPPT",
        "{map}"
    );
}
