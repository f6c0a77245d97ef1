//! A commanded device that joins the supply (read for the first time) or
//! leaves it (offline) while the load estimate is frozen after a change: the
//! estimate counted its output in the load, so it is made again from the
//! meter's reading instead of being held (`docs/steering.md`, "Transitions").

use super::*;
use crate::config::{CurtailmentFulfilment, ExportOrder};
use crate::steering::limits::{Direction, LimitSource};

/// A meter that reports up to 1.5 s late, devices polled every 200 ms and a
/// tick every 300 ms: the estimate stays frozen for 1.5 s after a change.
fn settings() -> LoopSettings {
    LoopSettings {
        export_order: ExportOrder::StorageFirst,
        curtailment: CurtailmentFulfilment::Proportional,
        storage_ramp_w_per_s: 40_000.0,
        production_ramp_w_per_s: 40_000.0,
        settle_ms: 2 * 200 + 1500 + 300,
    }
}

fn limit(w: f64, direction: Direction) -> Option<Limit> {
    Some(Limit {
        w,
        direction,
        source: LimitSource::Config,
    })
}

fn inverter(rated_w: f64, measured_w: Option<f64>) -> InverterView {
    InverterView {
        rated_w,
        measured_w,
        priority: 0,
        limit_w: None,
    }
}

/// What the loop reads at `now_ms`: the meter read 10 ms before (showing up
/// to 1.5 s before that), each device read 9 ms before.
fn sensed(now_ms: i64, grid_w: f64, powers: &[Option<f64>], battery_w: f64, cap: f64) -> Sensed {
    Sensed {
        now_ms,
        meter: Meter::Fresh {
            grid_w,
            ts_ms: now_ms - 10,
            report_lag_ms: 1500,
        },
        battery_w,
        readings_from_ms: now_ms - 10,
        readings: powers.iter().map(|p| p.map(|w| (now_ms - 9, w))).collect(),
        charge_cap_w: cap,
        discharge_cap_w: cap,
    }
}

const RELEASED: SitePlan = SitePlan {
    storage: StoragePlan::Release,
    production: ProductionPlan::Release,
    import_order: ImportOrder::LiftCurtailmentFirst,
};

/// The agent's first tick comes before one inverter's first reading: its
/// 194 kW are in that estimate's load. Maximize grid import starts 300 ms
/// later, with every device read: the import is held against the load
/// there is (600 W), not one that still holds the inverter's output.
#[test]
fn an_inverter_read_for_the_first_time_is_not_counted_twice() {
    let limits = GridLimits {
        import: limit(300_000.0, Direction::Import),
        export: limit(10_000_000.0, Direction::Export),
    };
    let (bat, pv, load) = (-194_100.0, 194_400.0, 600.0);
    let grid = load - 2.0 * pv - 2.0 * bat;
    let first = hold(
        &settings(),
        &limits,
        &RELEASED,
        &[inverter(200_000.0, None), inverter(200_000.0, Some(pv))],
        &sensed(
            10_000,
            grid,
            &[Some(bat), Some(bat), None, Some(pv)],
            2.0 * bat,
            400_000.0,
        ),
        &LoopState::default(),
    );
    let mgi = SitePlan {
        storage: StoragePlan::Power(-400_000.0),
        production: ProductionPlan::Limit(0.0),
        import_order: ImportOrder::ChargeLessFirst,
    };
    let read = [Some(bat), Some(bat), Some(pv), Some(pv)];
    let held = hold(
        &settings(),
        &limits,
        &mgi,
        &[inverter(200_000.0, Some(pv)), inverter(200_000.0, Some(pv))],
        &sensed(10_300, grid, &read, 2.0 * bat, 400_000.0),
        &first.state,
    );
    let storage = held.storage.power_w().expect("a storage power");
    assert_eq!(held.production, ProductionPlan::Limit(0.0));
    // With the production down at 0 and the storage at its command:
    let import = load - storage;
    assert!(
        import <= 300_000.0,
        "{import} W of import against 300 kW: storage {storage} W, {:?}",
        held.state.load
    );
    assert_eq!(held.mode, LoopMode::HoldingImport);
}

/// Two 100 kW inverters at full sun, 20 kW of load, a 50 kW export limit.
/// 300 ms after the first tick capped them, one goes offline still
/// producing 100 kW: its output is now in the load (−80 kW with it), so the
/// other is capped at nothing, not at the 69.5 kW a 20 kW load would allow.
#[test]
fn an_inverter_gone_offline_moves_its_output_into_the_load() {
    let limits = GridLimits {
        import: None,
        export: limit(50_000.0, Direction::Export),
    };
    let (pv, load) = (100_000.0, 20_000.0);
    let grid = load - 2.0 * pv;
    let first = hold(
        &settings(),
        &limits,
        &RELEASED,
        &[inverter(pv, Some(pv)), inverter(pv, Some(pv))],
        &sensed(10_000, grid, &[Some(pv), Some(pv)], 0.0, 0.0),
        &LoopState::default(),
    );
    assert!(matches!(first.production, ProductionPlan::Cap(c) if c < 70_000.0));
    let held = hold(
        &settings(),
        &limits,
        &RELEASED,
        &[inverter(pv, Some(pv)), inverter(pv, None)],
        &sensed(10_300, grid, &[Some(pv), None], 0.0, 0.0),
        &first.state,
    );
    let cap = held.production.limit_w().expect("a production cap");
    assert!(
        cap <= 1.0,
        "the online inverter capped at {cap} W: {:?}",
        held.state.load
    );
}
