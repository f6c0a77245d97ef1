//! The technician page against the demo itself: the `sitegate` binary runs
//! `sitegate demo` (its built-in `config/demo.toml`: two PV inverters, two
//! batteries and a grid meter, no authentication on loopback) and a headless
//! Chromium opens the page as a technician would, without a token.
//!
//! Needs `chromium` and `chromium-driver` like `page_browser.rs`: without them
//! the test prints a skip notice, or fails when `SITEGATE_REQUIRE_BROWSER=1`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::webdriver::launch_or_skip;

const WAIT: Duration = Duration::from_secs(60);
/// The demo's devices, in config order, with their names.
const DEVICES: [(&str, &str); 5] = [
    ("dvc_pv_east", "PV east"),
    ("dvc_pv_west", "PV west"),
    ("dvc_bat_a", "Battery A"),
    ("dvc_bat_b", "Battery B"),
    ("dvc_grid", "Grid meter"),
];

/// `sitegate demo` as a child process, stopped when dropped.
struct Demo {
    child: Child,
    base: String,
    _data: tempfile::TempDir,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `line` without ANSI escape sequences (the log may be coloured).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then one final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Starts the demo on a free loopback port (`--listen 127.0.0.1:0`) with its
/// database in a temporary folder, and learns the port from its log line
/// "HTTP API listening addr=...".
fn start_demo() -> Demo {
    let data = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .args(["demo", "--listen", "127.0.0.1:0", "--data"])
        .arg(data.path())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sitegate binary starts");
    let stderr = child.stderr.take().expect("piped stderr");
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    // Reads the log to its end, so the demo never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut log = Vec::new();
        let mut addr_tx = Some(addr_tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let line = plain(&line);
            if let (true, Some(at)) = (line.contains("HTTP API listening"), line.find("addr=")) {
                let addr: String = line[at + 5..]
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .collect();
                if let Some(tx) = addr_tx.take() {
                    let _ = tx.send(Ok(addr));
                }
            }
            log.push(line);
        }
        if let Some(tx) = addr_tx {
            let _ = tx.send(Err(log.join("\n")));
        }
    });
    let addr = match addr_rx.recv_timeout(WAIT) {
        Ok(Ok(addr)) => addr,
        Ok(Err(log)) => panic!("the demo ended without listening:\n{log}"),
        Err(e) => panic!("the demo did not say where it listens: {e}"),
    };
    Demo {
        child,
        base: format!("http://{addr}"),
        _data: data,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_page_works_out_of_the_box() {
    let Some(b) = launch_or_skip("the_demo_page_works_out_of_the_box").await else {
        return;
    };
    let demo = start_demo();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");

    // No token anywhere: the demo answers everyone on loopback.
    crate::common::wait_for("the demo's devices polled", WAIT, || async {
        let r = http
            .get(format!("{}/readyz", demo.base))
            .send()
            .await
            .ok()?;
        (r.status() == StatusCode::OK).then_some(())
    })
    .await;
    for (device, _) in DEVICES {
        crate::common::wait_for("stored samples of every device", WAIT, || async {
            let now = sitegate::model::time::now_ms();
            let body = json!({
                "property": "activePower",
                "range": {"type": "absolute",
                          "start": sitegate::model::time::format_utc(now - 3_600_000),
                          "end": sitegate::model::time::format_utc(now + 60_000)},
                "resolution": {"value": 30, "unit": "s"},
            });
            let r = http
                .post(format!(
                    "{}/devices/{device}/measurements/time-series",
                    demo.base
                ))
                .json(&body)
                .send()
                .await
                .ok()?;
            let v: Value = r.json().await.ok()?;
            v["data"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
                .then_some(())
        })
        .await;
    }

    // The page as a technician opens it: no token asked, the site shown.
    b.goto(&format!("{}/", demo.base)).await;
    b.wait_js(
        "five device cards with their power",
        WAIT,
        r#"const cards = document.querySelectorAll('#device-list article.device');
           const power = [...document.querySelectorAll('#device-list dd[data-property=activePower]')];
           return cards.length === 5 && power.length === 5 && power.every(d => /\d\s*k?W/.test(d.textContent));"#,
    )
    .await;
    let login_shown = b
        .js(
            "return !document.getElementById('login').hidden;",
            json!([]),
        )
        .await;
    assert_eq!(login_shown, json!(false), "no token asked");
    let access = b.text("#access").await;
    assert!(access.contains("Open access"), "{access}");
    // The simulated time the sun follows, beside the wall clock, as the
    // API says it (`GET /sites`' `simulation`).
    let sites: Value = http
        .get(format!("{}/sites", demo.base))
        .send()
        .await
        .expect("GET /sites")
        .json()
        .await
        .expect("JSON");
    let sim = &sites[0]["simulation"];
    assert_eq!(sim["speed"], json!(60), "{sites}");
    let hhmm = sitegate::model::time::format_utc(sim["time"].as_i64().expect("a time"));
    let sim_time = b.text("#sim-time").await;
    assert!(
        sim_time.starts_with("Simulated ") && sim_time.ends_with("UTC, 60× real time"),
        "{sim_time:?}"
    );
    // Within the few simulated minutes between the two reads.
    assert_eq!(&sim_time[10..12], &hhmm[11..13], "{sim_time:?} at {hhmm}");
    for (device, name) in DEVICES {
        let card = b
            .text(&format!("#device-list article[data-ref={device}]"))
            .await;
        assert!(card.contains(name), "{device}: {card:?}");
        assert!(card.contains("Online"), "{device} online: {card:?}");
    }
    for bat in ["dvc_bat_a", "dvc_bat_b"] {
        let soc = b
            .text(&format!(
                "#device-list article[data-ref={bat}] dd[data-property=soc]"
            ))
            .await;
        assert!(soc.contains('%'), "{bat} SoC: {soc:?}");
    }
    b.wait_js(
        "the steering state of the demo site",
        WAIT,
        "return document.querySelectorAll('#steer-state table.told tbody tr[data-ref]').length === 4;",
    )
    .await;

    // The charts: fitted to the data (a demo minutes old: 1 h), a line or a
    // point per device.
    b.wait_js(
        "the power chart with every device",
        WAIT,
        r#"const n = document.querySelectorAll('#chart-power .plot svg path.series, #chart-power .plot svg circle.dot').length;
           const legend = document.querySelector('#chart-power .legend').textContent;
           return n >= 5 && ['PV east', 'PV west', 'Battery A', 'Battery B', 'Grid meter'].every(x => legend.includes(x));"#,
    )
    .await;
    b.wait_js(
        "the SoC chart with both batteries",
        WAIT,
        "return document.querySelectorAll('#chart-soc .plot svg path.series, #chart-soc .plot svg circle.dot').length >= 2;",
    )
    .await;
    let note = b.text("#chart-note").await;
    assert!(note.starts_with("Last 1 h"), "{note}");
    let fitted = b
        .js(
            "return document.getElementById('range-1h').checked;",
            json!([]),
        )
        .await;
    assert_eq!(
        fitted,
        json!(true),
        "the 1 h selector shows the fitted range"
    );

    // Another range, chosen with the selector: the charts are fetched again
    // (one request per series, at that range's resolution) and redrawn.
    b.js(
        r#"window.seriesAsked = [];
           const fetchBefore = window.fetch;
           window.fetch = (path, init) => {
             if (String(path).endsWith('/measurements/time-series')) window.seriesAsked.push([String(path), JSON.parse(init.body)]);
             return fetchBefore(path, init);
           };
           for (const svg of document.querySelectorAll('#history .plot svg')) svg.dataset.before = 'yes';
           return true;"#,
        json!([]),
    )
    .await;
    b.click("label[for=range-24h]").await;
    b.wait_js(
        "the charts redrawn for 24 h",
        WAIT,
        r#"const svgs = [...document.querySelectorAll('#history .plot svg')];
           const n = document.querySelectorAll('#chart-power .plot svg path.series, #chart-power .plot svg circle.dot').length;
           return /^Last 24 h/.test(document.getElementById('chart-note').textContent)
             && svgs.length === 3 && svgs.every(s => !s.dataset.before) && n >= 5;"#,
    )
    .await;
    let asked = b.js("return window.seriesAsked;", json!([])).await;
    let asked = asked.as_array().expect("requests recorded");
    assert_eq!(
        asked.len(),
        7,
        "five power series and two SoC series: {asked:?}"
    );
    for (device, _) in DEVICES {
        let power = asked.iter().any(|a| {
            a[0].as_str()
                .is_some_and(|p| p.contains(&format!("/devices/{device}/")))
                && a[1]["property"] == "activePower"
        });
        assert!(power, "{device}'s power asked again: {asked:?}");
    }
    for a in asked {
        let body = &a[1];
        assert_eq!(
            body["resolution"],
            json!({"value": 5, "unit": "min"}),
            "{a}"
        );
        let start =
            sitegate::model::time::parse_rfc3339(body["range"]["start"].as_str().unwrap_or(""));
        let end = sitegate::model::time::parse_rfc3339(body["range"]["end"].as_str().unwrap_or(""));
        assert_eq!(end.and_then(|e| Ok(e - start?)), Ok(86_400_000), "{a}");
    }
    let chosen = b
        .js(
            "return [document.getElementById('range-24h').checked, location.hash];",
            json!([]),
        )
        .await;
    assert_eq!(chosen[0], json!(true), "{chosen}");
    assert!(
        chosen[1].as_str().unwrap_or("").contains("range=24h"),
        "the range is kept in the URL: {chosen}"
    );

    let errors = b.script_errors().await;
    assert!(errors.is_empty(), "the page logged errors: {errors:#?}");
    b.quit().await;
    drop(demo);
}
