//! `GET /metrics` at scale: an agent on a simulated site of 1,000 devices laid
//! out as commercial fleets are (and as `cargo bench --bench footprint --
//! scale` lays them out): 25 gateways of 40 unit ids, a park of 200 inverters,
//! 20 batteries and its grid meter, 19 commercial sites of about 26
//! inverters, their batteries and a grid meter each, and sub-meters. Every
//! device polled, every inverter under a production limit: one scrape stays
//! under 300 KB, with histograms per bus and one sample per device and family.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use sitegate::model::time::now_ms;

use crate::common::prom::Scrape;
use crate::common::site::{self, STEER_TOKEN, SUMMER_MORNING_MS};
use crate::steering_support::TestSite;

const DEVICES: usize = 1000;
const PER_GATEWAY: usize = 40;
/// At most this many bytes a scrape.
const BOUND: usize = 300_000;

/// (site, kind) of every device, in gateway order.
fn layout() -> (usize, Vec<(usize, &'static str)>) {
    let (inv, bat) = (694, 153);
    let met = DEVICES - inv - bat;
    let mut order = Vec::new();
    let mut add = |site: usize, i: usize, b: usize, m: usize| {
        order.extend(std::iter::repeat_n((site, "inverter"), i));
        order.extend(std::iter::repeat_n((site, "battery"), b));
        order.extend(std::iter::repeat_n((site, "meter"), m));
    };
    // The park, then 19 commercial sites sharing the rest, then sub-meters.
    add(0, 200, 20, 1);
    let (inv, bat, commercial) = (inv - 200, bat - 20, 19);
    for c in 0..commercial {
        let share = |total: usize| total / commercial + usize::from(c < total % commercial);
        add(1 + c, share(inv), share(bat), 1);
    }
    let sub = met - 1 - commercial;
    add(1 + commercial, 0, 0, sub);
    (commercial + 2, order)
}

/// The fleet of [`layout`]: every site with 100 MW limits, every gateway a
/// bus (1 s timeout), every device polled every 5 s.
fn fleet() -> TestSite {
    let (sites, devices) = layout();
    let mut fleet = TestSite::bare("ste_0", "Site 0")
        .gateway_id("scale")
        .common_tokens()
        .polling(500, 2000)
        .bus_key("timeout_ms", 1000)
        .poll_interval_ms(5000);
    for s in 0..sites {
        fleet = fleet
            .site(&format!("ste_{s}"), &format!("Site {s}"))
            .site_key("max_import", "100 MW")
            .site_key("max_export", "100 MW");
    }
    for (i, (site, kind)) in devices.iter().enumerate() {
        let (bus, reference) = (format!("gw{}", i / PER_GATEWAY), format!("dvc_{i:04}"));
        fleet = fleet.site(&format!("ste_{site}"), &format!("Site {site}"));
        fleet = match *kind {
            "inverter" => fleet.inverter(&bus, &reference, 10.0),
            "battery" => fleet.battery(&bus, &reference, 10.0, 20.0),
            _ => fleet.meter(&bus, &reference),
        }
        .name(&format!("D{i}"))
        .unit_id(u8::try_from(i % PER_GATEWAY + 1).unwrap());
    }
    fleet
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_of_1000_devices_stays_under_300_kb() {
    let site = site::start(&fleet().text(), 1.0, SUMMER_MORNING_MS).await;
    let (sites, devices) = layout();
    let steered = devices.iter().filter(|(_, k)| *k != "meter").count();
    let scrape = || async {
        let resp = site
            .http
            .get(format!("{}/metrics", site.base))
            .send()
            .await
            .expect("GET /metrics");
        assert_eq!(resp.status(), StatusCode::OK);
        resp.text().await.expect("body")
    };
    let wait = Duration::from_secs(120);
    crate::common::wait_for("every device online", wait, || async {
        let s = Scrape::parse(&scrape().await);
        (s.sum("sitegate_site_devices_online", &[]) == DEVICES as f64).then_some(())
    })
    .await;
    // Every inverter under a limit: a change written to each.
    for s in 0..sites - 1 {
        let body = json!({"setting": {"value": 5, "unit": "kW"}, "validUntil": now_ms() + 600_000});
        let (status, v) = site
            .call(
                Method::POST,
                &format!("/sites/ste_{s}/steering/curtailment"),
                Some(STEER_TOKEN),
                Some(&body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
    }
    let inverters = devices.iter().filter(|(_, k)| *k == "inverter").count();
    let text = crate::common::wait_for("every inverter's limit written", wait, || async {
        let text = scrape().await;
        let s = Scrape::parse(&text);
        let applied = s.sum("sitegate_steering_device_state", &[("state", "applied")]);
        (applied >= inverters as f64).then_some(text)
    })
    .await;
    let s = Scrape::parse(&text);
    let series = |name: &str| {
        s.samples
            .keys()
            .filter(|k| k.split('{').next() == Some(name))
            .count()
    };
    assert_eq!(series("sitegate_device_online"), DEVICES);
    assert_eq!(series("sitegate_steering_device_state"), steered);
    assert_eq!(series("sitegate_steering_device_writes_total"), steered);
    assert!(
        !text
            .lines()
            .any(|l| l.contains("_bucket{") && l.contains("device=")),
        "no histogram per device"
    );
    let size = text.len();
    eprintln!(
        "/metrics at {DEVICES} devices on {} buses: {size} bytes, {} lines; the largest families:",
        DEVICES.div_ceil(PER_GATEWAY),
        text.lines().count()
    );
    let mut bytes: std::collections::BTreeMap<&str, usize> = Default::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or(line);
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|x| {
                name.strip_suffix(x)
                    .filter(|f| s.types.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        *bytes.entry(family).or_default() += line.len() + 1;
    }
    let mut largest: Vec<_> = bytes.into_iter().collect();
    largest.sort_by_key(|(_, b)| std::cmp::Reverse(*b));
    for (family, b) in largest.iter().take(8) {
        eprintln!("  {family}: {b} bytes");
    }
    assert!(size <= BOUND, "a scrape is {size} bytes, more than {BOUND}");
    site.stop().await;
}
