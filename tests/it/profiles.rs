//! Every shipped register-map profile against a simulated device on a real
//! socket, through the agent's own polling and steering:
//!
//! - sample frames: raw register images, written out in the test the way the
//!   vendor's register table describes the device in a known state, and the
//!   value and sign each point must decode to (a discharging battery reads a
//!   positive `activePower`; a "no value" pattern reads as no value);
//! - the profile's writes accepted and read back by the device;
//! - Huawei's "charge from grid" switched on with a setpoint and off at release;
//! - `check-config` refusing invalid profiles and unrated profile batteries,
//!   each problem with its TOML path.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::site::{self, SmallSite, STEER_TOKEN, SUMMER_MORNING_MS};
use crate::common::wait_for;
use crate::steering_support::{kw, Kind, TestSite};
use reqwest::Method;
use serde_json::json;
use sitegate::agent::Agent;
use sitegate::config::parse;
use sitegate::modbus::control::{ess_release_writes, ess_writes};
use sitegate::modbus::{Controls, Op};
use sitegate::model::Property;
use sitegate::profile::BUILTIN;
use sitegate::register::plan::{Span, Table};
use sitegate::sim::{SimSite, SimSiteSpec};

/// A site with `units` batteries of `profile` on one simulated bus (units
/// 1..), each rated `rated_kw` if given.
fn batteries(profile: &str, units: u8, rated_kw: Option<f64>) -> TestSite {
    let mut site = TestSite::bare("ste_test", "Test site")
        .gateway_id("test")
        .common_tokens()
        .polling(100, 400)
        .control_interval_ms(300)
        .revert_timeout_s(30)
        .bus_key("timeout_ms", 500);
    for unit in 1..=units {
        site = site
            .device("hybrid", &format!("dvc_bat_{unit}"), Kind::Battery)
            .name(&format!("Battery {unit}"))
            .unit_id(unit)
            .profile(profile);
        if let Some(rated) = rated_kw {
            site = site.key("rated_power", kw(rated));
        }
    }
    site
}

/// [`batteries`] rated 5 kW, as TOML.
fn config(profile: &str, units: u8) -> String {
    batteries(profile, units, Some(5.0)).text()
}

