//! `GET /devices[?site=<siteReference>]`: the device listing.
//!
//! The body is built by [`device_views`] so that the MQTT uplink can publish the
//! same document on `{root}/devices`. Reads live state only; never blocks on I/O.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::error::ApiError;
use super::query::QueryParams;
use super::ApiState;
use crate::model::{DeviceType, Property, Unit};
use crate::telemetry::Live;

/// One entry of the listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceView<'a> {
    pub device_reference: &'a str,
    pub site_reference: &'a str,
    pub name: &'a str,
    #[serde(rename = "type")]
    pub device_type: DeviceType,
    /// What the device offers, in vocabulary order.
    pub properties: Vec<PropertyView>,
    pub status: StatusView,
}

/// A property a device offers, with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PropertyView {
    pub property: Property,
    pub unit: Unit,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    pub online: bool,
    /// Epoch ms of the newest sample or successful poll; `null` before the first.
    pub last_seen: Option<i64>,
}

/// The listing of `devices` (`Live::devices`, in config order), optionally
/// only the devices of one site. The site reference is not checked here.
pub fn device_views<'a>(
    live: &Live,
    devices: &'a [crate::config::DeviceConfig],
    site: Option<&str>,
) -> Vec<DeviceView<'a>> {
    devices
        .iter()
        .filter(|d| site.is_none_or(|s| d.site == s))
        .map(|d| {
            let snapshot = live.snapshot(d.id);
            DeviceView {
                device_reference: &d.reference,
                site_reference: &d.site,
                name: &d.name,
                device_type: d.device_type,
                properties: snapshot
                    .properties
                    .iter()
                    .map(|&property| PropertyView {
                        property,
                        unit: property.unit(),
                    })
                    .collect(),
                status: StatusView {
                    online: snapshot.online,
                    last_seen: snapshot.last_seen,
                },
            }
        })
        .collect()
}

/// `GET /devices`. `site` is trimmed; a reference no site has (one of blanks
/// only too): 404 `site_not_found`; an empty `site=`: 400 `invalid_value`.
pub async fn list(
    State(state): State<ApiState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = QueryParams::parse(raw.as_deref(), &["site"])?;
    let site = match query.get("site") {
        None => None,
        Some("") => {
            return Err(ApiError::invalid_value(
                "site",
                "the query parameter \"site\" is empty",
            ))
        }
        Some(given) => {
            let site = given.trim();
            if !state.sites.iter().any(|s| s.reference == site) {
                return Err(ApiError::site_not_found(given));
            }
            Some(site)
        }
    };
    let devices = state.live.devices();
    Ok(Json(device_views(&state.live, &devices, site)).into_response())
}
