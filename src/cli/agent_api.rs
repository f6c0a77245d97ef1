//! How the command line asks a running agent over its HTTP API (`diag`,
//! `status`): which agent (`--config`, `--url`, `--https`), with which
//! token, and one HTTP/1.1 request a connection without a client library:
//! plain on the agent's first plain listener (loopback), or HTTPS trusting
//! only the pinned certificate (`--fingerprint`, else the one the config
//! names).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{complain, load_config, EXIT_USAGE};

/// Which agent to ask, and how.
#[derive(clap::Args, Debug)]
pub struct AgentArgs {
    /// The agent's config: where its API listens, and its gateway id.
    #[arg(long, short, default_value = "/etc/sitegate/sitegate.toml")]
    config: PathBuf,
    /// An API token (or set SITEGATE_TOKEN).
    #[arg(long)]
    token: Option<String>,
    /// Ask over HTTPS at this address (ip:port), e.g. a controller on the LAN.
    #[arg(long)]
    https: Option<std::net::SocketAddr>,
    /// Ask the agent at this URL instead of the one the config names:
    /// `http://HOST:PORT`, or `https://HOST:PORT` with `--fingerprint`.
    #[arg(long, conflicts_with = "https")]
    url: Option<String>,
    /// The SHA-256 fingerprint of the agent's certificate to trust
    /// (`sitegate tls fingerprint` prints it); by default the one the
    /// config names.
    #[arg(long)]
    fingerprint: Option<String>,
}

impl AgentArgs {
    /// `--token`, else `SITEGATE_TOKEN`.
    pub fn token(&self) -> Option<String> {
        self.token
            .clone()
            .or_else(|| std::env::var("SITEGATE_TOKEN").ok())
    }

    /// The agent to ask, and a label for it: `--url`'s host and port, else
    /// the config's gateway id. The exit code after saying why not.
    pub fn resolve(&self) -> Result<(Target, String), ExitCode> {
        if let Some(url) = &self.url {
            return target_of_url(url, self.fingerprint.as_deref()).map_err(|e| {
                complain(&e);
                ExitCode::from(EXIT_USAGE)
            });
        }
        let config = load_config(&self.config)?;
        match target(self, &config) {
            Ok(t) => Ok((t, config.gateway_id)),
            Err(e) => {
                complain(&format!("{}: {e}", self.config.display()));
                Err(ExitCode::from(EXIT_USAGE))
            }
        }
    }
}

/// Runs one command's requests on a runtime of this thread.
pub fn block_on<T>(f: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?
        .block_on(f)
}

/// A TLS connector trusting only the certificate of `fingerprint`.
fn pinned(fingerprint: &str) -> Result<tokio_rustls::TlsConnector, String> {
    sitegate::https::pinned::client_config(fingerprint)
        .map(tokio_rustls::TlsConnector::from)
        .ok_or_else(|| {
            format!("--fingerprint: {fingerprint:?} is not a SHA-256 fingerprint (64 hex digits, colons allowed)")
        })
}

/// Where the agent is asked.
#[derive(Clone)]
pub enum Target {
    Plain(SocketAddr),
    Https {
        addr: SocketAddr,
        tls: tokio_rustls::TlsConnector,
    },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Plain(a) => write!(f, "http://{a}"),
            Target::Https { addr, .. } => write!(f, "https://{addr}"),
        }
    }
}

/// The unspecified address as loopback: the agent listens there too.
fn reachable(mut addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    addr
}

/// The target the arguments and the config name.
fn target(args: &AgentArgs, config: &sitegate::config::Config) -> Result<Target, String> {
    let https = args.https.or_else(|| {
        config
            .http
            .listen
            .is_empty()
            .then(|| config.http.https_listen.first().copied())
            .flatten()
    });
    let Some(addr) = https else {
        return config
            .http
            .listen
            .first()
            .map(|a| Target::Plain(reachable(*a)))
            .ok_or_else(|| "http.listen names no address to ask the agent on".to_string());
    };
    let fingerprint = match &args.fingerprint {
        Some(f) => f.clone(),
        None => sitegate::https::configured_fingerprint(config)
            .map_err(|e| format!("no fingerprint to pin (give --fingerprint): {e}"))?,
    };
    Ok(Target::Https {
        addr: reachable(addr),
        tls: pinned(&fingerprint)?,
    })
}

/// The target `--url` names, and a label for the file name.
fn target_of_url(url: &str, fingerprint: Option<&str>) -> Result<(Target, String), String> {
    let bad = |why: &str| format!("--url {url:?}: {why}");
    let (https, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(bad("expected http://HOST:PORT or https://HOST:PORT"));
    };
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') {
        return Err(bad("give the agent's address only, without a path"));
    }
    let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .map_err(|e| bad(&format!("not HOST:PORT ({e})")))?
        .next()
        .ok_or_else(|| bad("the host has no address"))?;
    let label: String = authority
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if !https {
        return Ok((Target::Plain(addr), label));
    }
    let fingerprint = fingerprint.ok_or_else(|| {
        bad("an https URL needs --fingerprint (`sitegate tls fingerprint` prints it)")
    })?;
    Ok((
        Target::Https {
            addr,
            tls: pinned(fingerprint)?,
        },
        label,
    ))
}

pub fn problem(v: &Value) -> String {
    v["detail"]
        .as_str()
        .map_or_else(|| v.to_string(), str::to_string)
}

/// One HTTP/1.1 request on its own connection; the status and the JSON
/// body (`null` when the body is not JSON).
pub async fn call(
    target: &Target,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, Value), String> {
    let (status, payload) = call_raw(target, token, method, path, body).await?;
    Ok((
        status,
        serde_json::from_slice(&payload).unwrap_or(Value::Null),
    ))
}

/// One HTTP/1.1 request on its own connection; the status and the body.
pub async fn call_raw(
    target: &Target,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, Vec<u8>), String> {
    let addr = match target {
        Target::Plain(a) | Target::Https { addr: a, .. } => *a,
    };
    let tcp = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .map_err(|_| "does not answer (is it running?)".to_string())?
        .map_err(|e| format!("cannot connect ({e}); is the agent running?"))?;
    let mut stream: Box<dyn Stream> = match target {
        Target::Plain(_) => Box::new(tcp),
        Target::Https { tls, .. } => {
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            let tls = tokio::time::timeout(Duration::from_secs(10), tls.connect(name, tcp))
                .await
                .map_err(|_| "no TLS handshake within 10 s".to_string())?
                .map_err(|e| format!("TLS: {e}"))?;
            Box::new(tls)
        }
    };
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream
        .write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
        .await
        .map_err(|_| format!("{method} {path}: no answer within 30 s"))?
        .map_err(|e| e.to_string())?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("{method} {path}: not an HTTP answer"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    let mut payload = raw[split + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        payload =
            dechunk(&payload).ok_or_else(|| format!("{method} {path}: a broken chunked body"))?;
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{method} {path}: no status in the answer"))?;
    Ok((status, payload))
}

/// A plain or TLS connection.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(
            std::str::from_utf8(&data[..line_end])
                .ok()?
                .split(';')
                .next()?
                .trim(),
            16,
        )
        .ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}
