//! The simulator's noisy mode as the agent sees it over Modbus: float-model
//! and integer-model devices side by side, values with decimals that move
//! every second, counters that never go back; and `sitegate demo --noisy`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::demo::Demo;
use crate::common::wait_for;
use nix::sys::signal::Signal;
use sitegate::agent::Agent;
use sitegate::config::parse;
use sitegate::model::Property;
use sitegate::sim::{SimSite, SimSiteSpec};

/// 11:00 UTC on 2026-06-21: the sun is high.
const SUMMER_MORNING_MS: i64 = 1_782_039_600_000;

/// Two sites on one simulated bus: (reference, type, site, unit id).
const DEVICES: [(&str, &str, &str, u8); 7] = [
    ("dvc_inv_1", "inverter", "ste_a", 1),
    ("dvc_inv_2", "inverter", "ste_a", 2),
    ("dvc_bat", "battery", "ste_a", 3),
    ("dvc_grid_a", "meter", "ste_a", 4),
    ("dvc_inv_3", "inverter", "ste_b", 5),
    ("dvc_inv_4", "inverter", "ste_b", 6),
    ("dvc_grid_b", "meter", "ste_b", 7),
];

fn config(dir: &std::path::Path) -> String {
    let mut c = format!(
        "[http]\nlisten = [\"127.0.0.1:0\"]\nauth = \"none\"\n[storage]\npath = \"{}/db\"\n\
         [[sites]]\nreference = \"ste_a\"\nname = \"A\"\n\
         [[sites]]\nreference = \"ste_b\"\nname = \"B\"\n\
         [[buses]]\nname = \"sim\"\ntcp = \"127.0.0.1:0\"\n",
        dir.display()
    );
    for (reference, ty, site, unit) in DEVICES {
        let rated = if ty == "meter" {
            ""
        } else {
            "rated_power = \"8 kW\"\n"
        };
        c.push_str(&format!(
            "[[devices]]\nreference = \"{reference}\"\nname = \"{reference}\"\ntype = \"{ty}\"\n\
             site = \"{site}\"\nbus = \"sim\"\nunit_id = {unit}\n{rated}"
        ));
    }
    c.push_str(
        "[simulator]\nnoisy = true\nseed = 11\n\
         [simulator.sites.ste_a]\nbase_load = \"3 kW\"\n\
         [simulator.sites.ste_b]\nbase_load = \"20 kW\"\n",
    );
    c
}

fn non_integral(v: f64) -> bool {
    (v - v.round()).abs() > 1e-6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_polls_float_and_integer_devices_whose_values_move_every_second() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = parse(&config(dir.path())).unwrap();
    let mut spec = SimSiteSpec::from_config(&cfg, 1.0);
    spec.start = Some(SUMMER_MORNING_MS);
    // Every second inverter and meter on the float models, so this small
    // site has both.
    spec.noise.as_mut().unwrap().float_every = 2;
    let sim = SimSite::start(spec).await.unwrap();
    sim.point_config_at_servers(&mut cfg);
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

    // Six seconds of readings, one a second.
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
            let counter = if ty == "battery" {
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
