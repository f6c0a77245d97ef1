//! The seed's worked scenario over HTTP, checked at the simulated devices'
//! registers: combined signal, partial update, scheduled start, expiry back to the
//! fallback within one control interval, DELETE, and devices that refuse writes.

use std::time::Duration;
use tokio::time::Instant;

use crate::steering_support::*;
use serde_json::json;

const INTERVAL_MS: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worked_scenario_at_the_registers() {
    let rig = Rig::start(&config_text(INTERVAL_MS, 30)).await;
    // At fallback `auto`, the storage control is released and no limit is set.
    eventually("fallback written", Duration::from_secs(5), || async {
        rig.device_state("dvc_bat_a").await["state"] == "fallback"
    })
    .await;
    assert_eq!(rig.storage("bat-a"), None);

    // Step 1: site steering, ESS 100 kW discharge and 300 kW curtailment.
    let t = now_ms() + 60_000;
    let body = json!({"energyStorageSetting": {"value": 100000, "unit": "W"},
                      "productionCurtailment": {"value": 300000, "unit": "W"}, "validUntil": t});
    let (s, answer) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{answer}");
    let first = answer["requestId"].as_str().unwrap().to_string();
    assert!(first.starts_with("req_"));
    assert_eq!(answer["energyStorageSetting"], body["energyStorageSetting"]);
    // Proportional by rating: 50 kW each = 25 % of WChaMax; 150 kW each = 75 % of WMax.
    eventually(
        "100 kW discharge and 300 kW curtailment",
        Duration::from_secs(10),
        || async {
            rig.storage("bat-a") == window(25.0)
                && rig.storage("bat-b") == window(25.0)
                && rig.limit("pv-a") == Some(75.0)
                && rig.limit("pv-b") == Some(75.0)
        },
    )
    .await;
    let st = rig.state().await;
    assert_eq!(
        st["energyStorageSetting"]["setting"],
        json!({"value": 100000, "unit": "W"})
    );
    assert_eq!(st["productionCurtailment"]["requestId"], first.as_str());
    assert_eq!(st["maximizeGridImport"]["value"], false);
    assert_eq!(st["maximizeGridImport"]["validUntil"], t);
    eventually("all applied", Duration::from_secs(10), || async {
        let st = rig.state().await;
        st["devices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "applied" && d["confirmed"] == true)
    })
    .await;
    let bat = rig.device_state("dvc_bat_a").await;
    assert_eq!(bat["setpoint"], json!({"value": 50000, "unit": "W"}));
    assert_eq!(bat["component"], "ess");
    assert!(bat["writtenAt"].as_i64().is_some());

    // Step 2: ESS only, 300 kW; the curtailment stays.
    let (s, answer) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": 300000, "unit": "W"}, "validUntil": t}),
        )
        .await;
    assert_eq!(s, 200, "{answer}");
    eventually("300 kW discharge", Duration::from_secs(10), || async {
        rig.storage("bat-a") == window(75.0) && rig.storage("bat-b") == window(75.0)
    })
    .await;
    assert_eq!(rig.limit("pv-a"), Some(75.0));
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"]["requestId"], answer["requestId"]);
    assert_eq!(st["productionCurtailment"]["requestId"], first.as_str());

    // A scheduled curtailment: 50 % of 400 kW from 1.5 s on.
    let from = now_ms() + 1500;
    let (s, _) = rig
        .post(
            &format!("/sites/{SITE}/steering/curtailment"),
            STEER,
            &json!({"setting": {"value": 50, "unit": "%"}, "validFrom": from, "validUntil": t}),
        )
        .await;
    assert_eq!(s, 200);
    let st = rig.state().await;
    assert_eq!(st["scheduled"].as_array().unwrap().len(), 1, "{st}");
    assert_eq!(st["scheduled"][0]["component"], "curtailment");
    assert_eq!(rig.limit("pv-a"), Some(75.0), "not before validFrom");
    eventually("scheduled curtailment", Duration::from_secs(10), || async {
        rig.limit("pv-a") == Some(50.0) && rig.limit("pv-b") == Some(50.0)
    })
    .await;
    assert!(now_ms() >= from);

    // Expiry: the ESS entry ends; within one control interval the storage is released.
    let until = now_ms() + 2000;
    let (s, _) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": -40, "unit": "kW"}, "validUntil": until}),
        )
        .await;
    assert_eq!(s, 200);
    eventually("40 kW charge", Duration::from_secs(10), || async {
        rig.storage("bat-a") == window(-10.0)
    })
    .await;
    eventually(
        "released after validUntil",
        Duration::from_secs(10),
        || async { rig.storage("bat-a").is_none() && rig.storage("bat-b").is_none() },
    )
    .await;
    let late = now_ms() - until;
    assert!(
        late <= INTERVAL_MS as i64,
        "released {late} ms after validUntil"
    );
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"], json!(null));
    eventually("battery at fallback", Duration::from_secs(10), || async {
        rig.device_state("dvc_bat_a").await["state"] == "fallback"
    })
    .await;

    // DELETE one component, then all.
    let (s, st) = rig
        .delete(
            &format!("/sites/{SITE}/steering?component=curtailment"),
            STEER,
        )
        .await;
    assert_eq!(s, 200, "{st}");
    assert_eq!(st["productionCurtailment"], json!(null));
    assert_eq!(st["maximizeGridImport"]["value"], false);
    eventually("limits released", Duration::from_secs(10), || async {
        rig.limit("pv-a").is_none() && rig.limit("pv-b").is_none()
    })
    .await;
    let (s, st) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert_eq!(s, 200);
    assert_eq!(st["maximizeGridImport"], json!(null));

    // The history has the requests, newest first, and the writes.
    let (s, h) = rig
        .get(&format!("/sites/{SITE}/steering/history?limit=200"), READ)
        .await;
    assert_eq!(s, 200);
    let h = h.as_array().unwrap();
    // The release writes the DELETE causes may be newer than the DELETE itself.
    let newest_request = h.iter().find(|e| e["type"] == "request").unwrap();
    assert_eq!(
        newest_request["action"],
        format!("DELETE /sites/{SITE}/steering")
    );
    assert!(h.iter().any(|e| e["type"] == "request"
        && e["requestId"] == first.as_str()
        && e["token"] == "operator"));
    assert!(h.iter().any(|e| e["type"] == "write"
        && e["deviceReference"] == "dvc_bat_a"
        && e["result"] == "ok"));
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_refuses_writes_fails_alone() {
    let rig = Rig::start(&config_text(INTERVAL_MS, 30)).await;
    rig.device("bat-b").set_refuse_writes(true);
    let body = json!({"setting": {"value": 100, "unit": "kW"}, "validUntil": now_ms() + 60_000});
    let (s, _) = rig
        .post(&format!("/sites/{SITE}/steering/ess"), STEER, &body)
        .await;
    assert_eq!(s, 200);
    // bat-a is "applied" at each step of its ramp (25 % of 200 kW a second:
    // 15 kW in a 300 ms interval), so wait for its register to hold its half
    // of the signal as well.
    eventually(
        "bat-a applied at 25 %, bat-b failed",
        Duration::from_secs(5),
        || async {
            rig.device_state("dvc_bat_a").await["state"] == "applied"
                && rig.storage("bat-a") == window(25.0)
                && rig.device_state("dvc_bat_b").await["state"] == "failed"
        },
    )
    .await;
    assert_eq!(rig.storage("bat-b"), None);
    let b = rig.device_state("dvc_bat_b").await;
    assert_eq!(b["confirmed"], false);
    assert!(b["error"].as_str().unwrap().contains("exception"), "{b}");
    // It is retried with backoff and recovers once the device accepts writes.
    rig.device("bat-b").set_refuse_writes(false);
    let started = Instant::now();
    eventually("bat-b recovers", Duration::from_secs(5), || async {
        rig.device_state("dvc_bat_b").await["state"] == "applied"
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(rig.storage("bat-b"), window(25.0));
    let (_, h) = rig
        .get(&format!("/sites/{SITE}/steering/history"), READ)
        .await;
    assert!(h
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["deviceReference"] == "dvc_bat_b" && e["result"] == "error"));
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maximize_grid_import_charges_within_max_import() {
    let text =
        config_text(INTERVAL_MS, 30).replace("max_import = \"10 MW\"", "max_import = \"300 kW\"");
    let rig = Rig::start(&text).await;
    let body = json!({"energyStorageSetting": {"value": 100, "unit": "kW"}, "maximizeGridImport": true,
                      "validUntil": now_ms() + 60_000});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
    // Production held back, storage charging hard, import at most 300 kW.
    eventually(
        "charging near the import limit",
        Duration::from_secs(20),
        || async {
            let grid = rig.device("grid").state().ac_power_w;
            let charging = |bus: &str| {
                rig.storage(bus)
                    .is_some_and(|c| c.out_pct < -60.0 && c.in_pct > 60.0)
            };
            rig.limit("pv-a") == Some(0.0)
                && charging("bat-a")
                && charging("bat-b")
                && grid > 250_000.0
        },
    )
    .await;
    // Held, not only touched: ten readings over a second (three of the loop's
    // 300 ms intervals), none over maxImport.
    for _ in 0..10 {
        let grid = rig.device("grid").state().ac_power_w;
        let power = |bus: &str| rig.device(bus).state().ac_power_w;
        assert!(
            grid <= 300_000.0,
            "import {grid} W over maxImport: batteries {} and {} W ({:?}), PV {} and {} W",
            power("bat-a"),
            power("bat-b"),
            rig.storage("bat-a"),
            power("pv-a"),
            power("pv-b"),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let st = rig.state().await;
    assert_eq!(st["maximizeGridImport"]["value"], true);
    assert_eq!(
        rig.device_state("dvc_bat_a").await["component"],
        "maximizeGridImport"
    );
    rig.shutdown().await;
}
