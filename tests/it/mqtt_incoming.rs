//! Incoming messages of any size never knock the gateway offline, with MQTT
//! 3.1.1 and 5, on rumqttd and mosquitto:
//!
//! - a 2 MiB RPC request (under `max_incoming_kb`, over the RPC limit) with an
//!   id is answered 413; 2 MiB that are not JSON are logged, not answered; the
//!   connection stays up and telemetry keeps flowing;
//! - a message over `max_incoming_kb`: a broker that honours MQTT 5's maximum
//!   packet size (mosquitto) drops it for us; where it cannot be told (3.1.1) or
//!   does not listen (rumqttd), the connection breaks once and the agent comes
//!   back with a clean session, so the message is not delivered again: no loop.

use std::time::Duration;

use crate::common::broker::{kinds, Broker, Kind, Subscriber};
use crate::common::logs;
use crate::common::mqtt::{self, mqtt_section, plain_url, site_config, uplink, ROOT};
use crate::common::prom::scrape;
use crate::common::site::SmallSite;
use rumqttc::v5::mqttbytes::QoS;
use serde_json::json;

const T: Duration = Duration::from_secs(30);
const BIG: usize = 2 << 20;

async fn connects(site: &SmallSite) -> f64 {
    scrape(&site.http, &site.base)
        .await
        .get("sitegate_mqtt_connections_total{event=\"connected\"}")
        .expect("connections counted")
}

/// Telemetry newer than what the outbox held now arrives.
async fn telemetry_flows(site: &SmallSite, watch: &mut Subscriber) {
    let after = uplink(site).stats().last_seq;
    watch
        .expect(&format!("telemetry after seq {after}"), T, |m| {
            m.json()["seq"].as_u64().is_some_and(|s| s > after)
        })
        .await;
}

async fn start(
    broker: &Broker,
    protocol: &str,
    extra: &str,
) -> (SmallSite, Subscriber, Subscriber) {
    let tag = format!("{:?}-{protocol}-{}", broker.kind, extra.len());
    let answers = Subscriber::connect(
        broker.addr("5"),
        &format!("answers-{tag}"),
        &format!("{ROOT}/rpc/response/#"),
    )
    .await;
    let telemetry = Subscriber::connect(
        broker.addr("5"),
        &format!("telemetry-{tag}"),
        &format!("{ROOT}/devices/+/measurements"),
    )
    .await;
    let site = mqtt::start(&site_config(
        &mqtt_section(&plain_url(broker.addr(protocol)), protocol, extra),
        200,
    ))
    .await;
    mqtt::wait_connected(&site, true, T).await;
    (site, answers, telemetry)
}

async fn under_the_bound(kind: Kind, protocol: &str) {
    let logs = logs::capture();
    let broker = Broker::start(kind).await;
    let (site, mut answers, mut telemetry) = start(&broker, protocol, "").await;
    let before = connects(&site).await;

    // 2 MiB with an id: a 413 problem for that id.
    let request = json!({
        "id": "big-1",
        "method": "POST",
        "path": "/sites/ste_test/steering",
        "body": {"pad": "x".repeat(BIG)},
    });
    let answer = mqtt::rpc(&mut answers, request).await;
    assert_eq!(answer["status"], 413, "{kind:?} {protocol}: {answer}");
    assert_eq!(answer["body"]["code"], "payload_too_large");

    // 2 MiB of noise: no id to answer to, so it is logged.
    let mark = logs.mark();
    answers
        .client
        .publish(
            format!("{ROOT}/rpc/request"),
            QoS::AtLeastOnce,
            false,
            vec![b'x'; BIG],
        )
        .await
        .expect("publish noise");
    logs.wait_for(
        mark,
        "RPC request without a usable id or response topic: not answered",
        T,
        |e| e["fields"]["bytes"] == BIG,
    )
    .await;

    telemetry_flows(&site, &mut telemetry).await;
    assert!(uplink(&site).is_connected());
    assert_eq!(
        connects(&site).await,
        before,
        "{kind:?} {protocol}: reconnected"
    );
    let m = scrape(&site.http, &site.base).await;
    assert_eq!(
        m.get("sitegate_mqtt_incoming_too_large_total{outcome=\"answered\"}"),
        Some(2.0)
    );
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2_mib_request_is_answered_413_and_the_gateway_stays_connected() {
    for kind in kinds() {
        for protocol in ["3.1.1", "5"] {
            under_the_bound(kind, protocol).await;
        }
    }
}

async fn over_the_bound(kind: Kind, protocol: &str) {
    let logs = logs::capture();
    let broker = Broker::start(kind).await;
    let (site, answers, mut telemetry) = start(&broker, protocol, "max_incoming_kb = 256").await;
    let before = connects(&site).await;
    let mark = logs.mark();
    answers
        .client
        .publish(
            format!("{ROOT}/rpc/request"),
            QoS::AtLeastOnce,
            false,
            vec![b'x'; BIG],
        )
        .await
        .expect("publish");
    let broker_drops_it = kind == Kind::Mosquitto && protocol == "5";
    if broker_drops_it {
        // Told at connect, mosquitto never sends it: nothing to notice. Had it come,
        // the agent would be back from the break within its first retry (RETRY: at
        // most 1 s): 2 s in which `connects` must not move.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(connects(&site).await, before, "{kind:?} {protocol}");
    } else {
        logs.wait_for(
            mark,
            "MQTT broker sent a message over mqtt.max_incoming_kb; reconnecting with a clean session to drop it (messages the broker queued for this gateway are dropped; RPC requesters retry)",
            T,
            |_| true,
        )
        .await;
        mqtt::wait_connected(&site, true, T).await;
        // Back once, and it stays: the message was not delivered again.
        crate::common::wait_for("the reconnect", T, || async {
            (connects(&site).await == before + 1.0).then_some(())
        })
        .await;
        // 3 s in which a redelivery would break the connection again: the retry after
        // a second break waits at most 2 s (RETRY), so it would be counted by then.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            connects(&site).await,
            before + 1.0,
            "{kind:?} {protocol}: a loop"
        );
        let m = scrape(&site.http, &site.base).await;
        assert_eq!(
            m.get("sitegate_mqtt_incoming_too_large_total{outcome=\"disconnected\"}"),
            Some(1.0)
        );
    }
    telemetry_flows(&site, &mut telemetry).await;
    assert!(uplink(&site).is_connected());
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_bound_never_loops() {
    for kind in kinds() {
        for protocol in ["3.1.1", "5"] {
            over_the_bound(kind, protocol).await;
        }
    }
}
