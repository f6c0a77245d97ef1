//! What the HTTPS tests share: the agent binary on a config with a plain
//! loopback listener and an HTTPS one, and a rustls client (ring) that says
//! which certificate it was served, pinning it or not.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::free_port;
use crate::common::process::{AgentProcess, ConfigDir};
use crate::common::site::http_section;

pub const T: Duration = Duration::from_secs(30);

/// An IPv4 address of this machine other than loopback, if it has one.
pub fn lan_address() -> Option<std::net::Ipv4Addr> {
    sitegate::https::self_signed::interface_addrs()
        .into_iter()
        .find_map(|ip| match ip {
            std::net::IpAddr::V4(v4) if !v4.is_loopback() => Some(v4),
            _ => None,
        })
}

/// A free port on `ip`.
pub fn free_port_on(ip: std::net::Ipv4Addr) -> SocketAddr {
    let l = std::net::TcpListener::bind((ip, 0)).expect("bind");
    l.local_addr().expect("addr")
}

/// The agent binary with HTTPS on loopback.
pub struct HttpsAgent {
    pub process: AgentProcess,
    pub file: PathBuf,
    pub plain: SocketAddr,
    pub https: SocketAddr,
}

/// The agent binary on a config without devices: the test tokens, plain
/// HTTP on a loopback port, HTTPS on another with `tls` (a TOML value) and
/// `extra` in `[http]`. Returns once HTTPS answers `/healthz`.
pub async fn start(tls: &str, extra: &str) -> HttpsAgent {
    start_on(free_port(), free_port(), tls, extra).await
}

/// [`start`] with plain HTTP on `plain` and HTTPS on `https`.
pub async fn start_on(plain: SocketAddr, https: SocketAddr, tls: &str, extra: &str) -> HttpsAgent {
    start_with(plain, https, tls, extra, Placement::default()).await
}

/// Where the agent's files go, when not all in its config's folder.
#[derive(Default)]
pub struct Placement<'a> {
    /// `storage.path`; the config's folder's `sitegate.db` if `None`.
    pub store: Option<&'a Path>,
    /// The agent's environment besides (`STATE_DIRECTORY`, ...).
    pub env: Vec<(&'a str, &'a Path)>,
}

/// [`start_on`] with the store and the environment of `placement`.
pub async fn start_with(
    plain: SocketAddr,
    https: SocketAddr,
    tls: &str,
    extra: &str,
    placement: Placement<'_>,
) -> HttpsAgent {
    let http = http_section().replace(
        "listen = [\"127.0.0.1:0\"]",
        &format!("listen = [\"{plain}\"]\nhttps_listen = [\"{https}\"]\ntls = {tls}\n{extra}"),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let store = placement
        .store
        .map_or_else(|| dir.path().join("sitegate.db"), Path::to_path_buf);
    let text = format!(
        "gateway_id = \"https-test\"\n{http}\n[storage]\npath = \"{}\"\n",
        store.display()
    );
    let file = dir.path().join("sitegate.toml");
    std::fs::write(&file, text).expect("write the config");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sitegate"));
    cmd.arg("run").arg("--config").arg(&file);
    for (name, value) in placement.env {
        cmd.env(name, value);
    }
    let process = AgentProcess::run(
        ConfigDir {
            dir,
            file: file.clone(),
        },
        cmd,
    );
    let agent = HttpsAgent {
        process,
        file,
        plain,
        https,
    };
    let client = any_certificate();
    crate::common::wait_for("the agent serves HTTPS", T, || {
        let client = client.clone();
        async move {
            get(https, client, "/healthz", None)
                .await
                .ok()
                .filter(|a| a.status == 200)
                .map(drop)
        }
    })
    .await;
    agent
}

/// Runs `sitegate` with `args`; its stdout (trimmed), or a panic with its
/// stderr.
pub fn sitegate(args: &[&str], config: &Path) -> String {
    sitegate_in(args, config, &[])
}

/// [`sitegate`] with `env` added to its environment.
pub fn sitegate_in(args: &[&str], config: &Path, env: &[(&str, &Path)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .args(args)
        .arg("--config")
        .arg(config)
        .envs(env.iter().copied())
        .output()
        .expect("sitegate runs");
    assert!(
        out.status.success(),
        "sitegate {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// SHA-256 of `der`, as the agent writes fingerprints (computed here on
/// its own).
pub fn fingerprint(der: &[u8]) -> String {
    sha2::Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Trusts every certificate (the handshake's signatures are still checked):
/// the test asserts which one it was served.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client that takes any certificate and offers h2 and http/1.1.
pub fn any_certificate() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

/// What one request over HTTPS got.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// The fingerprint of the certificate served.
    pub served: String,
    pub alpn: Option<Vec<u8>>,
    pub version: Option<rustls::ProtocolVersion>,
}

/// `GET path` on a connection of its own, with a bearer `token`.
pub async fn get(
    addr: SocketAddr,
    client: Arc<rustls::ClientConfig>,
    path: &str,
    token: Option<&str>,
) -> Result<Answer, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::IpAddress(addr.ip().into());
    let mut tls = tokio::time::timeout(
        T,
        tokio_rustls::TlsConnector::from(client).connect(name, tcp),
    )
    .await
    .map_err(|_| "no handshake".to_string())?
    .map_err(|e| e.to_string())?;
    let (_, session) = tls.get_ref();
    let served = session
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| fingerprint(c.as_ref()))
        .unwrap_or_default();
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    let version = session.protocol_version();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req += &format!("Authorization: Bearer {t}\r\n");
    }
    req += "\r\n";
    tls.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    tokio::time::timeout(T, tls.read_to_end(&mut raw))
        .await
        .map_err(|_| "no answer".to_string())?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").ok_or("not HTTP")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no status")?;
    Ok(Answer {
        status,
        body: body.to_string(),
        served,
        alpn,
        version,
    })
}
