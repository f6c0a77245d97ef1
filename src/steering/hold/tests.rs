//! The grid loop against a small plant model: devices that follow their
//! commands at once, a load, and the sun. The loop is run tick by tick through
//! `decide`, exactly as the control loop runs it.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::config::{CurtailmentFulfilment, EssFallback, EssFulfilment, ExportOrder};
use crate::model::PowerValue;
use crate::steering::alloc::BatteryView;
use crate::steering::decide::{decide, Command, Measurements, Site, SiteRules};
use crate::steering::signal::Active;
use crate::steering::timeline::Entry;
use crate::steering::value::{Component, CurtailmentValue, EssSetting};

const TICK: i64 = 1000;

/// A site: inverters with what the sun offers each, batteries with an own
/// (auto) behaviour, and a load.
#[derive(Clone, Debug)]
struct Plant {
    load_w: f64,
    inverter_rated: Vec<f64>,
    sun_w: Vec<f64>,
    battery_rated: Vec<f64>,
    soc: Vec<f64>,
    /// What each battery does on its own while released (+ discharge).
    auto_w: Vec<f64>,
    // State the devices are in.
    limits: Vec<Option<f64>>,
    storage: Vec<Option<f64>>,
    meter_online: bool,
}

impl Plant {
    fn noon(load_w: f64, soc: f64) -> Plant {
        Plant {
            load_w,
            inverter_rated: vec![30_000.0, 20_000.0],
            sun_w: vec![28_200.0, 18_800.0],
            battery_rated: vec![20_000.0, 10_000.0],
            soc: vec![soc, soc],
            auto_w: vec![0.0, 0.0],
            limits: vec![None, None],
            storage: vec![None, None],
            meter_online: true,
        }
    }

    fn pv(&self) -> Vec<f64> {
        self.sun_w
            .iter()
            .zip(&self.limits)
            .map(|(s, l)| l.map_or(*s, |l| s.min(l)))
            .collect()
    }

    fn battery(&self) -> Vec<f64> {
        self.storage
            .iter()
            .zip(&self.auto_w)
            .zip(&self.soc)
            .map(|((c, a), soc)| {
                let p = c.unwrap_or(*a);
                // A full battery cannot charge, an empty one cannot discharge.
                if (p < 0.0 && *soc >= 95.0) || (p > 0.0 && *soc <= 5.0) {
                    0.0
                } else {
                    p
                }
            })
            .collect()
    }

    /// + import.
    fn grid(&self) -> f64 {
        self.load_w - self.pv().iter().sum::<f64>() - self.battery().iter().sum::<f64>()
    }

    fn views(&self) -> (Vec<BatteryView>, Vec<InverterView>) {
        let b = self
            .battery_rated
            .iter()
            .zip(&self.soc)
            .map(|(r, soc)| BatteryView {
                rated_w: *r,
                max_charge_w: *r,
                max_discharge_w: *r,
                soc: Some(*soc),
                soc_min: 5.0,
                soc_max: 95.0,
                capacity_wh: Some(2.0 * r),
                priority: 0,
            })
            .collect();
        let pv = self.pv();
        let i = self
            .inverter_rated
            .iter()
            .zip(&pv)
            .zip(&self.limits)
            .map(|((r, p), l)| InverterView {
                rated_w: *r,
                measured_w: Some(*p),
                priority: 0,
                limit_w: *l,
            })
            .collect();
        (b, i)
    }

    fn measurements(&self, now: i64) -> Measurements {
        let bat: f64 = self.battery().iter().sum();
        Measurements {
            meter: Some(if self.meter_online {
                Meter::Fresh {
                    grid_w: self.grid(),
                    ts_ms: now - 1,
                    report_lag_ms: 0,
                }
            } else {
                Meter::Lost("meter dvc_grid offline".into())
            }),
            battery_w: Some(bat),
            production_w: Some(self.pv().iter().sum()),
            online_battery_w: bat,
            readings_from_ms: now - 1,
            readings: self
                .battery()
                .into_iter()
                .chain(self.pv())
                .map(|w| Some((now - 1, w)))
                .collect(),
            ..Measurements::default()
        }
    }

    fn apply(&mut self, d: &crate::steering::decide::Decision) {
        for (slot, c) in d.batteries.iter().enumerate() {
            self.storage[slot] = match c {
                Command::EssPower(w) => Some(*w),
                _ => None,
            };
        }
        for (slot, c) in d.inverters.iter().enumerate() {
            self.limits[slot] = match c {
                Command::ProductionLimit(w) => Some(*w),
                _ => None,
            };
        }
    }
}

