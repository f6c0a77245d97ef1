//! The signal is durable: after a restart of the agent on the same database the
//! active parts are applied again and what expired while it was down is gone;
//! and a database written by the first releases (their JSON in the rows) still
//! loads: its signal, history and idempotency answers read as they were.

use std::time::Duration;

use crate::steering_support::*;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_signal_and_drops_what_expired() {
    let rig = Rig::start(&config_text(300, 30)).await;
    let t = now_ms() + 120_000;
    let body = json!({"energyStorageSetting": {"value": 300, "unit": "kW"},
                      "productionCurtailment": {"value": 300, "unit": "kW"}, "validUntil": t});
    let (s, first) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200);
    // A short ESS override that ends while the agent is down. It is long
    // enough to be seen on the batteries on a loaded machine: the check below
    // may take until it ends, never longer.
    let short = now_ms() + 5000;
    let (s, _) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": 100, "unit": "kW"}, "validUntil": short}),
        )
        .await;
    assert_eq!(s, 200);
    let until_short = Duration::from_millis((short - now_ms()).max(0) as u64);
    eventually("steered", until_short, || async {
        rig.storage("bat-a") == window(25.0) && rig.limit("pv-a") == Some(75.0)
    })
    .await;

    let rig = rig.restart().await;
    // Until the short override's validUntil by the real clock the agent reads (it
    // may have passed already, while the agent was down): then it must be gone.
    tokio::time::sleep(Duration::from_millis((short - now_ms()).max(0) as u64)).await;
    let st = rig.state().await;
    assert_eq!(st["energyStorageSetting"], json!(null), "{st}");
    assert_eq!(st["productionCurtailment"]["requestId"], first["requestId"]);
    assert_eq!(st["productionCurtailment"]["validUntil"], t);
    assert_eq!(st["maximizeGridImport"]["value"], false);
    eventually(
        "curtailment kept, storage at fallback",
        Duration::from_secs(10),
        || async {
            rig.limit("pv-a") == Some(75.0)
                && rig.limit("pv-b") == Some(75.0)
                && rig.storage("bat-a").is_none()
        },
    )
    .await;
    let (_, h) = rig
        .get(&format!("/sites/{SITE}/steering/history"), READ)
        .await;
    assert!(h
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["requestId"] == first["requestId"]));
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_the_first_releases_still_loads() {
    let rig = Rig::start(&config_text(300, 30)).await;
    let from = now_ms() - 1000;
    let until = now_ms() + 120_000;
    // Rows exactly as the first releases wrote them (keys sorted).
    let answer = format!(
        r#"{{"productionCurtailment":{{"unit":"kW","value":300}},"requestId":"req_00000000000000c1","validUntil":{until}}}"#
    );
    let request = format!(
        r#"{{"action":"POST /sites/{SITE}/steering","body":{{"productionCurtailment":{{"unit":"kW","value":300}},"validUntil":{until}}},"requestId":"req_00000000000000c1","source":"http","time":{from},"token":"operator","type":"request"}}"#
    );
    let write = format!(
        r#"{{"action":"production limit","component":"curtailment","confirmed":true,"deviceReference":"dvc_pv_a","error":null,"result":"ok","setpoint":{{"unit":"W","value":150000.0}},"time":{},"type":"write"}}"#,
        from + 1
    );
    let rig = rig
        .restart_with(|config| {
            let conn = rusqlite::Connection::open(&config.storage.path).unwrap();
            conn.execute(
                "INSERT INTO steering_timeline (site, component, from_ms, until_ms, value, request_id)
                 VALUES (?1, 'curtailment', ?2, ?3, '{\"unit\":\"kW\",\"value\":300.0}', 'req_00000000000000c1'),
                        (?1, 'maximizeGridImport', ?2, ?3, 'false', 'req_00000000000000c1')",
                rusqlite::params![SITE, from, until],
            )
            .unwrap();
            for (at, kind, record) in [(from, "request", &request), (from + 1, "write", &write)] {
                conn.execute(
                    "INSERT INTO steering_audit (site, at_ms, kind, record) VALUES (?1, ?2, ?3, ?4)",
                    rusqlite::params![SITE, at, kind, record],
                )
                .unwrap();
            }
            conn.execute(
                "INSERT INTO steering_idempotency (caller, key, at_ms, answer) VALUES ('operator', 'first', ?1, ?2)",
                rusqlite::params![from, answer],
            )
            .unwrap();
        })
        .await;

    let st = rig.state().await;
    assert_eq!(
        st["productionCurtailment"],
        json!({"validFrom": from, "validUntil": until, "requestId": "req_00000000000000c1",
               "setting": {"value": 300, "unit": "kW"}}),
        "{st}"
    );
    assert_eq!(st["maximizeGridImport"]["value"], false);
    eventually(
        "the stored curtailment applied",
        Duration::from_secs(10),
        || async { rig.limit("pv-a") == Some(75.0) && rig.limit("pv-b") == Some(75.0) },
    )
    .await;
    let (s, h) = rig
        .get(&format!("/sites/{SITE}/steering/history"), READ)
        .await;
    assert_eq!(s, 200);
    let h = h.as_array().unwrap();
    for stored in [&request, &write] {
        // Numbers in today's one style: whole watts without a fraction.
        let want: Value = serde_json::from_str(&stored.replace("150000.0", "150000")).unwrap();
        assert!(h.contains(&want), "{want} not in {h:?}");
    }
    // The first answer again for the same key and body (an answer stored
    // without its operation compares the body only); another body is refused.
    let send = |body: Value| {
        rig.http
            .post(format!("{}/sites/{SITE}/steering", rig.base))
            .header("Idempotency-Key", "first")
            .json(&body)
    };
    let other = json!({"energyStorageSetting": {"mode": "idle"}, "validUntil": until});
    let (s, v) = rig.send(send(other), STEER).await;
    assert_eq!(
        (s, v["code"].as_str()),
        (422, Some("idempotency_key_reused")),
        "{v}"
    );
    let same = json!({"productionCurtailment": {"unit": "kW", "value": 300}, "validUntil": until});
    let (s, replay) = rig.send(send(same), STEER).await;
    assert_eq!(s, 200, "{replay}");
    // As stored, and written (durable).
    let mut want = serde_json::from_str::<Value>(&answer).unwrap();
    want["durable"] = json!(true);
    assert_eq!(replay, want);
    rig.shutdown().await;
}
