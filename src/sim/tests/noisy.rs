//! Noisy mode on the devices (float models laid out in full, values that move
//! every second within their noise, counters that never go back) and sites of
//! their own (each meter balances only its own site).

use tokio::time::Instant;

use sunspec::models::model103::Model103;
use sunspec::models::model113::Model113;
use sunspec::models::model203::Model203;
use sunspec::models::model213::Model213;
use sunspec::models::model802::Model802;

use super::*;
use crate::register::codec::ValueType::{F32, I16, U16, U32};
use crate::sim::device::{Build, Device, Kind};
use crate::sim::noise::{device_seed, Jitter};
use crate::sim::physics::Tick;
use crate::sim::{SimNoise, SimSiteGroup};

fn noisy(float: bool) -> Build {
    Build {
        site_max_w: 30_000.0,
        jitter: Jitter::seeded(device_seed(7, "sim", 1)),
        float,
    }
}

/// The data words of model `id` in a device's map.
fn data(d: &Device, id: u16) -> Vec<u16> {
    let e = d.map.models().iter().find(|m| m.id == id).unwrap();
    d.map.peek(e.addr + 2, e.len)
}

/// Steps a device for `seconds` real seconds in steps of 100 ms, calling
/// `seen` after each step with its real time.
fn run(d: &mut Device, seconds: u32, site_w: f64, mut seen: impl FnMut(&Device, f64)) {
    for i in 1..=seconds * 10 {
        let real_s = f64::from(i) / 10.0;
        let tick = Tick {
            sim_ms: NOON + i64::from(i) * 100,
            dt_s: 0.1,
            real_dt_s: 0.1,
            real_s,
        };
        let d2 = &mut *d;
        match &mut d2.kind {
            Kind::Inverter(inv) => {
                inv.step(&mut d2.map, tick, Some(0.6));
            }
            Kind::Meter(m) => {
                // The balance swings both ways: both counters grow.
                let w = if i % 20 < 10 { site_w } else { -site_w };
                m.step(&mut d2.map, w, tick);
            }
            Kind::Battery(b) => {
                b.step(&mut d2.map, (-3000.0, 0.0), tick);
            }
            _ => {}
        }
        seen(d, real_s);
    }
}

fn non_integral(v: f64) -> bool {
    (v - v.round()).abs() > 1e-6
}

#[test]
fn float_devices_lay_out_every_register_of_their_models() {
    for (spec, ids) in [
        (inverter(1), vec![1, 113, 120, 121, 123]),
        (meter(3), vec![1, 213]),
    ] {
        let d = Device::new(&spec, noisy(true));
        let got: Vec<u16> = d.map.models().iter().map(|m| m.id).collect();
        assert_eq!(got, ids);
        assert_eq!(d.map.undeclared(), Vec::<u16>::new(), "{:?}", spec.kind);
    }
}

#[test]
fn a_noisy_integer_inverter_moves_every_second_within_its_noise() {
    let mut d = Device::new(&inverter(1), noisy(false));
    let m = data(&d, 103);
    // Fine scale factors: volts and amps to the hundredth.
    assert_eq!(raw(&m, &Model103::V_SF, I16), Some(-2.0));
    assert_eq!(raw(&m, &Model103::A_SF, I16), Some(-2.0));
    let (mut per_second, mut wh) = (Vec::new(), 0.0);
    let mut decimals = 0;
    run(&mut d, 10, 0.0, |d, real_s| {
        let m = data(d, 103);
        let w = scaled(&m, &Model103::W, I16, &Model103::W_SF).unwrap();
        approx(w, d.state().ac_power_w, 50.0 + 1.0);
        let v = scaled(&m, &Model103::PH_VPH_A, U16, &Model103::V_SF).unwrap();
        let a = scaled(&m, &Model103::APH_A, U16, &Model103::A_SF).unwrap();
        decimals += usize::from(non_integral(v) && non_integral(a));
        let e = scaled(&m, &Model103::WH, U32, &Model103::WH_SF).unwrap();
        assert!(e >= wh, "the counter went back: {e} < {wh}");
        wh = e;
        if ((real_s * 10.0).round() as i64) % 10 == 5 {
            per_second.push(w);
        }
    });
    assert!(decimals > 80, "{decimals}");
    // Whole watts at this rating: two seconds may round alike, seldom.
    let moved = per_second.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(moved >= 8, "{per_second:?}");
}

