//! The agent with an `[mqtt]` section on a simulated site, restartable on the same
//! database, for the MQTT end-to-end tests.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use sitegate::agent::Agent;
use sitegate::config::{parse, Config};
use sitegate::uplink::Uplink;

use super::broker::Subscriber;
use super::site::{self, SmallSite, SUMMER_MORNING_MS};
use crate::steering_support::TestSite;

/// The root topic of the test configs (`gateway_id = "test"`).
pub const ROOT: &str = "sitegate/test";
const RPC_TIMEOUT: Duration = Duration::from_secs(20);

/// Publishes an RPC request and waits for the answer on
/// `{ROOT}/rpc/response/{id}` (`sub` must subscribe to those topics).
pub async fn rpc(sub: &mut Subscriber, request: Value) -> Value {
    let id = request["id"].as_str().expect("id").to_string();
    let topic = format!("{ROOT}/rpc/response/{id}");
    sub.request(&format!("{ROOT}/rpc/request"), &request, None)
        .await;
    let m = sub
        .expect(&format!("answer to {id}"), RPC_TIMEOUT, |m| {
            m.topic == topic
        })
        .await;
    let v = m.json();
    assert_eq!(v["id"], id.as_str());
    v
}

/// The `[mqtt]` section for a broker at `addr`; `extra` lines go inside it.
pub fn mqtt_section(url: &str, protocol: &str, extra: &str) -> String {
    format!(
        "\n[mqtt]\nurl = \"{url}\"\nprotocol = \"{protocol}\"\nkeep_alive_s = 5\ndrain_rate = 2000\n{extra}\n"
    )
}

pub fn plain_url(addr: SocketAddr) -> String {
    format!("mqtt://{addr}")
}

/// The small test site ([`TestSite::small`]) with every device polled every
/// `poll_ms` in place of 200 ms.
pub fn small_site(poll_ms: u64) -> TestSite {
    TestSite::small().poll_interval_ms(poll_ms)
}

/// [`small_site`] rendered, with the `[mqtt]` section `mqtt` appended.
pub fn site_config(mqtt: &str, poll_ms: u64) -> String {
    small_site(poll_ms).text() + mqtt
}

pub async fn start(config_text: &str) -> SmallSite {
    site::start(config_text, 60.0, SUMMER_MORNING_MS).await
}

/// [`start`], the agent loading its config from a file
/// ([`site::start_from_file`]).
pub async fn start_from_file(config_text: &str) -> SmallSite {
    site::start_from_file(config_text, 60.0, SUMMER_MORNING_MS).await
}

pub fn uplink(site: &SmallSite) -> &Uplink {
    site.agent.uplink().expect("the test config has [mqtt]")
}

/// Stops the agent and starts a new one on the same database and simulator.
pub async fn restart(site: SmallSite, config_text: &str) -> SmallSite {
    let SmallSite {
        sim,
        agent,
        http,
        dir,
        ..
    } = site;
    agent.shutdown().await;
    let mut config: Config = parse(config_text).expect("test config is valid");
    config.storage.path = dir.path().join("sitegate.db");
    sim.point_config_at_servers(&mut config);
    let agent = Agent::start(config).await.expect("agent restarts");
    let base = format!("http://{}", agent.http_addrs()[0]);
    SmallSite {
        sim,
        agent,
        base,
        http,
        dir,
    }
}

/// Waits until the uplink's connection state is `up`.
pub async fn wait_connected(site: &SmallSite, up: bool, timeout: Duration) {
    let mut rx = uplink(site).connection();
    tokio::time::timeout(timeout, rx.wait_for(|c| *c == up))
        .await
        .unwrap_or_else(|_| panic!("uplink connected={up} within {timeout:?}"))
        .expect("uplink running");
}
