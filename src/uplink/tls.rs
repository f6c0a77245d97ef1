//! The rustls client configuration for `mqtts://`, built from the TLS files as
//! `config::tls` reads and checks them (the same checks `check-config` runs),
//! with the `ring` crypto provider.
//!
//! No network, no retries: the link decides what happens when this fails.

use std::sync::Arc;

use rustls::ClientConfig;

use crate::config::tls::{load_tls, provider};
use crate::config::{MqttConfig, Problem};

/// Why the uplink cannot be set up (the link retries with backoff).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{}", join(.0))]
    Files(Vec<Problem>),
    #[error("mqtt.url: {0}")]
    Url(String),
    #[error("TLS setup: {0}")]
    Rustls(#[from] rustls::Error),
}

fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Builds the client configuration from `ca_file` (or the system's roots),
/// `client_cert_file` and `client_key_file`.
pub fn client_config(m: &MqttConfig) -> Result<Arc<ClientConfig>, SetupError> {
    let material = load_tls(m).map_err(SetupError::Files)?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(material.roots);
    let config = match material.client {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key)?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}
