//! Writes per inverter under noise: a commercial site (26 inverters of
//! 10 kW, 6 batteries of 10 kW, a 39 kW load that walks and steps) and the
//! bench's park (200 of 25 kW), a meter and inverter readings with
//! measurement noise as `docs/devices.md`'s noisy mode gives them, held at
//! the export limit by the grid loop for an hour of ticks. Each inverter's writes are its changes plus the refreshes its
//! revert timer needs (`report::refresh_ms`: 45 s at the default 60 s).

use super::*;
use crate::steering::report::refresh_ms;

/// A small deterministic random source (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform within ±`a`.
    fn pm(&mut self, a: f64) -> f64 {
        (2.0 * self.next() - 1.0) * a
    }
}

/// A site of the bench's commercial layout (`benches/footprint/layout.rs`).
#[derive(Clone, Copy)]
struct Layout {
    inverters: usize,
    rated_w: f64,
    batteries: usize,
    load_w: f64,
    max_export_w: f64,
    max_import_w: f64,
}

/// A commercial site: 26 inverters of 10 kW, 6 batteries, a 39 kW load.
const COMMERCIAL: Layout = Layout {
    inverters: 26,
    rated_w: 10_000.0,
    batteries: 6,
    load_w: 39_000.0,
    max_export_w: 182_000.0,
    max_import_w: 97_500.0,
};

/// The park: 200 inverters of 25 kW, 20 batteries, a 200 kW load, 1 MW of
/// export.
const PARK: Layout = Layout {
    inverters: 200,
    rated_w: 25_000.0,
    batteries: 20,
    load_w: 200_000.0,
    max_export_w: 1_000_000.0,
    max_import_w: 2_000_000.0,
};

fn plant(l: Layout, sun: f64, soc: f64) -> Plant {
    Plant {
        load_w: l.load_w,
        inverter_rated: vec![l.rated_w; l.inverters],
        sun_w: vec![l.rated_w * sun; l.inverters],
        battery_rated: vec![10_000.0; l.batteries],
        soc: vec![soc; l.batteries],
        auto_w: vec![0.0; l.batteries],
        limits: vec![None; l.inverters],
        storage: vec![None; l.batteries],
        meter_online: true,
    }
}

fn site_rules(p: &Plant, l: Layout, order: ExportOrder) -> SiteRules {
    let inv: f64 = p.inverter_rated.iter().sum();
    let bat: f64 = p.battery_rated.iter().sum();
    SiteRules {
        ess: EssFulfilment::Proportional,
        curtailment: CurtailmentFulfilment::Proportional,
        ess_fallback: EssFallback::Auto,
        max_import_w: Some(l.max_import_w),
        max_export_w: Some(l.max_export_w),
        rated_production_w: inv,
        grid_loop: Some(LoopSettings {
            export_order: order,
            curtailment: CurtailmentFulfilment::Proportional,
            storage_ramp_w_per_s: 0.25 * bat,
            production_ramp_w_per_s: 0.25 * inv,
            settle_ms: 2 * 1000 + 1500 + 1000,
        }),
    }
}

/// What an hour showed: each inverter's writes, the releases and caps of
/// the site, and the export each tick.
struct Hour {
    writes: Vec<usize>,
    battery_writes: Vec<usize>,
    toggles: usize,
    export: Vec<f64>,
}

/// Runs an hour of ticks with noise: the load walks (1 % a second, pulled
/// back over 120 s) and steps (5 to 20 %, one in 90 s), the meter reads
/// ±0.5 % of its reading, each inverter ±0.5 % of its rating.
fn noisy_hour(plant: Plant, l: Layout, rules: &SiteRules, seed: u64) -> Hour {
    let mut rng = Rng(seed);
    let mut run = Run::new(plant);
    let refresh = refresh_ms(60);
    let mut level = 0.0f64;
    let mut writes = vec![0usize; l.inverters];
    let mut battery_writes = vec![0usize; l.batteries];
    let mut battery_told: Vec<Option<f64>> = vec![None; l.batteries];
    let mut battery_at = vec![0i64; l.batteries];
    let mut told: Vec<Option<f64>> = vec![None; l.inverters];
    let mut written_at = vec![0i64; l.inverters];
    let mut toggles = 0;
    let mut export = Vec::new();
    for _ in 0..3600 {
        level += 0.01 * rng.pm(3f64.sqrt()) - level / 120.0;
        if rng.next() < 1.0 / 90.0 {
            let step = 0.05 + 0.15 * rng.next();
            level += if rng.next() < 0.5 { -step } else { step };
        }
        level = level.clamp(-0.5, 0.6);
        run.plant.load_w = l.load_w * (1.0 + level);
        run.now += TICK;
        let (b, mut i) = run.plant.views();
        for v in &mut i {
            if let Some(m) = v.measured_w.as_mut() {
                *m = (*m + rng.pm(0.005 * v.rated_w)).max(0.0);
            }
        }
        let mut m = run.plant.measurements(run.now);
        if let Some(Meter::Fresh { grid_w, .. }) = m.meter.as_mut() {
            *grid_w += rng.pm(0.005 * grid_w.abs());
        }
        for (k, v) in i.iter().enumerate() {
            m.readings[b.len() + k] = v.measured_w.map(|w| (run.now - 1, w));
        }
        m.production_w = Some(i.iter().filter_map(|v| v.measured_w).sum());
        m.battery_setpoints = run.plant.storage.clone();
        let site = Site {
            rules,
            batteries: &b,
            inverters: &i,
            measurements: &m,
        };
        let d = decide(
            &site,
            &Active::default(),
            &BTreeSet::new(),
            &run.state,
            run.now,
        );
        run.state = d.loop_state.clone();
        run.plant.apply(&d);
        for (k, c) in d.inverters.iter().enumerate() {
            let now = match c {
                Command::ProductionLimit(w) => Some(*w),
                _ => None,
            };
            let changed = now != told[k];
            if changed && now.is_some() != told[k].is_some() {
                toggles += 1;
            }
            let refresh_due = now.is_some() && run.now - written_at[k] >= refresh;
            if changed || refresh_due {
                writes[k] += 1;
                written_at[k] = run.now;
            }
            told[k] = now;
        }
        for (k, c) in d.batteries.iter().enumerate() {
            let now = match c {
                Command::EssPower(w) => Some(*w),
                _ => None,
            };
            let refresh_due = now.is_some() && run.now - battery_at[k] >= refresh;
            if now != battery_told[k] || refresh_due {
                battery_writes[k] += 1;
                battery_at[k] = run.now;
            }
            battery_told[k] = now;
        }
        export.push(-run.plant.grid());
    }
    Hour {
        writes,
        battery_writes,
        toggles,
        export,
    }
}

