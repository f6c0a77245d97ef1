//! Binding the HTTP listeners and serving the API router on them, under the
//! connection bounds of `connections.rs`: one task accepts per listener, one
//! task serves each connection (HTTP/1, with a deadline for each request
//! head), and a connection on the reserve gets the reserve's router; hyper's
//! own refusals of a request head are answered as problem+json
//! (`head_errors.rs`).
//!
//! It serves the router it is given; it must not build one nor know what
//! the routes do.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::connections::{Capped, Class, Connections, Held};
use super::head_errors::ProblemHeads;
use super::over_share::{self, Rewind};
use super::ServeError;

/// Binds a listener on each of `addrs`.
pub(super) async fn bind(addrs: &[SocketAddr]) -> Result<Vec<TcpListener>, ServeError> {
    let mut listeners = Vec::with_capacity(addrs.len());
    for addr in addrs {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind {
                addr: *addr,
                source,
            })?;
        listeners.push(l);
    }
    Ok(listeners)
}

/// The most a client may take to send a request's head (request line and
/// headers); past it the connection is closed.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The routers a connection is served: every route, or the reserve's; and
/// for a plain connection from beyond loopback, the same with tokens refused
/// in clear.
#[derive(Clone)]
struct Apps {
    pub full: axum::Router,
    pub reserve: axum::Router,
    pub in_clear: (axum::Router, axum::Router),
}

impl Apps {
    /// The full router and the reserve's, for a connection from `peer`
    /// (`tls`: over HTTPS).
    fn for_peer(&self, peer: SocketAddr, tls: bool) -> (axum::Router, axum::Router) {
        if !tls && !peer.ip().to_canonical().is_loopback() {
            (self.in_clear.0.clone(), self.in_clear.1.clone())
        } else {
            (self.full.clone(), self.reserve.clone())
        }
    }
}

/// Serves `router` on the bound listeners (the reserve's router on reserve
/// connections; tokens refused in clear on plain connections from beyond
/// loopback, whatever `http.allow_plain_tokens` lets the config bind); the
/// addresses they listen on, and whether each serves HTTPS.
pub fn serve_router(
    listeners: Vec<Listener>,
    router: axum::Router,
    connections: &Arc<Connections>,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> Vec<(SocketAddr, bool)> {
    let https: Vec<SocketAddr> = listeners
        .iter()
        .filter(|l| l.tls.is_some())
        .filter_map(|l| l.tcp.local_addr().ok())
        .collect();
    let reserve = crate::api::reserve_router(router.clone());
    let in_clear = (
        crate::api::refuse_tokens_in_clear(router.clone(), &https),
        crate::api::refuse_tokens_in_clear(reserve.clone(), &https),
    );
    let apps = Apps {
        reserve,
        full: router,
        in_clear,
    };
    let addrs = serve(listeners, apps, connections, tracker, cancel.child_token());
    for (addr, tls) in &addrs {
        if *tls {
            tracing::info!(%addr, "HTTPS API listening");
        } else {
            tracing::info!(%addr, "HTTP API listening");
        }
    }
    addrs
}

/// A bound listener, and its TLS when it serves HTTPS.
pub struct Listener {
    pub tcp: TcpListener,
    pub tls: Option<TlsAcceptor>,
}

/// Serves `apps` on every listener until `cancel`, within the connection
/// bounds of `connections`; returns the bound addresses (and whether each
/// serves HTTPS).
fn serve(
    listeners: Vec<Listener>,
    apps: Apps,
    connections: &Arc<Connections>,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) -> Vec<(SocketAddr, bool)> {
    let mut addrs = Vec::new();
    for Listener { tcp, tls } in listeners {
        if let Ok(a) = tcp.local_addr() {
            addrs.push((a, tls.is_some()));
        }
        let listener = Capped::new(tcp, connections.clone());
        tracker.spawn(accept_loop(
            listener,
            tls,
            apps.clone(),
            connections.clone(),
            tracker.clone(),
            cancel.clone(),
        ));
    }
    addrs
}

async fn accept_loop(
    mut listener: Capped,
    tls: Option<TlsAcceptor>,
    apps: Apps,
    connections: Arc<Connections>,
    tracker: TaskTracker,
    cancel: CancellationToken,
) {
    loop {
        let (io, peer, class) = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (full, reserve) = apps.for_peer(peer, tls.is_some());
        let conn = Conn {
            full,
            reserve,
            class,
            connections: connections.clone(),
            cancel: cancel.clone(),
            reclaimed: io.reclaimed(),
        };
        tracker.spawn(serve_connection(io, tls.clone(), conn));
    }
}

/// One connection until it closes: its TLS handshake first on an HTTPS
/// listener, which must end within the head deadline (a handshake trickled
/// byte by byte holds its slot no longer than a slow request head).
async fn serve_connection(io: Held, tls: Option<TlsAcceptor>, conn: Conn) {
    let Some(acceptor) = tls else {
        conn.serve(io).await;
        return;
    };
    match tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(io)).await {
        Ok(Ok(stream)) => conn.serve(stream).await,
        Ok(Err(e)) => {
            conn.connections.tls_failed();
            tracing::debug!(error = %e, "TLS handshake failed");
        }
        Err(_) => {
            conn.connections.tls_failed();
            conn.connections
                .head_timeouts
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!("TLS handshake not done within the head deadline: closed");
        }
    }
}

/// What serving one connection needs besides its stream; on `cancel`, its
/// request in flight finishes and it closes.
struct Conn {
    full: axum::Router,
    reserve: axum::Router,
    class: Class,
    connections: Arc<Connections>,
    cancel: CancellationToken,
    /// Cancelled when a newer connection from the same address takes this
    /// one's place.
    reclaimed: CancellationToken,
}

impl Conn {
    /// Serves HTTP/1 on `io` (plain, or TLS once its handshake is done).
    async fn serve<S>(self, mut io: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (app, io) = match self.class {
            Class::Full => (self.full, Rewind::new(Vec::new(), io)),
            Class::Reserve => (self.reserve, Rewind::new(Vec::new(), io)),
            Class::OverShare => {
                let read = match tokio::time::timeout(
                    HEAD_TIMEOUT,
                    over_share::read_request_line(&mut io),
                )
                .await
                {
                    Ok(Ok(Some(read))) => read,
                    Ok(_) => return,
                    Err(_) => {
                        self.connections
                            .head_timeouts
                            .fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                };
                if !over_share::asks_health(over_share::first_line(&read)) {
                    self.connections.refused_busy();
                    over_share::refuse_busy(&mut io).await;
                    return;
                }
                self.connections.served_reserve();
                (self.reserve, Rewind::new(read, io))
            }
        };
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEAD_TIMEOUT)
            .keep_alive(self.class == Class::Full);
        let io = ProblemHeads::new(io, self.connections.refused_heads.clone());
        let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(app));
        tokio::pin!(conn);
        let result = tokio::select! {
            r = conn.as_mut() => r,
            () = self.cancel.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
            // Its address opened one more than it may hold while this one sat
            // between requests: it closes (after an answer it is writing).
            () = self.reclaimed.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(e) = result {
            if e.is_timeout() {
                self.connections
                    .head_timeouts
                    .fetch_add(1, Ordering::Relaxed);
            }
            tracing::debug!(error = %e, "HTTP connection ended with an error");
        }
    }
}
