//! A device as the poller sees it after discovery: the points it reads, the
//! planned requests, what it is, and where its controls are.
//!
//! [`DeviceMap::controls`] is the steering layer's entry point: SunSpec devices
//! expose their control models (123, 124, 704) from the chain, profile devices
//! their profile's control registers and recipes.

use std::sync::Arc;

use super::sunspec::{self, ModelBlock};
use crate::config::DeviceConfig;
use crate::profile::{Profile, ProfileControls};
use crate::register::plan::{self, Span};
use crate::register::point::{self, PointSpec};
use crate::telemetry::DeviceInfo;

/// Read once per discovery; immutable afterwards (re-discovery builds a new one).
#[derive(Debug, Clone)]
pub struct DeviceMap {
    pub points: Vec<PointSpec>,
    /// The fewest requests that read every point (see `plan`).
    pub requests: Vec<Span>,
    pub info: DeviceInfo,
    /// The SunSpec model chain of this logical device; empty for profiles.
    pub chain: Vec<ModelBlock>,
    /// The register-map profile the device is read with, if any.
    pub profile: Option<Arc<Profile>>,
}

/// Where a device can be steered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Controls<'a> {
    /// SunSpec control models present in the chain (the first block of each).
    Sunspec {
        /// Model 123, immediate controls (`WMaxLimPct` in % of `WMax`).
        immediate: Option<&'a ModelBlock>,
        /// Model 124, basic storage controls.
        storage: Option<&'a ModelBlock>,
        /// Model 704, DER AC controls (`WMaxLimPct`, `WSet`).
        der: Option<&'a ModelBlock>,
    },
    /// A profile's control registers and write recipes.
    Profile(&'a ProfileControls),
}

impl DeviceMap {
    /// Every register from the first model to the end marker of a SunSpec map is
    /// readable, so reads span any gap: the plan is the fewest requests the
    /// 125-register limit allows.
    pub fn from_sunspec(chain: Vec<ModelBlock>, info: DeviceInfo, device: &DeviceConfig) -> Self {
        let points = sunspec::points_for(&chain, device.device_type, device.invert_power);
        let requests = plan::plan(&point::spans(&points), u16::MAX);
        Self {
            points,
            requests,
            info,
            chain,
            profile: None,
        }
    }

    /// A profile's points, read through gaps of at most `max_gap` registers
    /// (vendors' maps have holes that may answer "illegal data address").
    pub fn from_profile(profile: Arc<Profile>, device: &DeviceConfig, max_gap: u16) -> Self {
        let points: Vec<PointSpec> = profile
            .points
            .iter()
            .map(|p| p.negated(device.invert_power && p.property.is_signed_power()))
            .collect();
        let requests = plan::plan(&point::spans(&points), max_gap);
        let info = DeviceInfo {
            manufacturer: profile.manufacturer.clone(),
            model: profile.model.clone(),
            ..DeviceInfo::default()
        };
        Self {
            points,
            requests,
            info,
            chain: Vec::new(),
            profile: Some(profile),
        }
    }

    /// The block of a SunSpec model, when the device has it.
    pub fn model(&self, id: u16) -> Option<&ModelBlock> {
        self.chain.iter().find(|b| b.id == id)
    }

    /// Where the device can be steered.
    pub fn controls(&self) -> Controls<'_> {
        match &self.profile {
            Some(p) => Controls::Profile(&p.controls),
            None => Controls::Sunspec {
                immediate: self.model(123),
                storage: self.model(124),
                der: self.model(704),
            },
        }
    }

    /// Every register span the points need (what a learned plan must cover).
    pub fn needed(&self) -> Vec<Span> {
        point::spans(&self.points)
    }
}
