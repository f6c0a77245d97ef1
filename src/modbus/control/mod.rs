//! Control recipes: how a command for one device (a storage power, a
//! production limit, or the release of either) becomes a write plan, for
//! SunSpec models 123, 124 and 704 and for register-map profiles alike.
//!
//! A plan is computed from the recipe's calibration registers (reference
//! values and scale factors: static points of the device, read with them)
//! and says which writes to make in which order, which registers to read
//! back afterwards (those written and what lies between them, as one range;
//! point by point for a device that refuses the range) and which words they
//! must show. This is all the
//! register knowledge of steering: steering chooses commands and runs plans
//! through the device's bus task. Pure: nothing here does I/O or keeps state.
//!
//! Layout: `sunspec` (models 124, 123 and 704), `fronius` (model 124 as a
//! Fronius GEN24 takes it), `profile` (the recipes of a profile's
//! `[controls]`), `restore` (the registers a recipe may write, what
//! they held when found, and the release that writes that back), and
//! [`Recipe`], which picks one from what [`DeviceMap::controls`] says a device
//! has.

mod fronius;
mod narrow;
mod profile;
mod restore;
mod sunspec;

pub use fronius::{is_gen24, StorageGen24};
pub use profile::{
    ess_release_writes, ess_writes, limit_writes, release_writes, ProfileEss, ProfileLimit,
};
pub use restore::{changes, footprint, restore, Originals};
pub use sunspec::{Storage124, Storage704, SunspecLimit};

use super::sunspec::ModelBlock;
use super::{Controls, DeviceMap};
use crate::model::DeviceType;
use crate::profile::ProfileControls;
use crate::register::plan::{self, Image, Span, Table};
use crate::telemetry::DeviceInfo;

/// What one device is told.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Command {
    /// Exact storage power (W, + discharge); 0 is idle.
    EssPower(f64),
    /// Remote control released: the storage runs its own logic.
    EssRelease,
    /// Production limit (W).
    ProductionLimit(f64),
    /// No production limit.
    ProductionRelease,
}

impl Command {
    /// True for commands that hold a device under remote control (and so need
    /// refreshing before the device's revert timer fires).
    pub const fn is_control(self) -> bool {
        matches!(self, Command::EssPower(_) | Command::ProductionLimit(_))
    }
}

/// One write request to holding registers: `values` from `addr` on
/// (function 6 for one word, 16 for more).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegWrite {
    pub addr: u16,
    pub values: Vec<u16>,
}

/// The writes for one command, in order, and what the read-back must show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePlan {
    pub writes: Vec<RegWrite>,
    /// Holding registers read after the writes, in the same bus transaction:
    /// the registers written and what lies between them, in one request
    /// where the 125-register limit allows (a device that refuses such a
    /// range gets [`WritePlan::read_back_by_point`]).
    pub read_back: Vec<Span>,
    /// `(address, word)` pairs the read-back must hold.
    pub expect: Vec<(u16, u16)>,
}

impl WritePlan {
    /// A plan that reads back the registers it writes as one range and
    /// expects the last word written to each. Never a whole control block
    /// beyond them, and no calibration registers: those are static points,
    /// read with them (`modbus::statics`).
    pub fn new(writes: Vec<RegWrite>) -> WritePlan {
        let mut expect: Vec<(u16, u16)> = Vec::new();
        for w in &writes {
            for (i, &word) in w.values.iter().enumerate() {
                let addr = w.addr.wrapping_add(i as u16);
                expect.retain(|&(a, _)| a != addr);
                expect.push((addr, word));
            }
        }
        let read_back = plan::plan(&written(&writes), u16::MAX);
        WritePlan {
            read_back,
            writes,
            expect,
        }
    }

    /// The read-back for a device that refuses a range: exactly the
    /// registers the plan checks (those its whole recipe writes, also when
    /// it was narrowed to fewer writes), adjacent ones together.
    pub fn read_back_by_point(&self) -> Vec<Span> {
        let mut addrs: Vec<u16> = self.expect.iter().map(|&(a, _)| a).collect();
        addrs.sort_unstable();
        addrs.dedup();
        let spans: Vec<Span> = addrs
            .into_iter()
            .map(|a| Span::new(Table::Holding, a, 1))
            .collect();
        plan::plan(&spans, 0)
    }
}

