//! `sitegate demo` as a newcomer runs it: the binary on a free port serves the
//! simulated site of `config/demo.toml` over HTTP with values, says where it
//! listens, and stops cleanly on Ctrl-C (SIGINT) and on SIGTERM.

use std::path::Path;

use crate::common::demo::{Demo, DEADLINE};
use crate::common::process::{sitegate, succeeded};
use crate::common::wait_for;
use nix::sys::signal::Signal;
use reqwest::StatusCode;
use serde_json::Value;
use sitegate::model::DeviceType;

/// The demo's devices as `config/demo.toml` declares them: (reference, type).
fn demo_devices() -> Vec<(String, DeviceType)> {
    let config = sitegate::config::parse(include_str!("../../config/demo.toml"))
        .expect("config/demo.toml is valid");
    config
        .devices
        .iter()
        .map(|d| (d.reference.clone(), d.device_type))
        .collect()
}

/// The listing once every device is online and offers properties.
fn complete(listing: &Value, want: &[(String, DeviceType)]) -> bool {
    let Some(devices) = listing.as_array() else {
        return false;
    };
    devices.len() == want.len()
        && devices.iter().all(|d| {
            d["status"]["online"] == true
                && d["status"]["lastSeen"].is_i64()
                && d["properties"].as_array().is_some_and(|p| !p.is_empty())
        })
}

/// Lines of the log at a level that says something went wrong.
fn trouble(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(" ERROR ") || l.contains(" WARN ") || l.contains("did not stop"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_serves_its_site_and_stops_on_sigint() {
    let want = demo_devices();
    let count = |t| want.iter().filter(|(_, dt)| *dt == t).count();
    assert_eq!(
        (
            count(DeviceType::Inverter),
            count(DeviceType::Battery),
            count(DeviceType::Meter)
        ),
        (2, 2, 1),
        "the README promises 2 PV inverters, 2 batteries and a grid meter"
    );

    let mut demo = Demo::start(&[]).await;
    let listening = format!("HTTP API listening addr={}", demo.addr);
    assert!(
        demo.log().lines().any(|l| l.ends_with(&listening)),
        "the log names the listen address ({listening:?}):\n{}",
        demo.log()
    );

    let listing = wait_for("every demo device online", DEADLINE, || async {
        let (status, body) = demo.get("/devices").await;
        (status == StatusCode::OK && complete(&body, &want)).then_some(body)
    })
    .await;
    for (d, (reference, device_type)) in listing.as_array().unwrap().iter().zip(&want) {
        assert_eq!(d["deviceReference"], reference.as_str(), "config order");
        assert_eq!(d["siteReference"], "ste_demo");
        assert_eq!(
            d["type"],
            serde_json::to_value(device_type).unwrap(),
            "{reference}"
        );
    }

    // Each device has values: active power for all, state of charge for batteries.
    for (reference, device_type) in &want {
        let (status, body) = demo
            .get(&format!(
                "/devices/{reference}/measurement?property=activePower"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{reference}: {body}");
        assert!(body["value"].is_number(), "{reference}: {body}");
        assert!(body["timestamp"].is_i64(), "{reference}: {body}");
        if *device_type == DeviceType::Battery {
            let (status, body) = demo
                .get(&format!("/devices/{reference}/measurement?property=soc"))
                .await;
            assert_eq!(status, StatusCode::OK, "{reference}: {body}");
            let soc = body["value"].as_f64().expect("soc value");
            assert!((0.0..=100.0).contains(&soc), "{reference} soc {soc}");
        }
    }

    let status = demo.stop(Signal::SIGINT).await;
    let log = demo.log();
    assert!(
        status.success(),
        "exit status {status} after SIGINT:\n{log}"
    );
    for step in [
        "SIGINT: shutting down",
        "agent stopped",
        "simulated site stopped",
    ] {
        assert!(log.contains(step), "missing {step:?} in the log:\n{log}");
    }
    assert_eq!(trouble(&log), Vec::<&str>::new(), "{log}");
    assert!(
        demo.data_dir().join("sitegate-demo.db").is_file(),
        "the store is under --data"
    );
    assert!(
        demo.printed()
            .contains(&format!("http://{}/ (Ctrl-C stops it)", demo.addr)),
        "{}",
        demo.printed()
    );
    // Each simulated device's address and unit, as `scan` takes them.
    for (reference, device_type) in &want {
        let start = format!(
            "sitegate demo: device {reference} ({}) on Modbus TCP 127.0.0.1:",
            device_type.as_str()
        );
        assert!(
            demo.printed()
                .lines()
                .any(|l| l.starts_with(&start) && l.contains(", unit ")),
            "no {start:?} in:\n{}",
            demo.printed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().expect("dir");
    let written = dir.path().join("from-demo.toml");
    let mut demo = Demo::start(&["--print-config", written.to_str().expect("a path")]).await;
    wait_for("the demo ready", DEADLINE, || async {
        (demo.get("/readyz").await.0 == StatusCode::OK).then_some(())
    })
    .await;
    // `--print-config`: a `sitegate run` config for the same devices, that
    // check-config takes, with each device's printed address.
    let text = std::fs::read_to_string(&written).expect("the written config");
    succeeded(&sitegate([Path::new("check-config"), &written]));
    let printed = demo.printed();
    let addresses: Vec<&str> = printed
        .lines()
        .filter_map(|l| l.split(" on Modbus TCP ").nth(1))
        .filter_map(|rest| rest.split(',').next())
        .collect();
    assert_eq!(addresses.len(), 5, "{printed}");
    for a in addresses {
        assert!(
            text.contains(&format!("tcp = \"{a}\"")),
            "{a} not in:\n{text}"
        );
    }
    assert!(text.contains("listen = [\"127.0.0.1:8081\"]"), "{text}");
    // `sitegate status` by the demo's URL: one screen of it.
    let url = format!("http://{}", demo.addr);
    let screen = wait_for("status sees every device online", DEADLINE, || {
        let url = url.clone();
        async move {
            let out = tokio::task::spawn_blocking(move || sitegate(["status", "--url", &url]))
                .await
                .expect("the command");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            (out.status.success() && text.contains("devices  5 of 5 online")).then_some(text)
        }
    })
    .await;
    for want in [
        &format!("agent    {url}: "),
        "site     ste_demo: grid loop ",
        "max import 60000 W (config), max export 40000 W (config)",
        "uplink   not configured",
        "store    ",
        "clock    ",
    ] {
        assert!(screen.contains(want), "missing {want:?} in:\n{screen}");
    }
    let status = demo.stop(Signal::SIGTERM).await;
    let log = demo.log();
    assert!(
        status.success(),
        "exit status {status} after SIGTERM:\n{log}"
    );
    assert!(log.contains("SIGTERM: shutting down"), "{log}");
    assert!(log.contains("agent stopped"), "{log}");
    assert_eq!(trouble(&log), Vec::<&str>::new(), "{log}");
}