async fn value(site: &SmallSite, device: &str, p: Property) -> Option<f64> {
    let id = site.agent.live().find(device)?;
    site.agent.live().latest(id, p).map(|r| r.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_shipped_profile_reads_and_steers_its_simulated_device() {
    // The battery profiles with a storage power control; the others (meters,
    // inverters, read-only batteries) are in tests/it/profile_library.rs.
    let steerable = BUILTIN.iter().filter(|(name, text)| {
        sitegate::profile::parse(name, "built-in", text)
            .is_ok_and(|p| p.controls.ess_power.is_some())
    });
    for (name, _) in steerable {
        let site = site::start(&config(name, 1), 1.0, SUMMER_MORNING_MS).await;
        let dev = site.sim.device("hybrid", 1).expect("simulated device");
        // Charging: the vendors count it positive or flag it; the API says negative.
        assert!(dev.set_value(Property::ActivePower, -2300.0));
        // Whole percent: some vendors have no decimals.
        assert!(dev.set_value(Property::Soc, 61.0));
        wait_for(
            &format!("{name}: values"),
            Duration::from_secs(10),
            || async {
                let p = value(&site, "dvc_bat_1", Property::ActivePower).await?;
                let soc = value(&site, "dvc_bat_1", Property::Soc).await?;
                ((p - -2300.0).abs() < 1e-6 && (soc - 61.0).abs() < 1e-6).then_some(())
            },
        )
        .await;

        // Steering's view: the profile's controls, written through the bus.
        let id = site.agent.live().find("dvc_bat_1").unwrap();
        let map = site.agent.device_maps().get(id).expect("discovered");
        let Controls::Profile(controls) = map.controls() else {
            panic!("{name}: expected profile controls");
        };
        let ess = controls.ess_power.as_ref().expect("ESS control");
        let bus = site.agent.bus("hybrid").unwrap();
        for (watts, writes) in [
            (-2000.0, ess_writes(ess, -2000.0, 60, Some(5000.0)).unwrap()),
            (1500.0, ess_writes(ess, 1500.0, 60, Some(5000.0)).unwrap()),
            (0.0, ess_release_writes(ess, Some(5000.0)).unwrap()),
        ] {
            let mut ops: Vec<Op> = writes
                .iter()
                .map(|w| Op::Write {
                    addr: w.addr,
                    values: w.values.clone(),
                })
                .collect();
            ops.extend(
                writes
                    .iter()
                    .map(|w| Op::Read(Span::new(Table::Holding, w.addr, w.values.len() as u16))),
            );
            let out = bus
                .transact(1, ops)
                .await
                .unwrap_or_else(|e| panic!("{name} {watts} W: {e}"));
            // Each register is written once per recipe: its read-back shows it.
            let reads = &out[writes.len()..];
            for (i, w) in writes.iter().enumerate() {
                assert_eq!(
                    reads[i],
                    sitegate::modbus::OpOutput::Words(w.values.clone()),
                    "{name} {watts} W: register {}",
                    w.addr
                );
            }
        }
        site.stop().await;
    }
}

/// One device's registers in a known state, and what the agent must read.
struct Frame {
    /// What the image shows, for the failure messages.
    what: &'static str,
    /// `(table, first register, words)` as the device answers them.
    registers: Vec<(Table, u16, Vec<u16>)>,
    /// Every property the device offers in that state, with its value.
    expect: Vec<(Property, f64)>,
}

const H: Table = Table::Holding;
const I: Table = Table::Input;

/// Serves each frame from its own simulated device of `profile` (units 1..),
/// starts the agent, and checks that each device offers exactly the frame's
/// properties with exactly its values.
async fn check_frames(profile: &str, frames: Vec<Frame>) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = parse(&config(profile, frames.len() as u8)).unwrap();
    cfg.storage.path = dir.path().join("sitegate.db");
    let mut spec = SimSiteSpec::from_config(&cfg, 1.0);
    spec.start = Some(SUMMER_MORNING_MS);
    let sim = SimSite::start(spec).await.unwrap();
    sim.point_config_at_servers(&mut cfg);
    // The images are in place before the agent's first poll.
    for (i, f) in frames.iter().enumerate() {
        let dev = sim.device("hybrid", i as u8 + 1).unwrap();
        for (table, addr, words) in &f.registers {
            assert!(dev.poke(*table, *addr, words));
        }
    }
    let agent = Agent::start(cfg).await.unwrap();
    let live = agent.live().clone();
    for (i, f) in frames.iter().enumerate() {
        let id = live.find(&format!("dvc_bat_{}", i + 1)).unwrap();
        let want: BTreeMap<&str, f64> = f.expect.iter().map(|(p, v)| (p.name(), *v)).collect();
        let got = wait_for(
            &format!("{profile}, {}: {want:?}", f.what),
            Duration::from_secs(10),
            || {
                let s = live.snapshot(id);
                let got: BTreeMap<&str, f64> = Property::ALL
                    .iter()
                    .filter_map(|p| s.reading(*p).map(|r| (p.name(), r.value)))
                    .collect();
                let done = s.online && want.keys().all(|k| got.contains_key(k));
                async move { done.then_some(got) }
            },
        )
        .await;
        for (k, v) in &want {
            assert!(
                (got[k] - v).abs() < 1e-6,
                "{profile}, {}: {k} reads {} instead of {v}",
                f.what,
                got[k]
            );
        }
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{profile}, {}: the properties offered",
            f.what
        );
    }
    agent.shutdown().await;
    sim.shutdown().await;
}