#[test]
fn a_noisy_float_inverter_shows_floats_and_follows_its_limit() {
    let mut d = Device::new(&inverter(1), noisy(true));
    let mut seen = Vec::new();
    run(&mut d, 3, 0.0, |d, _| {
        let m = data(d, 113);
        let w = raw(&m, &Model113::W, F32).unwrap();
        approx(w, d.state().ac_power_w, 50.0 + 1.0);
        seen.push((w, raw(&m, &Model113::PH_VPH_B, F32).unwrap()));
        assert!(raw(&m, &Model113::VA, F32).is_none(), "not implemented");
    });
    assert!(seen
        .iter()
        .any(|(w, v)| non_integral(*w) && non_integral(*v)));
    // Steerable as a SunSpec float inverter is: model 123 of its own.
    let c = d.map.models().iter().find(|m| m.id == 123).unwrap().addr + 2;
    let (pct, ena) = (
        c + sunspec::models::model123::Model123::W_MAX_LIM_PCT.offset,
        c + sunspec::models::model123::Model123::W_MAX_LIM_ENA.offset,
    );
    d.write(pct, &[2500], Instant::now()).unwrap();
    d.write(ena, &[1], Instant::now()).unwrap();
    run(&mut d, 1, 0.0, |_, _| {});
    approx(d.state().ac_power_w, 2500.0, 1e-6);
}

#[test]
fn noisy_meters_keep_their_counters_growing_and_show_decimals() {
    for float in [false, true] {
        let mut d = Device::new(&meter(3), noisy(float));
        let (mut exp, mut imp, mut decimals) = (0.0, 0.0, 0);
        run(&mut d, 6, 7_345.0, |d, _| {
            // (power, a current, the counters)
            let (w, a, e, i) = if float {
                let m = data(d, 213);
                let f = |p| raw(&m, p, F32).unwrap();
                let e = (f(&Model213::TOT_WH_EXP), f(&Model213::TOT_WH_IMP));
                (f(&Model213::W), f(&Model213::APH_A), e.0, e.1)
            } else {
                let m = data(d, 203);
                let e = |p| scaled(&m, p, U32, &Model203::TOT_WH_SF).unwrap();
                (
                    scaled(&m, &Model203::W, I16, &Model203::W_SF).unwrap(),
                    scaled(&m, &Model203::APH_A, I16, &Model203::A_SF).unwrap(),
                    e(&Model203::TOT_WH_EXP),
                    e(&Model203::TOT_WH_IMP),
                )
            };
            approx(w.abs(), 7_345.0, 7_345.0 * 0.005 + 1.0);
            // Watts have decimals where the scale factor allows (floats);
            // currents at 0.01 A always.
            decimals += usize::from(non_integral(a) && (!float || non_integral(w)));
            assert!(e >= exp && i >= imp, "float {float}: counters went back");
            (exp, imp) = (e, i);
        });
        assert!(decimals > 30, "float {float}: {decimals}");
        let (e0, i0) = (1_800_000.0, 2_500_000.0);
        assert!(exp > e0 + 5.0 && imp > i0 + 5.0, "{exp} {imp}");
    }
}

