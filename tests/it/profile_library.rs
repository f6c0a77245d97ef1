//! The device library beyond SunSpec, on real sockets through the agent's own
//! polling and steering paths:
//!
//! - every new register-map profile reads a register image laid out from the
//!   vendor's documentation (raw words written here by hand, not encoded by
//!   the profile), and the agent shows the documented values with the
//!   vocabulary's signs (battery + discharging, meter + import);
//! - the profile batteries with a remote power command (SMA, SolarEdge, KOSTAL,
//!   Alpha ESS) and the Growatt limit are steered over HTTP: the words at the
//!   simulated registers, the read-back (`applied`, `confirmed`) and the
//!   release at expiry;
//! - the Eastron SDM630 is read over Modbus RTU on a pseudo-terminal pair;
//! - `sitegate scan` recognises the identifiable ones and prints blocks that
//!   `check-config` accepts.

use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use crate::common::words;
use crate::steering_support::*;
use serde_json::json;
use sitegate::model::Property;
use sitegate::profile::{parse, Profile, BUILTIN};
use sitegate::register::plan::Table;
use sitegate::sim::{SimDeviceSpec, SimKind, SimRtuLine, SimServerSpec, SimSite, SimSiteSpec};
use tokio_serial::SerialPort;

const INTERVAL_MS: u64 = 300;
const REVERT_S: u16 = 30;

// Raw words, as a vendor document prints them.
fn u32_hi(v: u32) -> Vec<u16> {
    vec![(v >> 16) as u16, v as u16]
}
fn u32_lo(v: u32) -> Vec<u16> {
    vec![v as u16, (v >> 16) as u16]
}
fn i32_hi(v: i32) -> Vec<u16> {
    u32_hi(v as u32)
}
fn i32_lo(v: i32) -> Vec<u16> {
    u32_lo(v as u32)
}
fn u64_hi(v: u64) -> Vec<u16> {
    (0..4).rev().map(|i| (v >> (16 * i)) as u16).collect()
}
fn f32_hi(v: f32) -> Vec<u16> {
    u32_hi(v.to_bits())
}
fn f32_lo(v: f32) -> Vec<u16> {
    u32_lo(v.to_bits())
}

use Property as P;
use Table::{Holding as H, Input as I};

/// One profile's documented image: raw words per register, and what the
/// agent must show.
struct Image {
    profile: &'static str,
    kind: Kind,
    words: Vec<(Table, u16, Vec<u16>)>,
    expect: Vec<(Property, f64)>,
}

