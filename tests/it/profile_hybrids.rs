//! The hybrid inverters added to the library (Fox ESS H3, SolaX G4, Growatt
//! SPH, Sofar HYD, Solis RHI), each seen as a battery, on real sockets: a
//! charging and a discharging register image per family, laid out by hand
//! from the sources each profile cites (raw words, not encoded by the
//! profile), read by the agent's own polling. The agent must show the values
//! with the vocabulary's sign (+ discharging) and scale, and nothing else:
//! a property the profile does not read (a counter only one source names)
//! has no value. None of these has a control recipe, so a steering request
//! finds "no control" (`modbus::control` tests,
//! `read_only_hybrids_have_no_control_when_steered`). The Victron GX (its
//! system service, also read only) is here too, for the function code it
//! reads with.

use std::time::Duration;

use crate::steering_support::*;
use sitegate::model::Property;
use sitegate::register::plan::Table;

use Property as P;
use Table::{Holding as H, Input as I};

fn u32_hi(v: u32) -> Vec<u16> {
    vec![(v >> 16) as u16, v as u16]
}
fn i16w(v: i16) -> Vec<u16> {
    vec![v as u16]
}

/// One simulated device: its image and what the agent must show.
struct Case {
    what: &'static str,
    words: Vec<(Table, u16, Vec<u16>)>,
    expect: Vec<(Property, f64)>,
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// Starts one device per case (each on its own bus) with `profile`, lays
/// each image, then checks every expected value and that no other property
/// has one.
async fn reads(profile: &str, cases: Vec<Case>) {
    let mut text = site_header(300, 30).replace("{rated_production}", "");
    let bus = |i: usize| format!("{}_{i}", profile.replace('-', "_"));
    for i in 0..cases.len() {
        text.push_str(&device_block(
            &bus(i),
            &format!("dvc_{}", bus(i)),
            "battery",
            &format!("profile = \"{profile}\"\nrated_power = \"5 kW\"\n"),
        ));
    }
    let mut config = sitegate::config::parse(&text).expect("test config is valid");
    let dir = tempfile::tempdir().unwrap();
    config.storage.path = dir.path().join("sitegate.db");
    let sim = start_sim(&mut config).await;
    for (i, case) in cases.iter().enumerate() {
        let dev = sim.device(&bus(i), 1).unwrap();
        for (table, addr, words) in &case.words {
            assert!(dev.poke(*table, *addr, words), "{}", case.what);
        }
    }
    let agent = sitegate::agent::Agent::start(config).await.expect("agent");
    let live = agent.live().clone();
    for (i, case) in cases.iter().enumerate() {
        let id = live.find(&format!("dvc_{}", bus(i))).unwrap();
        eventually(
            &format!("{profile}, {}: the documented values", case.what),
            Duration::from_secs(10),
            || async {
                case.expect
                    .iter()
                    .all(|(p, want)| live.latest(id, *p).is_some_and(|r| close(r.value, *want)))
            },
        )
        .await;
        let extra: Vec<Property> = Property::ALL
            .iter()
            .copied()
            .filter(|p| !case.expect.iter().any(|(q, _)| q == p))
            .filter(|p| live.latest(id, *p).is_some())
            .collect();
        assert!(
            extra.is_empty(),
            "{profile}, {}: properties the profile must not offer: {extra:?}",
            case.what
        );
    }
    agent.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foxess_h3_battery_power_sign_and_counters() {
    // 31036 S16 W, + discharging; 31037 0.1 °C; 31038 %; 32003/32006 U32
    // high word first, 0.1 kWh.
    let counters = |charged: u32, discharged: u32| {
        vec![
            (H, 31037, vec![253]),
            (H, 32003, u32_hi(charged)),
            (H, 32006, u32_hi(discharged)),
        ]
    };
    reads(
        "foxess-h3",
        vec![
            Case {
                what: "discharging 2.5 kW",
                words: [
                    vec![(H, 31036, i16w(2500)), (H, 31038, vec![64])],
                    counters(12_345, 11_111),
                ]
                .concat(),
                expect: vec![
                    (P::ActivePower, 2500.0),
                    (P::Soc, 64.0),
                    (P::Temperature, 25.3),
                    (P::TotalEnergyConsumed, 1_234_500.0),
                    (P::TotalEnergyProduced, 1_111_100.0),
                ],
            },
            Case {
                what: "charging 1.8 kW",
                words: [
                    vec![(H, 31036, i16w(-1800)), (H, 31038, vec![30])],
                    counters(70_000, 1),
                ]
                .concat(),
                expect: vec![
                    (P::ActivePower, -1800.0),
                    (P::Soc, 30.0),
                    (P::Temperature, 25.3),
                    (P::TotalEnergyConsumed, 7_000_000.0),
                    (P::TotalEnergyProduced, 100.0),
                ],
            },
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solax_g4_battery_power_counts_charging_positive() {
    // Input 0x0016 S16 W, + charging (negated); 0x001C SoC.
    reads(
        "solax-hybrid-g4",
        vec![
            Case {
                what: "charging 1.2 kW",
                words: vec![(I, 0x16, i16w(1200)), (I, 0x1C, vec![77])],
                expect: vec![(P::ActivePower, -1200.0), (P::Soc, 77.0)],
            },
            Case {
                what: "discharging 900 W",
                words: vec![(I, 0x16, i16w(-900)), (I, 0x1C, vec![76])],
                expect: vec![(P::ActivePower, 900.0), (P::Soc, 76.0)],
            },
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn growatt_sph_battery_power_is_discharge_minus_charge() {
    // Input 1009 (discharge) and 1011 (charge): U32 high word first, 0.1 W
    // magnitudes; 1014 SoC; 1054 discharge total U32 0.1 kWh.
    reads(
        "growatt-sph",
        vec![
            Case {
                what: "discharging 2,345.6 W",
                words: vec![
                    (I, 1009, u32_hi(23_456)),
                    (I, 1011, u32_hi(0)),
                    (I, 1014, vec![55]),
                    (I, 1054, u32_hi(4_321)),
                ],
                expect: vec![
                    (P::ActivePower, 2345.6),
                    (P::Soc, 55.0),
                    (P::TotalEnergyProduced, 432_100.0),
                ],
            },
            Case {
                what: "charging 1.5 kW",
                words: vec![
                    (I, 1009, u32_hi(0)),
                    (I, 1011, u32_hi(15_000)),
                    (I, 1014, vec![56]),
                    (I, 1054, u32_hi(4_322)),
                ],
                expect: vec![
                    (P::ActivePower, -1500.0),
                    (P::Soc, 56.0),
                    (P::TotalEnergyProduced, 432_200.0),
                ],
            },
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sofar_hyd_battery_power_counts_ten_watts_charging_positive() {
    // Holding 0x0606 S16, 10 W per count, + charging; 0x0608 SoC; 0x069A
    // discharge total U32 high word first, 0.1 kWh.
    reads(
        "sofar-hyd",
        vec![
            Case {
                what: "charging 2.5 kW",
                words: vec![
                    (H, 0x0606, i16w(250)),
                    (H, 0x0608, vec![42]),
                    (H, 0x069A, u32_hi(9_876)),
                ],
                expect: vec![
                    (P::ActivePower, -2500.0),
                    (P::Soc, 42.0),
                    (P::TotalEnergyProduced, 987_600.0),
                ],
            },
            Case {
                what: "discharging 1.2 kW",
                words: vec![
                    (H, 0x0606, i16w(-120)),
                    (H, 0x0608, vec![41]),
                    (H, 0x069A, u32_hi(9_877)),
                ],
                expect: vec![
                    (P::ActivePower, 1200.0),
                    (P::Soc, 41.0),
                    (P::TotalEnergyProduced, 987_700.0),
                ],
            },
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solis_rhi_battery_power_takes_its_sign_from_the_direction_register() {
    // Input 33149 U32 W magnitude; 33135: 0 charging, 1 discharging; 33139
    // SoC; 33165 discharge total U32 kWh.
    let image = |power: u32, direction: u16, soc: u16| {
        vec![
            (I, 33149, u32_hi(power)),
            (I, 33135, vec![direction]),
            (I, 33139, vec![soc]),
            (I, 33165, u32_hi(1_234)),
        ]
    };
    reads(
        "solis-hybrid",
        vec![
            Case {
                what: "discharging 3 kW",
                words: image(3000, 1, 88),
                expect: vec![
                    (P::ActivePower, 3000.0),
                    (P::Soc, 88.0),
                    (P::TotalEnergyProduced, 1_234_000.0),
                ],
            },
            Case {
                what: "charging 3 kW",
                words: image(3000, 0, 87),
                expect: vec![
                    (P::ActivePower, -3000.0),
                    (P::Soc, 87.0),
                    (P::TotalEnergyProduced, 1_234_000.0),
                ],
            },
        ],
    )
    .await;
}

/// Victron GX: 842 battery power (S16 W, + charging, negated), 843 SoC, 844
/// state, read with function 3 (holding). Peers read them with function 4;
/// the profile keeps 3 because Victron's ModbusTCP FAQ says the GX answers
/// both alike. Other words lie at the same addresses of the input table
/// (function 4): the agent must show the holding words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn victron_gx_battery_reads_842_to_844_with_function_3() {
    let input = vec![(I, 842, i16w(-999)), (I, 843, vec![11]), (I, 844, vec![0])];
    reads(
        "victron-gx",
        vec![
            Case {
                what: "charging 1.8 kW",
                words: [
                    vec![(H, 842, i16w(1800)), (H, 843, vec![80]), (H, 844, vec![1])],
                    input.clone(),
                ]
                .concat(),
                expect: vec![
                    (P::ActivePower, -1800.0),
                    (P::Soc, 80.0),
                    (P::OperatingState, 1.0),
                ],
            },
            Case {
                what: "discharging 600 W",
                words: [
                    vec![(H, 842, i16w(-600)), (H, 843, vec![79]), (H, 844, vec![2])],
                    input,
                ]
                .concat(),
                expect: vec![
                    (P::ActivePower, 600.0),
                    (P::Soc, 79.0),
                    (P::OperatingState, 2.0),
                ],
            },
        ],
    )
    .await;
}
