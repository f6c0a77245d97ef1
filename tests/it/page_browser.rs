//! The technician page in a real headless Chromium, driven over WebDriver,
//! against the simulated site and the agent started in-process.
//!
//! Needs `chromium` and `chromium-driver` (Debian). Without them each test
//! prints a skip notice, or fails when `SITEGATE_REQUIRE_BROWSER=1` (CI).
//!
//! `cargo test --test it page_browser:: -- --ignored screenshots` takes the
//! screenshots of `docs/screenshots/` from a running `sitegate demo`.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::site::{self, SmallSite, READ_TOKEN, STEER_TOKEN, SUMMER_MORNING_MS};
use crate::common::webdriver::{decode_base64, launch_or_skip, launch_or_skip_with, Browser};
use crate::steering_support::TestSite;

const WAIT: Duration = Duration::from_secs(30);

/// Waits until the store answers a time series for every device and an
/// energy bucket for the site, so that the page's first chart and energy
/// requests find data.
async fn history_exists(site: &SmallSite) {
    for device in ["dvc_pv", "dvc_bat", "dvc_grid"] {
        crate::common::wait_for("stored samples", WAIT, || async {
            let now = sitegate::model::time::now_ms();
            let body = json!({
                "property": "activePower",
                "range": {"type": "absolute",
                          "start": sitegate::model::time::format_utc(now - 3_600_000),
                          "end": sitegate::model::time::format_utc(now + 60_000)},
                "resolution": {"value": 30, "unit": "s"},
            });
            let (status, v) = site
                .call(
                    Method::POST,
                    &format!("/devices/{device}/measurements/time-series"),
                    Some(READ_TOKEN),
                    Some(&body),
                )
                .await;
            (status == 200 && v["data"].as_array().is_some_and(|d| !d.is_empty())).then_some(())
        })
        .await;
    }
    // And the energy view has a bucket: the page asks for it once, with its
    // first charts, and again only a minute later.
    crate::common::wait_for("an energy bucket", WAIT, || async {
        let now = sitegate::model::time::now_ms();
        let path = format!(
            "/sites/ste_test/energy?from={}&to={}",
            sitegate::model::time::format_utc(now - 3_600_000),
            sitegate::model::time::format_utc(now + 60_000)
        );
        let (status, v) = site.call(Method::GET, &path, Some(READ_TOKEN), None).await;
        (status == 200 && v["buckets"].as_array().is_some_and(|b| !b.is_empty())).then_some(())
    })
    .await;
}

async fn sign_in(b: &Browser, token: &str) {
    b.wait_js(
        "the sign-in form",
        WAIT,
        "return !document.getElementById('login').hidden && document.getElementById('login-why').textContent;",
    )
    .await;
    b.type_into("#token", token).await;
    b.click("#login-form button[type=submit]").await;
}

