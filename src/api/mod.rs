//! The HTTP API of `spec/api.md`: one axum router, its shared state, auth and
//! errors. The MQTT RPC bridge calls the same router, so nothing here may depend
//! on the transport (no peer addresses, no connection state).
//!
//! This module must not hold business logic: handlers parse and validate the
//! request, call the owning layer (`telemetry`, later `store` and `steering`), and
//! render the answer. They must not block the runtime or hold a lock across an
//! await.
//!
//! # Adding a route
//!
//! 1. Write the handler in its own file under `src/api/` (for example
//!    `timeseries.rs`). It takes `State<ApiState>` for shared state, [`ApiPath`]
//!    for path parameters, `RawQuery` + [`QueryParams::parse`] for the query,
//!    [`JsonBody`] for a body (validate the `serde_json::Value` field by field),
//!    and [`Caller`] when it needs to know who asks (steering's audit log). It
//!    returns `Result<impl IntoResponse, ApiError>`.
//! 2. Put what it needs into [`ApiState`] as a cheap, cloneable handle (an `Arc`
//!    or a channel sender), set in [`ApiState::new`] or with a builder method.
//! 3. Register it in [`router`] inside the group of its scope: `read_routes` for
//!    `read` (device data, time series, site and steering state), a
//!    `steer_routes` group with `auth::require_steer` for steering POST/DELETE.
//!    The same path may appear in both groups with different methods; axum
//!    merges them, and each method keeps its own scope layer.
//! 4. Errors: return an [`ApiError`]; map a layer's own error enum to it with a
//!    `From` impl next to the handler. Never return a bare status or text: the
//!    [safety net](ops::problem_safety_net) would still turn it into problem+json,
//!    but with a poorer detail.

mod auth;
mod code;
mod devices;
mod error;
mod extract;
mod http_stats;
mod limit;
mod measurements;
mod ops;
mod page;
mod query;
mod readiness;
mod steering;
mod time_limit;
mod timeseries;
mod token;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use axum::middleware;
use axum::routing::{get, post};
use axum::Router;

pub use auth::{require_read, require_steer, Auth, Caller};
pub use devices::{device_views, DeviceView, PropertyView, StatusView};
pub use error::{ApiError, ErrorCode, PROBLEM_JSON};
pub use extract::{
    check_json_content_type, parse_json, read_json, ApiPath, JsonBody, DEFAULT_BODY_LIMIT,
};
pub use http_stats::HttpStats;
pub use measurements::{MeasurementView, Num};
pub use query::QueryParams;
pub use readiness::{Readiness, ReadyFlag};
pub use steering::Transport;
pub use token::{hash_token, new_token, token_config_snippet, NewToken, TOKEN_PREFIX};

use crate::config::{Config, SiteConfig};
use crate::metrics::{ProcessCollector, Registry};
use crate::store::StoreHandle;
use crate::telemetry::Live;

/// Everything handlers share. Cheap to clone (a few `Arc`s); one clone per request.
#[derive(Clone)]
pub struct ApiState {
    /// Latest values and device status.
    pub live: Arc<Live>,
    /// Tokens and auth mode; `Auth::reload` swaps them on SIGHUP.
    pub auth: Arc<Auth>,
    /// The configured sites, in config order.
    pub sites: Arc<[SiteConfig]>,
    /// Extra `/readyz` checks (the store registers "store open").
    pub readiness: Readiness,
    /// The measurement store (time series); `None` until one is attached.
    pub store: Option<StoreHandle>,
    /// Site steering; `None` until the agent starts it (steering routes answer 500).
    pub steering: Option<crate::steering::SteeringService>,
    /// What `GET /metrics` renders; `None` with `http.metrics = false` (404).
    pub metrics: Option<Registry>,
    /// Requests served, counted by the outermost layer.
    pub http_stats: Arc<HttpStats>,
    /// `http.request_timeout_ms`.
    pub request_timeout: Duration,
}

impl ApiState {
    /// With `http.metrics`, the registry starts with the process and HTTP
    /// collectors; the agent registers the other layers' collectors.
    pub fn new(config: &Config, live: Arc<Live>) -> Self {
        let http_stats = Arc::new(HttpStats::default());
        let metrics = config.http.metrics.then(|| {
            let r = Registry::new();
            r.register(Arc::new(ProcessCollector::new()));
            r.register(http_stats.clone());
            r
        });
        Self {
            live,
            auth: Arc::new(Auth::new(&config.http)),
            sites: config.sites.clone().into(),
            readiness: Readiness::new(),
            store: None,
            steering: None,
            metrics,
            http_stats,
            request_timeout: Duration::from_millis(config.http.request_timeout_ms),
        }
    }

    /// Attaches the measurement store and registers its `/readyz` check.
    pub fn with_store(mut self, store: StoreHandle) -> Self {
        let probe = store.clone();
        self.readiness.register("store", move || {
            if probe.is_open() {
                Ok(())
            } else {
                Err("the measurement store is closed".to_string())
            }
        });
        self.store = Some(store);
        self
    }

    /// Serves the steering endpoints with `service`.
    pub fn with_steering(mut self, service: crate::steering::SteeringService) -> Self {
        self.steering = Some(service);
        self
    }
}

/// The whole API. Serve it with `axum::serve(listener, router(state))`.
pub fn router(state: ApiState) -> Router {
    let read_routes = Router::new()
        .route("/devices", get(devices::list))
        .route(
            "/devices/{device_reference}/measurement",
            get(measurements::single),
        )
        .route(
            "/devices/{device_reference}/measurements",
            get(measurements::list),
        )
        .route(
            "/devices/{device_reference}/measurements/map",
            get(measurements::map),
        )
        .route(
            "/devices/{device_reference}/measurements/time-series",
            post(timeseries::time_series),
        )
        .route("/sites", get(steering::list_sites))
        .route("/sites/{site_reference}", get(steering::get_site))
        .route("/sites/{site_reference}/steering", get(steering::get_state))
        .route(
            "/sites/{site_reference}/steering/history",
            get(steering::history),
        )
        .route_layer(middleware::from_fn_with_state(
            state.auth.clone(),
            require_read,
        ));
    let steer_routes = Router::new()
        .route(
            "/sites/{site_reference}/steering",
            post(steering::post_site).delete(steering::delete),
        )
        .route(
            "/sites/{site_reference}/steering/ess",
            post(steering::post_ess),
        )
        .route(
            "/sites/{site_reference}/steering/curtailment",
            post(steering::post_curtailment),
        )
        .route_layer(middleware::from_fn_with_state(
            state.auth.clone(),
            require_steer,
        ));

    Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .merge(page::routes())
        .merge(read_routes)
        .merge(steer_routes)
        .fallback(ops::not_found)
        .layer(middleware::from_fn_with_state(
            state.request_timeout,
            time_limit::limit_time,
        ))
        .layer(middleware::from_fn(ops::problem_safety_net))
        .layer(middleware::from_fn_with_state(
            state.http_stats.clone(),
            http_stats::count_requests,
        ))
        .with_state(state)
}