fn rules(order: ExportOrder) -> SiteRules {
    SiteRules {
        ess: EssFulfilment::Proportional,
        curtailment: CurtailmentFulfilment::Proportional,
        ess_fallback: EssFallback::Auto,
        max_import_w: Some(60_000.0),
        max_export_w: Some(40_000.0),
        rated_production_w: 50_000.0,
        grid_loop: Some(LoopSettings {
            export_order: order,
            curtailment: CurtailmentFulfilment::Proportional,
            storage_ramp_w_per_s: 7_500.0,
            production_ramp_w_per_s: 12_500.0,
            settle_ms: 3000,
        }),
    }
}

/// Runs `ticks` control intervals; returns the grid after each and the last decision.
struct Run {
    plant: Plant,
    /// What the grid operators' servers set (CSIP-AUS, EEBus).
    sources: crate::steering::sources::OperatorSet,
    state: LoopState,
    now: i64,
    last: Option<crate::steering::decide::Decision>,
}

impl Run {
    fn new(plant: Plant) -> Run {
        Run {
            plant,
            sources: Default::default(),
            state: LoopState::default(),
            now: 1_000_000,
            last: None,
        }
    }

    fn ticks(&mut self, r: &SiteRules, a: &Active, n: usize) -> Vec<f64> {
        let mut grid = Vec::new();
        for _ in 0..n {
            self.now += TICK;
            let (b, i) = self.plant.views();
            let mut m = self.plant.measurements(self.now);
            m.sources = self.sources.clone();
            let site = Site {
                rules: r,
                batteries: &b,
                inverters: &i,
                measurements: &m,
            };
            let d = decide(&site, a, &BTreeSet::new(), &self.state, self.now);
            self.state = d.loop_state.clone();
            self.plant.apply(&d);
            grid.push(self.plant.grid());
            if std::env::var("HOLD_TRACE").is_ok() {
                eprintln!(
                    "grid {:.0} pv {:?} bat {:?} | {:?} {:?} {:?} load {:?} head {:.0}",
                    self.plant.grid(),
                    self.plant.pv(),
                    self.plant.battery(),
                    d.grid.mode,
                    d.batteries,
                    d.inverters,
                    d.loop_state.load,
                    d.loop_state.headroom_w
                );
            }
            self.last = Some(d);
        }
        grid
    }

    fn decision(&self) -> &crate::steering::decide::Decision {
        self.last.as_ref().expect("ran at least one tick")
    }
}

fn entry<T>(value: T) -> Option<Entry<T>> {
    Some(Entry {
        from: 0,
        until: i64::MAX,
        value,
        request_id: "req_t".into(),
    })
}

fn within(grid: f64, lo: f64, hi: f64) -> bool {
    (lo..=hi).contains(&grid)
}

#[test]
fn noon_with_full_batteries_curtails_to_max_export() {
    let mut run = Run::new(Plant::noon(2_000.0, 95.0));
    let g = run.ticks(&rules(ExportOrder::StorageFirst), &Active::default(), 6);
    // Open loop it would export 45 kW; the loop holds 40 kW ± 800 W from tick 1 on.
    assert!(g.iter().all(|g| within(-*g, 39_200.0, 40_000.0)), "{g:?}");
    let d = run.decision();
    assert_eq!(d.grid.mode, LoopMode::HoldingExport);
    assert_eq!(d.production_by, Some(Component::GridLimit));
    assert!(matches!(d.inverters[0], Command::ProductionLimit(_)));
    // Storage stays released: it cannot take anything.
    assert_eq!(d.batteries, [Command::EssRelease; 2]);
    assert!(d
        .notes
        .iter()
        .any(|n| n.reason.starts_with("maxExport 40000 W (config)") && n.devices == vec![2, 3]));
}

/// The production the inverters give now, W.
fn produced(run: &Run) -> f64 {
    run.plant.pv().iter().sum()
}

/// The site cap the inverters were given, W (`None`: released).
fn capped(d: &crate::steering::decide::Decision) -> Option<f64> {
    d.inverters
        .iter()
        .map(|c| match c {
            Command::ProductionLimit(w) => Some(*w),
            _ => None,
        })
        .sum()
}

