//! `sitegate demo --mqtt URL` joins the demo to a broker: the binary, run as
//! docs/mqtt.md says, is online on `sitegate/demo/status` (retained), lists the
//! demo's devices and sends their telemetry; on SIGINT it exits 0 and leaves
//! the retained status offline.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use common::broker::{kinds, Broker, Kind, Message, Subscriber};
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

/// `sitegate demo` as a child process; killed when dropped.
struct Demo {
    child: Child,
    data: tempfile::TempDir,
}

impl Demo {
    /// On an ephemeral HTTP port, with its database and its log in a temp dir.
    fn start(mqtt_url: &str) -> Demo {
        let data = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(data.path().join("demo.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
            .arg("demo")
            .args(["--listen", "127.0.0.1:0", "--mqtt", mqtt_url])
            .arg("--data")
            .arg(data.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the demo starts");
        Demo { child, data }
    }

    fn log(&self) -> String {
        let path: PathBuf = self.data.path().join("demo.log");
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// SIGINT through `kill(1)` (no libc dependency).
    fn interrupt(&self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(sent.success(), "kill -INT failed: {sent}");
    }

    async fn exited(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the demo") {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the demo did not exit within {timeout:?}: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn is(topic: &str) -> impl Fn(&Message) -> bool + '_ {
    move |m| m.topic == topic
}

async fn demo_on(kind: Kind) {
    let broker = Broker::start(kind).await;
    let status = format!("{ROOT}/status");
    let listing = format!("{ROOT}/devices");
    let mut sub = Subscriber::connect(broker.addr("5"), "watch-demo", &format!("{ROOT}/#")).await;
    let mut demo = Demo::start(&format!("mqtt://{}", broker.addr("5")));

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

    demo.interrupt();
    let exit = demo.exited(T).await;
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
