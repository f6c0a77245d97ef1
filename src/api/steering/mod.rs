//! Steering endpoints (`openapi.json`, tag "Sites and steering"): the site listing, the
//! combined signal and its history (scope `read`), and the POSTs and DELETE that
//! change it (scope `steer`).
//!
//! Handlers translate: HTTP in, the body parsed into a typed request
//! (`parse.rs`, with the context the steering service gives), a
//! [`SteeringService`] call, its typed answer rendered (`render.rs`) or a
//! problem out. Every decision belongs to `crate::steering`.

pub mod parse;
pub mod render;

use axum::extract::{FromRequestParts, RawQuery, State};
use axum::http::request::Parts;
use axum::Json;
use serde_json::Value;

use super::error::{ApiError, ErrorCode};
use super::extract::{ApiPath, JsonBody};
use super::query::QueryParams;
use super::{ApiState, Caller};
use crate::steering::{Component, Origin, PersistError, RawBody, SteeringError, SteeringService};
use parse::{Endpoint, Rejection};

/// The transport a request came over, for the audit log. The MQTT RPC bridge
/// inserts `Transport("mqtt")` into the request extensions; absent means HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transport(pub &'static str);

/// The longest `Idempotency-Key` accepted.
const MAX_KEY_LEN: usize = 200;
/// History entries returned without `?limit`, and at most.
const DEFAULT_HISTORY: usize = 100;
const MAX_HISTORY: usize = 1000;

impl From<SteeringError> for ApiError {
    fn from(e: SteeringError) -> Self {
        match e {
            SteeringError::SiteNotFound(s) => ApiError::site_not_found(&s),
            SteeringError::Store(PersistError::Busy { running, waiting }) => {
                let detail = format!("the store is busy: {running} reads run and {waiting} wait");
                ApiError::rate_limited(format!("{detail}; try again shortly"), 1)
            }
            SteeringError::Store(e) => {
                tracing::error!(error = %e, "steering change not stored");
                ApiError::internal("the steering change could not be stored; nothing was applied")
            }
            e @ SteeringError::KeyReused { .. } => ApiError::for_field(
                ErrorCode::IdempotencyKeyReused,
                "Idempotency-Key",
                format!("{e}; a key belongs to one operation and one body: nothing was applied, use a new key for a new request"),
            ),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        match r.field {
            Some(f) => ApiError::for_field(r.code, f, r.detail),
            None => ApiError::new(r.code, r.detail),
        }
    }
}

fn service(state: &ApiState) -> Result<&SteeringService, ApiError> {
    state
        .steering
        .as_ref()
        .ok_or_else(|| ApiError::internal("site steering is not running"))
}

/// The caller and transport of a steering change, with its `Idempotency-Key`.
pub struct SteerOrigin(Origin);

impl<S: Send + Sync> FromRequestParts<S> for SteerOrigin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let key = match parts.headers.get("idempotency-key") {
            None => None,
            Some(v) => {
                let k = v.to_str().map(str::trim).unwrap_or("");
                if k.is_empty() || k.len() > MAX_KEY_LEN {
                    return Err(ApiError::invalid_value(
                        "Idempotency-Key",
                        format!("the Idempotency-Key header must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
                    ));
                }
                Some(k.to_string())
            }
        };
        let source = parts.extensions.get::<Transport>().map_or("http", |t| t.0);
        Ok(SteerOrigin(Origin {
            caller: caller.name().to_string(),
            source: source.to_string(),
            action: format!("{} {}", parts.method, parts.uri.path()),
            idempotency_key: key,
        }))
    }
}

fn dry_run(raw: Option<&str>) -> Result<bool, ApiError> {
    let q = QueryParams::parse(raw, &["dryRun"])?;
    match q.get("dryRun").map(str::trim) {
        None | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") | Some("") => Ok(true),
        Some(other) => Err(ApiError::invalid_value(
            "dryRun",
            format!("dryRun must be true or false, found {other:?}"),
        )),
    }
}

