//! TLS to the broker with a CA generated in the test, on rumqttd (behind a rustls
//! front) and on mosquitto (its own TLS listener): the right CA connects (also
//! with a client certificate the broker demands), a wrong CA is refused.
//! `check-config` reports each unusable TLS file with its path; the agent
//! itself runs without usable ones (polling, storing, steering), says why on
//! `/readyz`, and connects once they are fixed.

use std::path::Path;
use std::time::Duration;

use crate::common::broker::{kinds, Kind, Subscriber, TestPki};
use crate::common::logs;
use crate::common::mqtt::{self, mqtt_section, site_config};
use crate::common::prom::scrape;
use crate::common::tls::TlsBroker;
use reqwest::Method;

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

/// `sitegate check-config` on a config whose `[mqtt]` names these TLS files.
fn check_tls_files(dir: &Path, ca: &str, cert: &str, key: &str) -> (Option<i32>, String, String) {
    let file = dir.join("sitegate.toml");
    std::fs::write(
        &file,
        format!(
            "gateway_id = \"t\"\n[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n[storage]\npath = \"{db}\"\n[mqtt]\nurl = \"mqtts://127.0.0.1:8883\"\nca_file = \"{ca}\"\nclient_cert_file = \"{cert}\"\nclient_key_file = \"{key}\"\n",
            db = dir.join("s.db").display(),
            ca = dir.join(ca).display(),
            cert = dir.join(cert).display(),
            key = dir.join(key).display(),
        ),
    )
    .expect("write config");
    let out = crate::common::process::check_config(&file);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_reports_each_unusable_tls_file_with_its_path() {
    let pki = TestPki::generate();
    let other = TestPki::generate();
    let dir = tempfile::tempdir().expect("temp dir");
    pki.write(dir.path());
    std::fs::write(dir.path().join("other.key"), &other.client_key_pem).expect("write");
    let path = |name: &str| dir.path().join(name).display().to_string();

    let (code, stdout, stderr) = check_tls_files(dir.path(), "ca.pem", "client.pem", "client.key");
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains(": ok"), "{stdout}");

    // A key where the CA belongs, and a key that is not the certificate's: both
    // reported at once, each with its key and path.
    let (code, _, stderr) = check_tls_files(dir.path(), "client.key", "client.pem", "other.key");
    assert_eq!(code, Some(78), "{stderr}");
    for expected in [
        format!(
            "mqtt.ca_file: {}: holds no PEM certificate (it holds a private key)",
            path("client.key")
        ),
        format!(
            "mqtt.client_key_file: {}: does not match the certificate in {}",
            path("other.key"),
            path("client.pem")
        ),
    ] {
        assert!(stderr.contains(&expected), "{expected:?} in:\n{stderr}");
    }
    assert!(stderr.contains("2 problems in the config"), "{stderr}");

    // A certificate where the key belongs; a missing CA.
    let (code, _, stderr) = check_tls_files(dir.path(), "missing.pem", "client.pem", "client.pem");
    assert_eq!(code, Some(78), "{stderr}");
    for expected in [
        format!("mqtt.ca_file: {}: cannot read", path("missing.pem")),
        format!(
            "mqtt.client_key_file: {}: holds no PEM private key (it holds a certificate)",
            path("client.pem")
        ),
    ] {
        assert!(stderr.contains(&expected), "{expected:?} in:\n{stderr}");
    }
}

async fn runs_without_usable_tls(kind: Kind) {
    let logs = logs::capture();
    let pki = TestPki::generate();
    let other = TestPki::generate();
    let broker = TlsBroker::start(kind, &pki, true).await;
    let certs = tempfile::tempdir().expect("temp dir");
    pki.write(certs.path());
    // The client key is not the one of the client certificate.
    std::fs::write(certs.path().join("client.key"), &other.client_key_pem).expect("write");
    let mark = logs.mark();
    let site = mqtt::start(&site_config(
        &tls_section(broker.tls.port(), certs.path(), true),
        200,
    ))
    .await;

    // Polling and storing go on; /readyz says what keeps the uplink down.
    logs.wait_for(
        mark,
        "MQTT uplink cannot be set up; polling, storing and steering go on without it",
        T,
        |e| {
            e["fields"]["error"]
                .as_str()
                .is_some_and(|s| s.contains("mqtt.client_key_file"))
        },
    )
    .await;
    let (first, _) = crate::common::wait_for("a reading", T, || async {
        site.latest("dvc_grid", "activePower").await
    })
    .await;
    crate::common::wait_for("a newer reading", T, || async {
        site.latest("dvc_grid", "activePower")
            .await
            .filter(|(ts, _)| *ts > first)
    })
    .await;
    let (status, body) = site.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(status, 503, "{body}");
    let reasons = body["reasons"].to_string();
    assert!(
        reasons.contains("mqtt: mqtt.client_key_file")
            && reasons.contains("does not match the certificate"),
        "{body}"
    );
    let m = scrape(&site.http, &site.base).await;
    assert_eq!(m.get("sitegate_mqtt_set_up"), Some(0.0));
    crate::common::wait_for("telemetry waiting in the outbox", T, || async {
        (mqtt::uplink(&site).stats().rows > 0).then_some(())
    })
    .await;

    // Fixed on disk: the uplink picks it up at its next try and connects.
    pki.write(certs.path());
    mqtt::wait_connected(&site, true, Duration::from_secs(90)).await;
    site.ready().await;
    logs.wait_for(
        mark,
        "MQTT uplink set up: its TLS files can be used now",
        T,
        |_| true,
    )
    .await;
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_runs_without_usable_tls_files_and_connects_once_they_are_fixed() {
    for kind in kinds() {
        runs_without_usable_tls(kind).await;
    }
}
