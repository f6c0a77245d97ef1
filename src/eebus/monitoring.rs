//! What the node publishes for the control box to read and subscribe to:
//!
//! - MGCP (Monitoring of the Grid Connection Point), on the node's third
//!   entity: what the site's grid meters read. Scenarios 2 to 7: the
//!   momentary power (load convention, import positive, as the meters
//!   speak), the energy drawn and fed in, the current and voltage per
//!   phase, and the frequency.
//! - MPC (Monitoring of Power Consumption), on the fourth: what the site's
//!   controllable consumers draw, the batteries (the only ones sitegate
//!   steers). Scenarios 1 and 2: their summed power in the load convention
//!   (charging positive, so the sign of the devices' `activePower` turned),
//!   and the energy they charged (consumed) and discharged (produced).
//!
//! Several devices on one site are summed (power, energies, currents); the
//! voltage and the frequency are the first meter's that has them. A reading
//! older than the control loop's staleness bound
//! (`steering::inputs::stale_after_ms`), or from a meter offline, is
//! published as an error (MPC/MGCP-003), never as a number it no longer is.
//! The power is the one the grid loop holds (`steering::inputs::meter`).
//!
//! Reads the live view and fills the crate's `MonitoredUnit`; sends nothing
//! itself (the hub loop notifies).

use eebus::model::{ElectricalConnectionPhaseName as Phase, MeasurementValueState};
use eebus::usecases::monitoring::{Measurand, MonitoredUnit, Quantity};
use eebus::usecases::{mgcp, mpc};

use crate::model::{DeviceId, Property};
use crate::steering::hold::Meter;
use crate::steering::inputs::{meter, stale_after_ms};
use crate::telemetry::Live;

/// The scenarios the node plays (MGCP Table 1; 1, the PV curtailment
/// factor, is a configured value sitegate does not hold).
pub const SCENARIOS: &[u32] = &[2, 3, 4, 5, 6, 7];

/// Each measurand and the meter property it comes from, and whether the
/// site's meters are summed for it. The first three (the power and the two
/// energies) are MPC's too.
static POINTS: [(Measurand, Property, bool); 10] = [
    (Measurand::total_power(), Property::ActivePower, true),
    (
        Measurand::total(Quantity::EnergyConsumed),
        Property::TotalEnergyConsumed,
        true,
    ),
    (
        Measurand::total(Quantity::EnergyProduced),
        Property::TotalEnergyProduced,
        true,
    ),
    (
        Measurand::on(Quantity::Current, Phase::A),
        Property::CurrentL1,
        true,
    ),
    (
        Measurand::on(Quantity::Current, Phase::B),
        Property::CurrentL2,
        true,
    ),
    (
        Measurand::on(Quantity::Current, Phase::C),
        Property::CurrentL3,
        true,
    ),
    (
        Measurand::on(Quantity::Voltage, Phase::A),
        Property::VoltageL1,
        false,
    ),
    (
        Measurand::on(Quantity::Voltage, Phase::B),
        Property::VoltageL2,
        false,
    ),
    (
        Measurand::on(Quantity::Voltage, Phase::C),
        Property::VoltageL3,
        false,
    ),
    (
        Measurand::total(Quantity::Frequency),
        Property::Frequency,
        false,
    ),
];

/// MPC's scenarios: the power and the energies.
pub const CONSUMER_SCENARIOS: &[u32] = &[1, 2];

/// Which unit: the grid connection point (MGCP) or the controllable
/// consumers (MPC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Monitored {
    GridConnectionPoint,
    Consumers,
}

impl Monitored {
    fn points(self) -> &'static [(Measurand, Property, bool)] {
        match self {
            Monitored::GridConnectionPoint => &POINTS,
            // MPC's measurands over the batteries: the power and the two
            // energies, summed, as the first three of MGCP's.
            Monitored::Consumers => &POINTS[..3],
        }
    }

    /// The unit, with every measurand it publishes.
    pub fn unit(self) -> MonitoredUnit {
        let naming = match self {
            Monitored::GridConnectionPoint => mgcp::NAMING,
            Monitored::Consumers => mpc::NAMING,
        };
        self.points()
            .iter()
            .fold(MonitoredUnit::new(1).naming(naming), |u, (m, _, _)| {
                u.with(m.clone())
            })
    }
}

/// What one point reads now over `meters`: `None` when no meter has it,
/// `Some(None)` when a meter that had it is offline or stale.
fn point(
    live: &Live,
    meters: &[DeviceId],
    p: Property,
    summed: bool,
    now_ms: i64,
) -> Option<Option<f64>> {
    let mut sum: Option<Option<f64>> = None;
    for id in meters {
        let max_age = stale_after_ms(&live.config(*id));
        // As the control loop reads its meter: one failed poll does not
        // lose a reading, one older than its bound is lost.
        let read = live.inspect(*id, |s| {
            s.reading(p)
                .filter(|r| r.value.is_finite())
                .map(|r| (now_ms - r.ts_ms <= max_age).then_some(r.value))
        });
        let Some(value) = read else { continue };
        if !summed {
            return Some(value);
        }
        sum = Some(match (sum.flatten(), value) {
            (_, None) => return Some(None),
            (acc, Some(v)) => Some(acc.unwrap_or(0.0) + v),
        });
    }
    sum
}

/// The momentary power exactly as the grid loop reads it
/// (`steering::inputs::meter`): what the box sees is what the loop holds.
fn power(live: &Live, meters: &[DeviceId], now_ms: i64) -> Option<Option<f64>> {
    meter(live, meters, now_ms).map(|m| match m {
        Meter::Fresh { grid_w, .. } => Some(grid_w),
        Meter::Lost(_) => None,
    })
}

/// Sets what `devices` read now on `unit`: the site's meters for the grid
/// connection point, its batteries for the consumers.
pub fn update(
    what: Monitored,
    unit: &mut MonitoredUnit,
    live: &Live,
    devices: &[DeviceId],
    now_ms: i64,
) {
    for (m, p, summed) in what.points() {
        let read = match (what, p) {
            (Monitored::GridConnectionPoint, Property::ActivePower) => power(live, devices, now_ms),
            // The batteries speak + discharging; the load convention
            // counts what they draw.
            (Monitored::Consumers, Property::ActivePower) => {
                point(live, devices, *p, true, now_ms).map(|v| v.map(|w| 0.0 - w))
            }
            _ => point(live, devices, *p, *summed, now_ms),
        };
        match read {
            Some(Some(v)) => unit.set(m, v),
            Some(None) => unit.set_state(m, MeasurementValueState::Error),
            None => {}
        }
    }
}
