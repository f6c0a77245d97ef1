//! The API router over the agent's parts: the API state, the operations
//! service started over every subsystem, and what the agent keeps of them
//! (the token table, the metrics registry, readiness).
//!
//! Wiring only: `api/` answers the routes, `http_server/` serves them.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::metrics::Registry;
use crate::store::StoreHandle;
use crate::telemetry::Live;

/// What the API router is built over: every subsystem it answers for.
pub(super) struct ApiParts {
    pub config: Arc<Config>,
    pub live: Arc<Live>,
    pub store: StoreHandle,
    pub steering: crate::steering::SteeringService,
    pub telemetry: crate::telemetry::Telemetry,
    /// Every bus task's handle, by bus name (the operations' live changes).
    pub buses: HashMap<String, crate::modbus::BusHandle>,
    /// The HTTPS certificate in service, when HTTPS is served.
    pub https: Option<Arc<crate::https::Certs>>,
    /// The event list (`GET /events`, the bundle of `sitegate diag`).
    pub events: Arc<crate::events::EventLog>,
}

/// The API router and what the agent keeps of it.
pub(super) struct Api {
    pub router: axum::Router,
    /// The token table: the MQTT RPC bridge checks payload tokens against it
    /// and SIGHUP reloads it.
    pub auth: Arc<crate::api::Auth>,
    /// The metrics registry (`None` with `http.metrics = false`).
    pub metrics: Option<Registry>,
    pub readiness: crate::api::Readiness,
    /// The operations service.
    pub ops: crate::ops::Ops,
}

/// The API router over every subsystem, the operations channel included.
pub(super) async fn router(
    parts: ApiParts,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) -> Api {
    let ApiParts {
        config,
        live,
        store,
        steering,
        telemetry,
        buses,
        https,
        events,
    } = parts;
    let state = crate::api::ApiState::new(&config, live.clone())
        .with_store(store.clone())
        .with_steering(steering.clone())
        .with_events(events.clone());
    let auth = state.auth.clone();
    let reload: crate::ops::Reload = Arc::new(move |c: &Config| auth.reload(&c.http));
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
            https,
            events: Some(events),
        },
        tracker,
        cancel,
    )
    .await;
    let state = state.with_ops(ops.clone());
    Api {
        auth: state.auth.clone(),
        metrics: state.metrics.clone(),
        readiness: state.readiness.clone(),
        ops,
        router: crate::api::router(state),
    }
}
