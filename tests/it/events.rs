//! `GET /events` on a running agent: a device that stops answering and a
//! steering signal that runs out are listed, newest first, with the device
//! or site they concern; the device's return too.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::site::{self, STEER_TOKEN, SUMMER_MORNING_MS};
use crate::common::wait_for;
use crate::steering_support::TestSite;

/// The first event of `kind` about `key` = `reference`, once listed.
async fn listed(site: &site::SmallSite, kind: &str, key: &str, reference: &str) -> Value {
    wait_for(
        &format!("{kind} of {reference} in /events"),
        Duration::from_secs(10),
        || async {
            let events = site.get_ok("/events").await;
            events
                .as_array()?
                .iter()
                .find(|e| e["kind"] == kind && e[key] == reference)
                .cloned()
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_stops_answering_and_a_signal_that_expires_are_listed() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let until = sitegate::model::time::now_ms() + 2_500;
    let body = json!({"setting": {"value": 1, "unit": "kW"}, "validUntil": until});
    let (status, answer) = site
        .call(
            Method::POST,
            "/sites/ste_test/steering/ess",
            Some(STEER_TOKEN),
            Some(&body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let request = answer["requestId"]
        .as_str()
        .expect("a request id")
        .to_string();
    let started = listed(&site, "signalStarted", "siteReference", "ste_test").await;
    assert!(
        started["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&request)),
        "{started}"
    );

    site.sim.stop_server("bat").await;
    let offline = listed(&site, "deviceOffline", "deviceReference", "dvc_bat").await;
    assert!(
        offline["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{offline}"
    );
    let expired = listed(&site, "signalExpired", "siteReference", "ste_test").await;
    assert!(
        expired["timestamp"].as_i64().is_some_and(|t| t >= until),
        "expired once its validUntil passed: {expired}"
    );
    assert!(
        expired["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("energyStorageSetting") && d.contains(&request)),
        "{expired}"
    );

    site.sim
        .start_server("bat")
        .await
        .expect("the battery again");
    listed(&site, "deviceOnline", "deviceReference", "dvc_bat").await;
    // Newest first, each with its time; no event twice.
    let events = site.get_ok("/events").await;
    let times: Vec<i64> = events
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| e["timestamp"].as_i64().expect("a time"))
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{events}");
    let offline_count = events
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| e["kind"] == "deviceOffline" && e["deviceReference"] == "dvc_bat")
        .count();
    assert_eq!(offline_count, 1, "{events}");
    let limited = site.get_ok("/events?limit=1").await;
    assert_eq!(limited.as_array().map(Vec::len), Some(1), "{limited}");
    site.stop().await;
}