async fn submit(
    state: ApiState,
    endpoint: Endpoint,
    site: String,
    query: Option<String>,
    origin: Origin,
    body: Value,
) -> Result<Json<Value>, ApiError> {
    let svc = service(&state)?;
    let dry = dry_run(query.as_deref())?;
    // The site's signal stays locked from here until the change is committed
    // or dropped; an idempotent replay wins over whatever the body says now.
    let change = svc.begin(&site, origin).await?;
    let raw = RawBody(body.to_string());
    if !dry {
        if let Some(first) = change.replay(&raw).await? {
            let durable = !svc.durable().pending(&site);
            return Ok(Json(render::answer(&first, durable)));
        }
    }
    let req = parse::parse(endpoint, &body, change.context())?;
    if dry {
        return Ok(Json(render::dry_run(&change.dry_run(&req))));
    }
    let (answer, durability) = change.commit(&req, raw).await?;
    let durable = durability == crate::steering::durable::Durability::Durable;
    Ok(Json(render::answer(&answer, durable)))
}

macro_rules! post_handler {
    ($name:ident, $endpoint:expr) => {
        pub async fn $name(
            State(state): State<ApiState>,
            ApiPath(site): ApiPath<String>,
            RawQuery(query): RawQuery,
            SteerOrigin(origin): SteerOrigin,
            JsonBody(body): JsonBody,
        ) -> Result<Json<Value>, ApiError> {
            submit(state, $endpoint, site, query, origin, body).await
        }
    };
}

post_handler!(post_site, Endpoint::Site);
post_handler!(post_ess, Endpoint::Ess);
post_handler!(post_curtailment, Endpoint::Curtailment);
post_handler!(post_grid_limit, Endpoint::GridLimit);

/// `DELETE /sites/{s}/steering[?component=]`.
pub async fn delete(
    State(state): State<ApiState>,
    ApiPath(site): ApiPath<String>,
    RawQuery(query): RawQuery,
    SteerOrigin(origin): SteerOrigin,
) -> Result<Json<Value>, ApiError> {
    let svc = service(&state)?;
    let q = QueryParams::parse(query.as_deref(), &["component"])?;
    let component = match q.optional("component")? {
        None => None,
        Some(c) => Some(Component::from_wire(c).ok_or_else(|| {
            ApiError::invalid_value(
                "component",
                format!("unknown component {c:?}; expected ess, curtailment, maximizeGridImport or gridLimit"),
            )
        })?),
    };
    let state = svc.end(&site, component, &origin).await?;
    Ok(Json(render::site_state(&state)))
}

/// `GET /sites/{s}/steering`.
pub async fn get_state(
    State(state): State<ApiState>,
    ApiPath(site): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    QueryParams::parse(query.as_deref(), &[])?;
    let state = service(&state)?.state(&site).await?;
    Ok(Json(render::site_state(&state)))
}

/// `GET /sites/{s}/steering/history?limit=N`.
pub async fn history(
    State(state): State<ApiState>,
    ApiPath(site): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let q = QueryParams::parse(query.as_deref(), &["limit"])?;
    let limit = q.count("limit", MAX_HISTORY, DEFAULT_HISTORY)?;
    let records = service(&state)?.history(&site, limit).await?;
    Ok(Json(Value::Array(
        records.iter().map(render::history_record).collect(),
    )))
}

/// `GET /sites`.
pub async fn list_sites(
    State(state): State<ApiState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    QueryParams::parse(query.as_deref(), &[])?;
    let sites = service(&state)?.site_views();
    let sim = state.simulated;
    Ok(Json(Value::Array(
        sites.iter().map(|v| render::site(v, sim)).collect(),
    )))
}

/// `GET /sites/{s}`.
pub async fn get_site(
    State(state): State<ApiState>,
    ApiPath(site): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    QueryParams::parse(query.as_deref(), &[])?;
    Ok(Json(render::site(
        &service(&state)?.site_view(&site)?,
        state.simulated,
    )))
}
