use super::*;
use crate::model::PowerValue;
use crate::steering::hold::{LoopState, Meter};
use crate::steering::timeline::Entry;
use crate::steering::value::CurtailmentValue;

fn rules() -> SiteRules {
    SiteRules {
        ess: EssFulfilment::Proportional,
        curtailment: CurtailmentFulfilment::Proportional,
        ess_fallback: EssFallback::Auto,
        max_import_w: Some(100_000.0),
        max_export_w: Some(50_000.0),
        rated_production_w: 400_000.0,
        // These tests are of the open loop; the grid loop has its own.
        grid_loop: None,
    }
}

/// Measurements with a fresh meter.
fn measured(grid: Option<f64>, battery: Option<f64>, production: Option<f64>) -> Measurements {
    Measurements {
        meter: grid.map(|g| Meter::Fresh {
            grid_w: g,
            ts_ms: 0,
            report_lag_ms: 0,
        }),
        battery_w: battery,
        production_w: production,
        ..Measurements::default()
    }
}

fn bat(soc: f64) -> BatteryView {
    BatteryView {
        rated_w: 200_000.0,
        max_charge_w: 200_000.0,
        max_discharge_w: 200_000.0,
        soc: Some(soc),
        soc_min: 5.0,
        soc_max: 95.0,
        capacity_wh: Some(400_000.0),
        priority: 0,
    }
}

fn inv() -> InverterView {
    InverterView {
        rated_w: 200_000.0,
        measured_w: None,
        priority: 0,
        limit_w: None,
    }
}

fn entry<T>(value: T, id: &str) -> Option<Entry<T>> {
    Some(Entry {
        from: 0,
        until: 1000,
        value,
        request_id: id.to_string(),
    })
}

fn decide_with(
    r: &SiteRules,
    a: &Active,
    batteries: &[BatteryView],
    m: &Measurements,
    reached: &BTreeSet<String>,
) -> Decision {
    let site = Site {
        rules: r,
        batteries,
        inverters: &[inv(), inv()],
        measurements: m,
    };
    decide(&site, a, reached, &LoopState::default(), 0)
}

fn run(r: &SiteRules, a: &Active, m: Measurements) -> Decision {
    decide_with(r, a, &[bat(50.0), bat(50.0)], &m, &BTreeSet::new())
}

#[test]
fn fallback_releases_or_idles() {
    let d = run(&rules(), &Active::default(), Measurements::default());
    assert_eq!(d.batteries, [Command::EssRelease; 2]);
    assert_eq!(d.inverters, [Command::ProductionRelease; 2]);
    assert_eq!((d.storage_by, d.production_by), (None, None));
    let idle = SiteRules {
        ess_fallback: EssFallback::Idle,
        ..rules()
    };
    assert_eq!(
        run(&idle, &Active::default(), Measurements::default()).batteries,
        [Command::EssPower(0.0); 2]
    );
}

#[test]
fn worked_scenario_spreads_discharge_and_curtailment() {
    let r = SiteRules {
        max_export_w: None,
        ..rules()
    };
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(300_000.0)), "req_2"),
        curtailment: entry(
            CurtailmentValue::Power(PowerValue::watts(300_000.0)),
            "req_1",
        ),
        maximize_grid_import: entry(false, "req_1"),
        grid_limit: None,
    };
    let d = run(&r, &a, Measurements::default());
    assert_eq!(d.batteries, [Command::EssPower(150_000.0); 2]);
    assert_eq!(d.inverters, [Command::ProductionLimit(150_000.0); 2]);
    assert!(d.notes.is_empty());
    assert_eq!(d.storage_by, Some(Component::Ess));
}

