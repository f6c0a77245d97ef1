use std::path::{Path, PathBuf};

use rcgen::{CertificateParams, KeyPair};

use super::*;

/// A self-signed CA, and a client certificate with its key.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca_key = KeyPair::generate().expect("ca key");
        let mut ca = CertificateParams::new(Vec::new()).expect("ca params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).expect("ca cert");
        let key = KeyPair::generate().expect("client key");
        let cert = CertificateParams::new(vec!["client".into()])
            .expect("client params")
            .self_signed(&key)
            .expect("client cert");
        let other = KeyPair::generate().expect("other key");
        for (name, text) in [
            ("ca.pem", ca_cert.pem()),
            ("ca.key", ca_key.serialize_pem()),
            ("client.pem", cert.pem()),
            ("client.key", key.serialize_pem()),
            ("other.key", other.serialize_pem()),
            ("notes.txt", "not a certificate\n".to_string()),
        ] {
            std::fs::write(dir.path().join(name), text).expect("write");
        }
        Files { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn config(&self, ca: &str, pair: Option<(&str, &str)>) -> MqttConfig {
        MqttConfig {
            url: "mqtts://broker.example:8883".into(),
            ca_file: Some(self.path(ca)),
            client_cert_file: pair.map(|(c, _)| self.path(c)),
            client_key_file: pair.map(|(_, k)| self.path(k)),
            ..MqttConfig::default()
        }
    }
}

fn problems(m: &MqttConfig) -> Vec<(String, String)> {
    load_tls(m)
        .expect_err("should have problems")
        .into_iter()
        .map(|p| (p.path, p.message))
        .collect()
}

fn check(m: &MqttConfig, expected: &[(&str, &Path, &str)]) {
    let got = problems(m);
    assert_eq!(got.len(), expected.len(), "{got:?}");
    for ((path, message), (want_path, file, want)) in got.iter().zip(expected) {
        assert_eq!(path, want_path, "{got:?}");
        assert!(
            message.starts_with(&format!("{}: ", file.display())) && message.contains(want),
            "{message:?} should name {} and say {want:?}",
            file.display()
        );
    }
}

#[test]
fn matching_files_load() {
    let f = Files::new();
    let m = load_tls(&f.config("ca.pem", Some(("client.pem", "client.key")))).expect("loads");
    assert_eq!(m.roots.len(), 1);
    assert!(m.client.is_some());
    assert!(load_tls(&f.config("ca.pem", None))
        .expect("loads")
        .client
        .is_none());
}

#[test]
fn each_bad_file_is_reported_with_its_key_and_path() {
    let f = Files::new();
    check(
        &f.config("ca.key", None),
        &[(
            "mqtt.ca_file",
            &f.path("ca.key"),
            "holds no PEM certificate (it holds a private key)",
        )],
    );
    check(
        &f.config("notes.txt", None),
        &[(
            "mqtt.ca_file",
            &f.path("notes.txt"),
            "no PEM section at all",
        )],
    );
    check(
        &f.config("missing.pem", None),
        &[("mqtt.ca_file", &f.path("missing.pem"), "cannot read")],
    );
    check(
        &f.config("ca.pem", Some(("client.pem", "other.key"))),
        &[(
            "mqtt.client_key_file",
            &f.path("other.key"),
            "does not match the certificate in",
        )],
    );
    check(
        &f.config("ca.pem", Some(("client.pem", "client.pem"))),
        &[(
            "mqtt.client_key_file",
            &f.path("client.pem"),
            "holds no PEM private key (it holds a certificate)",
        )],
    );
    check(
        &f.config("ca.pem", Some(("client.key", "client.key"))),
        &[(
            "mqtt.client_cert_file",
            &f.path("client.key"),
            "holds no PEM certificate",
        )],
    );
}

#[test]
fn every_problem_comes_at_once() {
    let f = Files::new();
    check(
        &f.config("client.key", Some(("ca.pem", "other.key"))),
        &[
            (
                "mqtt.ca_file",
                &f.path("client.key"),
                "holds no PEM certificate",
            ),
            (
                "mqtt.client_key_file",
                &f.path("other.key"),
                "does not match",
            ),
        ],
    );
}
