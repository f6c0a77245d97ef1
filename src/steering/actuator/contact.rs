//! First contact with the device: its recipe (`modbus::control`), computed
//! from the device's static points (`modbus::statics`: the recipe's
//! calibration registers among them, read with the device's discovery and
//! refreshed with them), and the registers the recipe may write as first
//! found (its footprint), which a release writes back. What was found
//! is kept in the store (`found_registers`) with a mark that says whether the
//! agent's own values are in the device now, so a start after a crash writes
//! back what the installer left, not what the last run wrote. After the
//! device refused a write, its static points are read again
//! ([`Actuator::refresh_statics`]): a scale factor or rating may have changed.
//!
//! It reads and keeps; it must not write to the device, and it must not take
//! an unreachable device for one with nothing to keep (that is an error,
//! looked at again).

use std::sync::Arc;

use super::Actuator;
use crate::modbus::commands::{words_of, BusReader};
use crate::modbus::control::{footprint, Originals, Recipe, WriteError};
use crate::modbus::statics::{self, Statics};
use crate::modbus::{DeviceMap, ModbusError, Op};
use crate::model::time::now_ms;
use crate::register::plan::Image;
use crate::steering::persist::FoundRegisters;

/// How often to look again for a device that is not discovered yet.
const UNDISCOVERED_RETRY_MS: i64 = 1000;
/// How soon to read the calibration registers again after a failed read.
const CALIBRATION_RETRY_MS: i64 = 1000;