fn images() -> Vec<Image> {
    vec![
        Image {
            profile: "sma-storage",
            kind: Kind::Battery,
            // Charging at 1.5 kW: SMA's grid power is negative (drawing).
            words: vec![
                (H, 30775, i32_hi(-1500)),
                (H, 30845, u32_hi(61)),
                (H, 30849, i32_hi(235)),
                (H, 30783, u32_hi(23012)),
                (H, 30803, u32_hi(5001)),
                (H, 31397, u64_hi(1_234_567)),
                (H, 31401, u64_hi(987_654)),
                (H, 30201, u32_hi(307)),
            ],
            expect: vec![
                (P::ActivePower, -1500.0),
                (P::Soc, 61.0),
                (P::Temperature, 23.5),
                (P::VoltageL1, 230.12),
                (P::Frequency, 50.01),
                (P::TotalEnergyConsumed, 1_234_567.0),
                (P::TotalEnergyProduced, 987_654.0),
                (P::OperatingState, 307.0),
            ],
        },
        Image {
            profile: "solaredge-storage",
            kind: Kind::Battery,
            // SolarEdge counts +1200 W while charging.
            words: vec![
                (H, 57716, f32_lo(1200.0)),
                (H, 57732, f32_lo(56.25)),
                (H, 57730, f32_lo(97.0)),
                (H, 57708, f32_lo(21.5)),
                (H, 57734, u32_lo(3)),
            ],
            expect: vec![
                (P::ActivePower, -1200.0),
                (P::Soc, 56.25),
                (P::StateOfHealth, 97.0),
                (P::Temperature, 21.5),
                (P::OperatingState, 3.0),
            ],
        },
        Image {
            profile: "kostal-plenticore",
            kind: Kind::Battery,
            // 582 counts charging negative already.
            words: vec![
                (H, 582, vec![(-800i16) as u16]),
                (H, 514, vec![73]),
                (H, 214, f32_lo(19.5)),
                (H, 1046, f32_lo(123_456.0)),
                (H, 1048, f32_lo(100_000.0)),
            ],
            expect: vec![
                (P::ActivePower, -800.0),
                (P::Soc, 73.0),
                (P::Temperature, 19.5),
                (P::TotalEnergyConsumed, 123_456.0),
                (P::TotalEnergyProduced, 100_000.0),
            ],
        },
        Image {
            profile: "alpha-ess",
            kind: Kind::Battery,
            // Discharging 2.5 kW: 0x0126 is positive.
            words: vec![
                (H, 258, vec![655]),
                (H, 288, u32_hi(12_345)),
                (H, 290, u32_hi(11_111)),
                (H, 294, vec![2500]),
            ],
            expect: vec![
                (P::Soc, 65.5),
                (P::TotalEnergyConsumed, 1_234_500.0),
                (P::TotalEnergyProduced, 1_111_100.0),
                (P::ActivePower, 2500.0),
            ],
        },
        Image {
            profile: "victron-gx",
            kind: Kind::Battery,
            // Victron counts +1800 W while charging.
            words: vec![(H, 842, vec![1800]), (H, 843, vec![80]), (H, 844, vec![1])],
            expect: vec![
                (P::ActivePower, -1800.0),
                (P::Soc, 80.0),
                (P::OperatingState, 1.0),
            ],
        },
        Image {
            profile: "deye-hybrid",
            kind: Kind::Battery,
            // Charging 3 kW: 590 is negative.
            words: vec![
                (H, 516, u32_lo(54_321)),
                (H, 518, u32_lo(43_210)),
                (H, 588, vec![47]),
                (H, 590, vec![(-3000i16) as u16]),
            ],
            expect: vec![
                (P::TotalEnergyConsumed, 5_432_100.0),
                (P::TotalEnergyProduced, 4_321_000.0),
                (P::Soc, 47.0),
                (P::ActivePower, -3000.0),
            ],
        },
        Image {
            profile: "growatt-tl",
            kind: Kind::Inverter,
            words: vec![
                (I, 0, vec![1]),
                (I, 35, u32_hi(45_678)),
                (I, 37, vec![5002]),
                (I, 38, vec![2301]),
                (I, 39, vec![65]),
                (I, 55, u32_hi(123_456)),
                (I, 93, vec![412]),
                // No word at 3, the limit: the site's fallback releases the
                // Growatt a moment after it is found (100 % at 3), so a value
                // poked there would race that write. The release is what is read.
            ],
            expect: vec![
                (P::OperatingState, 1.0),
                (P::ActivePower, 4567.8),
                (P::Frequency, 50.02),
                (P::VoltageL1, 230.1),
                (P::CurrentL1, 6.5),
                (P::TotalEnergyProduced, 12_345_600.0),
                (P::Temperature, 41.2),
                (P::ActivePowerLimit, 100.0),
            ],
        },
        Image {
            profile: "eastron-sdm72",
            kind: Kind::Meter,
            // Exporting 2.5 kW.
            words: vec![
                (I, 52, f32_hi(-2500.0)),
                (I, 72, f32_hi(1500.5)),
                (I, 74, f32_hi(300.25)),
            ],
            expect: vec![
                (P::ActivePower, -2500.0),
                (P::TotalEnergyConsumed, 1_500_500.0),
                (P::TotalEnergyProduced, 300_250.0),
            ],
        },
        Image {
            profile: "janitza-umg",
            kind: Kind::Meter,
            words: vec![
                (H, 19000, f32_hi(231.0)),
                (H, 19012, f32_hi(4.5)),
                (H, 19026, f32_hi(3210.0)),
                (H, 19042, f32_hi(-120.0)),
                (H, 19050, f32_hi(49.98)),
                (H, 19068, f32_hi(5_000_000.0)),
                (H, 19076, f32_hi(1_000_000.0)),
            ],
            expect: vec![
                (P::VoltageL1, 231.0),
                (P::CurrentL1, 4.5),
                (P::ActivePower, 3210.0),
                (P::ReactivePower, -120.0),
                (P::Frequency, 49.98),
                (P::TotalEnergyConsumed, 5_000_000.0),
                (P::TotalEnergyProduced, 1_000_000.0),
            ],
        },
        Image {
            profile: "carlo-gavazzi-em24",
            kind: Kind::Meter,
            // Exporting 1.5 kW (application H).
            words: vec![
                (H, 0, i32_lo(2305)),
                (H, 12, i32_lo(6500)),
                (H, 40, i32_lo(-15_000)),
                (H, 51, vec![500]),
                (H, 52, i32_lo(123_456)),
                (H, 78, i32_lo(654_321)),
            ],
            expect: vec![
                (P::VoltageL1, 230.5),
                (P::CurrentL1, 6.5),
                (P::ActivePower, -1500.0),
                (P::Frequency, 50.0),
                (P::TotalEnergyConsumed, 12_345_600.0),
                (P::TotalEnergyProduced, 65_432_100.0),
            ],
        },
        Image {
            profile: "abb-b2x",
            kind: Kind::Meter,
            words: vec![
                (H, 23296, u32_hi(2301)),
                (H, 23308, u32_hi(512)),
                (H, 23316, i32_hi(123_456)),
                (H, 23340, vec![5000]),
                (H, 20480, u64_hi(1_234_567)),
                (H, 20484, u64_hi(7_654_321)),
            ],
            expect: vec![
                (P::VoltageL1, 230.1),
                (P::CurrentL1, 5.12),
                (P::ActivePower, 1234.56),
                (P::Frequency, 50.0),
                (P::TotalEnergyConsumed, 12_345_670.0),
                (P::TotalEnergyProduced, 76_543_210.0),
            ],
        },
        Image {
            profile: "eastron-sdm630",
            kind: Kind::Meter,
            words: vec![
                (I, 0, f32_hi(229.5)),
                (I, 6, f32_hi(12.25)),
                (I, 52, f32_hi(2800.0)),
                (I, 60, f32_hi(-300.0)),
                (I, 70, f32_hi(50.0)),
                (I, 72, f32_hi(4321.5)),
                (I, 74, f32_hi(1234.5)),
            ],
            expect: vec![
                (P::VoltageL1, 229.5),
                (P::CurrentL1, 12.25),
                (P::ActivePower, 2800.0),
                (P::ReactivePower, -300.0),
                (P::Frequency, 50.0),
                (P::TotalEnergyConsumed, 4_321_500.0),
                (P::TotalEnergyProduced, 1_234_500.0),
            ],
        },
    ]
}