#[test]
fn a_noisy_batterys_soc_moves_in_tenths() {
    let mut d = Device::new(&battery(2, 50.0), noisy(false));
    let mut seen = std::collections::BTreeSet::new();
    run(&mut d, 8, 0.0, |d, _| {
        let m = data(d, 802);
        let soc = scaled(&m, &Model802::SOC, U16, &Model802::SOC_SF).unwrap();
        approx(soc, d.state().soc.unwrap(), 0.15 + 1e-9);
        seen.insert((soc * 10.0).round() as i64);
    });
    assert!(seen.len() >= 2, "{seen:?}");
}

/// Two inverters, each with its meter, on one server; `sites`: whether each
/// pair is a site of its own.
fn two_pairs(sites: bool) -> SimSiteSpec {
    let mut small = inverter(3);
    small.kind = SimKind::Inverter { rated_w: 4_000.0 };
    let group = |site: &str, units: [u8; 2]| SimSiteGroup {
        site: site.into(),
        base_load_w: 1_000.0,
        devices: units.iter().map(|u| ("sim".to_string(), *u)).collect(),
    };
    SimSiteSpec {
        sites: if sites {
            vec![group("ste_a", [1, 2]), group("ste_b", [3, 4])]
        } else {
            Vec::new()
        },
        ..site_spec(vec![inverter(1), meter(2), small, meter(4)], NOON, 1.0)
    }
}

#[tokio::test]
async fn each_meter_balances_only_its_own_site() {
    let sim = SimSite::start(two_pairs(true)).await.unwrap();
    sim.set_sun(Some(0.5));
    assert!(sim.set_site_load("ste_a", Some(1_000.0)));
    assert!(sim.set_site_load("ste_b", Some(8_000.0)));
    assert!(!sim.set_site_load("ste_nowhere", Some(1.0)));
    settle().await;
    let w = |unit| sim.device("sim", unit).unwrap().state().ac_power_w;
    approx(w(2), 1_000.0 - 5_000.0, 1e-6);
    approx(w(4), 8_000.0 - 2_000.0, 1e-6);
    assert_eq!(sim.site_load_w("ste_b"), Some(8_000.0));
    sim.shutdown().await;

    // One balance for all (no sites given): both meters see both inverters.
    let sim = SimSite::start(two_pairs(false)).await.unwrap();
    sim.set_sun(Some(0.5));
    sim.set_load(Some(1_000.0));
    settle().await;
    let w = |unit| sim.device("sim", unit).unwrap().state().ac_power_w;
    approx(w(2), 1_000.0 - 7_000.0, 1e-6);
    approx(w(4), 1_000.0 - 7_000.0, 1e-6);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_noisy_sites_load_walks_on_its_own() {
    let mut spec = two_pairs(true);
    spec.noise = Some(SimNoise::seeded(3));
    let sim = SimSite::start(spec).await.unwrap();
    sim.set_sun(Some(0.0));
    let mut loads = Vec::new();
    for _ in 0..4 {
        tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
        loads.push(sim.site_load_w("ste_a").unwrap());
    }
    // The profile alone moves under 1 % in 4 s; the walk moves every second.
    assert!(loads.windows(2).all(|w| w[0] != w[1]), "{loads:?}");
    let meter = sim.device("sim", 2).unwrap().state().ac_power_w;
    approx(meter, sim.site_load_w("ste_a").unwrap(), 1e-6);
    sim.shutdown().await;
}

#[test]
fn sites_that_name_no_device_or_share_one_are_refused() {
    let mut spec = two_pairs(true);
    spec.sites[1].devices.push(("sim".into(), 2));
    assert!(spec
        .check()
        .unwrap_err()
        .contains("in sites \"ste_a\" and \"ste_b\""));
    let mut spec = two_pairs(true);
    spec.sites[0].devices.push(("other".into(), 1));
    assert!(spec
        .check()
        .unwrap_err()
        .contains("no device at server \"other\" unit 1"));
    let mut spec = two_pairs(true);
    spec.sites[0].base_load_w = -1.0;
    assert!(spec
        .check()
        .unwrap_err()
        .contains("base_load_w must not be negative"));
}
