//! The uplink against NATS's MQTT gateway, which speaks MQTT 3.1.1 only and
//! closes the connection at an MQTT 5 CONNECT: with `mqtt.protocol` unset
//! the uplink falls back to 3.1.1 and delivers. Runs where `nats-server`
//! is installed (CI requires it: `SITEGATE_REQUIRE_NATS=1`).

use std::path::PathBuf;
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};

use crate::common::broker::wait_listening;
use crate::common::free_port;
use crate::common::mqtt::{site_config, start, ROOT};

/// A NATS server with JetStream and its MQTT gateway on a port of its own.
struct Nats {
    child: std::process::Child,
    mqtt: std::net::SocketAddr,
    _dir: tempfile::TempDir,
}

impl Nats {
    async fn start(bin: &PathBuf) -> Nats {
        let dir = tempfile::tempdir().expect("dir");
        let mqtt = free_port();
        let conf = dir.path().join("nats.conf");
        std::fs::write(
            &conf,
            format!(
                "server_name: \"sitegate-test\"\nlisten: \"127.0.0.1:-1\"\n\
                 jetstream {{ store_dir: \"{}\" }}\nmqtt {{ listen: \"{mqtt}\" }}\n",
                dir.path().join("js").display()
            ),
        )
        .expect("the NATS config");
        let child = std::process::Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nats-server starts");
        wait_listening(mqtt).await;
        Nats {
            child,
            mqtt,
            _dir: dir,
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_uplink_falls_back_to_3_1_1_on_nats_and_delivers() {
    let Some(bin) = crate::common::installed("nats-server") else {
        assert!(
            !crate::common::required("NATS"),
            "SITEGATE_REQUIRE_NATS=1 but no nats-server is installed"
        );
        #[allow(clippy::print_stderr, reason = "a test run should say what it skipped")]
        {
            eprintln!("nats-server not installed: the NATS uplink test is skipped");
        }
        return;
    };
    let nats = Nats::start(&bin).await;
    // A 3.1.1 watcher on the gateway.
    let mut options = MqttOptions::new("watcher", "127.0.0.1", nats.mqtt.port());
    options.set_keep_alive(Duration::from_secs(30));
    let (watcher, mut events) = AsyncClient::new(options, 100);
    watcher
        .subscribe(format!("{ROOT}/devices/+/measurements"), QoS::AtLeastOnce)
        .await
        .expect("subscribe");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watching = tokio::spawn(async move {
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    let _ = tx.send(p.topic);
                }
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    });
    // `protocol` unset: MQTT 5 first.
    let mqtt = format!(
        "\n[mqtt]\nurl = \"mqtt://{}\"\nkeep_alive_s = 5\ndrain_rate = 2000\n",
        nats.mqtt
    );
    let site = start(&site_config(&mqtt, 200)).await;
    let topic = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("a measurement over NATS within 60 s")
        .expect("the watcher runs");
    assert!(topic.starts_with(&format!("{ROOT}/devices/")), "{topic}");
    watching.abort();
    site.agent.shutdown().await;
}
