//! SunSpec discovery where devices put their map: at 40000 (most), at 0, at
//! 50000, and nowhere discovery looks (a map one register off, at 40001, as
//! some vendors' 1-based documents lead to). The agent reads the first three
//! and reports the fourth as "no SunSpec marker"; `scan` says where each map
//! starts and which unit answers without one.

use std::time::Duration;

use crate::common::wait_for;
use crate::steering_support::{Kind, TestSite};
use sitegate::agent::Agent;
use sitegate::config::Transport;
use sitegate::modbus::link::Port;
use sitegate::modbus::{scan, Controls};
use sitegate::model::Property;
use sitegate::sim::{SimDeviceSpec, SimKind, SimServerSpec, SimSite, SimSiteSpec, Variant};

/// (unit id, reference, type, kind, where its map starts).
fn devices() -> Vec<(u8, &'static str, Kind, SimKind, u16)> {
    vec![
        (1, "dvc_at_0", Kind::Meter, SimKind::Meter, 0),
        (
            2,
            "dvc_at_50000",
            Kind::Inverter,
            SimKind::Inverter { rated_w: 6000.0 },
            50000,
        ),
        (
            3,
            "dvc_off_by_one",
            Kind::Meter,
            SimKind::Fixed {
                variant: Variant::Meter201,
                rated_w: 1.0,
            },
            40001,
        ),
        (
            4,
            "dvc_at_40000",
            Kind::Battery,
            SimKind::Battery {
                rated_w: 5000.0,
                capacity_wh: 10_000.0,
                initial_soc: 55.0,
                soc_min: 5.0,
                soc_max: 95.0,
            },
            40000,
        ),
    ]
}

/// The [`devices`] on the bus `lan` at `127.0.0.1:port` (500 ms timeout),
/// polled every 200 ms, backing off 100 to 400 ms; the database in `dir`.
fn site(port: u16, dir: &std::path::Path) -> TestSite {
    let mut site = TestSite::bare("ste_s", "S")
        .storage_path(&dir.join("db"))
        .polling(100, 400)
        .bus_key("timeout_ms", 500)
        .bus_key_of("lan", "tcp", format!("127.0.0.1:{port}"));
    for (unit, reference, kind, _, _) in devices() {
        site = site.device("lan", reference, kind).unit_id(unit);
    }
    site
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maps_are_found_at_40000_then_0_then_50000_and_nowhere_else() {
    let sim = SimSite::start(SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "lan".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: devices()
                .into_iter()
                .map(|(unit_id, reference, _, kind, base)| SimDeviceSpec {
                    unit_id,
                    kind,
                    serial: reference.to_uppercase(),
                    refuse_writes: false,
                    sunspec_base: base,
                    response: sitegate::sim::SimResponse::IDEAL,
                })
                .collect(),
        }],
        time_factor: 1.0,
        start: Some(1_782_039_600_000),
        base_load_w: 500.0,
        ..SimSiteSpec::default()
    })
    .await
    .unwrap();
    let addr = sim.addr("lan").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(site(addr.port(), dir.path()).config())
        .await
        .unwrap();
    let live = agent.live().clone();
    let id = |r: &str| live.find(r).unwrap();

    let error = wait_for(
        "the three maps read, the fourth reported",
        Duration::from_secs(20),
        || async {
            let read = ["dvc_at_0", "dvc_at_50000", "dvc_at_40000"]
                .iter()
                .all(|r| live.latest(id(r), Property::ActivePower).is_some());
            let missing = live.snapshot(id("dvc_off_by_one"));
            (read && !missing.online)
                .then_some(missing.last_error)
                .flatten()
        },
    )
    .await;
    assert!(
        error.contains("no SunSpec marker \"SunS\" at 40000, 0 or 50000"),
        "{error}"
    );
    assert!(live.snapshot(id("dvc_off_by_one")).properties.is_empty());

    // Each map is walked from where it starts, and read with its values.
    let maps = agent.device_maps();
    let chain_start = |r: &str| maps.get(id(r)).unwrap().chain[0].addr;
    assert_eq!(chain_start("dvc_at_0"), 2, "Common model after the marker");
    assert_eq!(chain_start("dvc_at_50000"), 50002);
    assert_eq!(chain_start("dvc_at_40000"), 40002);
    let meter = live.snapshot(id("dvc_at_0"));
    assert!(meter.reading(Property::TotalEnergyConsumed).is_some());
    assert!(meter.reading(Property::VoltageL1).is_some());
    let inverter = live.snapshot(id("dvc_at_50000"));
    assert_eq!(inverter.info.serial.as_deref(), Some("DVC_AT_50000"));
    assert!(inverter.reading(Property::Frequency).is_some());
    // Steering finds the inverter's controls up there too.
    let inverter_map = maps.get(id("dvc_at_50000")).unwrap();
    assert!(matches!(
        inverter_map.controls(),
        Controls::Sunspec { immediate: Some(b), .. } if b.addr > 50000
    ));
    agent.shutdown().await;

    // `scan` says where each map starts, and which unit has none.
    let mut port = Port::new(
        Transport::Tcp {
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        Duration::from_millis(500),
    );
    let mut without_map = Vec::new();
    let found = scan::scan(&mut port, &[1, 2, 3, 4], |p| {
        if let scan::Progress::NotSunspec(u) = p {
            without_map.push(u);
        }
    })
    .await;
    port.close().await;
    let bases: Vec<(u8, u16)> = found.iter().map(|f| (f.unit, f.base)).collect();
    assert_eq!(bases, [(1, 0), (2, 50000), (4, 40000)]);
    assert_eq!(without_map, [3]);
    sim.shutdown().await;
}
