//! The simulator's noisy mode as the agent sees it over Modbus: float-model
//! and integer-model devices side by side, values with decimals that move
//! every second, counters that never go back; and `sitegate demo --noisy`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::demo::Demo;
use crate::common::wait_for;
use crate::steering_support::{kw, Kind, TestSite};
use nix::sys::signal::Signal;
use sitegate::agent::Agent;
use sitegate::model::Property;

/// 11:00 UTC on 2026-06-21: the sun is high.
const SUMMER_MORNING_MS: i64 = 1_782_039_600_000;

/// The two sites: (reference, name, simulated base load in kW).
const SITES: [(&str, &str, f64); 2] = [("ste_a", "A", 3.0), ("ste_b", "B", 20.0)];

/// Two sites on one simulated bus: (reference, type, site, unit id).
const DEVICES: [(&str, Kind, &str, u8); 7] = [
    ("dvc_inv_1", Kind::Inverter, "ste_a", 1),
    ("dvc_inv_2", Kind::Inverter, "ste_a", 2),
    ("dvc_bat", Kind::Battery, "ste_a", 3),
    ("dvc_grid_a", Kind::Meter, "ste_a", 4),
    ("dvc_inv_3", Kind::Inverter, "ste_b", 5),
    ("dvc_inv_4", Kind::Inverter, "ste_b", 6),
    ("dvc_grid_b", Kind::Meter, "ste_b", 7),
];

/// [`SITES`] and their [`DEVICES`] (8 kW but the meters, polled every
/// second), the simulator noisy with seed 11, the database in `dir`.
fn site(dir: &std::path::Path) -> TestSite {
    let mut site = TestSite::bare(SITES[0].0, SITES[0].1)
        .storage_path(&dir.join("db"))
        .poll_interval_ms(1000)
        .noisy(11);
    for (reference, name, load_kw) in SITES {
        site = site.site(reference, name).base_load_kw(load_kw);
        for (device, kind, _, unit) in DEVICES.iter().filter(|d| d.2 == reference) {
            site = site.device("sim", device, *kind).unit_id(*unit);
            if *kind != Kind::Meter {
                site = site.key("rated_power", kw(8.0));
            }
        }
    }
    site
}

fn non_integral(v: f64) -> bool {
    (v - v.round()).abs() > 1e-6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_polls_float_and_integer_devices_whose_values_move_every_second() {
    let dir = tempfile::tempdir().unwrap();
    let site = site(dir.path());
    let mut cfg = site.config();
    let sim = site
        .time(1.0, SUMMER_MORNING_MS)
        // Every second inverter and meter on the float models, so this
        // small site has both.
        .sim(|spec| spec.noise.as_mut().unwrap().float_every = 2)
        .start_sim(&mut cfg)
        .await;
    let agent = Agent::start(cfg).await.unwrap();
    let live = agent.live().clone();
    let id = |r: &str| live.find(r).unwrap();
    wait_for("every device polled", Duration::from_secs(30), || async {
        DEVICES
            .iter()
            .all(|d| live.latest(id(d.0), Property::VoltageL1).is_some())
            .then_some(())
    })
    .await;

    // What the agent discovered: the second inverter of each site and the
    // second meter speak the float models, the others the integer ones.
    let models = |r: &str| live.snapshot(id(r)).info.sunspec_models;
    let float_inverter = vec![1, 113, 120, 121, 123];
    let int_inverter = vec![1, 103, 120, 121, 123];
    assert_eq!(models("dvc_inv_1"), int_inverter);
    assert_eq!(models("dvc_inv_2"), float_inverter);
    assert_eq!(models("dvc_inv_3"), int_inverter);
    assert_eq!(models("dvc_inv_4"), float_inverter);
    assert_eq!(models("dvc_grid_a"), vec![1, 203]);
    assert_eq!(models("dvc_grid_b"), vec![1, 213]);
    assert_eq!(models("dvc_bat"), vec![1, 701, 120, 124, 802]);

    // Six seconds of readings, one a second: a poll interval (1 s) apart, each of
    // a new poll, and the noise moves the values every second of real time.
    let watched = [
        Property::ActivePower,
        Property::VoltageL1,
        Property::CurrentL1,
        Property::Frequency,
    ];
    let mut seen: BTreeMap<(&str, Property), Vec<f64>> = BTreeMap::new();
    let mut counters: BTreeMap<&str, f64> = BTreeMap::new();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        for (reference, ty, _, _) in DEVICES {
            for p in watched {
                let v = live.latest(id(reference), p).unwrap().value;
                seen.entry((reference, p)).or_default().push(v);
            }
            let counter = if ty == Kind::Battery {
                Property::TotalEnergyConsumed
            } else {
                Property::TotalEnergyProduced
            };
            let c = live.latest(id(reference), counter).unwrap().value;
            let last = counters.insert(reference, c).unwrap_or(c);
            assert!(
                c >= last,
                "{reference}: {counter:?} went back: {last} to {c}"
            );
        }
    }
    let floats = ["dvc_inv_2", "dvc_inv_4", "dvc_grid_b"];
    for (reference, _, _, _) in DEVICES {
        // In how many of the five seconds some point of the device moved (a
        // point on a coarse integer step may stay put now and then).
        let moved = (1..6)
            .filter(|&i| {
                watched.iter().any(|&p| {
                    let v = &seen[&(reference, p)];
                    v[i] != v[i - 1]
                })
            })
            .count();
        assert!(moved >= 4, "{reference} hardly moved: {seen:?}");
    }
    for ((reference, p), values) in &seen {
        // Whole watts on the integer models at these ratings (their scale
        // factor allows no finer); every float, volt and ampere has decimals.
        let decimals = match p {
            Property::ActivePower => floats.contains(reference),
            Property::Frequency => false,
            _ => true,
        };
        if decimals {
            assert!(
                values.iter().any(|v| non_integral(*v)),
                "{reference} {p:?} shows no decimals: {values:?}"
            );
        }
    }
    // The floats arrive as a float32 holds them, not rounded.
    let w = seen[&("dvc_inv_2", Property::ActivePower)][0];
    assert_eq!(f64::from(w as f32), w);

    agent.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_noisy_on_request() {
    let mut demo = Demo::start(&["--noisy", "--seed", "5", "--speed", "1"]).await;
    let path = "/devices/dvc_grid/measurement?property=voltageL1";
    let mut values = Vec::new();
    for _ in 0..5 {
        // Past one of the demo's polls (every second, at --speed 1): each reading is
        // of a new poll, with new noise.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (_, m) = demo.get(path).await;
        if let Some(v) = m["value"].as_f64() {
            values.push(v);
        }
    }
    let moved = values.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(moved >= 2, "{values:?}\n{}", demo.log());
    demo.stop(Signal::SIGTERM).await;
}
