//! `GET /sites/{site_reference}/energy?from=&to=&interval=hour|day&source=auto|integratedPower`:
//! the site's energy per hour or day (`crate::energy`), in kWh.
//!
//! The handler only glues: it validates the query string field by field,
//! collects the site's devices from the live state, asks `energy` and
//! renders its answer (`energy/render.rs`). No energy is computed here.

mod render;

use axum::extract::{RawQuery, State};
use axum::Json;
use serde_json::Value;

use super::error::{ApiError, ErrorCode};
use super::extract::ApiPath;
use super::query::QueryParams;
use super::time_range::RangeProblem;
use super::ApiState;
use crate::energy::{self, EnergyDevice, EnergyError, EnergyQuery, Interval, Prefer, MAX_RANGE_MS};
use crate::model::time;
use crate::store::StoreError;

const PARAMS: &[&str] = &["from", "to", "interval", "source"];
/// `source` values: counters where a device has them, or power for all.
const SOURCES: &[(&str, Prefer)] = &[
    ("auto", Prefer::Counters),
    ("integratedPower", Prefer::IntegratedPower),
];

/// The handler. Site unknown: 404; store not open: 503 `not_ready`.
pub async fn site_energy(
    State(state): State<ApiState>,
    ApiPath(site): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let params = QueryParams::parse(query.as_deref(), PARAMS)?;
    if !state.sites.iter().any(|s| s.reference == site) {
        return Err(ApiError::site_not_found(&site));
    }
    let q = parse(&params)?;
    let devices = site_devices(&state, &site);
    let store = state
        .store
        .as_ref()
        .ok_or_else(|| ApiError::new(ErrorCode::NotReady, "the measurement store is not open"))?;
    let answer = energy::site_energy(store, &devices, q)
        .await
        .map_err(energy_error)?;
    Ok(Json(render::site_energy(&site, &answer)))
}

/// The question from the query string, every bad value named with its field.
fn parse(params: &QueryParams) -> Result<EnergyQuery, ApiError> {
    let instant = |field: &str| -> Result<i64, ApiError> {
        let s = params.require(field)?;
        time::parse_rfc3339(s).map_err(|e| ApiError::invalid_value(field, format!("{field}: {e}")))
    };
    let from_ms = instant("from")?;
    let to_ms = instant("to")?;
    match super::time_range::check(from_ms, to_ms, MAX_RANGE_MS, "31 days", ("from", "to")) {
        Ok(()) => {}
        Err(RangeProblem::Backwards(detail)) => {
            return Err(ApiError::for_field(ErrorCode::InvalidRange, "to", detail))
        }
        Err(RangeProblem::TooLong(detail)) => return Err(ApiError::range_too_long("to", detail)),
    }
    let interval = match params.optional("interval")? {
        None => Interval::Hour,
        Some(s) => Interval::parse(s).ok_or_else(|| {
            let names: Vec<&str> = Interval::ALL.iter().map(|i| i.name()).collect();
            ApiError::invalid_value(
                "interval",
                format!(
                    "unknown interval {s:?}; expected one of {}",
                    names.join(", ")
                ),
            )
        })?,
    };
    let prefer = match params.optional("source")? {
        None => Prefer::Counters,
        Some(s) => SOURCES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                let names: Vec<&str> = SOURCES.iter().map(|(n, _)| *n).collect();
                ApiError::invalid_value(
                    "source",
                    format!("unknown source {s:?}; expected one of {}", names.join(", ")),
                )
            })?,
    };
    Ok(EnergyQuery {
        from_ms,
        to_ms,
        interval,
        prefer,
    })
}

/// The site's devices in config order, with what each offers now.
fn site_devices(state: &ApiState, site: &str) -> Vec<EnergyDevice> {
    state
        .live
        .devices()
        .iter()
        .filter(|d| d.site == site)
        .map(|d| EnergyDevice {
            reference: d.reference.clone(),
            device_type: d.device_type,
            offered: state.live.inspect(d.id, |s| s.properties.clone()),
            poll_interval_ms: d.poll_interval_ms,
        })
        .collect()
}

fn energy_error(e: EnergyError) -> ApiError {
    match e {
        EnergyError::Store(StoreError::Closed) => {
            ApiError::new(ErrorCode::NotReady, "the measurement store is closed")
        }
        EnergyError::Store(busy @ StoreError::Busy { .. }) => {
            ApiError::rate_limited(busy.to_string(), 1)
        }
        other => {
            tracing::error!(error = %other, "energy query failed");
            ApiError::internal("the energy query failed; see the agent log")
        }
    }
}
