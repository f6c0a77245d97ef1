//! Binding the HTTP listeners and serving the API router on them, under the
//! connection bounds of `connections.rs`: one task accepts per listener, one
//! task serves each connection (HTTP/1, with a deadline for each request
//! head), and a connection on the reserve gets the reserve's router; hyper's
//! own refusals of a request head are answered as problem+json
//! (`head_errors.rs`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::connections::{Capped, Class, Connections, Held};
use super::head_errors::ProblemHeads;
use super::StartError;
use crate::config::Config;
use crate::metrics::Registry;
use crate::store::StoreHandle;
use crate::telemetry::Live;

pub(super) async fn bind(addrs: &[SocketAddr]) -> Result<Vec<TcpListener>, StartError> {
    let mut listeners = Vec::with_capacity(addrs.len());
    for addr in addrs {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: *addr,
                source,
            })?;
        listeners.push(l);
    }
    Ok(listeners)
}

/// The API router over every subsystem (the operations channel included),
/// its token table (the MQTT RPC bridge checks payload tokens against it and
/// SIGHUP reloads it), its metrics registry (`None` with `http.metrics =
/// false`), its readiness checks, and the operations service.
pub(super) async fn router(
    config: &Arc<Config>,
    live: Arc<Live>,
    store: StoreHandle,
    steering: crate::steering::SteeringService,
    devices: (
        crate::telemetry::Telemetry,
        HashMap<String, crate::modbus::BusHandle>,
    ),
    tracker: &TaskTracker,
    cancel: CancellationToken,
) -> (
    axum::Router,
    Arc<crate::api::Auth>,
    Option<Registry>,
    crate::api::Readiness,
    crate::ops::Ops,
) {
    let state = crate::api::ApiState::new(config, live.clone())
        .with_store(store.clone())
        .with_steering(steering.clone());
    let auth = state.auth.clone();
    let reload: crate::ops::Reload = Arc::new(move |c: &Config| auth.reload(&c.http));
    let (telemetry, buses) = devices;
    let ops = crate::ops::Ops::start(
        crate::ops::OpsContext {
            config: config.clone(),
            live,
            store,
            steering,
            metrics: state.metrics.clone(),
            live_parts: Some(crate::ops::LiveParts {
                telemetry,
                buses,
                reload,
            }),
        },
        tracker,
        cancel,
    )
    .await;
    let state = state.with_ops(ops.clone());
    let auth = state.auth.clone();
    let metrics = state.metrics.clone();
    let readiness = state.readiness.clone();
    (crate::api::router(state), auth, metrics, readiness, ops)
}

/// The most a client may take to send a request's head (request line and
/// headers); past it the connection is closed.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The routers a connection is served: every route, or the reserve's.
#[derive(Clone)]
pub(super) struct Apps {
    pub full: axum::Router,
    pub reserve: axum::Router,
}

/// Serves `apps` on every listener until `cancel`, within the connection
/// bounds of `connections`; returns the bound addresses.
pub(super) fn serve(
    listeners: Vec<TcpListener>,
    apps: Apps,
    connections: &Arc<Connections>,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) -> Vec<SocketAddr> {
    let mut addrs = Vec::new();
    for listener in listeners {
        if let Ok(a) = listener.local_addr() {
            addrs.push(a);
        }
        let listener = Capped::new(listener, connections.clone());
        tracker.spawn(accept_loop(
            listener,
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
    apps: Apps,
    connections: Arc<Connections>,
    tracker: TaskTracker,
    cancel: CancellationToken,
) {
    loop {
        let (io, _addr, class) = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let app = match class {
            Class::Full => apps.full.clone(),
            Class::Reserve => apps.reserve.clone(),
        };
        tracker.spawn(serve_connection(
            io,
            app,
            class,
            connections.clone(),
            cancel.clone(),
        ));
    }
}

/// One connection until it closes; on `cancel`, its request in flight
/// finishes and it closes.
async fn serve_connection(
    io: Held,
    app: axum::Router,
    class: Class,
    connections: Arc<Connections>,
    cancel: CancellationToken,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .keep_alive(class == Class::Full);
    let reclaimed = io.reclaimed();
    let io = ProblemHeads::new(io, connections.refused_heads.clone());
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(app));
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
        // Its address opened one more than it may hold while this one sat
        // between requests: it closes (after an answer it is writing).
        () = reclaimed.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        if e.is_timeout() {
            connections.head_timeouts.fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(error = %e, "HTTP connection ended with an error");
    }
}
