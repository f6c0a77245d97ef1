//! The rustls client configuration for `mqtts://`: the CA file (or the system's
//! roots), an optional client certificate and key, the `ring` crypto provider.
//!
//! Reads only the configured files; no network. Errors name the file at fault.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use crate::config::MqttConfig;

/// Why the TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("mqtt.{key}: cannot read {file}: {why}")]
    File {
        key: &'static str,
        file: String,
        why: String,
    },
    #[error("mqtt.{key}: {file} holds no {what}")]
    Empty {
        key: &'static str,
        file: String,
        what: &'static str,
    },
    #[error("mqtt.ca_file: no CA given and no system roots found")]
    NoRoots,
    #[error("TLS setup: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Builds the client configuration from `ca_file`, `client_cert_file` and
/// `client_key_file`.
pub fn client_config(m: &MqttConfig) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    match &m.ca_file {
        Some(file) => {
            for cert in certs("ca_file", file)? {
                roots.add(cert)?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!(error = %e, "cannot load some system CA certificates");
            }
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(TlsError::NoRoots);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let config = match (&m.client_cert_file, &m.client_key_file) {
        (Some(cert), Some(key)) => {
            let chain = certs("client_cert_file", cert)?;
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::File {
                key: "client_key_file",
                file: key.display().to_string(),
                why: e.to_string(),
            })?;
            builder.with_client_auth_cert(chain, key_der)?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

fn certs(key: &'static str, file: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let err = |why: String| TlsError::File {
        key,
        file: file.display().to_string(),
        why,
    };
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            key,
            file: file.display().to_string(),
            what: "PEM certificate",
        });
    }
    Ok(certs)
}