#[test]
fn grid_limits_clamp_the_storage_and_say_so() {
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(300_000.0)), "r"),
        ..Active::default()
    };
    // No measurements: the storage alone may export 50 kW.
    let d = run(&rules(), &a, Measurements::default());
    assert_eq!(d.batteries, [Command::EssPower(25_000.0); 2]);
    assert_eq!(d.notes[0].applied_w, Some(50_000.0));
    // The site imports 30 kW without the storage: 80 kW of discharge stay within.
    let m = measured(Some(30_000.0), Some(0.0), None);
    assert_eq!(
        run(&rules(), &a, m.clone()).batteries,
        [Command::EssPower(40_000.0); 2]
    );
    // Charging: import limit 100 kW, site already imports 30 kW.
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(-300_000.0)), "r"),
        ..Active::default()
    };
    assert_eq!(
        run(&rules(), &a, m.clone()).batteries,
        [Command::EssPower(-35_000.0); 2]
    );
    // Idle never becomes action, even when the grid is over a limit.
    let a = Active {
        ess: entry(EssSetting::Idle, "r"),
        ..Active::default()
    };
    let over = measured(Some(150_000.0), Some(0.0), None);
    assert_eq!(
        run(&rules(), &a, over).batteries,
        [Command::EssPower(0.0); 2]
    );
}

#[test]
fn until_soc_turns_idle_when_reached() {
    let a = Active {
        ess: entry(
            EssSetting::UntilSoc {
                power: PowerValue::watts(20_000.0),
                until_soc: 50.0,
            },
            "req_u",
        ),
        ..Active::default()
    };
    let d = run(&rules(), &a, Measurements::default());
    assert_eq!(d.batteries, [Command::EssPower(0.0); 2]);
    assert_eq!(d.reached.as_deref(), Some("req_u"));
    let d = decide_with(
        &rules(),
        &a,
        &[bat(60.0), bat(60.0)],
        &Measurements::default(),
        &BTreeSet::new(),
    );
    assert_eq!(d.batteries, [Command::EssPower(10_000.0); 2]);
    // Once reached, it stays idle for the rest of its validity.
    let reached: BTreeSet<String> = ["req_u".to_string()].into();
    let d = decide_with(
        &rules(),
        &a,
        &[bat(60.0), bat(60.0)],
        &Measurements::default(),
        &reached,
    );
    assert_eq!(d.batteries, [Command::EssPower(0.0); 2]);
    assert_eq!(d.reached, None);
}

#[test]
fn percent_curtailment_uses_the_rated_production() {
    let a = Active {
        curtailment: entry(CurtailmentValue::Percent(25.0), "r"),
        ..Active::default()
    };
    assert_eq!(
        run(&rules(), &a, Measurements::default()).inverters,
        [Command::ProductionLimit(50_000.0); 2]
    );
}

#[test]
fn maximize_import_charges_within_max_import() {
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(300_000.0)), "r"),
        maximize_grid_import: entry(true, "m"),
        ..Active::default()
    };
    // Load 18 kW (import 10 + PV 8, storage idle): charge 98 - 18 = 80 kW, PV off.
    let m = measured(Some(10_000.0), Some(0.0), Some(8_000.0));
    let d = run(&rules(), &a, m.clone());
    assert_eq!(d.batteries, [Command::EssPower(-40_000.0); 2]);
    assert_eq!(d.inverters, [Command::ProductionLimit(0.0); 2]);
    assert_eq!(d.storage_by, Some(Component::MaximizeGridImport));
    // Steady state: the storage charges 80 kW, PV 0: same load, same answer.
    let m = measured(Some(98_000.0), Some(-80_000.0), Some(0.0));
    assert_eq!(
        run(&rules(), &a, m.clone()).batteries,
        [Command::EssPower(-40_000.0); 2]
    );
    // Load alone over the limit: no charging, production runs.
    let m = measured(Some(120_000.0), Some(0.0), Some(0.0));
    let d = run(&rules(), &a, m.clone());
    assert_eq!(d.batteries, [Command::EssPower(0.0); 2]);
    assert_eq!(d.inverters, [Command::ProductionRelease; 2]);
    // Without a meter: charging held to maxImport.
    let d = run(&rules(), &a, Measurements::default());
    assert_eq!(d.batteries, [Command::EssPower(-49_000.0); 2]);
    assert_eq!(d.notes.len(), 1);
}

