//! The site energy view end to end: `GET /sites/{ref}/energy` over HTTP on
//! an agent polling the simulated site. The kWh of each flow must be the
//! deltas of the counters the agent stored (read back through the
//! time-series endpoint), integrated power must agree with them, a counter
//! that falls (a reset, a misread) must never count as negative or as its
//! whole level, and every bad query string gets a problem naming its field
//! and value.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sitegate::model::time::{format_utc, now_ms};
use sitegate::model::Property;

use crate::common::site::{self, SmallSite, READ_TOKEN, SUMMER_MORNING_MS};
use crate::common::wait_for;
use crate::steering_support::{kw, Kind, TestSite};

const FLOWS: [&str; 5] = ["produced", "imported", "exported", "charged", "discharged"];

/// The small site scaled up (100 kW PV, a 50 kW battery of 200 kWh), its
/// grid limits out of the way, so that a few seconds carry watt-hours enough
/// to compare.
fn big_site() -> String {
    TestSite::small()
        .key_of("dvc_pv", "rated_power", kw(100.0))
        .key_of("dvc_bat", "rated_power", kw(50.0))
        .key_of("dvc_bat", "capacity", crate::steering_support::kwh(200.0))
        .grid_limits(500.0, 500.0)
        .text()
}

async fn energy(site: &SmallSite, query: &str) -> (StatusCode, Value) {
    site.call(
        Method::GET,
        &format!("/sites/ste_test/energy?{query}"),
        Some(READ_TOKEN),
        None,
    )
    .await
}

/// The first and the last value the agent stored for a counter in
/// `[from, to)`, Wh.
async fn stored_ends(
    site: &SmallSite,
    device: &str,
    property: &str,
    from: i64,
    to: i64,
) -> (f64, f64) {
    let ask = |aggregation: &str| {
        json!({
            "property": property,
            "range": {"type": "absolute", "start": format_utc(from), "end": format_utc(to)},
            "resolution": {"value": 1, "unit": "d"},
            "aggregation": aggregation,
        })
    };
    let path = format!("/devices/{device}/measurements/time-series");
    let (s, first) = site
        .call(Method::POST, &path, Some(READ_TOKEN), Some(&ask("first")))
        .await;
    assert_eq!(s, StatusCode::OK, "{first}");
    let (s, last) = site
        .call(Method::POST, &path, Some(READ_TOKEN), Some(&ask("last")))
        .await;
    assert_eq!(s, StatusCode::OK, "{last}");
    let value = |v: &Value, i: usize| v["data"][i].as_f64().expect("a value");
    let n = last["data"].as_array().map_or(0, Vec::len);
    (value(&first, 0), value(&last, n - 1))
}