/// Curtailing (full batteries, or curtail first), and with the storage
/// charging first, with the sun at 85 and 95 % of the inverters' rating, on a
/// commercial site and on the park: no inverter is written more than 150
/// times an hour, and on average at most its refreshes (80) and 40 changes
/// (measured on the commercial site: 108 writes an hour curtailing at 95 %
/// sun, 111 at 85 %, 108 with the storage charging; on the park 86; before
/// the changes of `settle.rs`, the site deadband and the release, the
/// commercial site's limits alone changed 157 to 553 times an hour); no
/// battery more than 150 times either (charging first: 126 to 140, where
/// each followed the storage target at 302); the cap is not released and
/// taken again; the export holds its band.
///
/// One test a case, so that the cases (each an hour of ticks) run at once.
fn writes_each_inverter_little(l: Layout, sun: f64, soc: f64, order: ExportOrder) {
    let refreshes = 3_600_000.0 / refresh_ms(60) as f64;
    let tolerance = tolerance_w(l.max_export_w);
    let aim = l.max_export_w - 0.5 * tolerance;
    let plant = plant(l, sun, soc);
    let rules = site_rules(&plant, l, order);
    let hour = noisy_hour(plant, l, &rules, 7);
    let most = hour.writes.iter().max().copied().unwrap_or(0);
    let case = format!(
        "{} inverters, sun {sun}, SoC {soc}, {order:?}: writes at most {most}",
        l.inverters
    );
    let mean = hour.writes.iter().sum::<usize>() as f64 / l.inverters as f64;
    eprintln!(
        "mean {mean:.0}; {case}; toggles {}; batteries {:?}",
        hour.toggles, hour.battery_writes
    );
    assert!(mean <= refreshes + 40.0, "{mean} on average; {case}");
    assert!(most <= 150, "{case}");
    assert!(
        hour.battery_writes.iter().all(|&w| w <= 150),
        "batteries {:?}; {case}",
        hour.battery_writes
    );
    // The first cap, and no release and cap again.
    assert!(
        hour.toggles <= l.inverters,
        "{} toggles; {case}",
        hour.toggles
    );
    let above = hour
        .export
        .iter()
        .filter(|x| **x > l.max_export_w + tolerance)
        .count();
    assert!(above <= 36, "above the band in {above} ticks; {case}");
    let worst = hour.export.iter().copied().fold(f64::MIN, f64::max);
    assert!(
        worst <= l.max_export_w + 0.2 * l.load_w,
        "export {worst} W; {case}"
    );
    let mean_x = hour.export.iter().sum::<f64>() / hour.export.len() as f64;
    // Near its aim; below it by the headroom where the storage takes
    // a little more than the export needs (`export::storage_target`).
    let headroom = if order == ExportOrder::StorageFirst && soc < 95.0 {
        0.05 * l.rated_w * l.inverters as f64
    } else {
        0.0
    };
    assert!(
        (aim - tolerance - headroom..=aim + 0.5 * tolerance).contains(&mean_x),
        "export {mean_x} W on average; {case}"
    );
}

#[test]
fn a_curtailing_commercial_site_writes_each_inverter_little() {
    writes_each_inverter_little(COMMERCIAL, 0.95, 95.0, ExportOrder::StorageFirst);
}

#[test]
fn a_commercial_site_charging_first_writes_each_inverter_little() {
    writes_each_inverter_little(COMMERCIAL, 0.95, 50.0, ExportOrder::StorageFirst);
}

#[test]
fn a_commercial_site_curtailing_first_writes_each_inverter_little() {
    writes_each_inverter_little(COMMERCIAL, 0.95, 50.0, ExportOrder::CurtailFirst);
}

#[test]
fn a_commercial_site_in_less_sun_writes_each_inverter_little() {
    writes_each_inverter_little(COMMERCIAL, 0.85, 95.0, ExportOrder::StorageFirst);
}

#[test]
fn the_park_charging_first_writes_each_inverter_little() {
    writes_each_inverter_little(PARK, 0.95, 50.0, ExportOrder::StorageFirst);
}

#[test]
fn the_curtailing_park_writes_each_inverter_little() {
    writes_each_inverter_little(PARK, 0.95, 95.0, ExportOrder::StorageFirst);
}
