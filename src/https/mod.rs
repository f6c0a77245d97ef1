//! HTTPS for the local API: the certificate (configured files, or a
//! self-signed one kept in the state directory), the rustls server
//! configuration (TLS 1.2 and 1.3 with ring; ALPN `http/1.1`, the only
//! protocol the server speaks), and the certificate in service, which SIGHUP
//! replaces without a restart (a broken file keeps the pair in service).
//!
//! It makes and reads certificates; it must not accept connections (the
//! agent's `http.rs` does, under the connection bounds) nor decide who may
//! use the API.

pub mod pinned;
pub mod self_signed;
pub mod validity;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

pub use crate::config::tls_pair as pem;
use crate::config::{Config, HttpTls};
pub use pem::{normalise_fingerprint, Pair, PairError, Part};
pub use self_signed::{Issued, SelfSignedError};

/// The protocol offered by ALPN. hyper is built for HTTP/1 only here:
/// offering `h2` would need hyper's HTTP/2 server and the `h2` crate.
pub const ALPN: &[&[u8]] = &[b"http/1.1"];

/// The crypto provider (`ring`; no aws-lc, no OpenSSL).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why no certificate can be served.
#[derive(Debug, thiserror::Error)]
pub enum HttpsError {
    #[error("http.tls: {0}")]
    Files(#[from] PairError),
    #[error("http.tls = \"self-signed\": {0}")]
    SelfSigned(#[from] SelfSignedError),
    #[error("cannot build the TLS configuration: {0}")]
    Rustls(String),
}

/// Where a self-signed certificate is kept: the state directory. Under
/// systemd that is the unit's own (`$STATE_DIRECTORY`, `/var/lib/sitegate`),
/// so that HTTPS does not hang on the store's folder: a store that cannot be
/// opened (a path on a read-only file system) leaves the agent running on a
/// temporary store, and the technicians who must find out why still reach
/// it. Elsewhere it is the folder holding the measurement store.
pub fn state_dir(config: &Config) -> PathBuf {
    state_dir_from(
        std::env::var_os("STATE_DIRECTORY").as_deref(),
        &config.storage.path,
    )
}

/// [`state_dir`] for a `STATE_DIRECTORY` of `systemd_state` and the store
/// at `store`.
fn state_dir_from(systemd_state: Option<&std::ffi::OsStr>, store: &Path) -> PathBuf {
    crate::util::first_dir(systemd_state).unwrap_or_else(|| {
        store
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    })
}

/// The pair `tls` names: read from its files, or the self-signed one in
/// `dir` (made or issued again when due), and whether it was issued now.
pub fn load(
    tls: &HttpTls,
    dir: &Path,
    listen: &[SocketAddr],
    now_s: i64,
) -> Result<(Pair, Issued), HttpsError> {
    match tls {
        HttpTls::Files {
            cert_file,
            key_file,
        } => Ok((pem::load_files(cert_file, key_file)?, Issued::Kept)),
        HttpTls::SelfSigned { names } => {
            let wanted = self_signed::wanted(names, listen);
            Ok(self_signed::ensure(dir, &wanted, now_s)?)
        }
    }
}

/// [`load`] for `config`'s `[http]`, now; `None` without `tls`.
pub fn load_for(config: &Config) -> Option<Result<(Pair, Issued), HttpsError>> {
    let tls = config.http.tls.as_ref()?;
    Some(load(
        tls,
        &state_dir(config),
        &config.http.https_listen,
        crate::model::time::now_ms() / 1000,
    ))
}

/// The certificate in service, replaced whole by [`Certs::replace`].
#[derive(Debug)]
pub struct Certs {
    current: RwLock<Pair>,
}

impl Certs {
    pub fn new(pair: Pair) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(pair),
        })
    }

    /// The pair in service.
    pub fn current(&self) -> Pair {
        // A pair is replaced whole; a panic elsewhere leaves a whole one.
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `pair` from the next handshake on; handshakes under way finish
    /// with the old one.
    pub fn replace(&self, pair: Pair) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = pair;
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current().key)
    }
}

/// The rustls server configuration over `certs`: TLS 1.2 and 1.3, no client
/// certificates, ALPN [`ALPN`].
pub fn server_config(certs: Arc<Certs>) -> Result<Arc<rustls::ServerConfig>, HttpsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| HttpsError::Rustls(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The fingerprint of the certificate `config` serves, read from its file
/// without making or changing anything (the self-signed one must exist).
pub fn configured_fingerprint(config: &Config) -> Result<String, String> {
    let file = match config.http.tls.as_ref() {
        None => return Err("http.tls is not set: the agent serves no HTTPS".into()),
        Some(HttpTls::Files { cert_file, .. }) => cert_file.clone(),
        Some(HttpTls::SelfSigned { .. }) => state_dir(config).join(self_signed::CERT_FILE),
    };
    let pem = std::fs::read(&file).map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
    use rustls::pki_types::pem::PemObject;
    let first = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .next()
        .ok_or_else(|| format!("{}: holds no certificate", file.display()))?
        .map_err(|e| format!("{}: not valid PEM: {e}", file.display()))?;
    Ok(pem::fingerprint(first.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_state_directory_is_systemds_else_the_stores_folder() {
        let store = Path::new("/usr/sitegate.db");
        assert_eq!(
            state_dir_from(Some(OsStr::new("/var/lib/sitegate")), store),
            Path::new("/var/lib/sitegate")
        );
        assert_eq!(state_dir_from(None, store), Path::new("/usr"));
        assert_eq!(
            state_dir_from(Some(OsStr::new("")), store),
            Path::new("/usr")
        );
        assert_eq!(
            state_dir_from(None, Path::new("sitegate.db")),
            Path::new(".")
        );
    }
}
