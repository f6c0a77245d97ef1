//! Device kinds and the process-local device id.

use std::fmt;
use std::str::FromStr;

/// What a device is on the site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceType {
    Inverter,
    Battery,
    Meter,
}

impl DeviceType {
    pub const fn as_str(self) -> &'static str {
        match self {
            DeviceType::Inverter => "inverter",
            DeviceType::Battery => "battery",
            DeviceType::Meter => "meter",
        }
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DeviceType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "inverter" => Ok(DeviceType::Inverter),
            "battery" => Ok(DeviceType::Battery),
            "meter" => Ok(DeviceType::Meter),
            other => Err(format!(
                "unknown device type {other:?} (expected inverter, battery or meter)"
            )),
        }
    }
}

/// Index of a device in config order. Valid for one process run only; the
/// stable identity across runs is the device reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId(pub u16);

impl DeviceId {
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}