/// The two words of a 32-bit value, high word first.
fn hi_lo(v: i64) -> Vec<u16> {
    let v = v as u32;
    vec![(v >> 16) as u16, v as u16]
}

/// The two words of a 32-bit value, low word first.
fn lo_hi(v: i64) -> Vec<u16> {
    let v = v as u32;
    vec![v as u16, (v >> 16) as u16]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goodwe_et_sample_frames() {
    use Property as P;
    // The ET's running data and BMS blocks (holding registers, high word first).
    let frame = |pbattery1: i64, mode: u16, temp: u16, soc: u16| {
        vec![
            (H, 35182, hi_lo(pbattery1)), // pbattery1, S32, W
            (H, 35184, vec![mode]),       // battery mode
            (H, 35206, hi_lo(12_345)),    // total charge, 0.1 kWh
            (H, 35209, hi_lo(65_536)),    // total discharge, 0.1 kWh
            (H, 37003, vec![temp]),       // BMS temperature, S16, 0.1 degC
            (H, 37007, vec![soc, 99]),    // SOC %, SOH %
        ]
    };
    check_frames(
        "goodwe-et",
        vec![
            Frame {
                what: "discharging 2.5 kW at 25.1 degC, 87 %",
                registers: frame(2500, 2, 251, 87),
                expect: vec![
                    (P::ActivePower, 2500.0),
                    (P::OperatingState, 2.0),
                    (P::TotalEnergyConsumed, 1_234_500.0),
                    (P::TotalEnergyProduced, 6_553_600.0),
                    (P::Temperature, 25.1),
                    (P::Soc, 87.0),
                    (P::StateOfHealth, 99.0),
                ],
            },
            Frame {
                what: "charging 1.2 kW, temperature -1 (no value)",
                registers: frame(-1200, 3, 0xFFFF, 40),
                expect: vec![
                    (P::ActivePower, -1200.0),
                    (P::OperatingState, 3.0),
                    (P::TotalEnergyConsumed, 1_234_500.0),
                    (P::TotalEnergyProduced, 6_553_600.0),
                    (P::Soc, 40.0),
                    (P::StateOfHealth, 99.0),
                ],
            },
            Frame {
                what: "standby, temperature 0x7FFF and SOC 0xFFFF (no values)",
                registers: frame(0, 1, 0x7FFF, 0xFFFF),
                expect: vec![
                    (P::ActivePower, 0.0),
                    (P::OperatingState, 1.0),
                    (P::TotalEnergyConsumed, 1_234_500.0),
                    (P::TotalEnergyProduced, 6_553_600.0),
                    (P::StateOfHealth, 99.0),
                ],
            },
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huawei_luna2000_sample_frames() {
    use Property as P;
    // Energy storage unit 1 (holding registers, high word first). Huawei counts
    // battery power + while charging.
    let frame = |power: i64, status: u16, temp: u16| {
        vec![
            (H, 37000, vec![status]),   // running status
            (H, 37001, hi_lo(power)),   // charge/discharge power, I32, W
            (H, 37004, vec![655]),      // SOC, gain 10
            (H, 37022, vec![temp]),     // temperature, I16, gain 10
            (H, 37046, hi_lo(5000)),    // max charge power, U32, W
            (H, 37048, hi_lo(4500)),    // max discharge power, U32, W
            (H, 37066, hi_lo(100_000)), // total charge, U32, kWh gain 100
            (H, 37068, hi_lo(12_345)),  // total discharge, U32, kWh gain 100
        ]
    };
    let common = |power: f64, status: f64| {
        vec![
            (P::OperatingState, status),
            (P::ActivePower, power),
            (P::Soc, 65.5),
            (P::MaxChargePower, 5000.0),
            (P::MaxDischargePower, 4500.0),
            (P::TotalEnergyConsumed, 1_000_000.0),
            (P::TotalEnergyProduced, 123_450.0),
        ]
    };
    // The whole storage's block (37760-37782) as firmware without it
    // answers: "no value" everywhere, so unit 1's registers are read.
    let no_storage_block = vec![
        (H, 37760, vec![0xFFFF]),
        (H, 37762, vec![0xFFFF]),
        (H, 37765, vec![0x7FFF, 0xFFFF]),
        (H, 37780, vec![0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF]),
    ];
    // A one-unit site whose storage block repeats unit 1.
    let storage_block = |power: i64, status: u16| {
        vec![
            (H, 37760, vec![655]),
            (H, 37762, vec![status]),
            (H, 37765, hi_lo(power)),
            (H, 37780, [hi_lo(100_000), hi_lo(12_345)].concat()),
        ]
    };
    check_frames(
        "huawei-luna2000",
        vec![
            Frame {
                what: "discharging 3 kW (-3000 on the wire) at -2.5 degC",
                registers: [frame(-3000, 2, (-25i16) as u16), storage_block(-3000, 2)].concat(),
                expect: {
                    let mut e = common(3000.0, 2.0);
                    e.push((P::Temperature, -2.5));
                    e
                },
            },
            Frame {
                what: "charging 1.2 kW, temperature 0x7FFF, no storage block: unit 1",
                registers: [frame(1200, 2, 0x7FFF), no_storage_block].concat(),
                expect: common(-1200.0, 2.0),
            },
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huawei_two_luna2000_units_read_as_one_storage() {
    use Property as P;
    // Unit 1 charges 1.2 kW at 65.5 %; unit 2 (not read on its own) charges
    // 0.8 kW. The storage block holds both: 2 kW charging, the SoC of the
    // whole storage (51.2 %), the counters of both units.
    let unit1 = vec![
        (H, 37000, vec![2]),
        (H, 37001, hi_lo(1200)),
        (H, 37004, vec![655]),
        (H, 37022, vec![250]),
        (H, 37046, hi_lo(5000)),
        (H, 37048, hi_lo(4500)),
        (H, 37066, hi_lo(100_000)),
        (H, 37068, hi_lo(12_345)),
    ];
    let storage = vec![
        (H, 37760, vec![512]),      // SOC, gain 10
        (H, 37762, vec![2]),        // running
        (H, 37765, hi_lo(2000)),    // I32, W, + charging
        (H, 37780, hi_lo(250_000)), // total charge, kWh gain 100
        (H, 37782, hi_lo(30_000)),  // total discharge
    ];
    check_frames(
        "huawei-luna2000",
        vec![Frame {
            what: "two units charging 1.2 kW + 0.8 kW",
            registers: [unit1, storage].concat(),
            expect: vec![
                (P::OperatingState, 2.0),
                (P::ActivePower, -2000.0),
                (P::Soc, 51.2),
                (P::TotalEnergyConsumed, 2_500_000.0),
                (P::TotalEnergyProduced, 300_000.0),
                (P::MaxChargePower, 5000.0),
                (P::MaxDischargePower, 4500.0),
                (P::Temperature, 25.0),
            ],
        }],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sungrow_sh_sample_frames_of_both_firmware_generations() {
    use Property as P;
    // The battery block (input registers, 32-bit values low word first);
    // 13000 is the running state: bit 1 charging, bit 2 discharging.
    let frame = |state: u16, power: u16| {
        vec![
            (I, 13000, vec![state]),
            (I, 13021, vec![power]),            // battery power
            (I, 13022, vec![612, 985, 0xFFF6]), // level 0.1 %, health 0.1 %, temperature S16 0.1 degC
            (I, 13026, lo_hi(12_345)),          // total discharge, 0.1 kWh
            (I, 13040, lo_hi(65_536)),          // total charge, 0.1 kWh
        ]
    };
    let expect = |power: f64| {
        vec![
            (P::ActivePower, power),
            (P::Soc, 61.2),
            (P::StateOfHealth, 98.5),
            (P::Temperature, -1.0),
            (P::TotalEnergyProduced, 1_234_500.0),
            (P::TotalEnergyConsumed, 6_553_600.0),
        ]
    };
    check_frames(
        "sungrow-sh",
        vec![
            Frame {
                what: "older firmware, charging 1.5 kW: magnitude and bit 1",
                registers: frame(0x0002, 1500),
                expect: expect(-1500.0),
            },
            Frame {
                what: "older firmware, discharging 2 kW: magnitude and bit 2",
                registers: frame(0x0004, 2000),
                expect: expect(2000.0),
            },
            Frame {
                what: "newer firmware, charging 1.5 kW: signed, bit 1 set",
                registers: frame(0x0002, (-1500i16) as u16),
                expect: expect(-1500.0),
            },
            Frame {
                what: "newer firmware, charging 1.5 kW: signed, bits clear",
                registers: frame(0x0000, (-1500i16) as u16),
                expect: expect(-1500.0),
            },
            Frame {
                what: "newer firmware, discharging 2 kW: signed",
                registers: frame(0x0000, 2000),
                expect: expect(2000.0),
            },
        ],
    )
    .await;
}

/// Firmware that reports 13021 as a positive magnitude and leaves 13000's
/// direction bits clear: the sign comes from the battery current 13020 (S16,
/// 0.1 A, − charging). One frame per firmware behaviour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sungrow_sign_from_battery_current() {
    let frame = |state: u16, power: u16, current: i16| {
        vec![
            (I, 13000, vec![state]),
            (I, 13020, vec![current as u16]),
            (I, 13021, vec![power]),
            (I, 13022, vec![612, 985, 0xFFF6]),
            (I, 13026, lo_hi(12_345)),
            (I, 13040, lo_hi(65_536)),
        ]
    };
    let expect = |power: f64| {
        vec![
            (Property::ActivePower, power),
            (Property::Soc, 61.2),
            (Property::StateOfHealth, 98.5),
            (Property::Temperature, -1.0),
            (Property::TotalEnergyProduced, 1_234_500.0),
            (Property::TotalEnergyConsumed, 6_553_600.0),
        ]
    };
    let frames = [
        (
            "bits clear, charging 1.5 kW: magnitude, current −3.2 A",
            frame(0, 1500, -32),
            -1500.0,
        ),
        (
            "bits clear, discharging 2 kW: magnitude, current +4.3 A",
            frame(0, 2000, 43),
            2000.0,
        ),
        (
            "older firmware, charging: bit 1, current 0",
            frame(0x0002, 1500, 0),
            -1500.0,
        ),
        (
            "signed firmware, charging: −1.5 kW, current −3.2 A",
            frame(0, (-1500i16) as u16, -32),
            -1500.0,
        ),
        ("idle: 0 W, current 0", frame(0, 0, 0), 0.0),
    ];
    check_frames(
        "sungrow-sh",
        frames
            .into_iter()
            .map(|(what, registers, power)| Frame {
                what,
                registers,
                expect: expect(power),
            })
            .collect(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huawei_charge_setpoints_switch_charge_from_grid_on_and_release_switches_it_off() {
    let site = site::start(&config("huawei-luna2000", 1), 1.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let dev = site.sim.device("hybrid", 1).unwrap();
    let reg = |a: u16| dev.registers(a, 1)[0];
    let state = || async {
        let (_, st) = site
            .call(
                Method::GET,
                "/sites/ste_test/steering",
                Some(STEER_TOKEN),
                None,
            )
            .await;
        st["devices"][0].clone()
    };
    wait_for("fallback", Duration::from_secs(10), || async {
        (state().await["state"] == "fallback").then_some(())
    })
    .await;
    let mut writes = site.sim.subscribe_writes();

    // A 2 kW charge: charge from grid on before forcing the charge.
    let until = sitegate::model::time::now_ms() + 60_000;
    let (s, v) = site
        .call(
            Method::POST,
            "/sites/ste_test/steering/ess",
            Some(STEER_TOKEN),
            Some(&json!({"setting": {"value": -2, "unit": "kW"}, "validUntil": until})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    wait_for("charging, confirmed", Duration::from_secs(5), || async {
        let st = state().await;
        (reg(47087) == 1 && reg(47100) == 1 && st["confirmed"] == true).then_some(())
    })
    .await;
    let mut order = Vec::new();
    while let Ok(e) = writes.try_recv() {
        order.push(e.address);
    }
    let at = |a: u16| order.iter().position(|x| *x == a);
    assert!(at(47087) < at(47100), "{order:?}");

    // Released: charge from grid off again, forcing stopped.
    let (s, _) = site
        .call(
            Method::DELETE,
            "/sites/ste_test/steering",
            Some(STEER_TOKEN),
            None,
        )
        .await;
    assert_eq!(s, 200);
    wait_for("released", Duration::from_secs(5), || async {
        let st = state().await;
        (reg(47087) == 0 && reg(47100) == 0 && st["state"] == "fallback" && st["confirmed"] == true)
            .then_some(())
    })
    .await;
    site.stop().await;
}

/// `check-config` on `config` (with `profile` next to it as `p.toml`): its exit
/// code and stdout.
fn check_with_profile(config: &str, profile: Option<&str>) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    if let Some(p) = profile {
        std::fs::write(dir.path().join("p.toml"), p).unwrap();
    }
    let file = dir.path().join("sitegate.toml");
    std::fs::write(&file, config).unwrap();
    let out = crate::common::process::check_config(&file);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn check_config_refuses_invalid_profiles_and_unrated_profile_batteries_with_their_paths() {
    let with_rating = |profile: &str, rated_kw: Option<f64>| {
        batteries(profile, 1, rated_kw)
            .http_key("listen", vec!["127.0.0.1:8080"])
            .text()
    };
    let with = |profile: &str| with_rating(profile, Some(5.0));
    let (code, out) = check_with_profile(
        &with("p.toml"),
        Some(
            r#"
manufacturer = "Test"

[[points]]
property = "activePower"
register = 100
type = "i24"

[[points]]
property = "soc"
register = 200
type = "u32"

[[points]]
property = "stateOfHealth"
register = 201
type = "u16"

[controls.ess_power]
signed = { register = 300, type = "i16", positive = "discharge" }
enable = [{ register = 300, value = 1 }]
release = [{ register = 301, value = 0 }]
"#,
        ),
    );
    assert_eq!(code, 78, "{out}");
    // A shape error stops the file at its first problem.
    assert!(out.contains("devices[0].profile: profile "), "{out}");
    assert!(
        out.contains("points[0].type: unknown variant `i24`"),
        "{out}"
    );

    let (code, out) = check_with_profile(
        &with("p.toml"),
        Some(
            r#"
[[points]]
property = "soc"
register = 200
type = "u32"

[[points]]
property = "stateOfHealth"
register = 201
type = "u16"

[controls.ess_power]
signed = { register = 300, type = "i16", positive = "discharge" }
enable = [{ register = 300, value = 1 }]
release = [{ register = 301, value = 0 }]
"#,
        ),
    );
    assert_eq!(code, 78, "{out}");
    for want in [
        "devices[0].profile: profile ",
        "p.toml: points[1].register: registers 201 overlap points[0].register (registers 200-201)",
        "p.toml: controls.ess_power.signed.register: registers 300 overlap \
         controls.ess_power.enable[0].register (registers 300)",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }

    // A shipped profile battery without a rating.
    let (code, out) = check_with_profile(&with_rating("sungrow-sh", None), None);
    assert_eq!(code, 78, "{out}");
    assert!(
        out.contains(
            "devices[0].rated_power: required for a battery steered through profile \"sungrow-sh\""
        ),
        "{out}"
    );
    let (code, out) = check_with_profile(&with("sungrow-sh"), None);
    assert_eq!(code, 0, "{out}");
}
