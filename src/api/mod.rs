//! The HTTP API (described in `openapi.json`): one axum router, its shared state, auth and
//! errors. The MQTT RPC bridge calls the same router, so nothing here may depend
//! on the transport (no peer addresses, no connection state).
//!
//! This module must not hold business logic: handlers parse and validate the
//! request, call the owning layer (`telemetry`, `store`, `steering`), and
//! render the answer. They must not block the runtime or hold a lock across an
//! await of their own (a steering `Change` holds its site's signal lock from
//! `begin` to `commit`: that lock is steering's, so that changes reach memory
//! in the order they reached the disk).
//!
//! With `uplink`, this is the only layer that knows JSON: the other layers hand
//! it typed values (steering's views, requests and records), and it parses and
//! renders them (`steering/parse.rs`, `steering/render.rs`, which the uplink's
//! retained steering state uses too).
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
//! 3. Register it in `register` (below [`router`]) inside the group of its
//!    access, with the group's `.get`/`.post`/`.delete` (never `Router::route`
//!    directly: the group records the route for [`routes`]): `read_routes` for
//!    `read` (device data, time series, site and steering state), `steer_routes`
//!    (behind `auth::require_steer`) for steering POST/DELETE, `admin_routes`
//!    (behind `auth::require_admin`) for the operations channel, `open_routes` for
//!    what needs no token. The same path may appear in both token groups with
//!    different methods; axum merges them, and each method keeps its own scope
//!    layer.
//! 4. Errors: return an [`ApiError`]; map a layer's own error enum to it with a
//!    `From` impl next to the handler. Never return a bare status or text: the
//!    [safety net](ops::problem_safety_net) would still turn it into problem+json,
//!    but with a poorer detail.
//! 5. Describe it in `openapi.json` (parameters, body, every status it answers,
//!    with examples); `tests/it/openapi.rs` fails until the document and the route
//!    list agree and real answers validate against it.

mod admin;
mod auth;
pub mod bounds;
mod code;
mod devices;
mod energy;
mod error;
mod events;
mod extract;
mod http_stats;
mod in_clear;
mod limit;
mod measurements;
pub mod number;
mod openapi;
mod ops;
mod page;
mod query;
mod readiness;
mod route_table;
mod steering;
mod time_limit;
mod time_range;
mod timeseries;
mod token;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use axum::middleware;
use axum::Router;

pub use admin::render::{chunk as render_bundle_chunk, operation as render_operation};
pub use auth::{require_admin, require_read, require_steer, Auth, Caller};
pub use devices::{device_views, DeviceView, PropertyView, StatusView};
pub use error::{ApiError, ErrorCode, PROBLEM_JSON};
pub use extract::{
    check_json_content_type, parse_json, read_json, ApiPath, JsonBody, DEFAULT_BODY_LIMIT,
};
pub use http_stats::HttpStats;
pub use in_clear::{https_url, refuse_tokens_in_clear};
pub use measurements::MeasurementView;
pub use number::{Exact, Num};
pub use openapi::OPENAPI_DOCUMENT;
pub use query::QueryParams;
pub use readiness::{Readiness, ReadyFlag};
pub use route_table::{Access, RouteInfo};
pub use steering::render::site_state as render_steering_state;
pub use steering::Transport;
pub use token::{hash_token, new_token, token_config_snippet, NewToken, TOKEN_PREFIX};