fn csip(kind: crate::steering::sources::Kind, value: f64) -> crate::steering::sources::SourceLimit {
    crate::steering::sources::SourceLimit {
        source: crate::steering::limits::LimitSource::Csip,
        kind,
        value,
        until_ms: None,
        failsafe: false,
        since_ms: 0,
        reference: Some("MRID1".into()),
    }
}

#[test]
fn a_utility_servers_limits_win_where_tightest_and_bound_the_der() {
    use crate::steering::sources::{Kind, OperatorSet};
    let mut m = measured(Some(0.0), Some(0.0), Some(0.0));
    m.sources = OperatorSet {
        limits: vec![
            csip(Kind::Export, 1_500.0),
            csip(Kind::Import, 200_000.0),
            csip(Kind::Generation, 30_000.0),
        ],
    };
    // The partner asks 100 kW discharge: the generation limit leaves it 30 kW
    // and the inverters nothing beside it.
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(100_000.0)), "r1"),
        ..Active::default()
    };
    let d = decide_with(&rules(), &a, &[bat(50.0)], &m, &BTreeSet::new());
    let export = d.grid.limits.export.unwrap();
    assert_eq!(
        (export.w, export.source),
        (1_500.0, crate::steering::limits::LimitSource::Csip)
    );
    assert_eq!(
        d.grid.limits.import.unwrap().source,
        crate::steering::limits::LimitSource::Config
    );
    let discharge: f64 = d
        .batteries
        .iter()
        .map(|c| match c {
            Command::EssPower(w) => *w,
            _ => 0.0,
        })
        .sum();
    assert!(discharge <= 30_000.0 + 1e-6, "{discharge}");
    let production: f64 = d
        .inverters
        .iter()
        .map(|c| match c {
            Command::ProductionLimit(w) => *w,
            _ => f64::INFINITY,
        })
        .sum();
    assert!(
        production + discharge <= 30_000.0 + 1e-6,
        "{production} + {discharge}"
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.reason == "maxGeneration 30000 W (csip)"),
        "{:?}",
        d.notes
    );
}

#[test]
fn a_disconnect_from_the_utility_server_takes_the_der_off_whatever_the_partner_asks() {
    use crate::steering::sources::{Kind, OperatorSet};
    let mut m = measured(Some(0.0), Some(0.0), Some(0.0));
    m.sources = OperatorSet {
        limits: vec![csip(Kind::Connect, 0.0)],
    };
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(-50_000.0)), "r1"),
        maximize_grid_import: entry(true, "r2"),
        ..Active::default()
    };
    let d = decide_with(&rules(), &a, &[bat(50.0)], &m, &BTreeSet::new());
    assert!(
        d.batteries.iter().all(|c| *c == Command::EssPower(0.0)),
        "{:?}",
        d.batteries
    );
    assert!(
        d.inverters
            .iter()
            .all(|c| *c == Command::ProductionLimit(0.0)),
        "{:?}",
        d.inverters
    );
    assert_eq!(d.storage_by, Some(Component::GridLimit));
}

#[test]
fn a_load_limit_bounds_the_charge_and_a_storage_target_replaces_the_partners() {
    use crate::steering::sources::{Kind, OperatorSet};
    let mut m = measured(Some(0.0), Some(0.0), Some(0.0));
    m.sources = OperatorSet {
        limits: vec![
            csip(Kind::Load, 4_000.0),
            csip(Kind::StorageTarget, -10_000.0),
        ],
    };
    let a = Active {
        ess: entry(EssSetting::Power(PowerValue::watts(20_000.0)), "r1"),
        ..Active::default()
    };
    let d = decide_with(&rules(), &a, &[bat(50.0), bat(50.0)], &m, &BTreeSet::new());
    let total: f64 = d
        .batteries
        .iter()
        .map(|c| match c {
            Command::EssPower(w) => *w,
            _ => 0.0,
        })
        .sum();
    assert!((total + 4_000.0).abs() < 1e-6, "{total}");
}