/// Devices with values, the flow diagram and both charts.
async fn site_is_shown(b: &Browser) {
    b.wait_js(
        "three device cards with their power",
        WAIT,
        r#"const cards = document.querySelectorAll('#device-list article.device');
           const power = [...document.querySelectorAll('#device-list dd[data-property=activePower]')];
           return cards.length === 3 && power.length === 3 && power.every(d => /\d\s*k?W/.test(d.textContent));"#,
    )
    .await;
    let soc = b
        .text("#device-list article[data-ref=dvc_bat] dd[data-property=soc]")
        .await;
    assert!(soc.contains('%'), "battery SoC shown: {soc:?}");
    let state = b.text("#device-list article[data-ref=dvc_pv] .state").await;
    assert!(state.contains("Online"), "online state in words: {state:?}");
    let operating = b
        .text("#device-list article[data-ref=dvc_pv] dd[data-property=operatingState]")
        .await;
    assert_eq!(operating, "MPPT (4)", "the inverter's St by its name");

    let load = b.text("#flow-body svg .node.load text.value").await;
    assert!(load.contains('W'), "load derived in the flow: {load:?}");

    let drawn = b
        .wait_js(
            "the power chart with a line or a point per device",
            WAIT,
            r#"const n = document.querySelectorAll('#chart-power .plot svg path.series, #chart-power .plot svg circle.dot').length;
               const legend = document.querySelector('#chart-power .legend').textContent;
               return n >= 3 && /PV/.test(legend) && /Battery/.test(legend) && /Grid/.test(legend) && n;"#,
        )
        .await;
    assert!(drawn.as_u64().unwrap_or(0) >= 3, "{drawn}");
    b.wait_js(
        "the SoC chart",
        WAIT,
        "return document.querySelectorAll('#chart-soc .plot svg path.series, #chart-soc .plot svg circle.dot').length;",
    )
    .await;
    let layers = b
        .wait_js(
            "the site chart: PV, battery and grid stacked, the load, the grid limits",
            WAIT,
            r#"const svg = document.querySelector('#chart-site .plot svg');
               if (!svg) return false;
               const layers = [...svg.querySelectorAll('path.area')].map(p => p.dataset.layer);
               const load = svg.querySelectorAll('path.load-line').length;
               const limits = [...svg.querySelectorAll('line.limit-line')].map(l => l.dataset.limit);
               return layers.includes('pv') && load === 1 && limits.length === 2 && layers.join(',');"#,
        )
        .await;
    assert!(
        layers
            .as_str()
            .is_some_and(|l| l.contains("charge") || l.contains("import") || l.contains("export")),
        "the battery or the grid stacked beside PV: {layers}"
    );
    let energy = b
        .wait_js(
            "the energy panel: kWh per hour, self-consumption and autarky",
            WAIT,
            r#"const rows = document.querySelectorAll('#energy-body table.energy-table tbody tr').length;
               const total = document.querySelector('#energy-body table.energy-table tfoot tr');
               const summary = document.querySelector('#energy-body .energy-summary');
               return rows >= 1 && total && summary && /kWh/.test(summary.textContent) && /autarky/.test(summary.textContent)
                 && total.textContent + ' | ' + document.querySelector('#energy-body p.small').textContent;"#,
        )
        .await;
    let energy = energy.as_str().unwrap_or_default();
    assert!(energy.starts_with("Total"), "{energy}");
    assert!(
        energy.contains("PV: counter"),
        "each flow's source said: {energy}"
    );
}