/// The holding registers `writes` write.
fn written(writes: &[RegWrite]) -> Vec<Span> {
    writes
        .iter()
        .map(|w| Span::new(Table::Holding, w.addr, w.values.len() as u16))
        .collect()
}

/// Why a command cannot be written to a device.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WriteError {
    #[error("the device has no {0}")]
    NoControl(&'static str),
    #[error("{what} is not available on the device ({detail})")]
    Missing { what: &'static str, detail: String },
    #[error("command {0:?} does not apply to this device")]
    WrongCommand(Command),
    #[error("{0}")]
    Encode(String),
}

/// A read-back that does not show what was written: the first register that
/// differs, what it holds (nothing: not in the reads) and what was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("read-back of register {addr} shows {} instead of {want}", shown(*.got))]
pub struct Mismatch {
    pub addr: u16,
    pub got: Option<u16>,
    pub want: u16,
}

fn shown(got: Option<u16>) -> String {
    got.map_or("nothing".to_string(), |g| g.to_string())
}

/// Checks a read-back against a plan: `got` holds what was read back (the
/// plan's range or its point-by-point read). `Err` names the first register
/// that differs.
pub fn verify(plan: &WritePlan, got: &Image) -> Result<(), Mismatch> {
    for &(addr, want) in &plan.expect {
        let word = got.get(Table::Holding, addr, 1).map(|w| w[0]);
        if word != Some(want) {
            return Err(Mismatch {
                addr,
                got: word,
                want,
            });
        }
    }
    Ok(())
}

/// A device's write recipe.
#[derive(Clone, Debug, PartialEq)]
pub enum Recipe {
    /// SunSpec model 124 (basic storage controls).
    Storage124(Storage124),
    /// SunSpec model 124 of a Fronius GEN24 (one limit bit per direction).
    StorageGen24(StorageGen24),
    /// SunSpec model 704 `WSet` in W, for storage without model 124.
    Storage704(Storage704),
    /// SunSpec `WMaxLimPct` in % of `WMax`: model 123, or 704 without it.
    Limit(SunspecLimit),
    /// A register-map profile's `ess_power` control.
    ProfileStorage(ProfileEss),
    /// A register-map profile's `production_limit` control.
    ProfileLimit(ProfileLimit),
}

impl Recipe {
    /// The recipe of a discovered device, by what it is configured as (a
    /// battery gets storage power, an inverter a production limit).
    /// `configured_rated_w` completes a profile, which reads no rating.
    ///
    /// SunSpec: model 124 (batteries) and 123 (inverters) when present; model
    /// 704 only for devices that have neither (704 may stand in for them,
    /// never beside them: two models would fight over one setpoint). A
    /// battery whose Common model names a Fronius GEN24 gets that
    /// inverter's reading of 124 ([`is_gen24`]).
    pub fn for_device(
        device_type: DeviceType,
        configured_rated_w: Option<f64>,
        map: &DeviceMap,
    ) -> Result<Self, WriteError> {
        match map.controls() {
            Controls::Sunspec {
                immediate,
                storage,
                der,
            } => sunspec_recipe(device_type, immediate, storage, der, &map.info()),
            Controls::Profile(p) => profile_recipe(
                device_type,
                p,
                configured_rated_w.or(map.info.rated_power_w),
            ),
        }
    }

    /// The registers its plans are computed from (reference values and scale
    /// factors, each point on its own, adjacent ones together): static
    /// points of the device, in `cal` of [`Recipe::plan`]; empty when the
    /// recipe needs none.
    pub fn calibration(&self) -> Vec<Span> {
        match self {
            Recipe::Storage124(r) => r.calibration(),
            Recipe::StorageGen24(r) => r.calibration(),
            Recipe::Storage704(r) => r.calibration(),
            Recipe::Limit(r) => r.calibration(),
            Recipe::ProfileStorage(_) | Recipe::ProfileLimit(_) => Vec::new(),
        }
    }

    /// A production limit the device had switched on itself when found, in
    /// % of its rating: SunSpec's enable point says so; a profile's registers
    /// do not tell.
    pub fn found_limit(&self, found: &Originals, cal: &Image) -> Option<f64> {
        match self {
            Recipe::Limit(r) => r.found_limit(found, cal),
            _ => None,
        }
    }

    /// The plan for `cmd`; `revert_s` is the device's revert timeout, `cal`
    /// holds the registers of [`Self::calibration`] as read (the device's
    /// static points).
    pub fn plan(&self, cmd: Command, revert_s: u16, cal: &Image) -> Result<WritePlan, WriteError> {
        let writes = match (self, cmd) {
            (Recipe::Storage124(r), Command::EssPower(w)) => r.power(w, revert_s, cal)?,
            (Recipe::Storage124(r), Command::EssRelease) => r.release(cal)?,
            (Recipe::StorageGen24(r), Command::EssPower(w)) => r.power(w, revert_s, cal)?,
            (Recipe::StorageGen24(r), Command::EssRelease) => r.release(cal)?,
            (Recipe::Storage704(r), Command::EssPower(w)) => r.power(w, revert_s, cal)?,
            (Recipe::Storage704(r), Command::EssRelease) => r.release()?,
            (Recipe::Limit(r), Command::ProductionLimit(w)) => r.limit(w, revert_s, cal)?,
            (Recipe::Limit(r), Command::ProductionRelease) => r.release()?,
            (Recipe::ProfileStorage(r), Command::EssPower(w)) => r.power(w, revert_s)?,
            (Recipe::ProfileStorage(r), Command::EssRelease) => r.release()?,
            (Recipe::ProfileLimit(r), Command::ProductionLimit(w)) => r.limit(w, revert_s)?,
            (Recipe::ProfileLimit(r), Command::ProductionRelease) => r.release(),
            (_, other) => return Err(WriteError::WrongCommand(other)),
        };
        Ok(WritePlan::new(writes))
    }
}

/// Every SunSpec recipe's calibration registers for the control models of
/// `chain` (124, 123, 704): static points of any device that has them.
pub fn sunspec_calibration(chain: &[ModelBlock]) -> Vec<Span> {
    let mut spans = Vec::new();
    for block in chain {
        let block = *block;
        match block.id {
            124 => spans.extend(Storage124 { block }.calibration()),
            123 | 704 => {
                // The rating does not change which registers are read.
                spans.extend(SunspecLimit { block, wmax_w: 1.0 }.calibration());
                if block.id == 704 {
                    spans.extend(Storage704 { block }.calibration());
                }
            }
            _ => {}
        }
    }
    spans
}

fn sunspec_recipe(
    device_type: DeviceType,
    immediate: Option<&ModelBlock>,
    storage: Option<&ModelBlock>,
    der: Option<&ModelBlock>,
    info: &DeviceInfo,
) -> Result<Recipe, WriteError> {
    let rated_w = info.rated_power_w;
    match device_type {
        DeviceType::Battery => match (storage, der) {
            (Some(b), _) if is_gen24(info) => Ok(Recipe::StorageGen24(StorageGen24 { block: *b })),
            (Some(b), _) => Ok(Recipe::Storage124(Storage124 { block: *b })),
            (None, Some(b)) => Ok(Recipe::Storage704(Storage704 { block: *b })),
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
            Ok(Recipe::Limit(SunspecLimit {
                block: *block,
                wmax_w,
            }))
        }
        DeviceType::Meter => Err(WriteError::NoControl("controls (it is a meter)")),
    }
}

fn profile_recipe(
    device_type: DeviceType,
    p: &ProfileControls,
    rated_w: Option<f64>,
) -> Result<Recipe, WriteError> {
    match device_type {
        DeviceType::Battery => p
            .ess_power
            .clone()
            .map(|control| Recipe::ProfileStorage(ProfileEss { control, rated_w }))
            .ok_or(WriteError::NoControl(
                "ESS power control (its profile has no [controls.ess_power])",
            )),
        DeviceType::Inverter => p
            .production_limit
            .clone()
            .map(|control| Recipe::ProfileLimit(ProfileLimit { control, rated_w }))
            .ok_or(WriteError::NoControl(
                "production limit control (its profile has no [controls.production_limit])",
            )),
        DeviceType::Meter => Err(WriteError::NoControl("controls (it is a meter)")),
    }
}

#[cfg(test)]
mod tests;
