//! The store end to end: the agent polls the simulated site, the time-series
//! endpoint answers from what it stored, and a restarted agent that cannot reach
//! its devices still answers the latest values from the store.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use sitegate::agent::Agent;
use sitegate::config::Transport;
use sitegate::model::time::format_utc;
use sitegate::sim::{SimSite, SimSiteSpec};

use crate::common::site::{READ_TOKEN, SUMMER_MORNING_MS};
use crate::common::wait_for;
use crate::steering_support::TestSite;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_series_from_polls_and_latest_values_after_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = TestSite::small().config();
    config.storage.path = dir.path().join("sitegate.db");
    config.storage.flush_interval_ms = 100;
    let mut spec = SimSiteSpec::from_config(&config, 1.0);
    spec.start = Some(SUMMER_MORNING_MS);
    let sim = SimSite::start(spec).await.expect("simulator");
    let mut polled = config.clone();
    sim.point_config_at_servers(&mut polled);
    let agent = Agent::start(polled).await.expect("agent");
    let base = format!("http://{}", agent.http_addrs()[0]);
    let http = crate::common::http_client()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");

    let get_latest = |base: String| {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("{base}/devices/dvc_bat/measurement?property=soc"))
                .bearer_auth(READ_TOKEN)
                .send()
                .await
                .expect("GET");
            let status = r.status();
            let body: serde_json::Value = r.json().await.expect("json");
            (status == StatusCode::OK).then_some(body)
        }
    };
    // A few polls' worth of samples, committed.
    wait_for("samples of every device", Duration::from_secs(15), || {
        let store = agent.store().clone();
        async move { (store.latest().await.ok()?.len() >= 3).then_some(()) }
    })
    .await;
    // Two more seconds of the agent's polls (every 200 ms) stored: the series
    // below, at a resolution of 1 s, needs samples in at least two of its seconds.
    tokio::time::sleep(Duration::from_secs(2)).await;
    agent.store().flush().await.expect("flush");

    let now = sitegate::model::time::now_ms();
    let body = json!({
        "property": "soc",
        "range": {"type": "absolute", "start": format_utc(now - 60_000), "end": format_utc(now + 1_000)},
        "resolution": {"value": 1, "unit": "s"}
    });
    let r = http
        .request(
            Method::POST,
            format!("{base}/devices/dvc_bat/measurements/time-series"),
        )
        .bearer_auth(READ_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("POST");
    assert_eq!(r.status(), StatusCode::OK);
    let series: serde_json::Value = r.json().await.expect("json");
    let times = series["time"].as_array().expect("time");
    let data = series["data"].as_array().expect("data");
    assert!(times.len() >= 2, "{series}");
    assert_eq!(times.len(), data.len());
    let parsed: Vec<i64> = times
        .iter()
        .map(|t| {
            sitegate::model::time::parse_rfc3339(t.as_str().expect("string")).expect("RFC 3339")
        })
        .collect();
    assert!(
        parsed.windows(2).all(|w| w[0] < w[1] && w[0] % 1000 == 0),
        "{series}"
    );

    let before = get_latest(base.clone()).await.expect("a latest soc");
    agent.shutdown().await;
    sim.shutdown().await;

    // Same store, devices unreachable: the latest values come from the store.
    let mut offline = config.clone();
    for bus in &mut offline.buses {
        bus.transport = Transport::Tcp {
            host: "127.0.0.1".into(),
            port: 1,
        };
    }
    let agent = Agent::start(offline).await.expect("agent restarts");
    let base = format!("http://{}", agent.http_addrs()[0]);
    let after = get_latest(base.clone())
        .await
        .expect("soc answered from the store");
    // Polls may have landed between the last GET and the shutdown: the restored
    // value is the one committed last, at most a few polls newer.
    let (t0, t1) = (
        before["timestamp"].as_i64().expect("ts"),
        after["timestamp"].as_i64().expect("ts"),
    );
    assert!(
        t1 >= t0 && t1 - t0 < 5_000,
        "before {before}, after {after}"
    );
    assert!(after["value"].is_number(), "{after}");
    agent.shutdown().await;
}