fn bus_of(profile: &str) -> String {
    profile.replace('-', "_")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_register_images_read_with_the_vocabulary_signs() {
    let images = images();
    let mut site = TestSite::new(INTERVAL_MS, REVERT_S);
    for im in &images {
        let b = bus_of(im.profile);
        site = site
            .device(&b, &format!("dvc_{b}"), im.kind)
            .profile(im.profile);
        if im.kind != Kind::Meter {
            site = site.key("rated_power", kw(5.0));
        }
    }
    // Read-only batteries never reach a steering fallback: no Rig here, the
    // simulated site and the agent alone.
    let mut config = site.config();
    let dir = tempfile::tempdir().unwrap();
    config.storage.path = dir.path().join("sitegate.db");
    let sim = start_sim(&mut config).await;
    let agent = sitegate::agent::Agent::start(config).await.expect("agent");
    for im in &images {
        let dev = sim.device(&bus_of(im.profile), 1).unwrap();
        for (table, addr, words) in &im.words {
            assert!(dev.poke(*table, *addr, words), "{}", im.profile);
        }
    }
    let live = agent.live().clone();
    for im in &images {
        let id = live.find(&format!("dvc_{}", bus_of(im.profile))).unwrap();
        eventually(
            &format!("{}: the documented values", im.profile),
            Duration::from_secs(10),
            || async {
                im.expect
                    .iter()
                    .all(|(p, want)| live.latest(id, *p).is_some_and(|r| close(r.value, *want)))
            },
        )
        .await;
    }
    // The profile names its state codes: the API gives the name beside the
    // code (Victron's 844: 1 charging).
    let url = format!(
        "http://{}/devices/dvc_{}/measurement?property=operatingState",
        agent.http_addrs()[0],
        bus_of("victron-gx")
    );
    let m: serde_json::Value = reqwest::Client::new()
        .get(url)
        .bearer_auth(READ)
        .send()
        .await
        .expect("the API answers")
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        (&m["value"], &m["state"]),
        (&serde_json::json!(1), &serde_json::json!("CHARGING")),
        "{m}"
    );
    agent.shutdown().await;
    sim.shutdown().await;
}

