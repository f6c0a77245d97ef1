//! One measured value of one property of one device at one instant.

use super::{DeviceId, Property};

/// A measurement as it leaves a poll: device, property, epoch ms, value in the
/// property's unit with the vocabulary's sign convention already applied.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub device: DeviceId,
    pub property: Property,
    pub ts_ms: i64,
    pub value: f64,
}
