//! The CSIP-AUS client's requests: HTTP/1.1 over TLS to the utility server,
//! one connection kept open and used one request at a time, `sep+xml` both
//! ways, every request within a timeout, bodies within a bound. Redirects
//! are not followed and another host is not called: the device's
//! certificate goes to the server it was configured for only.
//!
//! Owns its connection; it knows no resource.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::config::csip::ServerUrl;

/// The largest body read, bytes: a page of 100 controls is about 60 kB.
pub const MAX_BODY: usize = 4 << 20;

/// The content type of 2030.5.
pub const SEP_XML: &str = "application/sep+xml";

/// Why a request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot connect to {addr}: {error}")]
    Connect { addr: String, error: std::io::Error },
    #[error("{0}")]
    Tls(String),
    #[error("no answer within {0} ms")]
    Timeout(u64),
    #[error("the connection failed: {0}")]
    Io(String),
    #[error("{method} {path} answered {status}{detail}")]
    Status {
        method: Method,
        path: String,
        status: StatusCode,
        detail: String,
    },
    #[error(
        "{method} {path} was redirected to {location:?}: a 2030.5 client does not follow redirects"
    )]
    Redirect {
        method: Method,
        path: String,
        location: String,
    },
    #[error("the answer to {0} is larger than {MAX_BODY} bytes")]
    TooLarge(String),
    #[error("the answer to {0} is not UTF-8 text")]
    NotText(String),
    #[error("{0:?} is on another server than the one configured: not called")]
    OtherHost(String),
}

impl HttpError {
    /// Short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            HttpError::Connect { .. } => "connect",
            HttpError::Tls(_) => "tls",
            HttpError::Timeout(_) => "timeout",
            HttpError::Io(_) => "io",
            HttpError::Status { .. } => "status",
            HttpError::Redirect { .. } => "redirect",
            HttpError::TooLarge(_) | HttpError::NotText(_) => "body",
            HttpError::OtherHost(_) => "other_host",
        }
    }

    /// The server answered what it means (it refused this request): a
    /// client error, a redirect, a body it should not have sent. A server
    /// error (5xx) is an outage like no answer at all: what waits is sent
    /// again (CACTUS simulates an outage with 500s).
    pub fn answered(&self) -> bool {
        match self {
            HttpError::Status { status, .. } => !status.is_server_error(),
            HttpError::Redirect { .. } | HttpError::TooLarge(_) | HttpError::NotText(_) => true,
            _ => false,
        }
    }
}

/// An answer: its status, `Location` and body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub location: Option<String>,
    pub body: String,
}

/// The client's one connection to the server.
pub struct Http {
    server: ServerUrl,
    tls: TlsConnector,
    timeout: Duration,
    conn: Option<SendRequest<Full<Bytes>>>,
}

impl Http {
    pub fn new(server: ServerUrl, tls: Arc<rustls::ClientConfig>, timeout: Duration) -> Http {
        Http {
            server,
            tls: TlsConnector::from(tls),
            timeout,
            conn: None,
        }
    }

    /// The path of `href` on the configured server.
    pub fn path_of(&self, href: &str) -> Result<String, HttpError> {
        if href.starts_with('/') {
            return Ok(href.to_string());
        }
        let url = ServerUrl::parse(href).map_err(|_| HttpError::OtherHost(href.to_string()))?;
        if url.host.eq_ignore_ascii_case(&self.server.host) && url.port == self.server.port {
            Ok(url.path)
        } else {
            Err(HttpError::OtherHost(href.to_string()))
        }
    }

    /// GET `href`: the body of a 200.
    pub async fn get(&mut self, href: &str) -> Result<String, HttpError> {
        let reply = self.request(Method::GET, href, None).await?;
        Ok(reply.body)
    }

    /// POST `body` to `href`.
    pub async fn post(&mut self, href: &str, body: String) -> Result<Reply, HttpError> {
        self.request(Method::POST, href, Some(body)).await
    }

    /// PUT `body` at `href`.
    pub async fn put(&mut self, href: &str, body: String) -> Result<Reply, HttpError> {
        self.request(Method::PUT, href, Some(body)).await
    }

    /// Drops the connection (the next request opens another).
    pub fn close(&mut self) {
        self.conn = None;
    }

    async fn request(
        &mut self,
        method: Method,
        href: &str,
        body: Option<String>,
    ) -> Result<Reply, HttpError> {
        let path = self.path_of(href)?;
        let ms = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let result = tokio::time::timeout(self.timeout, self.exchange(method.clone(), &path, body))
            .await
            .unwrap_or(Err(HttpError::Timeout(ms)));
        if result.as_ref().is_err_and(|e| !e.answered()) {
            self.conn = None;
        }
        let reply = result?;
        if reply.status.is_redirection() {
            return Err(HttpError::Redirect {
                method,
                path,
                location: reply.location.unwrap_or_default(),
            });
        }
        if !reply.status.is_success() {
            let excerpt: String = reply.body.chars().take(200).collect();
            let detail = if excerpt.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", excerpt.trim())
            };
            return Err(HttpError::Status {
                method,
                path,
                status: reply.status,
                detail,
            });
        }
        Ok(reply)
    }

    /// The open connection, ready for a request; opened if need be.
    async fn connect(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, HttpError> {
        let ready = match &mut self.conn {
            Some(c) => c.ready().await.is_ok(),
            None => false,
        };
        if !ready {
            self.conn = Some(self.open().await?);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| HttpError::Io("no connection".into()))
    }

    async fn open(&mut self) -> Result<SendRequest<Full<Bytes>>, HttpError> {
        let addr = format!("{}:{}", self.server.host, self.server.port);
        let tcp = TcpStream::connect((self.server.host.as_str(), self.server.port))
            .await
            .map_err(|error| HttpError::Connect {
                addr: addr.clone(),
                error,
            })?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(self.server.host.clone()).map_err(|e| {
            HttpError::Tls(format!("{:?} is not a server name: {e}", self.server.host))
        })?;
        let stream = self.tls.connect(name, tcp).await.map_err(|e| {
            HttpError::Tls(match super::tls::rustls_error(&e) {
                Some(r) => super::tls::explain(r),
                None => format!("the TLS handshake with {addr} failed: {e}"),
            })
        })?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| HttpError::Io(e.to_string()))?;
        // The connection's driver ends with the connection (closed by
        // either side, or dropped with `send`).
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(send)
    }

    async fn exchange(
        &mut self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<Reply, HttpError> {
        let host = if self.server.host.contains(':') {
            format!("[{}]:{}", self.server.host, self.server.port)
        } else {
            format!("{}:{}", self.server.host, self.server.port)
        };
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, host)
            .header(hyper::header::ACCEPT, SEP_XML);
        if body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, SEP_XML);
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| HttpError::Io(format!("the request for {path} cannot be built: {e}")))?;
        let resp = self.connect().await?.send_request(req).await.map_err(|e| {
            let tls = std::error::Error::source(&e)
                .and_then(|s| s.downcast_ref::<std::io::Error>())
                .and_then(super::tls::rustls_error)
                .map(super::tls::explain);
            match tls {
                Some(t) => HttpError::Tls(t),
                None => HttpError::Io(e.to_string()),
            }
        })?;
        let status = resp.status();
        let location = resp
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    HttpError::TooLarge(path.to_string())
                } else {
                    HttpError::Io(e.to_string())
                }
            })?
            .to_bytes();
        let body =
            String::from_utf8(bytes.to_vec()).map_err(|_| HttpError::NotText(path.to_string()))?;
        Ok(Reply {
            status,
            location,
            body,
        })
    }
}
