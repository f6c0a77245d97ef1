//! TLS for the CSIP-AUS client: TLS 1.2 with mutual authentication over
//! rustls and ring, offering first the suite IEEE 2030.5 mandates
//! (`ccm8.rs`) and then the ECDHE-ECDSA AES-GCM suites a server may also
//! accept. The client's certificate is the one its lFDI is taken from.
//!
//! Builds configurations and explains handshake failures; it opens no
//! socket (that is `http.rs`'s).

pub mod ccm8;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::{AlertDescription, ClientConfig, PeerIncompatible};

use crate::config::tls::TlsMaterial;

/// The suites offered, in order of preference.
pub fn suites() -> Vec<rustls::SupportedCipherSuite> {
    use rustls::crypto::ring::cipher_suite as ring;
    ccm8::suite()
        .into_iter()
        .chain([
            ring::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ring::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ])
        .collect()
}

/// ring's provider with the 2030.5 suites, and P-256 first among the key
/// exchange groups (2030.5 names secp256r1).
pub fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::kx_group;
    Arc::new(CryptoProvider {
        cipher_suites: suites(),
        kx_groups: vec![kx_group::SECP256R1, kx_group::X25519, kx_group::SECP384R1],
        ..rustls::crypto::ring::default_provider()
    })
}

/// The suites as a log line names them.
pub fn offered() -> String {
    suites()
        .iter()
        .map(|s| match s.suite() {
            // rustls's own suites have a name; this one is ours.
            rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8 => {
                "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8".to_string()
            }
            other => format!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a client configuration cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("no client certificate: 2030.5 servers know a device by its certificate")]
    NoClientCertificate,
    #[error("the TLS configuration was refused: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The client configuration from checked material (`config::tls`).
pub fn client_config(material: &TlsMaterial) -> Result<ClientConfig, TlsSetupError> {
    let (chain, key) = material
        .client
        .as_ref()
        .ok_or(TlsSetupError::NoClientCertificate)?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])?
        .with_root_certificates(material.roots.clone())
        .with_client_auth_cert(chain.clone(), key.clone_key())?;
    Ok(config)
}

/// A handshake's failure in words an installer can act on; `None` when the
/// error is not a TLS one.
pub fn explain(e: &rustls::Error) -> String {
    match e {
        rustls::Error::AlertReceived(
            AlertDescription::HandshakeFailure | AlertDescription::InsufficientSecurity,
        ) => format!(
            "the server refused the handshake ({e}): it accepts none of the cipher suites offered ({}, TLS 1.2)",
            offered()
        ),
        rustls::Error::AlertReceived(AlertDescription::ProtocolVersion) => format!(
            "the server refused the handshake ({e}): it does not speak TLS 1.2, which 2030.5 requires"
        ),
        rustls::Error::PeerIncompatible(
            PeerIncompatible::NoCipherSuitesInCommon | PeerIncompatible::ServerTlsVersionIsDisabledByOurConfig,
        ) => format!(
            "the server chose what the client does not offer ({e}); offered: {}, TLS 1.2",
            offered()
        ),
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::AccessDenied
            | AlertDescription::CertificateRequired,
        ) => format!(
            "the server refused the device certificate ({e}): is it signed by a CA the utility trusts, with its chain in cert_file?"
        ),
        rustls::Error::InvalidCertificate(why) => format!(
            "the server's certificate is not trusted ({why}): ca_file must hold the CA chain that signs the server"
        ),
        other => format!("TLS failed: {other}"),
    }
}

/// The rustls error inside an I/O error of a TLS stream, if any.
pub fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
}
