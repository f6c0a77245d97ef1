//! The latest-value reads: `GET /devices/{ref}/measurement?property=P`,
//! `.../measurements?properties=a,b` (a list) and `.../measurements/map?properties=a,b`.
//!
//! Answers come from the in-memory latest values only; this file must not touch
//! the store (time series is a separate endpoint) and holds no lock across an await.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::error::ApiError;
use super::extract::ApiPath;
use super::number::Num;
use super::query::QueryParams;
use super::ApiState;
use std::borrow::Cow;

use crate::model::{Property, Unit};
use crate::telemetry::{DeviceInfo, DeviceSnapshot, Reading, FUTURE_TOLERANCE_MS};

/// One element of the list answer (and of the uplink's measurement messages).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasurementView {
    pub timestamp: i64,
    pub property: Property,
    pub value: Num,
    pub unit: Unit,
    /// The name of an `operatingState` code, where the device's model or
    /// profile enumerates it (`DeviceInfo::state_name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Cow<'static, str>>,
}

impl MeasurementView {
    pub fn new(property: Property, reading: Reading) -> Self {
        Self {
            timestamp: reading.ts_ms,
            property,
            value: Num(reading.value),
            unit: property.unit(),
            state: None,
        }
    }

    /// As [`MeasurementView::new`], naming an operating state as the
    /// device's model or profile does.
    pub fn of(property: Property, reading: Reading, info: &DeviceInfo) -> Self {
        Self {
            state: state_name(property, reading, info),
            ..Self::new(property, reading)
        }
    }
}

/// The name of `reading` when it is an operating state the device names.
fn state_name(
    property: Property,
    reading: Reading,
    info: &DeviceInfo,
) -> Option<Cow<'static, str>> {
    (property == Property::OperatingState)
        .then(|| info.state_name(reading.value))
        .flatten()
}

#[derive(Serialize)]
struct Single<'a> {
    timestamp: i64,
    property: Property,
    value: Num,
    unit: Unit,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<Cow<'static, str>>,
    reference: &'a str,
}

#[derive(Serialize)]
struct List<'a> {
    reference: &'a str,
    measurements: Vec<MeasurementView>,
}

#[derive(Serialize)]
struct Map<'a> {
    reference: &'a str,
    measurements: InOrder,
}

/// `{"<property>": {"value", "unit"}, ...}` with keys in requested order.
struct InOrder(Vec<MeasurementView>);

impl Serialize for InOrder {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Entry<'a> {
            value: Num,
            unit: Unit,
            #[serde(skip_serializing_if = "Option::is_none")]
            state: &'a Option<Cow<'static, str>>,
        }
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for m in &self.0 {
            map.serialize_entry(
                m.property.name(),
                &Entry {
                    value: m.value,
                    unit: m.unit,
                    state: &m.state,
                },
            )?;
        }
        map.end()
    }
}

/// `GET /devices/{ref}/measurement?property=P`: the newest sample of one property.
pub async fn single(
    State(state): State<ApiState>,
    ApiPath(reference): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryParams::parse(raw.as_deref(), &["property"])?;
    let snapshot = device(&state, &reference)?;
    let name = query.require("property")?;
    let property = offered(&snapshot, &reference, "property", name)?;
    let reading =
        latest(&snapshot, property).ok_or_else(|| ApiError::no_measurement(&reference, name))?;
    let body = Single {
        timestamp: reading.ts_ms,
        property,
        value: Num(reading.value),
        unit: property.unit(),
        state: state_name(property, reading, &snapshot.info),
        reference: &reference,
    };
    Ok(Json(body).into_response())
}

/// `GET /devices/{ref}/measurements?properties=a,b`: a list in requested order.
pub async fn list(
    State(state): State<ApiState>,
    ApiPath(reference): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let measurements = requested(&state, &reference, raw.as_deref())?;
    let body = List {
        reference: &reference,
        measurements,
    };
    Ok(Json(body).into_response())
}

/// `GET /devices/{ref}/measurements/map?properties=a,b`: keyed by property, no
/// timestamps.
pub async fn map(
    State(state): State<ApiState>,
    ApiPath(reference): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let measurements = requested(&state, &reference, raw.as_deref())?;
    let body = Map {
        reference: &reference,
        measurements: InOrder(measurements),
    };
    Ok(Json(body).into_response())
}

/// The measurements named by `?properties=` (all offered when absent), in that
/// order, duplicates once, those without a sample left out.
fn requested(
    state: &ApiState,
    reference: &str,
    raw_query: Option<&str>,
) -> Result<Vec<MeasurementView>, ApiError> {
    let query = QueryParams::parse(raw_query, &["properties"])?;
    let snapshot = device(state, reference)?;
    let properties = match query.optional("properties")? {
        None => snapshot.properties.clone(),
        Some(list) => {
            let mut properties = Vec::new();
            for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let p = offered(&snapshot, reference, "properties", name)?;
                if !properties.contains(&p) {
                    properties.push(p);
                }
            }
            if properties.is_empty() {
                return Err(ApiError::invalid_value(
                    "properties",
                    format!("the query parameter \"properties\" names no property: {list:?}"),
                ));
            }
            properties
        }
    };
    Ok(properties
        .into_iter()
        .filter_map(|p| latest(&snapshot, p).map(|r| MeasurementView::of(p, r, &snapshot.info)))
        .collect())
}

fn device(state: &ApiState, reference: &str) -> Result<DeviceSnapshot, ApiError> {
    let id = state
        .live
        .find(reference)
        .ok_or_else(|| ApiError::device_not_found(reference))?;
    Ok(state.live.snapshot(id))
}

/// The property `name` if the device offers it, else 400 `unknown_property`
/// listing what it does offer.
fn offered(
    snapshot: &DeviceSnapshot,
    reference: &str,
    field: &str,
    name: &str,
) -> Result<Property, ApiError> {
    name.parse::<Property>()
        .ok()
        .filter(|p| snapshot.offers(*p))
        .ok_or_else(|| ApiError::unknown_property(field, name, reference, &snapshot.properties))
}

/// The newest reading; a non-finite value (which no JSON number can carry) counts
/// as none, and so does one stamped in the future (beyond
/// [`FUTURE_TOLERANCE_MS`]: the clock stepped back since; the next poll
/// brings the latest).
fn latest(snapshot: &DeviceSnapshot, property: Property) -> Option<Reading> {
    let newest = crate::model::time::now_ms() + FUTURE_TOLERANCE_MS;
    snapshot
        .reading(property)
        .filter(|r| r.value.is_finite() && r.ts_ms <= newest)
}