/// Why no write can be planned yet; the actuator reports it as the device's
/// pending reason and looks again after [`NotReady::retry_ms`].
#[derive(Debug, thiserror::Error)]
pub(super) enum NotReady {
    #[error("device not discovered yet (no answer to polls)")]
    Undiscovered,
    /// The device's map offers no recipe for its type (a configuration or
    /// device problem: looked at again only after the longest backoff).
    #[error(transparent)]
    NoRecipe(#[from] WriteError),
    #[error("reading the control registers: {0}")]
    Calibration(ModbusError),
}

impl NotReady {
    pub(super) fn retry_ms(&self) -> i64 {
        match self {
            NotReady::Undiscovered => UNDISCOVERED_RETRY_MS,
            NotReady::NoRecipe(_) => crate::steering::report::MAX_BACKOFF_MS,
            NotReady::Calibration(_) => CALIBRATION_RETRY_MS,
        }
    }
}

/// The device's recipe and the static points it was computed from.
pub(super) struct Calibrated {
    pub(super) map: Arc<DeviceMap>,
    pub(super) recipe: Recipe,
    /// The device's static points as last read: the recipe's calibration.
    pub(super) statics: Arc<Statics>,
    /// What the recipe's registers held when this map was first contacted,
    /// for the log of the first write.
    pub(super) current: Originals,
    /// The first write since contact was logged.
    pub(super) logged: bool,
}

impl Calibrated {
    /// The recipe's calibration registers as read.
    pub(super) fn image(&self) -> &Image {
        &self.statics.image
    }
}

impl Actuator {
    /// The device's recipe over its newest static points. First contact with
    /// a map reads the registers as found; static points read again since
    /// only rebuild the recipe (a rating may have changed).
    pub(super) async fn calibrate<'a>(
        &mut self,
        cal: &'a mut Option<Calibrated>,
    ) -> Result<&'a Calibrated, NotReady> {
        let Some(map) = self.maps.get(self.device.id) else {
            *cal = None;
            return Err(NotReady::Undiscovered);
        };
        let statics = map.kept_statics();
        let current = match cal.take() {
            Some(c) if Arc::ptr_eq(&c.map, &map) && Arc::ptr_eq(&c.statics, &statics) => c,
            Some(c) if Arc::ptr_eq(&c.map, &map) => {
                let recipe = self.recipe(&map)?;
                Calibrated {
                    recipe,
                    statics,
                    ..c
                }
            }
            _ => {
                let recipe = self.recipe(&map)?;
                let current = self
                    .read_found(&recipe, &statics.image)
                    .await
                    .map_err(NotReady::Calibration)?;
                Calibrated {
                    map,
                    recipe,
                    statics,
                    current,
                    logged: false,
                }
            }
        };
        Ok(cal.insert(current))
    }

    fn recipe(&self, map: &DeviceMap) -> Result<Recipe, WriteError> {
        Recipe::for_device(self.device.device_type, self.device.rated_power_w, map)
    }

    /// Reads the device's static points again, after it refused a write: a
    /// scale factor or a rating may have changed, and the next plan is
    /// computed from what it holds now. A failed read is logged; the next
    /// refused write tries again.
    pub(super) async fn refresh_statics(&self, map: &DeviceMap) {
        let mut reader = BusReader {
            bus: &self.bus,
            unit: self.device.unit_id,
        };
        let device = &self.device.reference;
        match statics::refresh(&mut reader, map).await {
            Ok(s) => {
                tracing::info!(%device, generation = s.generation, "the device refused a write: its static points were read again")
            }
            Err(e) => {
                tracing::warn!(%device, error = %e, "the device refused a write and its static points could not be read again")
            }
        }
    }

    /// Reads every register the recipe may write (each point on its own when
    /// the device refuses them together) and settles what the device held
    /// before the agent wrote anything: what it holds now, unless an earlier
    /// run left its own values there (then the words kept from before).
    /// Returns what it holds now; an unreachable device is an error (looked
    /// at again), never a record of nothing found.
    async fn read_found(&mut self, recipe: &Recipe, cal: &Image) -> Result<Originals, ModbusError> {
        let spans = footprint(recipe, self.revert_s, cal);
        if spans.is_empty() {
            return Ok(Originals::default());
        }
        let unit = self.device.unit_id;
        let ops = spans.iter().map(|s| Op::Read(*s)).collect();
        let reads = match self.bus.transact(unit, ops).await {
            Ok(out) => words_of(out),
            Err(e) if !matches!(e, ModbusError::Exception(_)) => return Err(e),
            Err(_) => {
                let mut reads = Vec::new();
                for s in &spans {
                    let words = match self.bus.transact(unit, vec![Op::Read(*s)]).await {
                        Ok(out) => words_of(out).pop().unwrap_or_default(),
                        Err(ModbusError::Exception(_)) => Vec::new(),
                        Err(e) => return Err(e),
                    };
                    reads.push(words);
                }
                reads
            }
        };
        let current = Originals::from_reads(&spans, &reads);
        let device = self.device.reference.clone();
        let kept = self
            .found
            .clone()
            .filter(|f| f.steered && f.originals.spans() == spans);
        let limited = recipe.found_limit(kept.as_ref().map_or(&current, |f| &f.originals), cal);
        self.found_note = limited.map(|pct| {
            tracing::info!(%device, limit_pct = pct, "device found limited by its own setting: a release returns it to that limit");
            format!("found limited to {pct} % of its rating by its own setting: a release returns it to that limit")
        });
        match kept {
            Some(f) => {
                tracing::info!(%device, found_ms = f.found_ms, registers = %f.originals.describe(), now = %current.describe(),
                    "device still holds setpoints of an earlier run: the registers as first found are written back at release");
            }
            _ => {
                if current.points.len() < spans.len() {
                    tracing::warn!(%device, readable = current.points.len(), of = spans.len(),
                        "some control registers could not be read: a release writes the profile's own values there");
                }
                tracing::info!(%device, registers = %current.describe(),
                    "control registers as found: written back at every release");
                let found = FoundRegisters {
                    originals: current.clone(),
                    found_ms: now_ms(),
                    steered: false,
                };
                self.found = Some(found.clone());
                self.keep_found.send_replace(Some(found));
            }
        }
        Ok(current)
    }

    /// Notes that the agent's own values are (or are no longer) in the
    /// device's registers, for a start after a crash; kept in the background.
    pub(super) fn mark_steered(&mut self, steered: bool) {
        if let Some(f) = self.found.as_mut().filter(|f| f.steered != steered) {
            f.steered = steered;
            self.keep_found.send_replace(Some(f.clone()));
        }
    }
}