async fn all_applied(rig: &Rig) -> bool {
    rig.state().await["devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["state"] == "applied" && d["confirmed"] == true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_batteries_and_the_growatt_limit_follow_the_site_signal() {
    let mut site = TestSite::new(INTERVAL_MS, REVERT_S);
    for p in [
        "sma-storage",
        "solaredge-storage",
        "kostal-plenticore",
        "alpha-ess",
    ] {
        let b = bus_of(p);
        site = site.battery(&b, &format!("dvc_{b}"), 4.0, 10.0).profile(p);
    }
    let rig = site
        .inverter("growatt_tl", "dvc_growatt_tl", 10.0)
        .profile("growatt-tl")
        .start()
        .await;
    // At the fallback every device got its release.
    eventually("released at start", Duration::from_secs(5), || async {
        words(&rig.device("sma_storage"), &[(40151, 2)]) == [0, 803]
            && words(&rig.device("solaredge_storage"), &[(57357, 1)]) == [7]
            && words(&rig.device("kostal_plenticore"), &[(1034, 2)]) == [0, 0]
            && words(&rig.device("alpha_ess"), &[(2176, 1)]) == [0]
    })
    .await;

    // 4 kW discharge, 1 kW each; 5 kW curtailment on the 10 kW Growatt = 50 %.
    let until = now_ms() + 60_000;
    let body = json!({"energyStorageSetting": {"value": 4, "unit": "kW"},
                      "productionCurtailment": {"value": 5, "unit": "kW"}, "validUntil": until});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
    let revert = u32::from(REVERT_S);
    eventually("discharge setpoints", Duration::from_secs(5), || async {
        words(&rig.device("sma_storage"), &[(40149, 4)]) == [i32_hi(1000), vec![0, 802]].concat()
            && words(&rig.device("solaredge_storage"), &[(57348, 1)]) == [4]
            && words(&rig.device("solaredge_storage"), &[(57354, 1)]) == [7]
            && words(&rig.device("solaredge_storage"), &[(57355, 2)]) == u32_lo(revert)
            && words(&rig.device("solaredge_storage"), &[(57357, 5)])
                == [vec![4], f32_lo(4000.0), f32_lo(1000.0)].concat()
            && words(&rig.device("kostal_plenticore"), &[(1034, 2)]) == f32_lo(1000.0)
            && words(&rig.device("alpha_ess"), &[(2176, 1)]) == [1]
            && words(&rig.device("alpha_ess"), &[(2177, 2)]) == u32_hi(33_000)
            && words(&rig.device("alpha_ess"), &[(2181, 4)])
                == [vec![2, 25], u32_hi(revert)].concat()
            && words(&rig.device("growatt_tl"), &[(3, 1)]) == [50]
    })
    .await;
    eventually("applied and confirmed", Duration::from_secs(10), || {
        all_applied(&rig)
    })
    .await;

    // 8 kW charge: 2 kW each, the other direction everywhere.
    let (s, _) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": -8000, "unit": "W"}, "validUntil": until}),
        )
        .await;
    assert_eq!(s, 200);
    eventually("charge setpoints", Duration::from_secs(5), || async {
        words(&rig.device("sma_storage"), &[(40149, 2)]) == i32_hi(-2000)
            && words(&rig.device("solaredge_storage"), &[(57357, 5)])
                == [vec![3], f32_lo(2000.0), f32_lo(4000.0)].concat()
            && words(&rig.device("kostal_plenticore"), &[(1034, 2)]) == f32_lo(-2000.0)
            && words(&rig.device("alpha_ess"), &[(2177, 2)]) == u32_hi(30_000)
            && words(&rig.device("alpha_ess"), &[(2182, 1)]) == [250]
    })
    .await;
    eventually("charge confirmed", Duration::from_secs(10), || {
        all_applied(&rig)
    })
    .await;

    // DELETE: every profile's release writes.
    let (s, _) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert_eq!(s, 200);
    eventually("released", Duration::from_secs(5), || async {
        words(&rig.device("sma_storage"), &[(40151, 2)]) == [0, 803]
            && words(&rig.device("solaredge_storage"), &[(57357, 1)]) == [7]
            && words(&rig.device("kostal_plenticore"), &[(1034, 2)]) == [0, 0]
            && words(&rig.device("alpha_ess"), &[(2176, 1)]) == [0]
            && words(&rig.device("growatt_tl"), &[(3, 1)]) == [100]
    })
    .await;
    rig.shutdown().await;
}

