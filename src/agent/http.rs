//! Binding the HTTP listeners and serving the API router on them, under the
//! connection cap of `connections.rs`.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::connections::{Capped, Connections};
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

/// The API router over every subsystem, its token table (the MQTT RPC bridge
/// checks payload tokens against it and SIGHUP reloads it), its metrics
/// registry (`None` with `http.metrics = false`), and its readiness checks.
pub(super) fn router(
    config: &Config,
    live: Arc<Live>,
    store: StoreHandle,
    steering: crate::steering::SteeringService,
) -> (
    axum::Router,
    Arc<crate::api::Auth>,
    Option<Registry>,
    crate::api::Readiness,
) {
    let state = crate::api::ApiState::new(config, live)
        .with_store(store)
        .with_steering(steering);
    let auth = state.auth.clone();
    let metrics = state.metrics.clone();
    let readiness = state.readiness.clone();
    (crate::api::router(state), auth, metrics, readiness)
}

/// Serves `router` on every listener until `cancel`, at most
/// [`super::connections::MAX_CONNECTIONS`] connections at once over all of
/// them; returns the bound addresses.
pub(super) fn serve(
    listeners: Vec<TcpListener>,
    router: axum::Router,
    connections: &Arc<Connections>,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) -> Vec<SocketAddr> {
    let mut addrs = Vec::new();
    for listener in listeners {
        if let Ok(a) = listener.local_addr() {
            addrs.push(a);
        }
        let app = router.clone();
        let cancel = cancel.clone();
        let listener = Capped::new(listener, connections.clone());
        tracker.spawn(async move {
            let result = axum::serve(listener, app)
                .with_graceful_shutdown(cancel.cancelled_owned())
                .await;
            if let Err(e) = result {
                tracing::error!(error = %e, "HTTP server failed");
            }
        });
    }
    addrs
}
