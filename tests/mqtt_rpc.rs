//! The RPC bridge end to end: every device-data endpoint answers over MQTT as it
//! does over HTTP; MQTT 5 response topics and correlation data; duplicate ids get
//! the first answer, also after a restart; the optional token check.

mod common;

use std::time::Duration;

use common::broker::{kinds, Broker, Kind, Subscriber};
use common::mqtt::{self, mqtt_section, plain_url, rpc, site_config, ROOT};
use common::site::{READ_TOKEN, STEER_TOKEN};
use reqwest::Method;
use serde_json::json;

const T: Duration = Duration::from_secs(20);
/// Polled once, then not for an hour: answers stay the same between the two transports.
const ONCE: u64 = 3_600_000;

async fn equality(kind: Kind) {
    let broker = Broker::start(kind).await;
    let mut sub = Subscriber::connect(
        broker.addr("5"),
        "rpc-client",
        &format!("{ROOT}/rpc/response/#"),
    )
    .await;
    let text = site_config(&mqtt_section(&plain_url(broker.addr("5")), "5", ""), ONCE);
    let site = mqtt::start(&text).await;
    site.ready().await;
    mqtt::wait_connected(&site, true, T).await;

    let paths = [
        "/devices",
        "/devices?site=ste_test",
        "/devices?site=ste_nope",
        "/devices/dvc_bat/measurement?property=soc",
        "/devices/dvc_bat/measurement?property=frequency",
        "/devices/dvc_bat/measurement",
        "/devices/dvc_nope/measurement?property=soc",
        "/devices/dvc_pv/measurements",
        "/devices/dvc_pv/measurements?properties=activePower,%20activePower",
        "/devices/dvc_pv/measurements?properties=nope",
        "/devices/dvc_grid/measurements/map",
        "/devices/dvc_grid/measurements/map?properties=activePower",
        "/devices?bogus=1",
        "/no/such/path",
        "/healthz",
        "/readyz",
    ];
    for (i, path) in paths.iter().enumerate() {
        let (status, http_body) = site.call(Method::GET, path, Some(READ_TOKEN), None).await;
        let answer = rpc(
            &mut sub,
            json!({"id": format!("eq-{i}"), "method": "GET", "path": path}),
        )
        .await;
        assert_eq!(answer["status"], status.as_u16(), "{path}: {answer}");
        assert_eq!(answer["body"], http_body, "{path}");
    }
    // A method the route lacks, over both transports.
    let (status, http_body) = site
        .call(Method::DELETE, "/devices", Some(STEER_TOKEN), None)
        .await;
    let answer = rpc(
        &mut sub,
        json!({"id": "eq-delete", "method": "DELETE", "path": "/devices"}),
    )
    .await;
    assert_eq!(
        (answer["status"].as_u64(), &answer["body"]),
        (Some(u64::from(status.as_u16())), &http_body)
    );

    // MQTT 5: the request's response topic and correlation data win.
    sub.client
        .subscribe(
            format!("{ROOT}/mine"),
            rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
        )
        .await
        .expect("subscribe");
    sub.request(
        &format!("{ROOT}/rpc/request"),
        &json!({"id": "corr-1", "method": "GET", "path": "/healthz"}),
        Some((&format!("{ROOT}/mine"), b"abc")),
    )
    .await;
    let m = sub
        .expect("answer on the response topic", T, |m| {
            m.topic == format!("{ROOT}/mine")
        })
        .await;
    assert_eq!(m.correlation.as_deref(), Some(&b"abc"[..]));
    assert_eq!(m.json()["status"], 200);

    // A malformed request is answered with a problem where it can be.
    let answer = rpc(
        &mut sub,
        json!({"id": "bad-1", "method": "PATCH", "path": "/devices"}),
    )
    .await;
    assert_eq!(answer["status"], 400);
    assert_eq!(answer["body"]["code"], "invalid_value");
    assert_eq!(answer["body"]["field"], "method");

    // A duplicate id gets the first answer (not a new one), also after a restart.
    let first = rpc(
        &mut sub,
        json!({"id": "dup-1", "method": "GET", "path": "/devices/dvc_bat/measurements"}),
    )
    .await;
    let again = rpc(
        &mut sub,
        json!({"id": "dup-1", "method": "GET", "path": "/healthz"}),
    )
    .await;
    assert_eq!(again, first);
    let site = mqtt::restart(site, &text).await;
    mqtt::wait_connected(&site, true, T).await;
    let after = rpc(
        &mut sub,
        json!({"id": "dup-1", "method": "GET", "path": "/healthz"}),
    )
    .await;
    assert_eq!(after, first);
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_device_data_endpoint_answers_over_rpc_as_over_http() {
    for kind in kinds() {
        equality(kind).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_token_is_checked_like_a_bearer_token() {
    let broker = Broker::start(Kind::Rumqttd).await;
    let mut sub = Subscriber::connect(
        broker.addr("5"),
        "rpc-token",
        &format!("{ROOT}/rpc/response/#"),
    )
    .await;
    let text = site_config(
        &mqtt_section(&plain_url(broker.addr("5")), "5", "require_token = true"),
        ONCE,
    );
    let site = mqtt::start(&text).await;
    mqtt::wait_connected(&site, true, T).await;

    let none = rpc(
        &mut sub,
        json!({"id": "t-1", "method": "GET", "path": "/devices"}),
    )
    .await;
    assert_eq!(
        (none["status"].as_u64(), none["body"]["code"].as_str()),
        (Some(401), Some("unauthorized"))
    );
    let wrong = rpc(
        &mut sub,
        json!({"id": "t-2", "method": "GET", "path": "/devices", "token": "sgt_nope"}),
    )
    .await;
    assert_eq!(wrong["status"], 401);
    let ok = rpc(
        &mut sub,
        json!({"id": "t-3", "method": "GET", "path": "/devices", "token": READ_TOKEN}),
    )
    .await;
    assert_eq!(ok["status"], 200, "{ok}");
    site.stop().await;
}