fn builtin(name: &str) -> Arc<Profile> {
    let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name).unwrap();
    Arc::new(parse(name, "built-in", text).unwrap())
}

fn profile_device(unit_id: u8, name: &str) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind: SimKind::Profile {
            profile: builtin(name),
            readable_gaps: false,
        },
        serial: format!("SN-{unit_id}"),
        refuse_writes: false,
        sunspec_base: 40000,
        response: sitegate::sim::SimResponse::IDEAL,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdm630_is_read_over_rtu_with_input_registers_and_floats() {
    let (master, slave) = tokio_serial::SerialStream::pair().expect("pty pair");
    let path = slave.name().expect("pty slave path");
    let line = SimRtuLine::start(master, &[profile_device(7, "eastron-sdm630")]);
    let im = images()
        .into_iter()
        .find(|i| i.profile == "eastron-sdm630")
        .unwrap();
    let dev = line.device(7).unwrap();
    for (table, addr, w) in &im.words {
        assert!(dev.poke(*table, *addr, w));
    }
    let dir = tempfile::tempdir().unwrap();
    let serial = table([
        ("path", path.into()),
        ("baud", 9600.into()),
        ("parity", "none".into()),
    ]);
    let cfg = TestSite::bare("ste_a", "A")
        .storage_path(&dir.path().join("db.sqlite"))
        .bus_key("timeout_ms", 300)
        .device("rs485", "dvc_sdm", Kind::Meter)
        .name("Grid meter")
        .unit_id(7)
        .profile("eastron-sdm630")
        .bus_key_of("rs485", "rtu", serial)
        .config();
    let agent = sitegate::agent::Agent::start(cfg).await.expect("agent");
    let live = agent.live().clone();
    let id = live.find("dvc_sdm").unwrap();
    eventually(
        "SDM630 values over RTU",
        Duration::from_secs(10),
        || async {
            im.expect
                .iter()
                .all(|(p, want)| live.latest(id, *p).is_some_and(|r| close(r.value, *want)))
        },
    )
    .await;
    agent.shutdown().await;
    line.stop().await;
}

