//! Which writer a device gets: from what [`DeviceMap::controls`] says the device
//! has and what the device is configured as (a battery gets storage power, an
//! inverter a production limit), and the dispatch to that writer.
//!
//! SunSpec: model 124 (batteries) and 123 (inverters) when present, so that
//! devices with them behave as before; model 704 only for devices that have
//! neither (`spec/steering.md`: "Where model 704 is present it may be used
//! instead"). Register-map profiles: their `ess_power` or `production_limit`.

use super::{
    ProfileEss, ProfileLimit, Sunspec123, Sunspec124, Sunspec704Limit, Sunspec704Power, WriteError,
    WritePlan,
};
use crate::config::DeviceConfig;
use crate::modbus::plan::{Image, Span};
use crate::modbus::profile::ProfileControls;
use crate::modbus::sunspec::ModelBlock;
use crate::modbus::{Controls, DeviceMap};
use crate::model::DeviceType;
use crate::steering::decide::Command;

/// A device's control surface.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceControls {
    /// SunSpec model 124 (basic storage controls).
    Storage124(Sunspec124),
    /// SunSpec model 123 (immediate controls), limits in % of `WMax`.
    Inverter123(Sunspec123),
    /// SunSpec model 704 `WSet` in W, for storage without model 124.
    Storage704(Sunspec704Power),
    /// SunSpec model 704 `WMaxLimPct`, for inverters without model 123.
    Inverter704(Sunspec704Limit),
    /// A register-map profile's `ess_power` control.
    ProfileStorage(ProfileEss),
    /// A register-map profile's `production_limit` control.
    ProfileInverter(ProfileLimit),
}

impl DeviceControls {
    /// The controls of a discovered device, by its configured type.
    pub fn for_device(device: &DeviceConfig, map: &DeviceMap) -> Result<Self, WriteError> {
        match map.controls() {
            Controls::Sunspec {
                immediate,
                storage,
                der,
            } => sunspec(
                device.device_type,
                immediate,
                storage,
                der,
                map.info.rated_power_w,
            ),
            // The profile reads no rating: the configured one completes it.
            Controls::Profile(p) => profile(
                device.device_type,
                p,
                device.rated_power_w.or(map.info.rated_power_w),
            ),
        }
    }

    /// Registers read before planning (calibration: reference values and
    /// scale factors), each point on its own; empty when the writer needs none.
    pub fn calibration(&self) -> Vec<Span> {
        match self {
            DeviceControls::Storage124(s) => s.calibration(),
            DeviceControls::Inverter123(s) => s.calibration(),
            DeviceControls::Storage704(s) => s.calibration(),
            DeviceControls::Inverter704(s) => s.calibration(),
            DeviceControls::ProfileStorage(_) | DeviceControls::ProfileInverter(_) => Vec::new(),
        }
    }

    /// The writes for `cmd`; `cal` holds the registers of [`Self::calibration`]
    /// as read.
    pub fn plan(&self, cmd: Command, revert_s: u16, cal: &Image) -> Result<WritePlan, WriteError> {
        match self {
            DeviceControls::Storage124(s) => s.plan(cmd, revert_s, cal),
            DeviceControls::Inverter123(s) => s.plan(cmd, revert_s, cal),
            DeviceControls::Storage704(s) => s.plan(cmd, revert_s, cal),
            DeviceControls::Inverter704(s) => s.plan(cmd, revert_s, cal),
            DeviceControls::ProfileStorage(p) => p.plan(cmd, revert_s),
            DeviceControls::ProfileInverter(p) => p.plan(cmd, revert_s),
        }
    }
}

fn sunspec(
    device_type: DeviceType,
    immediate: Option<&ModelBlock>,
    storage: Option<&ModelBlock>,
    der: Option<&ModelBlock>,
    rated_w: Option<f64>,
) -> Result<DeviceControls, WriteError> {
    match device_type {
        DeviceType::Battery => match (storage, der) {
            (Some(b), _) => Ok(DeviceControls::Storage124(Sunspec124 { block: *b })),
            (None, Some(b)) => Ok(DeviceControls::Storage704(Sunspec704Power { block: *b })),
            (None, None) => Err(WriteError::NoControl(
                "SunSpec storage controls (model 124 or 704)",
            )),
        },
        DeviceType::Inverter => {
            let block = immediate.or(der).ok_or(WriteError::NoControl(
                "SunSpec immediate controls (model 123 or 704)",
            ))?;
            let wmax_w = rated_w
                .filter(|w| *w > 0.0)
                .ok_or_else(|| WriteError::Missing {
                    what: "WMax",
                    detail: "none of model 121 WMax, 120 WRtg or 702 WMaxRtg was readable".into(),
                })?;
            Ok(if block.id == 123 {
                DeviceControls::Inverter123(Sunspec123 {
                    block: *block,
                    wmax_w,
                })
            } else {
                DeviceControls::Inverter704(Sunspec704Limit {
                    block: *block,
                    wmax_w,
                })
            })
        }
        DeviceType::Meter => Err(WriteError::NoControl("controls (it is a meter)")),
    }
}

fn profile(
    device_type: DeviceType,
    p: &ProfileControls,
    rated_w: Option<f64>,
) -> Result<DeviceControls, WriteError> {
    match device_type {
        DeviceType::Battery => p
            .ess_power
            .clone()
            .map(|control| DeviceControls::ProfileStorage(ProfileEss { control }))
            .ok_or(WriteError::NoControl(
                "ESS power control (its profile has no [controls.ess_power])",
            )),
        DeviceType::Inverter => p
            .production_limit
            .clone()
            .map(|control| DeviceControls::ProfileInverter(ProfileLimit { control, rated_w }))
            .ok_or(WriteError::NoControl(
                "production limit control (its profile has no [controls.production_limit])",
            )),
        DeviceType::Meter => Err(WriteError::NoControl("controls (it is a meter)")),
    }
}
