//! A device as the poller sees it after discovery: the points it reads, the
//! planned requests, its static points, what it is, and where its controls
//! are.
//!
//! [`DeviceMap::controls`] is the steering layer's entry point: SunSpec devices
//! expose their control models (123, 124, 704) from the chain, profile devices
//! their profile's control registers and recipes.
//!
//! The map is fixed at discovery (re-discovery builds a new one); what is
//! learned of the device since lives beside it, shared by the bus task and
//! the actuator: the static points as last read (`kept::Kept`) and whether
//! the device refuses a write's read-back as one range.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::control;
use super::kept::{Kept, Statics};
use super::sunspec::{self, ModelBlock, Ratings};
use crate::config::DeviceConfig;
use crate::model::{DeviceType, Property};
use crate::profile::{Profile, ProfileControls};
use crate::register::plan::{self, Image, Span};
use crate::register::point::{self, PointSpec};
use crate::telemetry::DeviceInfo;

/// A discovered device.
#[derive(Debug)]
pub struct DeviceMap {
    pub points: Vec<PointSpec>,
    /// The fewest requests that read every point but the static ones (see
    /// `plan`).
    pub requests: Vec<Span>,
    /// Registers read at discovery and refreshed rarely (`statics`): settings,
    /// nameplate data and the control models' scale factors, sorted. Empty for
    /// profiles.
    pub statics: Vec<Span>,
    /// What discovery read; the ratings in it follow the static points
    /// ([`DeviceMap::info`]).
    pub info: DeviceInfo,
    /// The SunSpec model chain of this logical device; empty for profiles.
    pub chain: Vec<ModelBlock>,
    /// The register-map profile the device is read with, if any.
    pub profile: Option<Arc<Profile>>,
    /// What discovery read (the Common model among it), for those who
    /// answer for the device as it is (`image.rs`); empty for profiles.
    pub discovered: Image,
    kept: Kept,
    read_back_by_point: AtomicBool,
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

/// The model of the chain the `operatingState` point lies in.
fn state_model(chain: &[ModelBlock], points: &[PointSpec]) -> Option<u16> {
    let addr = points
        .iter()
        .find(|p| p.property == Property::OperatingState)?
        .addr;
    sunspec::model_at(chain, addr)
}

impl DeviceMap {
    /// Every register from the first model to the end marker of a SunSpec map is
    /// readable, so reads span any gap: the plan is the fewest requests the
    /// 125-register limit allows for the points that are not static. `read`
    /// is what discovery read: it holds the static points.
    pub fn from_sunspec(
        chain: Vec<ModelBlock>,
        info: DeviceInfo,
        read: &Image,
        device_type: DeviceType,
        invert_power: bool,
    ) -> Self {
        let points = sunspec::points_for(&chain, device_type, invert_power);
        let statics = Self::sunspec_statics(&chain, &points);
        let info = DeviceInfo {
            state_model: state_model(&chain, &points),
            ..info
        };
        let requests = plan::plan(&per_poll(&points, &statics), u16::MAX);
        let kept = Kept::new(read.extract(&statics), sunspec::ratings(&chain, read));
        Self {
            points,
            requests,
            statics,
            info,
            chain,
            profile: None,
            discovered: read.clone(),
            kept,
            read_back_by_point: AtomicBool::new(false),
        }
    }

    /// The static spans of a SunSpec device read through `points`: the
    /// map's (`sunspec::static_spans`) and every control recipe's
    /// calibration registers.
    pub fn sunspec_statics(chain: &[ModelBlock], points: &[PointSpec]) -> Vec<Span> {
        let mut statics = sunspec::static_spans(chain, points);
        statics.extend(control::sunspec_calibration(chain));
        statics.sort();
        statics.dedup();
        statics
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
            state_names: profile.state_names.clone(),
            ..DeviceInfo::default()
        };
        Self {
            points,
            requests,
            statics: Vec::new(),
            info,
            chain: Vec::new(),
            profile: Some(profile),
            discovered: Image::new(),
            kept: Kept::new(Image::new(), Ratings::default()),
            read_back_by_point: AtomicBool::new(false),
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

    /// Every register span a poll needs (what a learned plan must cover):
    /// the points' spans but the static ones.
    pub fn needed(&self) -> Vec<Span> {
        per_poll(&self.points, &self.statics)
    }

    /// The static points as last read.
    pub fn kept_statics(&self) -> Arc<Statics> {
        self.kept.get()
    }

    /// Keeps the static points of `read` (a read of [`DeviceMap::statics`])
    /// as the newest; returns them.
    pub fn keep_statics(&self, read: &Image) -> Arc<Statics> {
        let ratings = if self.chain.is_empty() {
            Ratings::default()
        } else {
            sunspec::ratings(&self.chain, read)
        };
        self.kept.replace(read.extract(&self.statics), ratings)
    }

    /// What discovery read, with the ratings of the newest static points
    /// (a SunSpec device's `WMax` may change; a profile reads no rating).
    pub fn info(&self) -> DeviceInfo {
        let mut info = self.info.clone();
        if self.profile.is_none() {
            let r = self.kept.get().ratings;
            info.rated_power_w = r.power_w.or(info.rated_power_w);
            info.capacity_wh = r.capacity_wh.or(info.capacity_wh);
        }
        info
    }

    /// True once the device refused a write's read-back as one range: its
    /// writes are read back point by point for the life of this map.
    pub fn reads_back_by_point(&self) -> bool {
        self.read_back_by_point.load(Ordering::Relaxed)
    }

    /// Notes that the device refuses a write's read-back as one range.
    pub fn learn_read_back_by_point(&self) {
        self.read_back_by_point.store(true, Ordering::Relaxed);
    }
}

/// The spans of `points` that are not in `statics`.
fn per_poll(points: &[PointSpec], statics: &[Span]) -> Vec<Span> {
    point::spans(points)
        .into_iter()
        .filter(|s| statics.binary_search(s).is_err())
        .collect()
}
