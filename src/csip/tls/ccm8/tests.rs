//! The suite through a whole rustls handshake and records both ways, in
//! memory, with ECDSA P-256 certificates on both sides, as 2030.5 has them.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

use super::suite;
use crate::csip::tls::provider;

struct Pki {
    ca: CertificateDer<'static>,
    server: (CertificateDer<'static>, PrivateKeyDer<'static>),
    client: (CertificateDer<'static>, PrivateKeyDer<'static>),
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |san: Option<SanType>| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::new()).unwrap();
        p.subject_alt_names.extend(san);
        let cert = p.signed_by(&key, &issuer).unwrap();
        (
            cert.der().clone(),
            PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
    };
    Pki {
        ca: ca.der().clone(),
        server: leaf(Some(SanType::DnsName("utility.test".try_into().unwrap()))),
        client: leaf(None),
    }
}

fn configs(p: &Pki) -> (Arc<ClientConfig>, Arc<ServerConfig>) {
    let mut roots = RootCertStore::empty();
    roots.add(p.ca.clone()).unwrap();
    let roots = Arc::new(roots);
    let only_ccm8 = Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: vec![suite().unwrap()],
        ..(*provider()).clone()
    });
    let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), only_ccm8.clone())
        .build()
        .unwrap();
    let server = ServerConfig::builder_with_provider(only_ccm8.clone())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![p.server.0.clone()], p.server.1.clone_key())
        .unwrap();
    let client = ClientConfig::builder_with_provider(only_ccm8)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![p.client.0.clone()], p.client.1.clone_key())
        .unwrap();
    (Arc::new(client), Arc::new(server))
}

/// Moves every pending TLS byte from one side to the other until neither
/// has any to send; returns the plaintext each side received (client's,
/// server's), read as it arrives.
fn pump(c: &mut ClientConnection, s: &mut ServerConnection) -> (Vec<u8>, Vec<u8>) {
    let (mut to_client, mut to_server) = (Vec::new(), Vec::new());
    loop {
        let mut moved = false;
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        let mut rd = buf.as_slice();
        while !rd.is_empty() {
            moved = true;
            s.read_tls(&mut rd).unwrap();
            s.process_new_packets().unwrap();
            to_server.extend(read_all(&mut s.reader()));
        }
        let mut buf = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        let mut rd = buf.as_slice();
        while !rd.is_empty() {
            moved = true;
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets().unwrap();
            to_client.extend(read_all(&mut c.reader()));
        }
        if !moved {
            return (to_client, to_server);
        }
    }
}

fn read_all(r: &mut dyn std::io::Read) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn a_mutual_tls_handshake_agrees_on_ccm_8_and_carries_records_both_ways() {
    use std::io::Write;
    let p = pki();
    let (client, server) = configs(&p);
    let mut c =
        ClientConnection::new(client, ServerName::try_from("utility.test").unwrap()).unwrap();
    let mut s = ServerConnection::new(server).unwrap();
    pump(&mut c, &mut s);
    assert!(!c.is_handshaking() && !s.is_handshaking());
    assert_eq!(
        c.negotiated_cipher_suite().map(|s| s.suite()),
        Some(rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8)
    );
    assert!(s.peer_certificates().is_some_and(|c| c.len() == 1));

    // Several records, one larger than a fragment: each gets its own nonce.
    let big: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    c.writer().write_all(b"GET /dcap HTTP/1.1\r\n\r\n").unwrap();
    c.writer().write_all(&big).unwrap();
    let (_, got) = pump(&mut c, &mut s);
    assert_eq!(&got[..22], b"GET /dcap HTTP/1.1\r\n\r\n");
    assert!(
        got[22..] == big[..],
        "{} bytes arrived of {}",
        got.len() - 22,
        big.len()
    );

    s.writer()
        .write_all(b"HTTP/1.1 200 OK\r\n\r\n<DeviceCapability/>")
        .unwrap();
    let (got, _) = pump(&mut c, &mut s);
    assert_eq!(got, b"HTTP/1.1 200 OK\r\n\r\n<DeviceCapability/>");
}

#[test]
fn a_record_changed_on_the_wire_is_refused() {
    use std::io::Write;
    let p = pki();
    let (client, server) = configs(&p);
    let mut c =
        ClientConnection::new(client, ServerName::try_from("utility.test").unwrap()).unwrap();
    let mut s = ServerConnection::new(server).unwrap();
    pump(&mut c, &mut s);
    c.writer().write_all(b"opModExpLimW 1500").unwrap();
    let mut record = Vec::new();
    c.write_tls(&mut record).unwrap();
    // Header 5, explicit nonce 8, then ciphertext: flip one ciphertext bit.
    record[5 + 8] ^= 0x01;
    s.read_tls(&mut record.as_slice()).unwrap();
    assert!(matches!(
        s.process_new_packets(),
        Err(rustls::Error::DecryptError)
    ));
}