#[test]
fn storage_first_charges_instead_of_curtailing() {
    let mut run = Run::new(Plant::noon(2_000.0, 50.0));
    let g = run.ticks(&rules(ExportOrder::StorageFirst), &Active::default(), 6);
    // Never over the limit; the storage takes what the export cannot, plus a
    // little headroom while the production shows what it can give.
    assert!(g.iter().all(|g| -*g <= 40_000.0), "{g:?}");
    assert!(within(-g[5], 36_000.0, 39_600.0), "{g:?}");
    let d = run.decision();
    assert_eq!(produced(&run), 47_000.0, "all the sun is used");
    let cap = capped(d).expect("a cap held in advance");
    assert!(cap > 47_000.0, "{cap}");
    let charge: f64 = run.plant.battery().iter().sum();
    assert!((-8_500.0..-5_000.0).contains(&charge), "{charge}");
    assert_eq!(d.storage_by, Some(Component::GridLimit));
}

#[test]
fn curtail_first_leaves_the_storage_alone() {
    let mut run = Run::new(Plant::noon(2_000.0, 50.0));
    let g = run.ticks(&rules(ExportOrder::CurtailFirst), &Active::default(), 4);
    assert!(g.iter().all(|g| within(-*g, 39_200.0, 40_000.0)), "{g:?}");
    assert_eq!(run.decision().batteries, [Command::EssRelease; 2]);
}

#[test]
fn a_load_step_over_max_import_is_shaved_by_the_storage() {
    let mut plant = Plant::noon(20_000.0, 50.0);
    plant.sun_w = vec![0.0, 0.0];
    let mut run = Run::new(plant);
    let r = rules(ExportOrder::StorageFirst);
    let before = run.ticks(&r, &Active::default(), 2);
    assert_eq!(before, [20_000.0, 20_000.0]);
    assert_eq!(run.decision().grid.mode, LoopMode::Free);
    run.plant.load_w = 80_000.0;
    let g = run.ticks(&r, &Active::default(), 4);
    // (The model's devices follow at once; the meter reads after the tick.)
    assert!(g.iter().all(|g| within(*g, 58_800.0, 60_000.0)), "{g:?}");
    assert_eq!(run.decision().grid.mode, LoopMode::HoldingImport);
    // The load drops again: released within one tick.
    run.plant.load_w = 20_000.0;
    run.ticks(&r, &Active::default(), 1);
    assert_eq!(run.decision().batteries, [Command::EssRelease; 2]);
    assert_eq!(run.decision().grid.mode, LoopMode::Free);
}

#[test]
fn a_consumption_limit_is_held_over_the_batteries_through_a_load_step() {
    use crate::steering::limits::LimitSource;
    use crate::steering::sources::{Kind, OperatorSet, SourceLimit};
    let mut plant = Plant::noon(2_000.0, 50.0);
    plant.sun_w = vec![0.0, 0.0];
    let mut run = Run::new(plant);
    // §14a: the batteries may draw 4.2 kW beside the household.
    run.sources = OperatorSet {
        limits: vec![SourceLimit {
            source: LimitSource::Eebus,
            kind: Kind::Consumption,
            value: 4_200.0,
            until_ms: None,
            failsafe: false,
            since_ms: 0,
            reference: Some("lpc: limited".into()),
        }],
    };
    let charge = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(-30_000.0))),
        ..Active::default()
    };
    let r = rules(ExportOrder::StorageFirst);
    let g = run.ticks(&r, &charge, 4);
    assert!(g[1..].iter().all(|g| within(*g, 5_700.0, 6_200.0)), "{g:?}");
    assert_eq!(
        run.decision().grid.limits.import.map(|l| l.source),
        Some(LimitSource::Eebus)
    );
    // The household steps to 9 kW: it is not dimmed, the batteries keep 4.2 kW.
    run.plant.load_w = 9_000.0;
    let g = run.ticks(&r, &charge, 4);
    assert!(g.iter().all(|g| *g <= 13_200.0), "never over: {g:?}");
    assert!(
        g[1..].iter().all(|g| within(*g, 12_700.0, 13_200.0)),
        "{g:?}"
    );
    // Discharge stays free under a consumption limit.
    let discharge = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(10_000.0))),
        ..Active::default()
    };
    let g = run.ticks(&r, &discharge, 3);
    assert!(within(*g.last().unwrap(), -1_000.0, -1_000.0), "{g:?}");
}

