//! The TLS files of a client section (`[mqtt]`, `[csip_aus]`): the CA file
//! (or the system's roots), the client certificate and its key, read, parsed
//! and matched. `check-config` reports every problem here with the key and
//! the file; the uplink and the CSIP-AUS client build their rustls
//! configurations from the same [`TlsMaterial`], so the two cannot disagree.
//!
//! Reads only the named files (and the system's CA store when no `ca_file` is
//! given). It must not open sockets or build connections.

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::{InconsistentKeys, RootCertStore};

use super::problem::Problem;
use super::MqttConfig;

/// What the uplink's TLS needs, checked.
#[derive(Debug)]
pub struct TlsMaterial {
    /// `ca_file`'s certificates, or the system's roots.
    pub roots: RootCertStore,
    /// The client certificate chain and its key (mutual TLS).
    pub client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
}

/// The crypto provider the uplink's TLS uses (`ring`; no aws-lc, no OpenSSL).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads and checks the TLS files of `m`; every problem comes back at once,
/// each under its key (`mqtt.ca_file`, ...) and naming its file.
pub fn load_tls(m: &MqttConfig) -> Result<TlsMaterial, Vec<Problem>> {
    load_files(&TlsFiles {
        ca_key: "mqtt.ca_file",
        ca_file: m.ca_file.as_deref(),
        cert_key: "mqtt.client_cert_file",
        cert_file: m.client_cert_file.as_deref(),
        key_key: "mqtt.client_key_file",
        key_file: m.client_key_file.as_deref(),
    })
}

/// A client section's TLS files, each with the TOML key it is reported under.
pub struct TlsFiles<'a> {
    pub ca_key: &'a str,
    /// `None`: the system's CA certificates.
    pub ca_file: Option<&'a Path>,
    pub cert_key: &'a str,
    pub cert_file: Option<&'a Path>,
    pub key_key: &'a str,
    pub key_file: Option<&'a Path>,
}

/// Reads and checks `f`; every problem comes back at once, each under its
/// key and naming its file.
pub fn load_files(f: &TlsFiles<'_>) -> Result<TlsMaterial, Vec<Problem>> {
    let mut problems = Vec::new();
    let roots = match f.ca_file {
        Some(file) => ca_roots(f.ca_key, file, &mut problems),
        None => system_roots(f.ca_key, &mut problems),
    };
    let client = match (f.cert_file, f.key_file) {
        (Some(cert), Some(key)) => client_pair(f, cert, key, &mut problems),
        _ => None,
    };
    if problems.is_empty() {
        Ok(TlsMaterial { roots, client })
    } else {
        Err(problems)
    }
}

fn problem(key: &str, file: &Path, message: impl std::fmt::Display) -> Problem {
    Problem::new(key, format!("{}: {message}", file.display()))
}

/// The PEM sections of `file`, or a problem saying why there are none.
fn sections(key: &str, file: &Path) -> Result<Vec<(SectionKind, Vec<u8>)>, Problem> {
    let bytes = std::fs::read(file).map_err(|e| problem(key, file, format!("cannot read: {e}")))?;
    <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| problem(key, file, format!("not valid PEM: {e}")))
}

fn is_key(kind: SectionKind) -> bool {
    matches!(
        kind,
        SectionKind::PrivateKey | SectionKind::RsaPrivateKey | SectionKind::EcPrivateKey
    )
}

/// Says what a file holds when it lacks what its key wants.
fn holds(sections: &[(SectionKind, Vec<u8>)]) -> &'static str {
    match sections.first().map(|(kind, _)| *kind) {
        None => "no PEM section at all",
        Some(k) if is_key(k) => "a private key",
        Some(SectionKind::Certificate) => "a certificate",
        Some(SectionKind::PublicKey) => "a public key",
        Some(SectionKind::Csr) => "a certificate signing request",
        Some(SectionKind::Crl) => "a certificate revocation list",
        Some(_) => "another kind of PEM section",
    }
}

/// The certificates of `file` (at least one).
fn certificates(key: &str, file: &Path) -> Result<Vec<CertificateDer<'static>>, Problem> {
    let sections = sections(key, file)?;
    let certs: Vec<CertificateDer<'static>> = sections
        .iter()
        .filter(|(kind, _)| *kind == SectionKind::Certificate)
        .map(|(_, der)| CertificateDer::from(der.clone()))
        .collect();
    if certs.is_empty() {
        return Err(problem(
            key,
            file,
            format!("holds no PEM certificate (it holds {})", holds(&sections)),
        ));
    }
    Ok(certs)
}

fn ca_roots(key: &str, file: &Path, problems: &mut Vec<Problem>) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    match certificates(key, file) {
        Ok(certs) => {
            for (i, cert) in certs.into_iter().enumerate() {
                if let Err(e) = roots.add(cert) {
                    problems.push(problem(
                        key,
                        file,
                        format!("certificate {} is not a usable CA certificate: {e}", i + 1),
                    ));
                }
            }
        }
        Err(p) => problems.push(p),
    }
    roots
}

fn system_roots(key: &str, problems: &mut Vec<Problem>) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        problems.push(Problem::new(
            key,
            format!("not set, and no system CA certificates were found{why}: name the server's CA"),
        ));
    }
    roots
}

fn client_pair(
    f: &TlsFiles<'_>,
    cert_file: &Path,
    key_file: &Path,
    problems: &mut Vec<Problem>,
) -> Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let chain = certificates(f.cert_key, cert_file)
        .map_err(|p| problems.push(p))
        .ok();
    let key = private_key(f.key_key, key_file)
        .map_err(|p| problems.push(p))
        .ok();
    let (chain, key) = (chain?, key?);
    let provider = provider();
    if let Err(e) = provider.key_provider.load_private_key(key.clone_key()) {
        problems.push(problem(
            f.key_key,
            key_file,
            format!("not a usable private key: {e}"),
        ));
        return None;
    }
    match CertifiedKey::from_der(chain.clone(), key.clone_key(), &provider) {
        Ok(_) => Some((chain, key)),
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            problems.push(problem(
                f.key_key,
                key_file,
                format!(
                    "does not match the certificate in {} ({})",
                    cert_file.display(),
                    f.cert_key
                ),
            ));
            None
        }
        Err(e) => {
            problems.push(problem(
                f.cert_key,
                cert_file,
                format!("not a usable client certificate: {e}"),
            ));
            None
        }
    }
}

fn private_key(key: &str, file: &Path) -> Result<PrivateKeyDer<'static>, Problem> {
    let sections = sections(key, file)?;
    sections
        .iter()
        .find_map(|(kind, der)| PrivateKeyDer::from_pem(*kind, der.clone()))
        .ok_or_else(|| {
            problem(
                key,
                file,
                format!("holds no PEM private key (it holds {})", holds(&sections)),
            )
        })
}

#[cfg(test)]
mod tests;
