//! TLS to the broker with a CA generated in the test: the right CA connects (also
//! with a client certificate), a wrong CA is refused.

mod common;

use std::time::Duration;

use common::broker::{tls_front, Broker, Kind, Subscriber, TestPki};
use common::mqtt::{self, mqtt_section, site_config};

const T: Duration = Duration::from_secs(20);

fn tls_section(port: u16, dir: &std::path::Path, client_cert: bool) -> String {
    let mut extra = format!("ca_file = \"{}\"\n", dir.join("ca.pem").display());
    if client_cert {
        extra += &format!(
            "client_cert_file = \"{}\"\nclient_key_file = \"{}\"\n",
            dir.join("client.pem").display(),
            dir.join("client.key").display()
        );
    }
    mqtt_section(&format!("mqtts://127.0.0.1:{port}"), "5", &extra)
}

async fn connects(client_cert: bool) {
    let broker = Broker::start(Kind::Rumqttd).await;
    let pki = TestPki::generate();
    let certs = tempfile::tempdir().expect("temp dir");
    pki.write(certs.path());
    let (front, mut handshakes) = tls_front(broker.addr("5"), &pki, client_cert).await;
    let mut sub = Subscriber::connect(broker.addr("5"), "tls-watch", "sitegate/test/status").await;

    let site = mqtt::start(&site_config(
        &tls_section(front.port(), certs.path(), client_cert),
        200,
    ))
    .await;
    let first = tokio::time::timeout(T, handshakes.recv())
        .await
        .expect("a handshake");
    assert_eq!(first, Some(Ok(())));
    mqtt::wait_connected(&site, true, T).await;
    sub.expect("online over TLS", T, |m| m.json()["online"] == true)
        .await;
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_test_ca_connects() {
    connects(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate_connects() {
    connects(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_signed_by_another_ca_is_refused() {
    let broker = Broker::start(Kind::Rumqttd).await;
    let server_pki = TestPki::generate();
    let other = TestPki::generate();
    let certs = tempfile::tempdir().expect("temp dir");
    other.write(certs.path()); // the agent trusts a CA that did not sign the broker
    let (front, mut handshakes) = tls_front(broker.addr("5"), &server_pki, false).await;

    let site = mqtt::start(&site_config(
        &tls_section(front.port(), certs.path(), false),
        200,
    ))
    .await;
    let outcome = tokio::time::timeout(T, handshakes.recv())
        .await
        .expect("a handshake attempt")
        .expect("front running");
    assert!(outcome.is_err(), "handshake with an untrusted CA must fail");
    assert!(!mqtt::uplink(&site).is_connected());
    site.stop().await;
}
