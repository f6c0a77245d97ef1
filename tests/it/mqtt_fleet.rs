//! Many agents on one broker:
//!
//! - 20 agents lose the broker at once (every connection cut, new ones refused:
//!   a broker restart as the agents see it) and come back spread over their
//!   backoff windows (full jitter from the first retry). The spread is printed;
//!   the only timed check is a generous bound on the whole return;
//! - two agents with one gateway id (cloned controllers) take the session from
//!   each other, and it is logged as that. A broker that says so (MQTT 5
//!   DISCONNECT 0x8E: EMQX, HiveMQ) makes it certain; rumqttd, mosquitto 2.0.11
//!   and any MQTT 3.1.1 broker only close the connection, which the agent
//!   recognises when it happens again soon after each connect. Either line
//!   counts here (`client.rs` tests the 0x8E reading).

use std::time::Duration;
use tokio::time::Instant;

use crate::common::broker::{kinds, Broker, Gate, Kind};
use crate::common::logs;
use crate::common::prom::scrape;
use sitegate::agent::Agent;
use sitegate::config::parse;

const AGENTS: usize = 20;
const T: Duration = Duration::from_secs(60);

/// An agent without devices, only its uplink, on `dir`.
async fn agent(gateway_id: &str, url: &str, protocol: &str, dir: &std::path::Path) -> Agent {
    let text = format!(
        "gateway_id = \"{gateway_id}\"\n[http]\nlisten = [\"127.0.0.1:0\"]\nauth = \"none\"\n[mqtt]\nurl = \"{url}\"\nprotocol = \"{protocol}\"\nkeep_alive_s = 5\n"
    );
    let mut config = parse(&text).expect("fleet config");
    config.storage.path = dir.join(format!("{gateway_id}-{}.db", rand_suffix()));
    Agent::start(config).await.expect("agent starts")
}

// Randomness from the clock's nanoseconds, not a time the agent reads.
#[allow(clippy::disallowed_methods)]
fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

async fn connected(agent: &Agent, up: bool) {
    let mut rx = agent.uplink().expect("uplink").connection();
    tokio::time::timeout(T, rx.wait_for(|c| *c == up))
        .await
        .unwrap_or_else(|_| panic!("connected={up} in time"))
        .expect("uplink running");
}

async fn restart_spread(kind: Kind) {
    let broker = Broker::start(kind).await;
    let gate = Gate::start(broker.addr("5")).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("mqtt://{}", gate.addr);
    let mut fleet = Vec::new();
    for i in 0..AGENTS {
        fleet.push(agent(&format!("fleet-{i}"), &url, "5", dir.path()).await);
    }
    for a in &fleet {
        connected(a, true).await;
    }

    gate.close();
    for a in &fleet {
        connected(a, false).await;
    }
    // The outage the report below names: 2 s with the gate closed, in which the
    // agents' retries are refused, so each is somewhere in its backoff window
    // (RETRY: 1 s doubling, full jitter) when the gate opens.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let back = Instant::now();
    gate.reopen();
    let returns = fleet.iter().map(|a| {
        let mut rx = a.uplink().expect("uplink").connection();
        async move {
            tokio::time::timeout(Duration::from_secs(120), rx.wait_for(|c| *c))
                .await
                .expect("every agent returns within two minutes")
                .expect("uplink running");
            back.elapsed()
        }
    });
    let mut spread: Vec<Duration> = futures_join(returns).await;
    spread.sort();
    let ms: Vec<u128> = spread.iter().map(|d| d.as_millis()).collect();
    let within_1s = spread
        .iter()
        .filter(|d| **d < Duration::from_secs(1))
        .count();
    #[allow(clippy::print_stderr, reason = "the spread is this test's report")]
    {
        eprintln!(
            "{kind:?}: {AGENTS} agents back after a 2 s outage: first {} ms, median {} ms, last {} ms; {within_1s} within 1 s; all (ms): {ms:?}",
            ms[0],
            ms[AGENTS / 2],
            ms[AGENTS - 1],
        );
    }
    for a in fleet {
        a.shutdown().await;
    }
}

/// Awaits every future, concurrently.
async fn futures_join<F: std::future::Future<Output = Duration> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<Duration> {
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_agents_return_spread_over_the_backoff_window() {
    for kind in kinds() {
        restart_spread(kind).await;
    }
}

async fn twins(kind: Kind, protocol: &str) {
    let logs = logs::capture();
    let broker = Broker::start(kind).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("mqtt://{}", broker.addr(protocol));
    let mark = logs.mark();
    let a = agent("twin", &url, protocol, dir.path()).await;
    connected(&a, true).await;
    let b = agent("twin", &url, protocol, dir.path()).await;
    let lines = [
        "MQTT session taken over by another client with this client id: two agents share it (give each its own gateway_id)",
        "MQTT broker keeps closing the connection soon after connect: another client with this client id may be taking the session over (many brokers do not say so)",
    ];
    let line = crate::common::wait_for("the takeover in the log", T, || async {
        logs.since(mark).into_iter().find(|e| {
            lines.contains(&e["fields"]["message"].as_str().unwrap_or_default())
                && e["fields"]["client_id"] == "sitegate-twin"
        })
    })
    .await;
    let mut counted = 0.0;
    for agent in [&a, &b] {
        let base = format!("http://{}", agent.http_addrs()[0]);
        counted += scrape(&reqwest::Client::new(), &base)
            .await
            .sum("sitegate_mqtt_takeovers_total", &[]);
    }
    assert!(counted >= 1.0, "{kind:?} {protocol}: {line}");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_with_one_id_log_the_takeover() {
    for kind in kinds() {
        for protocol in ["5", "3.1.1"] {
            twins(kind, protocol).await;
        }
    }
}
