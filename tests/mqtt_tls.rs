//! TLS to the broker with a CA generated in the test, on rumqttd (behind a rustls
//! front) and on mosquitto (its own TLS listener): the right CA connects (also
//! with a client certificate the broker demands), a wrong CA is refused.

mod common;

use std::time::Duration;

use common::broker::{kinds, Kind, Subscriber, TestPki};
use common::logs;
use common::mqtt::{self, mqtt_section, site_config};
use common::tls::TlsBroker;

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

async fn connects(kind: Kind, client_cert: bool) {
    let pki = TestPki::generate();
    let mut broker = TlsBroker::start(kind, &pki, client_cert).await;
    let certs = tempfile::tempdir().expect("temp dir");
    pki.write(certs.path());
    let mut sub =
        Subscriber::connect(broker.broker.addr("5"), "tls-watch", "sitegate/test/status").await;

    let site = mqtt::start(&site_config(
        &tls_section(broker.tls.port(), certs.path(), client_cert),
        200,
    ))
    .await;
    if let Some(handshakes) = &mut broker.handshakes {
        let first = tokio::time::timeout(T, handshakes.recv())
            .await
            .expect("a handshake");
        assert_eq!(first, Some(Ok(())));
    }
    mqtt::wait_connected(&site, true, T).await;
    sub.expect(&format!("online over TLS on {kind:?}"), T, |m| {
        m.json()["online"] == true
    })
    .await;
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_test_ca_connects() {
    for kind in kinds() {
        connects(kind, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate_connects() {
    for kind in kinds() {
        connects(kind, true).await;
    }
}

async fn refused(kind: Kind) {
    let logs = logs::capture();
    let server_pki = TestPki::generate();
    let other = TestPki::generate();
    let mut broker = TlsBroker::start(kind, &server_pki, false).await;
    let certs = tempfile::tempdir().expect("temp dir");
    other.write(certs.path()); // the agent trusts a CA that did not sign the broker
    let mark = logs.mark();

    let site = mqtt::start(&site_config(
        &tls_section(broker.tls.port(), certs.path(), false),
        200,
    ))
    .await;
    if let Some(handshakes) = &mut broker.handshakes {
        let outcome = tokio::time::timeout(T, handshakes.recv())
            .await
            .expect("a handshake attempt")
            .expect("front running");
        assert!(outcome.is_err(), "handshake with an untrusted CA must fail");
    }
    // The agent says why: the broker's certificate does not verify (the other
    // CA has the same name, so rustls finds the issuer and rejects its
    // signature).
    let failed = logs
        .wait_for(mark, "MQTT connect failed", T, |e| {
            e["fields"]["error"]
                .as_str()
                .is_some_and(|s| s.contains("invalid peer certificate"))
        })
        .await;
    assert!(!mqtt::uplink(&site).is_connected(), "{failed}");
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_signed_by_another_ca_is_refused() {
    for kind in kinds() {
        refused(kind).await;
    }
}