fn kwh(v: &Value, flow: &str) -> f64 {
    v[flow].as_f64().unwrap_or_else(|| panic!("{flow} in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kwh_are_the_counters_deltas_and_integrated_power_agrees() {
    // Real time: the agent's timestamps and the simulator's counters run alike.
    let site = site::start(&big_site(), 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let from = now_ms() - 60_000;
    // Full sun over a 30 kW load: the battery charges, the rest is exported.
    site.sim.set_sun(Some(1.0));
    site.sim.set_load(Some(30_000.0));
    // 10 s at real speed (time factor 1): more than the 0.05 kWh of each flow that
    // the checks below ask for.
    tokio::time::sleep(Duration::from_secs(10)).await;
    // Night under an 80 kW load: the battery discharges, the rest is imported.
    site.sim.set_sun(Some(0.0));
    site.sim.set_load(Some(80_000.0));
    // 10 s again, for the discharge and the import.
    tokio::time::sleep(Duration::from_secs(10)).await;
    site.agent.store().flush().await.expect("flush");
    let to = now_ms() - 1_000;
    let range = format!("from={}&to={}", format_utc(from), format_utc(to));

    let (status, auto) = energy(&site, &range).await;
    assert_eq!(status, StatusCode::OK, "{auto}");
    assert_eq!(auto["unit"], "kWh");
    assert_eq!(auto["interval"], "hour");
    let total = &auto["total"];
    for flow in FLOWS {
        assert_eq!(total["sources"][flow], "counter", "{total}");
    }
    assert_eq!(
        auto["devices"][2]["flows"],
        json!({"imported": "counter", "exported": "counter"})
    );
    // Each flow is its counter's delta over the range (the agent started
    // inside it, so nothing before it counts), to the watt-hour.
    let counters = [
        ("produced", "dvc_pv", "totalEnergyProduced"),
        ("discharged", "dvc_bat", "totalEnergyProduced"),
        ("charged", "dvc_bat", "totalEnergyConsumed"),
        ("imported", "dvc_grid", "totalEnergyConsumed"),
        ("exported", "dvc_grid", "totalEnergyProduced"),
    ];
    for (flow, device, property) in counters {
        let (first, last) = stored_ends(&site, device, property, from, to).await;
        let delta = (last - first) / 1000.0;
        assert!(
            (kwh(total, flow) - delta).abs() <= 0.0015,
            "{flow}: {} kWh, the counter rose {delta} kWh",
            kwh(total, flow)
        );
        assert!(delta > 0.05, "{flow}: only {delta} kWh in the stretch");
        let buckets: f64 = auto["buckets"]
            .as_array()
            .expect("buckets")
            .iter()
            .map(|b| kwh(b, flow))
            .sum();
        assert!(
            (buckets - kwh(total, flow)).abs() <= 0.002,
            "{flow}: {auto}"
        );
    }
    let load = kwh(total, "produced") + kwh(total, "imported") - kwh(total, "exported")
        + kwh(total, "discharged")
        - kwh(total, "charged");
    assert!((kwh(total, "consumption") - load).abs() <= 0.003, "{total}");
    let own = (kwh(total, "produced") - kwh(total, "exported")) / kwh(total, "produced");
    assert!(
        (kwh(total, "selfConsumption") - own).abs() <= 0.002,
        "{total}"
    );
    let autarky = (load - kwh(total, "imported")) / load;
    assert!((kwh(total, "autarky") - autarky).abs() <= 0.002, "{total}");

    let (status, integrated) = energy(&site, &format!("{range}&source=integratedPower")).await;
    assert_eq!(status, StatusCode::OK, "{integrated}");
    let itotal = &integrated["total"];
    for flow in FLOWS {
        assert_eq!(itotal["sources"][flow], "integratedPower", "{itotal}");
        let (counted, integrated) = (kwh(total, flow), kwh(itotal, flow));
        assert!(
            (counted - integrated).abs() <= 0.05 * counted + 0.003,
            "{flow}: counters {counted} kWh, integrated power {integrated} kWh"
        );
    }
    site.stop().await;
}

/// A site of one profile meter, whose counters the test sets.
fn meter_site() -> String {
    TestSite::bare("ste_test", "Test site")
        .gateway_id("test")
        .common_tokens()
        .bus_key("timeout_ms", 300)
        .device("grid", "dvc_grid", Kind::Meter)
        .name("Grid")
        .profile("eastron-sdm630")
        .poll_interval_ms(100)
        .text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_that_falls_is_a_reset_or_a_misread_never_negative() {
    let site = site::start(&meter_site(), 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let meter = site.sim.device("grid", 1).expect("the meter");
    let set = |property: Property, wh: f64| {
        assert!(meter.set_value(property, wh));
        let name = property.name();
        let site = &site;
        async move {
            wait_for(
                &format!("the agent to read {name} {wh} Wh"),
                Duration::from_secs(10),
                || async {
                    site.latest("dvc_grid", name)
                        .await
                        .filter(|(_, v)| (v - wh).abs() < 1.0)
                },
            )
            .await;
        }
    };
    assert!(meter.set_value(Property::ActivePower, 0.0));
    set(Property::TotalEnergyProduced, 500_000.0).await;
    set(Property::TotalEnergyConsumed, 1_000_000.0).await;
    let from = now_ms();
    // Readings of the level at the start inside the range (300 ms: three of the
    // meter's 100 ms polls), so that the first rise lies wholly in it (a rise
    // accrues evenly between two readings).
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Import: +2 kWh, a misread of 5 Wh, back above the level before it, a
    // reset to 1 kWh, +0.5 kWh. Export stays.
    for wh in [1_002_000.0, 5.0, 1_003_000.0, 1_000.0, 1_500.0] {
        set(Property::TotalEnergyConsumed, wh).await;
    }
    site.agent.store().flush().await.expect("flush");
    let (status, e) = energy(
        &site,
        &format!(
            "from={}&to={}",
            format_utc(from),
            format_utc(now_ms() + 60_000)
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{e}");
    let total = &e["total"];
    // 2 kWh, 1 kWh past the level before the misread, 0.5 kWh after the reset.
    assert!((kwh(total, "imported") - 3.5).abs() <= 0.001, "{total}");
    assert_eq!(total["counterResets"], 1, "{total}");
    assert_eq!(kwh(total, "exported"), 0.0, "{total}");
    assert_eq!(total["sources"]["produced"], "none", "{total}");
    assert_eq!(
        total["selfConsumption"],
        Value::Null,
        "no production: {total}"
    );
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_query_strings_get_problems_naming_field_and_value() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    let (from, to) = ("2026-06-21T00:00:00Z", "2026-06-22T00:00:00Z");
    let ok = format!("from={from}&to={to}");
    let cases: Vec<(String, &str, Option<&str>, &str)> = vec![
        (format!("to={to}"), "missing_field", Some("from"), "from"),
        (
            format!("from=yesterday&to={to}"),
            "invalid_value",
            Some("from"),
            "yesterday",
        ),
        (
            format!("from={from}&to=2026-13-01T00:00:00Z"),
            "invalid_value",
            Some("to"),
            "2026-13-01",
        ),
        (
            format!("from={to}&to={from}"),
            "invalid_range",
            Some("to"),
            "reversed",
        ),
        (
            format!("from={from}&to={from}"),
            "invalid_range",
            Some("to"),
            "empty",
        ),
        (
            format!("from={from}&to=2026-07-23T00:00:00Z"),
            "range_too_long",
            Some("to"),
            "31 days",
        ),
        (
            format!("{ok}&interval=week"),
            "invalid_value",
            Some("interval"),
            "\"week\"",
        ),
        (
            format!("{ok}&interval="),
            "invalid_value",
            Some("interval"),
            "empty",
        ),
        (
            format!("{ok}&source=meter"),
            "invalid_value",
            Some("source"),
            "\"meter\"",
        ),
        (
            format!("{ok}&limit=3"),
            "unknown_field",
            Some("limit"),
            "limit",
        ),
        (
            format!("{ok}&from={from}"),
            "invalid_value",
            Some("from"),
            "more than once",
        ),
    ];
    for (query, code, field, said) in cases {
        let (status, p) = energy(&site, &query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {p}");
        assert_eq!(p["code"], code, "{query}: {p}");
        assert_eq!(p["field"].as_str(), field, "{query}: {p}");
        let detail = p["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(said),
            "{query}: {detail:?} does not say {said:?}"
        );
    }
    let (status, p) = site
        .call(
            Method::GET,
            &format!("/sites/ste_nowhere/energy?{ok}"),
            Some(READ_TOKEN),
            None,
        )
        .await;
    assert_eq!(
        (status, p["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("site_not_found")),
        "{p}"
    );
    assert!(
        p["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("ste_nowhere"),
        "{p}"
    );
    let (status, _) = site
        .call(
            Method::GET,
            &format!("/sites/ste_test/energy?{ok}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A range before anything was stored: no bucket, no total.
    let (status, e) = energy(
        &site,
        "from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z&interval=day",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{e}");
    assert_eq!(
        (e["buckets"].clone(), e["total"].clone()),
        (json!([]), Value::Null),
        "{e}"
    );
    site.stop().await;
}
