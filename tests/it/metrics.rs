//! `GET /metrics` on a running agent: Prometheus text that a scraper accepts,
//! needing no token, with the families an operator watches (polls, Modbus
//! requests, store, steering writes, HTTP requests, process), and counters that
//! move as the site runs. `http.metrics = false` turns it off.

use std::time::Duration;

use crate::common::demo::{Demo, DEADLINE};
use crate::common::prom::{self, Scrape};
use crate::common::site::{self, STEER_TOKEN, SUMMER_MORNING_MS};
use crate::steering_support::TestSite;
use nix::sys::signal::Signal;
use reqwest::{Method, StatusCode};
use serde_json::json;
use sitegate::model::time::now_ms;

const T: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_describe_the_running_site_and_move_with_it() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;

    let first = site.scrape().await;
    for family in [
        "sitegate_bus_polls_total",
        "sitegate_bus_poll_duration_seconds",
        "sitegate_device_poll_failures_total",
        "sitegate_device_online",
        "sitegate_site_devices_online",
        "sitegate_modbus_requests_total",
        "sitegate_modbus_request_duration_seconds",
        "sitegate_store_commits_total",
        "sitegate_store_commit_duration_seconds",
        "sitegate_store_queue_depth",
        "sitegate_store_samples_total",
        "sitegate_steering_writes_total",
        "sitegate_steering_device_writes_total",
        "sitegate_steering_device_state",
        "sitegate_http_requests_total",
        "sitegate_http_request_duration_seconds",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "sitegate_build_info",
    ] {
        assert!(first.has_family(family), "{family} missing");
    }
    for (device, bus, ty) in [
        ("dvc_pv", "pv", "inverter"),
        ("dvc_bat", "bat", "battery"),
        ("dvc_grid", "grid", "meter"),
    ] {
        assert_eq!(
            first.get(&format!("sitegate_device_online{{device=\"{device}\"}}")),
            Some(1.0),
            "{device} online"
        );
        assert_eq!(
            first.get(&format!(
                "sitegate_site_devices_online{{site=\"ste_test\",type=\"{ty}\"}}"
            )),
            Some(1.0),
            "{ty} online"
        );
        assert!(
            first.sum(
                "sitegate_bus_polls_total",
                &[("bus", bus), ("result", "ok")]
            ) >= 1.0
        );
    }
    // No device has failed a poll: none is listed.
    assert_eq!(first.sum("sitegate_device_poll_failures_total", &[]), 0.0);
    assert!(first.sum("sitegate_modbus_requests_total", &[("outcome", "ok")]) >= 3.0);

    // Requests made now are counted by route template and status.
    for _ in 0..3 {
        site.get_ok("/devices/dvc_bat/measurement?property=soc")
            .await;
    }
    let (status, _) = site
        .call(Method::GET, "/devices/dvc_nope/measurements", None, None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A steering signal makes the battery's actuator write.
    let (status, body) = site
        .call(
            Method::POST,
            "/sites/ste_test/steering/ess",
            Some(STEER_TOKEN),
            Some(&json!({"setting": {"value": 2, "unit": "kW"}, "validUntil": now_ms() + 600_000})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let confirmed =
        "sitegate_steering_writes_total{site=\"ste_test\",kind=\"change\",result=\"confirmed\"}";
    let committed = "sitegate_store_samples_total{result=\"committed\"}";
    let applied = "sitegate_steering_device_state{device=\"dvc_bat\",state=\"applied\"}";
    let later = crate::common::wait_for(
        "the battery's write confirmed, more polls and commits",
        T,
        || async {
            let s = site.scrape().await;
            let polled_more = ["pv", "bat", "grid"].iter().all(|b| {
                s.sum("sitegate_bus_polls_total", &[("bus", b)])
                    > first.sum("sitegate_bus_polls_total", &[("bus", b)])
            });
            let committed_more =
                s.get(committed).unwrap_or(0.0) > first.get(committed).unwrap_or(0.0);
            let written = s.get(confirmed).unwrap_or(0.0) >= 1.0 && s.get(applied) == Some(1.0);
            (polled_more && committed_more && written).then_some(s)
        },
    )
    .await;
    // One state a device: the one it is in.
    assert_eq!(
        later.sum("sitegate_steering_device_state", &[("device", "dvc_bat")]),
        1.0
    );
    assert!(later.get("sitegate_steering_device_writes_total{device=\"dvc_bat\"}") >= Some(1.0));
    assert!(later.get("sitegate_store_commits_total{result=\"ok\"}") >= Some(1.0));
    assert!(
        later.sum(
            "sitegate_modbus_requests_total",
            &[("function", "write"), ("outcome", "ok")]
        ) >= 1.0
    );
    let soc_route = "/devices/{device_reference}/measurement";
    assert_eq!(
        later.get(&format!(
            "sitegate_http_requests_total{{transport=\"http\",method=\"GET\",route=\"{soc_route}\",status=\"200\"}}"
        )),
        Some(3.0)
    );
    assert_eq!(
        later.get(
            "sitegate_http_requests_total{transport=\"http\",method=\"GET\",route=\"/devices/{device_reference}/measurements\",status=\"401\"}"
        ),
        Some(1.0)
    );
    assert!(
        later.get(&format!(
            "sitegate_http_request_duration_seconds_count{{transport=\"http\",route=\"{soc_route}\"}}"
        )) >= Some(3.0)
    );
    let rss = later.get("process_resident_memory_bytes").unwrap_or(0.0);
    assert!(rss > 1e6, "RSS {rss}");
    // SQLite's share: the open store's page caches and statements.
    let sqlite = later
        .get("sitegate_store_sqlite_memory_bytes{at=\"now\"}")
        .expect("SQLite's memory in /metrics");
    let peak = later
        .get("sitegate_store_sqlite_memory_bytes{at=\"peak\"}")
        .expect("SQLite's peak in /metrics");
    assert!(sqlite > 10e3 && sqlite <= peak, "now {sqlite}, peak {peak}");
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_can_be_turned_off() {
    let text = TestSite::small().http_key("metrics", false).text();
    let site = site::start(&text, 60.0, SUMMER_MORNING_MS).await;
    let (status, body) = site.call(Method::GET, "/metrics", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["code"], "not_found");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or("")
            .contains("http.metrics = false"),
        "{body}"
    );
    site.stop().await;
}

/// The demo as a newcomer runs it: `/metrics` answers without a token and its
/// counters move as the simulated site runs and is steered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_change_as_the_demo_runs() {
    let mut demo = Demo::start(&[]).await;
    let scrape_demo = || prom::scrape(&demo.http, &demo.base);
    let polls = |s: &Scrape| s.sum("sitegate_bus_polls_total", &[("result", "ok")]);
    let first = crate::common::wait_for("the demo polled", DEADLINE, || async {
        let s = scrape_demo().await;
        (polls(&s) > 0.0).then_some(s)
    })
    .await;

    let steer = demo
        .http
        .post(format!("{}/sites/ste_demo/steering/ess", demo.base))
        .json(&json!({"setting": {"value": 5, "unit": "kW"}, "validUntil": now_ms() + 600_000}))
        .send()
        .await
        .expect("steering POST");
    assert_eq!(steer.status(), StatusCode::OK);

    let writes = |s: &Scrape| {
        s.sum(
            "sitegate_steering_writes_total",
            &[("kind", "change"), ("result", "confirmed")],
        )
    };
    let committed = "sitegate_store_samples_total{result=\"committed\"}";
    let later = crate::common::wait_for(
        "polls, commits and steering writes to grow",
        DEADLINE,
        || async {
            let s = scrape_demo().await;
            (polls(&s) > polls(&first)
                && s.get(committed).unwrap_or(0.0) > first.get(committed).unwrap_or(0.0)
                && writes(&s) >= 2.0)
                .then_some(s)
        },
    )
    .await;
    assert!(
        later.sum(
            "sitegate_http_requests_total",
            &[
                ("route", "/sites/{site_reference}/steering/ess"),
                ("status", "200")
            ]
        ) == 1.0
    );
    // Every demo device online (2 inverters, 2 batteries, a meter).
    assert_eq!(
        later.sum("sitegate_site_devices_online", &[("site", "ste_demo")]),
        5.0
    );
    let status = demo.stop(Signal::SIGINT).await;
    assert!(status.success(), "{status}");
}
