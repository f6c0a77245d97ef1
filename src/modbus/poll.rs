//! One poll of one device: discover it when its map is missing, read its planned
//! requests, decode its points. A request the device refuses with "illegal data
//! address" is split (see [`crate::register::plan::split_refused`]) and retried
//! at once; the split plan is kept for the life of the map, so the device is
//! asked the smaller requests from then on. Discovery's nameplate reads split
//! the same way (`reader::read_spans`).
//!
//! Generic over [`RegisterReader`], so it never owns a connection and never
//! sleeps; the bus task decides when to poll and what a failure costs.

use std::sync::Arc;

use super::device::DeviceMap;
use super::error::ModbusError;
use super::reader::{self, RegisterReader};
use super::sunspec::{self, DiscoveryError};
use crate::config::{DeviceConfig, ProfileRef};
use crate::model::Property;
use crate::profile::VariantError;
use crate::register::plan::{Image, Span};
use crate::register::point;

/// A device's map and the plan learned for it.
#[derive(Debug, Default)]
pub struct DeviceState {
    pub map: Option<Arc<DeviceMap>>,
    /// The requests a poll makes; starts as `map.requests`, shrinks on refusals.
    pub plan: Vec<Span>,
}

impl DeviceState {
    pub fn forget(&mut self) {
        self.map = None;
        self.plan.clear();
    }
}

/// Why a poll failed: discovery found no usable SunSpec map, or could not
/// tell which variant of its profile the device is, or a read failed (the
/// device refused it or could not be reached). The text is what the device's
/// status and the log show.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PollError {
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error(transparent)]
    Variant(#[from] VariantError),
    #[error(transparent)]
    Modbus(#[from] ModbusError),
}

/// What a successful poll returns.
pub struct Polled {
    pub values: Vec<(Property, f64)>,
    /// Set after a discovery: the new map.
    pub fresh: Option<Arc<DeviceMap>>,
}

/// Discovers when needed, then reads every planned request.
pub async fn poll_device<R: RegisterReader>(
    reader: &mut R,
    cfg: &DeviceConfig,
    max_gap: u16,
    state: &mut DeviceState,
) -> Result<Polled, PollError> {
    let mut fresh = None;
    let map = match &state.map {
        Some(m) => m.clone(),
        None => {
            let m = Arc::new(discover(reader, cfg, max_gap).await?);
            tracing::info!(
                device = %cfg.reference,
                manufacturer = m.info.manufacturer.as_deref().unwrap_or("?"),
                model = m.info.model.as_deref().unwrap_or("?"),
                models = ?m.info.sunspec_models,
                requests = m.requests.len(),
                "device discovered"
            );
            state.map = Some(m.clone());
            state.plan = m.requests.clone();
            fresh = Some(m.clone());
            m
        }
    };
    let img = read_plan(reader, &cfg.reference, &map, &mut state.plan).await?;
    Ok(Polled {
        values: point::decode_points(&map.points, &img),
        fresh,
    })
}

/// Reads every request of `plan`, splitting refused ones in place.
async fn read_plan<R: RegisterReader>(
    reader: &mut R,
    device: &str,
    map: &DeviceMap,
    plan: &mut Vec<Span>,
) -> Result<Image, ModbusError> {
    reader::read_splitting(
        reader,
        plan,
        || map.needed(),
        |req, parts| {
            tracing::warn!(
                device,
                table = ?req.table,
                addr = req.addr,
                len = req.len,
                replaced_by = ?parts,
                "device refused a read (illegal data address); splitting it"
            );
        },
    )
    .await
}

async fn discover<R: RegisterReader>(
    reader: &mut R,
    cfg: &DeviceConfig,
    max_gap: u16,
) -> Result<DeviceMap, PollError> {
    match &cfg.profile {
        ProfileRef::Sunspec => {
            let chain = sunspec::discover(reader).await?;
            let chain = sunspec::select(chain, cfg.device_type);
            let info = sunspec::read_info(reader, &chain).await?;
            Ok(DeviceMap::from_sunspec(chain, info, cfg))
        }
        ProfileRef::Registers(profile) if profile.variants.is_empty() => {
            // A member named in config: the device must not contradict it.
            let told_by = profile.variant_spans();
            if !told_by.is_empty() {
                let img = reader::read_spans(reader, &told_by, 0).await?;
                profile.confirm_variant(&img)?;
            }
            Ok(DeviceMap::from_profile(profile.clone(), cfg, max_gap))
        }
        ProfileRef::Registers(family) => {
            // A family whose variant the config does not name: told from the
            // registers the variants name, never guessed.
            let img = reader::read_spans(reader, &family.variant_spans(), 0).await?;
            let profile = family.select_variant(&img)?;
            tracing::info!(
                device = %cfg.reference,
                profile = %family.name,
                variant = profile.variant.as_ref().map_or("?", |v| v.name.as_str()),
                "variant told from the device"
            );
            Ok(DeviceMap::from_profile(Arc::new(profile), cfg, max_gap))
        }
    }
}
