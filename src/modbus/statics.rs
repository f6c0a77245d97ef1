//! Static points: the registers of a device that hold settings and nameplate
//! data rather than measurements (SunSpec: `sunspec::static_spans` and the
//! control recipes' calibration registers), kept as last read so that the
//! per-poll plan can leave them out (`docs/devices.md`, "Static points").
//!
//! They are read at discovery, again once `polling.static_refresh_s` has
//! passed (by the bus task, with a poll), after the device refused a write
//! (by its actuator), and at once when a poll that reads one of them anyway
//! finds another word there. Each read replaces the kept image whole; the
//! poll's decoding and the write recipes take the newest one from then on.
//!
//! This file reads them again; `kept.rs` holds the reads, and `DeviceMap`
//! the newest. It must not decide which registers are static
//! (`sunspec::static_spans`, `DeviceMap`) nor when a poll runs (the bus task).

use std::sync::Arc;

use super::device::DeviceMap;
use super::error::ModbusError;
pub use super::kept::{Kept, Statics};
use super::reader::{self, RegisterReader};

/// Reads the static points of `map` again (through any gap, a request the
/// device refuses split as polls split theirs; a point refused alone is left
/// out) and keeps them. A device without static points is not asked.
pub async fn refresh<R: RegisterReader>(
    r: &mut R,
    map: &DeviceMap,
) -> Result<Arc<Statics>, ModbusError> {
    if map.statics.is_empty() {
        return Ok(map.kept_statics());
    }
    let img = reader::read_spans(r, &map.statics, u16::MAX).await?;
    Ok(map.keep_statics(&img))
}