async fn sitegate(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_sitegate"))
            .args(&args)
            .output()
            .expect("run sitegate")
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_recognises_profile_devices_and_prints_a_valid_config() {
    let spec = SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "lan".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: vec![
                SimDeviceSpec {
                    unit_id: 1,
                    kind: SimKind::Meter,
                    serial: "SN-1".into(),
                    refuse_writes: false,
                    sunspec_base: 40000,
                    response: sitegate::sim::SimResponse::IDEAL,
                },
                profile_device(2, "abb-b2x"),
                profile_device(3, "carlo-gavazzi-em24"),
                profile_device(4, "sma-storage"),
                // Answers, but offers no identification register.
                profile_device(5, "eastron-sdm72"),
            ],
        }],
        time_factor: 1.0,
        start: None,
        base_load_w: 500.0,
        ..SimSiteSpec::default()
    };
    let sim = SimSite::start(spec).await.unwrap();
    let addr = sim.addr("lan").unwrap().to_string();
    let out = sitegate(&[
        "scan",
        "--tcp",
        &addr,
        "--units",
        "1-6",
        "--timeout-ms",
        "300",
        "--site",
        "ste_home",
    ])
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for want in [
        "meter, SunSpec models 1, 203",
        "# unit 2: ABB B21 / B23 / B24 (abb-b2x register holding 35168 = \"B2\"), meter",
        "profile = \"abb-b2x\"",
        "register holding 11 = \"1648\"), meter, profile carlo-gavazzi-em24",
        "profile = \"carlo-gavazzi-em24\"",
        "register holding 30051 = \"8007\"), battery, profile sma-storage",
        "profile = \"sma-storage\"",
        "unit_id = 4",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("unit_id = 5"), "{stdout}");
    assert!(
        stderr.contains("unit 5: answers, but"),
        "the SDM72 answers but is not recognised:\n{stderr}"
    );

    // The printed blocks pass check-config once the site exists and the
    // battery has the rating the scan asks for (profiles read none: without
    // it check-config refuses the battery, naming the key).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scanned.toml");
    let write = |blocks: &str| {
        std::fs::write(
            &file,
            format!(
                "[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n\n\
                 [[sites]]\nreference = \"ste_home\"\nname = \"Home\"\n\n{blocks}"
            ),
        )
        .unwrap();
    };
    write(&stdout);
    let check = sitegate(&["check-config", file.to_str().unwrap()]).await;
    let summary = String::from_utf8_lossy(&check.stdout).to_string()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(!check.status.success(), "{summary}");
    assert!(
        summary.contains("devices[3].rated_power: required"),
        "{summary}"
    );
    assert!(stdout.contains("# rated_power = \"... kW\""), "{stdout}");
    write(&stdout.replace("# rated_power = \"... kW\"", "rated_power = \"5 kW\" #"));
    let check = sitegate(&["check-config", file.to_str().unwrap()]).await;
    let summary = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(
        check.status.success(),
        "{summary}\n{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(summary.contains("1 bus, 4 devices"), "{summary}");
    sim.shutdown().await;
}

/// The registers each shipped profile's recipes may write: read at first
/// contact and written back at every release. The table in docs/devices.md
/// ("Registers written back") is this list, so the doc cannot drift from the
/// recipes.
fn registers_written_back() -> String {
    use sitegate::modbus::control::{footprint, ProfileEss, ProfileLimit, Recipe};
    use sitegate::register::plan::Image;
    let mut out =
        String::from("| profile | control | registers (address × words) |\n|---|---|---|\n");
    for (name, text) in BUILTIN {
        let profile = parse(name, "built-in", text).expect("a shipped profile parses");
        let recipes = [
            profile.controls.ess_power.clone().map(|control| {
                (
                    "storage power",
                    Recipe::ProfileStorage(ProfileEss {
                        control,
                        rated_w: Some(10_000.0),
                    }),
                )
            }),
            profile.controls.production_limit.clone().map(|control| {
                let rated_w = Some(10_000.0);
                (
                    "production limit",
                    Recipe::ProfileLimit(ProfileLimit { control, rated_w }),
                )
            }),
        ];
        for (what, recipe) in recipes.into_iter().flatten() {
            let spans = footprint(&recipe, 30, &Image::new());
            let list: Vec<String> = spans
                .iter()
                .map(|s| match s.len {
                    1 => s.addr.to_string(),
                    n => format!("{} × {n}", s.addr),
                })
                .collect();
            out.push_str(&format!("| `{name}` | {what} | {} |\n", list.join(", ")));
        }
    }
    out
}

#[test]
fn docs_list_the_registers_each_recipe_writes_back() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/devices.md"))
        .expect("docs/devices.md");
    let table = registers_written_back();
    assert!(
        docs.contains(&table),
        "docs/devices.md must hold this table (\"Registers written back\"):\n{table}"
    );
}