use crate::config::{Config, Scope, SiteConfig};
use crate::metrics::{ProcessCollector, Registry};
use crate::store::StoreHandle;
use crate::telemetry::Live;
use route_table::Group;

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
    /// The operations channel (`/admin/...`); `None` until the agent starts it
    /// (those routes answer 500).
    pub ops: Option<crate::ops::Ops>,
    /// What `GET /metrics` renders; `None` with `http.metrics = false` (404).
    pub metrics: Option<Registry>,
    /// Requests served, counted by the outermost layer.
    pub http_stats: Arc<HttpStats>,
    /// `http.request_timeout_ms`, and the bound on changes in flight.
    pub time_limit: time_limit::TimeLimit,
    /// `storage.damaged_notice_h`.
    pub damaged_notice: Duration,
    /// What happened (`GET /events`); `None` until the agent starts it (500).
    pub events: Option<Arc<crate::events::EventLog>>,
    /// The simulation's clock under `sitegate demo` (`GET /sites` shows the
    /// simulated time); `None` on a real site.
    pub simulated: Option<crate::model::time::SimulatedClock>,
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
            ops: None,
            metrics,
            http_stats,
            time_limit: time_limit::TimeLimit::new(Duration::from_millis(
                config.http.request_timeout_ms,
            )),
            damaged_notice: Duration::from_secs(config.storage.damaged_notice_h * 3600),
            events: None,
            simulated: config.simulator.clock,
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
        let (path, notice) = (store.path().to_path_buf(), self.damaged_notice);
        self.readiness.register_degraded("store", move || {
            crate::store::integrity::aside_notice(&path, notice).map_or(Ok(()), Err)
        });
        let probe = store.clone();
        self.readiness.register_degraded("store", move || {
            match probe.stats().damage_found() {
                None => Ok(()),
                Some(why) => Err(format!(
                    "the background integrity check found the database damaged ({why}); it is set aside at the next start: restart to do it now"
                )),
            }
        });
        let probe = store.clone();
        self.readiness
            .register_degraded("store", move || match probe.stats().problem() {
                None => Ok(()),
                Some(why) => Err(format!(
                    "commits fail ({} samples wait in memory): {why}",
                    probe.stats().buffered()
                )),
            });
        self.store = Some(store);
        self
    }

    /// Serves the `/admin/...` endpoints with `ops`.
    pub fn with_ops(mut self, ops: crate::ops::Ops) -> Self {
        self.ops = Some(ops);
        self
    }

    /// Serves `GET /events` from `log`.
    pub fn with_events(mut self, log: Arc<crate::events::EventLog>) -> Self {
        self.events = Some(log);
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
    let (routes, _) = register(&state.auth);
    routes
        .fallback(ops::not_found)
        .layer(middleware::from_fn_with_state(
            state.time_limit.clone(),
            time_limit::limit_time,
        ))
        .layer(middleware::from_fn(ops::problem_safety_net))
        .layer(middleware::from_fn_with_state(
            state.http_stats.clone(),
            http_stats::count_requests,
        ))
        .with_state(state)
}

/// `router` for a connection on the reserve (every connection slot taken):
/// `/healthz`, `/readyz` and `/metrics` answer as always, anything else 503
/// `busy`.
pub fn reserve_router(router: Router) -> Router {
    router.layer(middleware::from_fn(ops::reserve_only))
}

/// Every route [`router`] serves, in registration order, as registered: the
/// OpenAPI document (`openapi.json`) must list the same ones.
pub fn routes() -> Vec<RouteInfo> {
    register(&Arc::new(Auth::deny_all())).1
}

/// Builds the routes and records each; `auth` is what the scope layers check.
fn register(auth: &Arc<Auth>) -> (Router<ApiState>, Vec<RouteInfo>) {
    let mut list = Vec::new();
    let open_routes = Group::new(&mut list, Access::Open)
        .get("/healthz", ops::healthz)
        .get("/readyz", ops::readyz)
        .get("/metrics", ops::metrics)
        .get("/openapi.json", openapi::document)
        .into_router();
    let page_routes = page::routes(Group::new(&mut list, Access::Page));
    let read_routes = Group::new(&mut list, Access::Token(Scope::Read))
        .get("/devices", devices::list)
        .get(
            "/devices/{device_reference}/measurement",
            measurements::single,
        )
        .get(
            "/devices/{device_reference}/measurements",
            measurements::list,
        )
        .get(
            "/devices/{device_reference}/measurements/map",
            measurements::map,
        )
        .post(
            "/devices/{device_reference}/measurements/time-series",
            timeseries::time_series,
        )
        .get("/events", events::list)
        .get("/sites", steering::list_sites)
        .get("/sites/{site_reference}", steering::get_site)
        .get("/sites/{site_reference}/energy", energy::site_energy)
        .get("/sites/{site_reference}/steering", steering::get_state)
        .get(
            "/sites/{site_reference}/steering/history",
            steering::history,
        )
        .into_router()
        .route_layer(middleware::from_fn_with_state(auth.clone(), require_read));
    let steer_routes = Group::new(&mut list, Access::Token(Scope::Steer))
        .post("/sites/{site_reference}/steering", steering::post_site)
        .delete("/sites/{site_reference}/steering", steering::delete)
        .post("/sites/{site_reference}/steering/ess", steering::post_ess)
        .post(
            "/sites/{site_reference}/steering/curtailment",
            steering::post_curtailment,
        )
        .post(
            "/sites/{site_reference}/steering/grid-limit",
            steering::post_grid_limit,
        )
        .into_router()
        .route_layer(middleware::from_fn_with_state(auth.clone(), require_steer));
    let admin_routes = Group::new(&mut list, Access::Token(Scope::Admin))
        .post("/admin/operations", admin::post_operation)
        .get("/admin/operations", admin::list_operations)
        .get("/admin/operations/{operation_id}", admin::get_operation)
        .get(
            "/admin/operations/{operation_id}/bundle",
            admin::get_bundle_chunk,
        )
        .into_router()
        .route_layer(middleware::from_fn_with_state(auth.clone(), require_admin));

    let routes = open_routes
        .merge(page_routes)
        .merge(read_routes)
        .merge(steer_routes)
        .merge(admin_routes);
    (routes, list)
}
