//! The CSIP-AUS client's TLS: TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8 against
//! OpenSSL's own implementation (the suite IEEE 2030.5 names and CACTUS's
//! servers offer alone), with the device certificate presented; and a
//! handshake refused for its cipher suite, its TLS version or an untrusted
//! server, each said in words an installer can act on.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sitegate::config::csip::ServerUrl;
use sitegate::config::tls::{load_files, TlsFiles};
use sitegate::csip::http::{Http, HttpError};

use crate::common::broker::TestPki;
use crate::common::free_port;

fn client(pki_dir: &std::path::Path, port: u16) -> Http {
    let m = load_files(&TlsFiles {
        ca_key: "csip_aus.ca_file",
        ca_file: Some(&pki_dir.join("ca.pem")),
        cert_key: "csip_aus.cert_file",
        cert_file: Some(&pki_dir.join("client.pem")),
        key_key: "csip_aus.key_file",
        key_file: Some(&pki_dir.join("client.key")),
    })
    .expect("the test PKI loads");
    let tls = sitegate::csip::tls::client_config(&m).expect("client config");
    Http::new(
        ServerUrl::parse(&format!("https://127.0.0.1:{port}/dcap")).unwrap(),
        Arc::new(tls),
        Duration::from_secs(5),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ccm_8_with_mutual_tls_against_openssl() {
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        assert!(
            !crate::common::required("OPENSSL"),
            "openssl is required here"
        );
        eprintln!("skipped: no openssl binary");
        return;
    }
    let pki = TestPki::generate();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    std::fs::write(dir.path().join("server.pem"), &pki.server_cert_pem).unwrap();
    std::fs::write(dir.path().join("server.key"), &pki.server_key_pem).unwrap();
    let dcap = r#"<DeviceCapability xmlns="urn:ieee:std:2030.5:ns" href="/dcap"><TimeLink href="/tm"/></DeviceCapability>"#;
    std::fs::write(dir.path().join("dcap"), dcap).unwrap();
    let port = free_port().port();
    let server = std::process::Command::new("openssl")
        .current_dir(dir.path())
        .args([
            "s_server",
            "-accept",
            &format!("127.0.0.1:{port}"),
            "-tls1_2",
        ])
        .args([
            "-cipher",
            "ECDHE-ECDSA-AES128-CCM8",
            "-cert",
            "server.pem",
            "-key",
            "server.key",
        ])
        .args(["-CAfile", "ca.pem", "-Verify", "1", "-WWW", "-quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl s_server starts");
    let _server = Killed(server);
    let mut http = client(dir.path(), port);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let body = loop {
        match http.get("/dcap").await {
            Ok(b) => break b,
            Err(HttpError::Connect { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("GET /dcap from openssl s_server failed: {e}"),
        }
    };
    assert_eq!(body.trim(), dcap);
}

/// A child process killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A rustls server with `suites` and `versions`, its certificate from
/// `pki`; it takes one handshake at a time and answers nothing.
async fn refusing_server(
    pki: &TestPki,
    suites: Vec<rustls::SupportedCipherSuite>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> u16 {
    let provider = Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        ..rustls::crypto::ring::default_provider()
    });
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(pki.server_cert_pem.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(pki.server_key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let _ = acceptor.accept(tcp).await;
        }
    });
    port
}

#[tokio::test]
async fn a_handshake_refused_says_why() {
    use rustls::crypto::ring::cipher_suite;
    let pki = TestPki::generate();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());

    let chacha = refusing_server(
        &pki,
        vec![cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256],
        &[&rustls::version::TLS12],
    )
    .await;
    let e = client(dir.path(), chacha).get("/dcap").await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("accepts none of the cipher suites offered")
            && text.contains("TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8"),
        "{text}"
    );

    let tls13 = refusing_server(
        &pki,
        vec![cipher_suite::TLS13_AES_128_GCM_SHA256],
        &[&rustls::version::TLS13],
    )
    .await;
    let text = client(dir.path(), tls13)
        .get("/dcap")
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("TLS 1.2"), "{text}");

    // A server whose certificate another CA signed.
    let other = TestPki::generate();
    let stranger = refusing_server(
        &other,
        vec![cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256],
        &[&rustls::version::TLS12],
    )
    .await;
    let text = client(dir.path(), stranger)
        .get("/dcap")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("not trusted") && text.contains("ca_file"),
        "{text}"
    );
}
