//! One poll of one device: discover it when its map is missing, read its planned
//! requests, decode its points. A request the device refuses with "illegal data
//! address" is split (see [`crate::register::plan::split_refused`]) and retried
//! at once; the split plan is kept for the life of the map, so the device is
//! asked the smaller requests from then on. Discovery's nameplate reads split
//! the same way (`reader::read_spans`).
//!
//! Static points (`statics`) are not in the plan: they are decoded from the
//! map's kept image, read again with the poll once
//! `polling.static_refresh_s` has passed, or at once when the poll read one
//! of them anyway and found another word there.
//!
//! Generic over [`RegisterReader`], so it never owns a connection and never
//! sleeps; the bus task decides when to poll and what a failure costs.

use std::sync::Arc;

use tokio::time::Instant;

use super::device::DeviceMap;
use super::error::ModbusError;
use super::reader::{self, RegisterReader};
use super::statics;
use super::sunspec::{self, DiscoveryError};
use crate::config::{DeviceConfig, PollingConfig, ProfileRef};
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
    /// The generation of the static points the last poll decoded with.
    statics_seen: u64,
}

impl DeviceState {
    pub fn forget(&mut self) {
        self.map = None;
        self.plan.clear();
        self.statics_seen = 0;
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
    /// Set when the static points were read again since the previous poll
    /// (by this poll, or by the device's actuator after a refused write);
    /// not at discovery.
    pub statics_read: bool,
    /// Every register the poll decoded from: the kept static points first,
    /// then what this poll read.
    pub image: Image,
}

/// Discovers when needed, then reads every planned request (and the static
/// points when they are due or moved).
pub async fn poll_device<R: RegisterReader>(
    reader: &mut R,
    cfg: &DeviceConfig,
    polling: &PollingConfig,
    state: &mut DeviceState,
) -> Result<Polled, PollError> {
    let mut fresh = None;
    let map = match &state.map {
        Some(m) => m.clone(),
        None => {
            let m = Arc::new(discover(reader, cfg, polling.coalesce_gap).await?);
            tracing::info!(
                device = %cfg.reference,
                manufacturer = m.info.manufacturer.as_deref().unwrap_or("?"),
                model = m.info.model.as_deref().unwrap_or("?"),
                models = ?m.info.sunspec_models,
                requests = m.requests.len(),
                static_points = m.statics.len(),
                "device discovered"
            );
            state.map = Some(m.clone());
            state.plan = m.requests.clone();
            fresh = Some(m.clone());
            m
        }
    };
    let polled = read_plan(reader, &cfg.reference, &map, &mut state.plan).await?;
    let mut kept = map.kept_statics();
    let due = kept.due(Instant::now(), polling.static_refresh());
    let moved = kept.moved(&map.statics, &polled);
    if fresh.is_none() && !map.statics.is_empty() && (due || moved) {
        if moved {
            tracing::info!(device = %cfg.reference, "a static point changed on the device: reading the static points again");
        }
        kept = statics::refresh(reader, &map).await?;
        tracing::debug!(device = %cfg.reference, generation = kept.generation, "static points read");
    }
    let statics_read = kept.generation != state.statics_seen;
    state.statics_seen = kept.generation;
    // The kept static points first: where the poll read one through, the
    // kept word is the one decoded (they change only when read again).
    let mut img = kept.image.clone();
    img.append(polled);
    Ok(Polled {
        values: point::decode_points(&map.points, &img),
        fresh,
        statics_read,
        image: img,
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
            let points = sunspec::points_for(&chain, cfg.device_type, cfg.invert_power);
            let statics = DeviceMap::sunspec_statics(&chain, &points);
            let (info, read) = sunspec::read_info_with(reader, &chain, &statics).await?;
            Ok(DeviceMap::from_sunspec(
                chain,
                info,
                &read,
                cfg.device_type,
                cfg.invert_power,
            ))
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
