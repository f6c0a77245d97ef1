//! `[csip_aus]` through the binary: `check-config` names each bad key with
//! its value (the URL, the NMI's checksum, the PIN's check digit, the PEN,
//! a certificate that is not P-256 or does not match its key) and exits 78;
//! `sitegate csip id` prints the lFDI and sFDI the tests' server computes
//! from the same certificate.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::csip_server::lfdi_of;

fn sitegate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .args(args)
        .output()
        .expect("run sitegate")
}

fn site(dir: &Path, table: &str) -> std::path::PathBuf {
    let text = format!(
        "[storage]\npath = \"{}\"\n[[sites]]\nreference = \"ste_home\"\nname = \"Home\"\n{table}",
        dir.join("sitegate.db").display()
    );
    let path = dir.join("sitegate.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn table(dir: &Path, keys: &str) -> String {
    format!(
        "[csip_aus]\nsite = \"ste_home\"\ncert_file = \"{d}/client.pem\"\nkey_file = \"{d}/client.key\"\nca_file = \"{d}/ca.pem\"\n{keys}",
        d = dir.display()
    )
}

#[test]
fn check_config_names_every_bad_key_and_value() {
    let pki = crate::common::broker::TestPki::generate();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let bad = table(
        dir.path(),
        "dcap_url = \"http://utility.example/dcap\"\nnmi = \"20019857321\"\npin = 111116\npen = 0\ncolour = 1\n",
    );
    let out = sitegate(&["check-config", site(dir.path(), &bad).to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    for want in [
        "csip_aus.colour: unknown key",
        "csip_aus.dcap_url: \"http://utility.example/dcap\" is not an https:// URL",
    ] {
        assert!(err.contains(want), "{want} in {err}");
    }
    let bad = table(
        dir.path(),
        "dcap_url = \"http://utility.example/dcap\"\nnmi = \"20019857321\"\npin = 111116\npen = 0\n",
    );
    let out = sitegate(&["check-config", site(dir.path(), &bad).to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    for want in [
        "csip_aus.dcap_url: \"http://utility.example/dcap\" is not an https:// URL",
        "csip_aus.nmi: \"20019857321\": its last digit should be the checksum 8",
        "csip_aus.pin: 111116: its last digit is not its check digit",
        "csip_aus.pen: 0 is not an IANA private enterprise number",
    ] {
        assert!(err.contains(want), "{want} in {err}");
    }

    // A key that is not the certificate's, and a CA file that is a key.
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(dir.path().join("other.key"), other.serialize_pem()).unwrap();
    let mismatched = table(
        dir.path(),
        "dcap_url = \"https://utility.example/dcap\"\nnmi = \"2001985732\"\npen = 1\n",
    )
    .replace("client.key", "other.key")
    .replace("ca.pem", "client.key");
    let out = sitegate(&[
        "check-config",
        site(dir.path(), &mismatched).to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("csip_aus.key_file") && err.contains("does not match the certificate"),
        "{err}"
    );
    assert!(
        err.contains("csip_aus.ca_file") && err.contains("holds no PEM certificate"),
        "{err}"
    );

    // An RSA certificate: 2030.5 wants ECDSA P-256.
    let rsa = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256);
    if let Ok(rsa) = rsa {
        let cert = rcgen::CertificateParams::new(Vec::new())
            .unwrap()
            .self_signed(&rsa)
            .unwrap();
        std::fs::write(dir.path().join("rsa.pem"), cert.pem()).unwrap();
        std::fs::write(dir.path().join("rsa.key"), rsa.serialize_pem()).unwrap();
        let t = table(
            dir.path(),
            "dcap_url = \"https://utility.example/dcap\"\nnmi = \"2001985732\"\npen = 1\n",
        )
        .replace("client.pem", "rsa.pem")
        .replace("client.key", "rsa.key");
        let out = sitegate(&["check-config", site(dir.path(), &t).to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not ECDSA P-256"), "{err}");
    }
}

#[test]
fn csip_id_prints_the_certificates_lfdi_and_sfdi() {
    let pki = crate::common::broker::TestPki::generate();
    let dir = tempfile::tempdir().unwrap();
    pki.write(dir.path());
    let good = table(
        dir.path(),
        "dcap_url = \"https://utility.example:8443/sep2/dcap\"\nnmi = \"20019857328\"\npin = 111115\npen = 12345\n",
    );
    let path = site(dir.path(), &good);
    let out = sitegate(&["check-config", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = sitegate(&["csip", "id", "--config", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use rustls::pki_types::pem::PemObject;
    let der =
        rustls::pki_types::CertificateDer::from_pem_slice(pki.client_cert_pem.as_bytes()).unwrap();
    let (lfdi, sfdi) = lfdi_of(der.as_ref());
    assert!(text.contains(&format!("lFDI {lfdi}")), "{text}");
    assert!(text.contains(&format!("sFDI {sfdi}")), "{text}");
    assert!(
        text.contains("https://utility.example:8443/sep2/dcap"),
        "{text}"
    );
    let out = sitegate(&[
        "csip",
        "id",
        "--config",
        site(dir.path(), "").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(78));
}
