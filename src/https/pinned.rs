//! A rustls client that trusts one certificate: the one whose SHA-256
//! fingerprint it is given (a self-signed certificate has no authority to
//! chain to). Its signatures in the handshake are still checked; names and
//! dates are not (a pinned certificate is the one meant, whatever address
//! reached it).
//!
//! For `sitegate diag` over HTTPS. It connects to nothing itself.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Accepts the certificate with the pinned fingerprint, and no other.
#[derive(Debug)]
pub struct Pinned {
    /// As [`super::pem::fingerprint`] writes it.
    fingerprint: String,
    provider: Arc<CryptoProvider>,
}

impl Pinned {
    /// `None` when `fingerprint` is not a SHA-256 fingerprint.
    pub fn new(fingerprint: &str) -> Option<Self> {
        Some(Self {
            fingerprint: super::pem::normalise_fingerprint(fingerprint)?,
            provider: super::provider(),
        })
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = super::pem::fingerprint(end_entity.as_ref());
        if seen == self.fingerprint {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the certificate's SHA-256 fingerprint is {seen}, not the pinned {}",
                self.fingerprint
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client configuration trusting only the certificate `fingerprint` names,
/// offering HTTP/1.1.
pub fn client_config(fingerprint: &str) -> Option<Arc<rustls::ClientConfig>> {
    let pinned = Pinned::new(fingerprint)?;
    let mut config = rustls::ClientConfig::builder_with_provider(super::provider())
        .with_safe_default_protocol_versions()
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(pinned))
        .with_no_client_auth();
    config.alpn_protocols = super::ALPN.iter().map(|p| p.to_vec()).collect();
    Some(Arc::new(config))
}
