//! The grid loop's vocabulary: what the plan asks of the site, what the loop
//! reads each tick, what it keeps between ticks, and its answer. Plain data.

use super::estimate::{History, Load};
use crate::config::{CurtailmentFulfilment, ExportOrder};

/// What the signal (or the fallback) asks of the storage, site total.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StoragePlan {
    /// Remote control released: the storage runs its own logic.
    Release,
    /// Exact power, W, + discharge.
    Power(f64),
}

/// What the production gets, site total.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ProductionPlan {
    Release,
    /// A limit (W), spread by the site's curtailment rule.
    Limit(f64),
    /// The grid loop's own cap (W), spread by [`cap_rule`](super::cap_rule): the inverters'
    /// limits sum to it, each gets what it produces before any gets room.
    Cap(f64),
}

impl ProductionPlan {
    /// The limit, W; `None` when released.
    pub fn limit_w(self) -> Option<f64> {
        match self {
            ProductionPlan::Release => None,
            ProductionPlan::Limit(l) | ProductionPlan::Cap(l) => Some(l),
        }
    }
}

impl StoragePlan {
    /// The power, W; `None` when released.
    pub fn power_w(self) -> Option<f64> {
        match self {
            StoragePlan::Release => None,
            StoragePlan::Power(p) => Some(p),
        }
    }
}

/// Which way a shortfall at the import limit is made up first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportOrder {
    /// Let the production run, then discharge (the normal case: PV is free).
    LiftCurtailmentFirst,
    /// Charge less first, then let the production run, then discharge
    /// (maximize grid import: grid energy before PV).
    ChargeLessFirst,
}

/// The site-level request before the grid limits are held.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SitePlan {
    pub storage: StoragePlan,
    pub production: ProductionPlan,
    pub import_order: ImportOrder,
}

/// The grid meter as the loop sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Meter {
    /// Sum over the site's meters (+ import), read at `ts_ms` (the oldest); it
    /// may show the power of up to `report_lag_ms` before that.
    Fresh {
        grid_w: f64,
        ts_ms: i64,
        report_lag_ms: i64,
    },
    /// Offline or stale: why.
    Lost(String),
}

/// What the loop reads this tick.
#[derive(Clone, Debug, PartialEq)]
pub struct Sensed {
    pub now_ms: i64,
    pub meter: Meter,
    /// Measured power of the commanded batteries that are online, W, + discharge.
    pub battery_w: f64,
    /// The oldest reading among the meter and the online commanded devices.
    pub readings_from_ms: i64,
    /// The latest reading of each commanded device (batteries, then
    /// inverters): when it was taken and its power, W (+ discharge and
    /// production); `None` while it is offline.
    pub readings: Vec<Option<(i64, f64)>>,
    /// Site totals of what the batteries may do now (SoC bounds applied).
    pub charge_cap_w: f64,
    pub discharge_cap_w: f64,
}

/// Fixed settings of a site's loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoopSettings {
    pub export_order: ExportOrder,
    pub curtailment: CurtailmentFulfilment,
    /// Largest relaxing move per second: storage (W/s) and production (W/s).
    pub storage_ramp_w_per_s: f64,
    pub production_ramp_w_per_s: f64,
    /// The longest the load estimate stays frozen while the site keeps
    /// changing (a device that stopped answering must not freeze it).
    pub settle_ms: i64,
}

/// What the loop remembers between ticks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopState {
    pub export_held: bool,
    pub import_held: bool,
    /// The last trusted load estimate.
    pub load: Option<Load>,
    /// When the site-level outputs last changed.
    pub changed_at_ms: i64,
    /// When `load` was estimated.
    pub estimated_at_ms: i64,
    /// Which commanded devices (batteries, then inverters) `load` counted in
    /// the supply, i.e. had a reading; the output of the others is in it.
    pub counted: Vec<bool>,
    /// The storage power the loop set last tick (it overrode the plan).
    pub storage_w: Option<f64>,
    /// What the released storage did on its own before the loop took it over.
    pub auto_w: Option<f64>,
    /// Since when the storage target and the production cap stand.
    pub storage_since_ms: i64,
    pub cap_since_ms: i64,
    /// Charging beyond what the export needs, held while the production sits
    /// at its cap so that it can show what it could give (storage first).
    pub headroom_w: f64,
    /// The site-level outputs of last tick (`None` = released), for change detection.
    pub last_storage: Option<Option<f64>>,
    pub last_production: Option<Option<f64>>,
    /// The devices' readings by the time they were taken, for the load estimate.
    pub supply: History,
    /// When the loop last moved an output away from a held limit with the
    /// ramp keeping it short of where it goes (and nothing else changed
    /// since): the next move away continues the ramp from there.
    pub relaxed_at_ms: Option<i64>,
    pub at_ms: i64,
}

/// What the loop is doing, for the steering state and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoopMode {
    /// No meter, or the loop is turned off: limits clamp only what the agent commands.
    #[default]
    Off,
    /// Within the limits: the plan passes (with the production capped in advance).
    Free,
    HoldingExport,
    HoldingImport,
    /// The meter is offline or stale: the safe state.
    MeterLost,
}

impl LoopMode {
    pub const fn wire_name(self) -> &'static str {
        match self {
            LoopMode::Off => "off",
            LoopMode::Free => "free",
            LoopMode::HoldingExport => "holdingExport",
            LoopMode::HoldingImport => "holdingImport",
            LoopMode::MeterLost => "meterLost",
        }
    }
}

/// Which side of the site a loop change touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Storage,
    Production,
}

/// One change the loop made to the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub side: Side,
    /// The plan's value, W (`None`: released).
    pub requested_w: Option<f64>,
    /// What the site gets, W (`None`: released).
    pub applied_w: Option<f64>,
    pub reason: String,
}

/// The loop's answer for one tick.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub storage: StoragePlan,
    pub production: ProductionPlan,
    pub mode: LoopMode,
    pub changes: Vec<Change>,
    pub state: LoopState,
}
