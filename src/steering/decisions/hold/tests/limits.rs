//! The grid loop's limits held over the plant model, scenario by scenario:
//! the export and import limits, a consumption limit, a partner's limits
//! tightened, a temporary limit, the meter lost, the release once a limit
//! no longer binds, and a steady site left alone.

use super::*;

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

/// A site whose inverters (50 kW) and batteries (30 kW) together cannot pass
/// its limits even with no load is left as it is without a meter: the safe
/// state holds by itself. Before, a released storage was set to idle and the
/// inverters capped at maxExport, at every start before the meter's first
/// reading as well.
#[test]
fn meter_lost_leaves_alone_what_cannot_break_a_limit() {
    let mut r = rules(ExportOrder::StorageFirst);
    r.max_export_w = Some(100_000.0);
    let mut plant = Plant::noon(2_000.0, 50.0);
    plant.meter_online = false;
    let mut run = Run::new(plant);
    run.ticks(&r, &Active::default(), 2);
    let d = run.decision();
    assert_eq!(d.grid.mode, LoopMode::MeterLost);
    assert_eq!(d.batteries, [Command::EssRelease; 2]);
    assert_eq!(d.inverters, [Command::ProductionRelease; 2]);
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    // A discharge asked goes ahead where the export limit has room beside
    // every inverter at its rating (100 - 50 kW)...
    let ask = |kw: f64| Active {
        ess: entry(EssSetting::Power(PowerValue::watts(kw * 1000.0))),
        ..Active::default()
    };
    run.ticks(&r, &ask(15.0), 2);
    let total = |d: &crate::steering::decide::Decision| -> f64 {
        d.batteries
            .iter()
            .map(|c| match c {
                Command::EssPower(w) => *w,
                other => panic!("{other:?}"),
            })
            .sum()
    };
    assert_eq!(total(run.decision()), 15_000.0);
    // ... and only that far.
    r.max_export_w = Some(60_000.0);
    run.ticks(&r, &ask(15.0), 2);
    let d = run.decision();
    assert_eq!(total(d), 10_000.0);
    assert!(d.notes.iter().all(|n| n.reason.contains("grid meter lost")));
    // A released storage that could charge past maxImport (30 kW against
    // 20 kW) is set to idle; a charge asked beyond it is held to it.
    r.max_import_w = Some(20_000.0);
    run.ticks(&r, &Active::default(), 2);
    assert_eq!(total(run.decision()), 0.0);
    run.ticks(&r, &ask(-25.0), 2);
    assert_eq!(total(run.decision()), -20_000.0);
}

/// An inverter that does not answer counts at its rating without a meter:
/// it may still produce. 40 kW of export allowed, 30 kW of inverters (one
/// of 10 kW silent): the discharge asked (15 kW) gets the 10 kW left, not
/// the 20 kW the answering inverter alone would leave.
#[test]
fn meter_lost_counts_a_silent_inverter_at_its_rating() {
    use crate::steering::limits::{Direction, GridLimits, Limit, LimitSource};
    let export = Limit {
        w: 40_000.0,
        direction: Direction::Export,
        source: LimitSource::Config,
    };
    let limits = GridLimits {
        import: None,
        export: Some(export),
    };
    let plan = SitePlan {
        storage: StoragePlan::Power(15_000.0),
        production: ProductionPlan::Release,
        import_order: ImportOrder::LiftCurtailmentFirst,
    };
    let inverter = |measured_w: Option<f64>| InverterView {
        rated_w: if measured_w.is_some() {
            20_000.0
        } else {
            10_000.0
        },
        measured_w,
        priority: 0,
        limit_w: None,
    };
    let inverters = [inverter(Some(5_000.0)), inverter(None)];
    let sensed = Sensed {
        now_ms: 1_000_000,
        meter: Meter::Lost("meter dvc_grid offline".into()),
        battery_w: 0.0,
        readings_from_ms: 999_000,
        // One battery, then the two inverters.
        readings: vec![Some((999_000, 0.0)), Some((999_000, 5_000.0)), None],
        charge_cap_w: 30_000.0,
        discharge_cap_w: 30_000.0,
    };
    let held = meter_lost(
        CurtailmentFulfilment::Dynamic,
        &limits,
        &plan,
        &inverters,
        &sensed,
        &LoopState::default(),
    );
    assert_eq!(held.storage, StoragePlan::Power(10_000.0));
    // 30 kW of inverters cannot pass 40 kW: they are not capped.
    assert_eq!(held.production, ProductionPlan::Release);
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