#[test]
fn a_partner_curtailment_looser_than_the_limit_is_tightened() {
    let a = Active {
        curtailment: entry(CurtailmentValue::Power(PowerValue::watts(45_000.0))),
        ..Active::default()
    };
    let mut run = Run::new(Plant::noon(0.0, 95.0));
    let g = run.ticks(&rules(ExportOrder::StorageFirst), &a, 4);
    assert!(g.iter().all(|g| within(-*g, 39_200.0, 40_000.0)), "{g:?}");
    let d = run.decision();
    assert_eq!(d.production_by, Some(Component::GridLimit));
    let note = d
        .notes
        .iter()
        .find(|n| n.component == Component::Curtailment)
        .unwrap();
    assert_eq!(note.requested_w, Some(45_000.0));
    // A tighter partner limit is kept as it is.
    let a = Active {
        curtailment: entry(CurtailmentValue::Power(PowerValue::watts(20_000.0))),
        ..Active::default()
    };
    run.ticks(&rules(ExportOrder::StorageFirst), &a, 3);
    assert_eq!(run.decision().production_by, Some(Component::Curtailment));
    assert_eq!(
        run.decision().inverters,
        [
            Command::ProductionLimit(12_000.0),
            Command::ProductionLimit(8_000.0)
        ]
    );
}

#[test]
fn a_partner_discharge_is_cut_before_production() {
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(20_000.0))),
        ..Active::default()
    };
    let mut run = Run::new(Plant::noon(2_000.0, 50.0));
    let g = run.ticks(&rules(ExportOrder::StorageFirst), &a, 6);
    assert!(g.iter().all(|g| -*g <= 40_000.0), "{g:?}");
    assert_eq!(produced(&run), 47_000.0, "all the sun is used");
    let d = run.decision();
    let n = d
        .notes
        .iter()
        .find(|n| n.component == Component::Ess)
        .unwrap();
    assert_eq!(n.requested_w, Some(20_000.0));
    assert!(n.applied_w.unwrap() < -5_000.0, "{n:?}");
}

#[test]
fn maximize_grid_import_holds_max_import() {
    let a = Active {
        maximize_grid_import: entry(true),
        ..Active::default()
    };
    let mut plant = Plant::noon(40_000.0, 50.0);
    plant.sun_w = vec![10_000.0, 5_000.0];
    let mut run = Run::new(plant);
    let g = run.ticks(&rules(ExportOrder::StorageFirst), &a, 5);
    // Charging 30 kW plus 40 kW of load would import 70 kW: held at 60.
    assert!(
        g[1..].iter().all(|g| within(*g, 58_800.0, 60_000.0)),
        "{g:?}"
    );
    let d = run.decision();
    assert_eq!(d.inverters, [Command::ProductionLimit(0.0); 2]);
    // Holding maxImport is part of maximize grid import: its devices stay its own.
    assert_eq!(d.storage_by, Some(Component::MaximizeGridImport));
    assert!(!d.notes.is_empty());
    // A small load: the storage charges all it can, the import stays below.
    run.plant.load_w = 5_000.0;
    let g = run.ticks(&rules(ExportOrder::StorageFirst), &a, 3);
    assert_eq!(g.last().copied(), Some(35_000.0));
}

#[test]
fn a_temporary_grid_limit_tightens_the_export() {
    let a = Active {
        grid_limit: entry(crate::steering::value::GridLimit {
            max_import: None,
            max_export: Some(PowerValue::watts(0.0)),
        }),
        ..Active::default()
    };
    let mut run = Run::new(Plant::noon(2_000.0, 95.0));
    let g = run.ticks(&rules(ExportOrder::StorageFirst), &a, 4);
    // Zero export: the site imports up to 500 W.
    assert!(g.iter().all(|g| within(*g, 0.0, 500.0)), "{g:?}");
    let l = run.decision().grid.limits.export.unwrap();
    assert_eq!(
        (l.w, l.source),
        (0.0, crate::steering::limits::LimitSource::GridLimit)
    );
}