fn visible(id: &str) -> String {
    format!("const e = document.getElementById('{id}'); return !!e && getComputedStyle(e).display !== 'none';")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_token_sees_the_site_and_steer_token_sends_a_signal() {
    let Some(b) = launch_or_skip("read_token_sees_the_site_and_steer_token_sends_a_signal").await
    else {
        return;
    };
    // Compacted every 5 s: the store says how far back it reaches only once
    // it has compacted samples.
    let config = TestSite::small()
        .section_key(&["storage"], "compact_interval_s", 5)
        .text();
    let site = site::start(&config, 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    history_exists(&site).await;

    // Without a token the agent answers 401 and the page asks for one.
    b.goto(&format!("{}/#range=1h", site.base)).await;
    let why = b
        .wait_js(
            "the token prompt",
            WAIT,
            "return !document.getElementById('login').hidden && document.getElementById('login-why').textContent;",
        )
        .await;
    assert!(why.as_str().unwrap_or("").contains("token"), "{why}");

    // A read-only token: everything is shown, no steering form, no "End now".
    sign_in(&b, READ_TOKEN).await;
    site_is_shown(&b).await;
    b.wait_js(
        "the read-only notice",
        WAIT,
        "return /read only/.test(document.getElementById('access').textContent);",
    )
    .await;
    b.wait_js(
        "the steering state",
        WAIT,
        "return document.querySelectorAll('#steer-state table.told tbody tr[data-ref]').length === 2;",
    )
    .await;
    assert_eq!(b.js(&visible("steer-form"), json!([])).await, json!(false));
    assert_eq!(
        b.js(
            "return document.querySelectorAll('#steer-state button').length;",
            json!([])
        )
        .await,
        json!(0)
    );

    // How far back the history reaches, from the agent's /metrics: read
    // every 5 s while a resolution is missing (the store compacts every 5 s
    // here), then every 20 s.
    let held = b
        .wait_js(
            "the history's reach under the charts",
            WAIT,
            r#"const t = document.getElementById('history-held').textContent;
               return /^History held: raw samples from .*minute means from .*hourly means from /.test(t) && t;"#,
        )
        .await;
    assert!(held.as_str().is_some_and(|t| t.ends_with('.')), "{held}");

    // A steer token: the form appears.
    b.click("#sign-out").await;
    sign_in(&b, STEER_TOKEN).await;
    b.wait_js("the steering form", WAIT, &visible("steer-form"))
        .await;
    let access = b.text("#access").await;
    assert!(access.contains("steer"), "{access}");

    // A signal the agent refuses: its problem detail is shown, nothing sent.
    b.click("input[name=ess-mode][value=power]").await;
    b.type_into("#ess-power", "2").await;
    b.type_into("#validity", "1000").await;
    b.click("select[name=validity-unit] option[value=h]").await;
    b.click("#steer-form button[type=submit]").await;
    let refused = b
        .wait_js(
            "the refusal with the problem's detail",
            WAIT,
            &format!(
                "{} && document.getElementById('steer-form-msg').textContent",
                visible("steer-form-msg").trim_end_matches(';')
            ),
        )
        .await;
    let refused = refused.as_str().unwrap_or_default().to_string();
    assert!(
        refused.contains("more than 31 days ahead") && refused.contains("invalid_value"),
        "{refused}"
    );
    assert_eq!(
        b.js("return document.getElementById('confirm').open;", json!([]))
            .await,
        json!(false)
    );

    // A valid one, with a temporary export limit: the confirmation shows
    // exactly what will be sent. 15 kW tightens the configured 20 kW but never
    // binds on this site (10 kW of PV and a 2 kW discharge), so the battery
    // keeps the partner's setpoint whatever the simulated sun does.
    b.click("#grid-on").await;
    b.type_into("#grid-export", "15").await;
    b.type_into("#validity", "10").await;
    b.click("select[name=validity-unit] option[value=min]")
        .await;
    b.click("#steer-form button[type=submit]").await;
    b.wait_js(
        "the confirmation dialog",
        WAIT,
        "return document.getElementById('confirm').open;",
    )
    .await;
    let shown = b.text("#confirm-request").await;
    let (line, json_text) = shown.split_once('\n').expect("method line, then the body");
    assert_eq!(line, "POST /sites/ste_test/steering");
    let sent: Value = serde_json::from_str(json_text).expect("the body is JSON");
    assert_eq!(
        sent["energyStorageSetting"],
        json!({"value": 2, "unit": "kW"})
    );
    assert_eq!(
        sent["gridLimit"],
        json!({"maxExport": {"value": 15, "unit": "kW"}})
    );
    let until = sent["validUntil"].as_i64().expect("validUntil");
    let ahead = until - sitegate::model::time::now_ms();
    assert!(
        (590_000..=610_000).contains(&ahead),
        "validUntil {ahead} ms ahead"
    );
    let predicted = b
        .js(
            "return document.querySelectorAll('#confirm-body table.allocation tbody tr').length;",
            json!([]),
        )
        .await;
    assert!(
        predicted.as_u64().unwrap_or(0) >= 1,
        "dry-run allocation shown"
    );
    b.click("#confirm-send").await;
    let done = b
        .wait_js(
            "the sent notice",
            WAIT,
            "return !document.getElementById('confirm').open && /Sent/.test(document.getElementById('steer-form-msg').textContent) && document.getElementById('steer-form-msg').textContent;",
        )
        .await;

    // The agent has it, as sent.
    let state = site.get_ok("/sites/ste_test/steering").await;
    let ess = &state["energyStorageSetting"];
    assert_eq!(ess["setting"]["value"].as_f64(), Some(2.0), "{state}");
    assert_eq!(ess["setting"]["unit"], "kW", "{state}");
    assert_eq!(ess["validUntil"], json!(until), "{state}");
    let request_id = ess["requestId"].as_str().expect("requestId");
    assert!(done.as_str().unwrap_or("").contains(request_id), "{done}");
    assert_eq!(
        state["gridLimit"]["requestId"],
        json!(request_id),
        "{state}"
    );

    // The grid limit and the limit in force, with its source.
    b.wait_js(
        "the grid limit component and the grid loop line",
        WAIT,
        r#"const td = document.querySelector('#steer-state td[data-component=gridLimit]');
           const loop = document.querySelector('#steer-state p.grid-loop');
           return !!td && /Export at most 15 kW/.test(td.textContent)
               && !!loop && /max export 15 kW \(gridLimit\)/.test(loop.textContent);"#,
    )
    .await;

    // The page shows the component counting down and the battery confirming.
    b.wait_js(
        "the ESS component with its countdown",
        WAIT,
        r#"const td = document.querySelector('#steer-state td[data-component=ess]');
           const row = td && td.closest('tr');
           return !!row && /Discharge 2 kW/.test(td.textContent) && /ends in \d+ min/.test(row.textContent);"#,
    )
    .await;
    b.wait_js(
        "the battery's confirmed setpoint",
        WAIT,
        r#"const tr = document.querySelector('#steer-state table.told tr[data-ref=dvc_bat]');
           const cells = tr ? [...tr.cells].map(c => c.textContent.trim()) : [];
           return cells[1] === 'ess' && cells[2] === 'discharge 2 kW'
               && /applied/.test(cells[3]) && /yes/.test(cells[4]);"#,
    )
    .await;

    // The event list names the signal the page sent, with its request.
    let listed = b
        .wait_js(
            "the signal in the event list",
            WAIT,
            r#"const li = [...document.querySelectorAll('#event-list li[data-kind=signalStarted]')]
                 .find(l => l.textContent.includes('energyStorageSetting'));
               return !!li && li.querySelector('time') && li.textContent;"#,
        )
        .await;
    assert!(
        listed
            .as_str()
            .is_some_and(|t| t.contains(request_id) && t.contains("ste_test")),
        "{listed}"
    );

    let errors = b.script_errors().await;
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
    b.quit().await;
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_access_needs_no_token() {
    let Some(b) = launch_or_skip("open_access_needs_no_token").await else {
        return;
    };
    // A clock known not to be synchronised (timesyncd's file missing): the
    // page shows the agent's health from /readyz. Metrics turned off: the
    // page still reads /metrics only every 20 s.
    let clock = tempfile::tempdir().expect("dir");
    let config = TestSite::small()
        .http_key("auth", "none")
        .http_key("metrics", false)
        .section_key(&["clock"], "sync_source", "timesyncd")
        .section_key(
            &["clock"],
            "timesync_file",
            clock.path().join("synchronized").display().to_string(),
        )
        .text();
    let site = site::start(&config, 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    history_exists(&site).await;

    b.goto(&format!("{}/#range=1h", site.base)).await;
    b.js("performance.setResourceTimingBufferSize(2000);", json!([]))
        .await;
    site_is_shown(&b).await;
    assert_eq!(b.js(&visible("login"), json!([])).await, json!(false));
    b.wait_js("the steering form", WAIT, &visible("steer-form"))
        .await;
    let access = b.text("#access").await;
    assert!(access.contains("Open access"), "{access}");
    b.wait_js(
        "the clock named in the agent's health",
        WAIT,
        r#"const el = document.getElementById('health');
           return !el.hidden && /clock: not synchronised/.test(el.textContent);"#,
    )
    .await;
    // Its answer is a 404, not a store without every resolution: no read
    // within 15 s of the first (every 5 s would be three).
    let reads = b
        .wait_js(
            "15 s of the page after its first read of /metrics",
            WAIT,
            r#"const at = performance.getEntriesByType('resource')
                 .filter(e => new URL(e.name).pathname === '/metrics').map(e => e.startTime);
               if (!at.length || performance.now() - at[0] < 15000) return false;
               return at.filter(t => t - at[0] < 15000).length;"#,
        )
        .await;
    assert_eq!(reads, json!(1), "reads of /metrics in 15 s");
    assert!(
        b.find("#history-held:not([hidden])").await.is_none(),
        "no history line without metrics"
    );

    let errors = b.script_errors().await;
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
    b.quit().await;
    site.stop().await;
}

/// The page over HTTPS: Chromium trusts the agent's self-signed certificate
/// only by its public key's pin (as a technician's browser would after
/// checking the fingerprint), signs in with a token and shows the site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_works_over_https_with_the_pinned_certificate() {
    let config = TestSite::small()
        .http_key("https_listen", vec!["127.0.0.1:0"])
        .http_key("tls", "self-signed")
        .text();
    let site = site::start(&config, 60.0, SUMMER_MORNING_MS).await;
    let pair = site.agent.https_certificate().expect("HTTPS served");
    let pin = pair.pin.expect("a key pin");
    let spki = pin.trim_start_matches("sha256//");
    let Some(b) = launch_or_skip_with(
        "the_page_works_over_https_with_the_pinned_certificate",
        &[format!("--ignore-certificate-errors-spki-list={spki}")],
    )
    .await
    else {
        site.stop().await;
        return;
    };
    site.ready().await;
    history_exists(&site).await;
    let https = site.agent.https_addrs()[0];
    b.goto(&format!("https://{https}/#range=1h")).await;
    sign_in(&b, READ_TOKEN).await;
    site_is_shown(&b).await;
    let protocol = b.js("return location.protocol;", json!([])).await;
    assert_eq!(protocol, json!("https:"));
    let errors = b.script_errors().await;
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
    b.quit().await;
    site.stop().await;
}

#[test]
fn screenshots_decode() {
    assert_eq!(decode_base64("aGVsbG8="), b"hello");
    assert_eq!(decode_base64("aGVsbG8h"), b"hello!");
    assert_eq!(decode_base64("aGk="), b"hi");
}

/// Screenshots of a running demo (`sitegate demo`, or `SITEGATE_DEMO_URL`) at
/// desktop and phone width, written to `docs/screenshots/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a running demo; run by hand to refresh docs/screenshots"]
async fn screenshots() {
    let Some(b) = launch_or_skip("screenshots").await else {
        return;
    };
    let base =
        std::env::var("SITEGATE_DEMO_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let range = std::env::var("SITEGATE_DEMO_RANGE").unwrap_or_else(|_| "6h".into());
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots");
    std::fs::create_dir_all(&dir).expect("docs/screenshots");
    for (name, width, mobile) in [("desktop", 1280, false), ("phone", 390, true)] {
        b.emulate(width, 900, mobile).await;
        b.goto(&format!("{base}/#range={range}")).await;
        b.wait_js(
            "a drawn page",
            WAIT,
            "return document.querySelectorAll('#device-list article.device').length > 0 && document.querySelectorAll('#chart-power .plot svg').length > 0 && document.querySelectorAll('#steer-state table').length > 0;",
        )
        .await;
        // The whole page: a screen as tall as the document.
        let height = b
            .js("return document.documentElement.scrollHeight;", json!([]))
            .await
            .as_u64()
            .expect("page height");
        b.emulate(width, height as u32, mobile).await;
        // The page redraws its charts 150 ms after a resize (web/app.js): 1.5 s for
        // the real browser to do that and lay out the new height before the screenshot.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let png = b.screenshot().await;
        std::fs::write(dir.join(format!("page-{name}.png")), png).expect("write screenshot");
    }
    // The confirmation step (a dry run only: nothing is sent).
    b.emulate(1280, 860, false).await;
    b.goto(&format!("{base}/#range={range}")).await;
    b.wait_js("the steering form", WAIT, &visible("steer-form"))
        .await;
    b.click("input[name=ess-mode][value=power]").await;
    b.type_into("#ess-power", "10").await;
    b.type_into("#validity", "30").await;
    b.click("#steer-form button[type=submit]").await;
    b.wait_js(
        "the confirmation dialog",
        WAIT,
        "return document.getElementById('confirm').open;",
    )
    .await;
    // A margin for Chromium to paint the dialog and its backdrop before the
    // screenshot (the page says nothing when a paint is done).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let png = b.screenshot().await;
    std::fs::write(dir.join("page-confirm.png"), png).expect("write screenshot");
    b.quit().await;
}

/// A utility server's limits on the page, in words: the CSIP-AUS client's
/// state and each limit with its control and end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_utilitys_limits_are_shown_in_words() {
    let Some(b) = launch_or_skip("the_utilitys_limits_are_shown_in_words").await else {
        return;
    };
    let server = crate::common::csip_server::CsipServer::start(1).await;
    server.register(111_115);
    let config = TestSite::small().http_key("auth", "none").text()
        + &server.table("ste_test", Some(111_115));
    let site = site::start(&config, 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    server.add_control(
        1,
        "EVENING",
        0,
        600,
        crate::common::csip_server::BaseSpec::export(5_000.0),
    );
    b.goto(&format!("{}/#range=1h", site.base)).await;
    b.wait_js(
        "the utility's export limit in words",
        WAIT,
        r#"const el = document.querySelector('.csip');
           return !!el && /Utility server \(CSIP-AUS\): following/.test(el.textContent)
             && /Max export 5([.,]0+)?\s*kW \(control [0-9A-F]{32}, until/.test(el.textContent);"#,
    )
    .await;
    let errors = b.script_errors().await;
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
    b.quit().await;
    site.stop().await;
}
