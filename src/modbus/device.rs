//! A device as the poller sees it after discovery: the points it reads, the
//! planned requests, and what it is.

use super::plan::{self, Span};
use super::point::{self, PointSpec};
use super::sunspec::{self, ModelBlock};
use crate::config::DeviceConfig;
use crate::telemetry::DeviceInfo;

/// Read once per discovery; immutable afterwards (re-discovery builds a new one).
#[derive(Debug, Clone)]
pub struct DeviceMap {
    pub points: Vec<PointSpec>,
    /// The fewest requests that read every point (see `plan`).
    pub requests: Vec<Span>,
    pub info: DeviceInfo,
    /// The SunSpec model chain; empty for register-map profiles.
    pub chain: Vec<ModelBlock>,
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
        }
    }

    /// The block of a SunSpec model, when the device has it.
    pub fn model(&self, id: u16) -> Option<&ModelBlock> {
        self.chain.iter().find(|b| b.id == id)
    }
}