#[test]
fn meter_lost_is_a_safe_state() {
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(15_000.0))),
        ..Active::default()
    };
    let mut plant = Plant::noon(2_000.0, 50.0);
    plant.meter_online = false;
    let mut run = Run::new(plant);
    run.ticks(&rules(ExportOrder::StorageFirst), &a, 1);
    let d = run.decision();
    assert_eq!(d.grid.mode, LoopMode::MeterLost);
    // No discharge; the storage takes what the production, at 47 kW, gives
    // beyond maxExport until the inverters are down.
    let charge: f64 = run.plant.battery().iter().sum();
    assert_eq!(charge, -7_000.0);
    run.ticks(&rules(ExportOrder::StorageFirst), &a, 1);
    let d = run.decision();
    // Then no discharge; production at most maxExport in total.
    assert_eq!(d.batteries, [Command::EssPower(0.0); 2]);
    assert_eq!(
        d.inverters,
        [
            Command::ProductionLimit(24_000.0),
            Command::ProductionLimit(16_000.0)
        ]
    );
    assert!(d.notes.iter().all(|n| n.reason.contains("grid meter lost")));
    // The meter comes back: the loop resumes and the discharge is allowed again
    // as far as the export limit lets it.
    run.plant.meter_online = true;
    let g = run.ticks(&rules(ExportOrder::StorageFirst), &a, 4);
    assert_ne!(run.decision().grid.mode, LoopMode::MeterLost);
    assert!(g.iter().all(|g| within(-*g, 36_000.0, 40_000.0)), "{g:?}");
}

#[test]
fn released_within_one_interval_once_not_binding() {
    let mut run = Run::new(Plant::noon(2_000.0, 95.0));
    let r = rules(ExportOrder::StorageFirst);
    run.ticks(&r, &Active::default(), 3);
    assert_eq!(run.decision().grid.mode, LoopMode::HoldingExport);
    // A load of 25 kW comes on: the export would be 22 kW without any limit.
    run.plant.load_w = 27_000.0;
    run.ticks(&r, &Active::default(), 1);
    assert_eq!(run.decision().inverters, [Command::ProductionRelease; 2]);
    assert_eq!(run.decision().grid.mode, LoopMode::Free);
}

#[test]
fn a_steady_site_is_not_rewritten() {
    let mut run = Run::new(Plant::noon(2_000.0, 95.0));
    let r = rules(ExportOrder::StorageFirst);
    run.ticks(&r, &Active::default(), 3);
    let before = run.decision().inverters.clone();
    // Load wobbles by 100 W: inside the deadband, the limits stay.
    for w in [2_100.0, 1_900.0, 2_050.0] {
        run.plant.load_w = w;
        run.ticks(&r, &Active::default(), 1);
        assert_eq!(run.decision().inverters, before);
    }
}

/// A narrow band (zero export, 2.9 kW import) with the batteries at their floor
/// charging on their own: holding the import takes the storage over, which
/// turns the import into an export; the export hold then curtails, and the
/// import hold must not lift that curtailment again.
#[test]
fn an_import_hold_never_lifts_a_curtailment_the_export_limit_needs() {
    for order in [ExportOrder::CurtailFirst, ExportOrder::StorageFirst] {
        let mut p = Plant::noon(30_700.0, 5.0);
        p.sun_w = vec![27_150.0, 8_600.0];
        p.auto_w = vec![-6_370.0, -3_185.0];
        let mut r = rules(order);
        r.max_export_w = Some(0.0);
        r.max_import_w = Some(2_900.0);
        let mut run = Run::new(p);
        let g = run.ticks(&r, &Active::default(), 8);
        for (tick, g) in g.iter().enumerate().skip(2) {
            assert!(
                *g >= -1.0 && *g <= 2_900.0 + 1.0,
                "{order:?}, tick {tick}: grid {g} W outside [0 W export, 2.9 kW import]"
            );
        }
    }
}

fn arb_plant() -> impl Strategy<Value = (Plant, f64, f64)> {
    (
        0.0..90_000.0f64,
        0.0..1.0f64,
        0.0..1.0f64,
        5.0..95.0f64,
        0.0..60_000.0f64,
        0.0..80_000.0f64,
        -10_000.0..10_000.0f64,
    )
        .prop_map(|(load, sun_e, sun_w, soc, x, i, auto)| {
            let mut p = Plant::noon(load, soc);
            p.sun_w = vec![30_000.0 * sun_e, 20_000.0 * sun_w];
            p.auto_w = vec![auto * 2.0 / 3.0, auto / 3.0];
            (p, x, i)
        })
}

