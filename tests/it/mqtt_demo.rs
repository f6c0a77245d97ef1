//! `sitegate demo --mqtt URL` joins the demo to a broker: the binary, run as
//! docs/mqtt.md says, is online on `sitegate/demo/status` (retained), lists the
//! demo's devices and sends their telemetry; on SIGINT it exits 0 and leaves
//! the retained status offline. Two demos on one broker with their own
//! `--gateway-id` each keep to their own root; a bad id is a usage error.

use std::time::Duration;

use crate::common::broker::{kinds, Broker, Kind, Message, Subscriber};
use crate::common::demo::Demo;
use nix::sys::signal::Signal;
use serde_json::json;

const T: Duration = Duration::from_secs(30);
const ROOT: &str = "sitegate/demo";
const DEVICES: [&str; 5] = [
    "dvc_pv_east",
    "dvc_pv_west",
    "dvc_bat_a",
    "dvc_bat_b",
    "dvc_grid",
];

fn is(topic: &str) -> impl Fn(&Message) -> bool + '_ {
    move |m| m.topic == topic
}

async fn demo_on(kind: Kind) {
    let broker = Broker::start(kind).await;
    let status = format!("{ROOT}/status");
    let listing = format!("{ROOT}/devices");
    let mut sub = Subscriber::connect(broker.addr("5"), "watch-demo", &format!("{ROOT}/#")).await;
    let url = format!("mqtt://{}", broker.addr("5"));
    let mut demo = Demo::start(&["--mqtt", &url]).await;

    let online = sub.expect("the demo online", T, is(&status)).await.json();
    assert_eq!(online["online"], true, "{online}");
    assert_eq!(online["version"], env!("CARGO_PKG_VERSION"));
    let devices = sub
        .expect("the device listing", T, is(&listing))
        .await
        .json();
    let refs: Vec<&str> = devices
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|d| d["deviceReference"].as_str())
        .collect();
    assert_eq!(refs, DEVICES, "{devices}");
    // Telemetry from every device.
    let mut heard = std::collections::BTreeSet::new();
    while heard.len() < DEVICES.len() {
        let m = sub
            .expect("measurements", T, |m| m.topic.ends_with("/measurements"))
            .await;
        let body = m.json();
        assert!(!body["measurements"].as_array().expect("array").is_empty());
        heard.insert(body["reference"].as_str().expect("reference").to_string());
    }
    assert!(
        heard.iter().all(|r| DEVICES.contains(&r.as_str())),
        "{heard:?}"
    );
    // Status and listing are retained for whoever subscribes later.
    for (topic, id) in [(&status, "late-status"), (&listing, "late-listing")] {
        let mut late = Subscriber::connect(broker.addr("5"), id, topic).await;
        let m = late
            .expect(&format!("retained {topic}"), T, is(topic))
            .await;
        assert!(m.retain, "{topic}");
        if topic == &status {
            assert_eq!(m.json()["online"], true);
        }
    }

    let exit = demo.stop(Signal::SIGINT).await;
    assert_eq!(exit.code(), Some(0), "{exit}: {}", demo.log());
    let offline = sub.expect("the demo offline", T, is(&status)).await;
    assert_eq!(offline.json(), json!({"online": false}));
    let mut late = Subscriber::connect(broker.addr("5"), "late-offline", &status).await;
    let m = late.expect("the retained status", T, is(&status)).await;
    assert!(m.retain);
    assert_eq!(m.json(), json!({"online": false}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_joins_a_broker_and_leaves_it_offline_on_sigint() {
    for kind in kinds() {
        demo_on(kind).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_demos_on_one_broker_keep_to_their_own_gateway_ids() {
    let broker = Broker::start(Kind::Rumqttd).await;
    let mut sub = Subscriber::connect(broker.addr("5"), "watch-two", "sitegate/+/status").await;
    let url = format!("mqtt://{}", broker.addr("5"));
    let mut east = Demo::start(&["--mqtt", &url, "--gateway-id", "site-east"]).await;
    let mut west = Demo::start(&["--mqtt", &url, "--gateway-id", "site-west"]).await;
    let mut online = std::collections::BTreeSet::new();
    while online.len() < 2 {
        let m = sub
            .expect("both demos online", T, |m| m.json()["online"] == true)
            .await;
        online.insert(m.topic);
    }
    assert_eq!(
        online.into_iter().collect::<Vec<_>>(),
        ["sitegate/site-east/status", "sitegate/site-west/status"]
    );
    for demo in [&mut east, &mut west] {
        let exit = demo.stop(Signal::SIGINT).await;
        assert_eq!(exit.code(), Some(0), "{exit}: {}", demo.log());
    }

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .args(["demo", "--gateway-id", "site/1", "--mqtt", &url])
        .output()
        .expect("run the demo");
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--gateway-id: \"site/1\" must be"),
        "{stderr}"
    );
}