proptest! {
    /// Whatever the site does, after three ticks the grid is within both limits
    /// (plus the tolerance) whenever the devices could hold them: the export
    /// whenever charging and curtailing everything would, the import whenever
    /// discharging everything and all the sun would.
    #[test]
    fn the_limits_hold_when_the_devices_can((plant, x, i) in arb_plant(), storage_first in any::<bool>()) {
        let mut r = rules(if storage_first { ExportOrder::StorageFirst } else { ExportOrder::CurtailFirst });
        r.max_export_w = Some(x);
        r.max_import_w = Some(i);
        let mut run = Run::new(plant.clone());
        let g = run.ticks(&r, &Active::default(), 6);
        let (b, _) = plant.views();
        let charge: f64 = b.iter().map(BatteryView::charge_cap).sum();
        let discharge: f64 = b.iter().map(BatteryView::discharge_cap).sum();
        let sun: f64 = plant.sun_w.iter().sum();
        let can_export_hold = plant.load_w + charge + x >= 0.0;
        let can_import_hold = plant.load_w - discharge - sun <= i;
        // Both at once only when the band between them is wide enough.
        let both = x + i >= tolerance_w(x) + tolerance_w(i);
        for g in &g[3..] {
            if can_export_hold && both {
                prop_assert!(-g <= x + 1.0, "export {} over {x}: {g:?}", -g);
            }
            if can_import_hold && both {
                prop_assert!(*g <= i + 1.0, "import {g} over {i}");
            }
        }
        // No device beyond its limits.
        let d = run.decision();
        for (c, bv) in d.batteries.iter().zip(&b) {
            if let Command::EssPower(w) = c {
                prop_assert!(*w <= bv.discharge_cap() + 1e-6 && -w <= bv.charge_cap() + 1e-6);
            }
        }
        for (c, rated) in d.inverters.iter().zip(&plant.inverter_rated) {
            if let Command::ProductionLimit(w) = c {
                prop_assert!(*w >= 0.0 && *w <= rated + 1e-6);
            }
        }
    }
}

/// A battery whose own logic discharges into the export (not only for the
/// load), taken over and then handed back: the cap leaves room for the
/// discharge it had before, so the hand-back does not push the export past
/// the limit and start a cycle of take-over and hand-back.
#[test]
fn a_storage_handed_back_counts_its_own_discharge() {
    let mut p = Plant::noon(2_036.0, 66.8);
    p.sun_w = vec![0.0, 4_410.0];
    p.auto_w = vec![4_547.0, 2_273.0];
    let mut r = rules(ExportOrder::CurtailFirst);
    r.max_export_w = Some(5_194.0);
    r.max_import_w = Some(12_670.0);
    let mut run = Run::new(p);
    let g = run.ticks(&r, &Active::default(), 8);
    for (tick, g) in g.iter().enumerate() {
        assert!(-g <= 5_194.0 + 1.0, "tick {tick}: export {} W: {g:?}", -g);
    }
}

/// A storage taken over and handed back is let go only where the cap a
/// released storage leaves keeps the production that the cap for it held
/// does. Let go at once, the cap fell: for a storage that discharges on its
/// own, to the largest one whose worst fitted, a fifth of the sun (an
/// inverter's dynamic room above what it produces did not fit); for one that
/// charges on its own, by all of its charging (a released storage may stop).
/// The site then imported 2 kW over a zero import limit, 4.9 kW over 3.2 kW
/// and 0.7 kW over 4 kW, in a cycle of hand-back, cut and import hold.
#[test]
fn a_storage_handed_back_never_cuts_the_production_below_the_load() {
    // (load, sun, SoC, own discharge, max export, max import)
    let cases = [
        (
            11_916.18,
            [21_971.12, 3_208.75],
            62.9,
            983.55,
            15_153.39,
            0.0,
        ),
        (
            11_348.54,
            [21_247.85, 294.31],
            17.92,
            1_833.64,
            13_374.79,
            3_186.10,
        ),
        (
            12_327.35,
            [18_241.77, 6_146.03],
            33.99,
            -8_440.27,
            4_381.61,
            3_997.75,
        ),
    ];
    for (load, sun, soc, auto, x, i) in cases {
        let mut p = Plant::noon(load, soc);
        p.sun_w = sun.to_vec();
        p.auto_w = vec![auto * 2.0 / 3.0, auto / 3.0];
        let mut r = rules(ExportOrder::CurtailFirst);
        r.max_export_w = Some(x);
        r.max_import_w = Some(i);
        let mut run = Run::new(p);
        let g = run.ticks(&r, &Active::default(), 12);
        for (tick, g) in g.iter().enumerate().skip(3) {
            assert!(
                *g <= i + 1.0,
                "load {load}, tick {tick}: import {g} W over {i}"
            );
            assert!(
                -g <= x + 1.0,
                "load {load}, tick {tick}: export {} W over {x}",
                -g
            );
        }
    }
}

mod joining;
mod plant;
mod quiet;
mod spread;
mod transitions;
