//! Steering devices that are not SunSpec 123/124, over HTTP, checked at the
//! simulated devices' registers: two register-map profile batteries (Sungrow SH:
//! mode + direction + one power register, no timer; Huawei LUNA2000: split power
//! registers, a direction register and a revert timer in minutes), a SunSpec
//! inverter (model 123), and SunSpec DER devices with model 704 but neither 123
//! nor 124: one as an inverter (`WMaxLimPct`), one as a battery (`WSet`).

use std::time::Duration;

use crate::steering_support::*;
use serde_json::json;
use sitegate::sim::{SimKind, SimSiteSpec, Variant, WriteEvent};
use sunspec::models::model704::Model704 as M704;

const INTERVAL_MS: u64 = 300;
const REVERT_S: u16 = 30;

fn config() -> String {
    let mut t = site_header(INTERVAL_MS, REVERT_S).replace("{rated_production}", "");
    for (bus, reference, kind, extra) in [
        (
            "bat-s",
            "dvc_bat_s",
            "battery",
            "profile = \"sungrow-sh\"\nrated_power = \"10 kW\"\ncapacity = \"20 kWh\"",
        ),
        (
            "bat-h",
            "dvc_bat_h",
            "battery",
            "profile = \"huawei-luna2000\"\nrated_power = \"5 kW\"\ncapacity = \"10 kWh\"",
        ),
        (
            "bat-d",
            "dvc_bat_d",
            "battery",
            "rated_power = \"10 kW\"\ncapacity = \"10 kWh\"",
        ),
        ("pv-a", "dvc_pv_a", "inverter", "rated_power = \"10 kW\""),
        ("pv-d", "dvc_pv_d", "inverter", "rated_power = \"10 kW\""),
    ] {
        t.push_str(&device_block(bus, reference, kind, extra));
    }
    t
}

/// `pv-d` and `bat-d` are SunSpec DER devices (701, 702, 704, 713): no model
/// 123 or 124.
fn der_devices(spec: &mut SimSiteSpec) {
    for s in spec
        .servers
        .iter_mut()
        .filter(|s| s.name == "pv-d" || s.name == "bat-d")
    {
        s.devices[0].kind = SimKind::Fixed {
            variant: Variant::DerStorage,
            rated_w: 10_000.0,
        };
    }
}

/// Reads registers of the model 704 block of the device on `bus`: one word
/// at each of `words`, then two words (high first) at each of `longs`.
fn der(rig: &Rig, bus: &str, words: &[u16], longs: &[u16]) -> Vec<u32> {
    let reference = format!("dvc_{}", bus.replace('-', "_"));
    let id = rig.agent.live().find(&reference).unwrap();
    let map = rig.agent.device_maps().get(id).unwrap();
    let b = *map.model(704).expect("model 704");
    let d = rig.device(bus);
    let one = words
        .iter()
        .map(|o| u32::from(d.registers(b.point(*o), 1)[0]));
    let two = longs.iter().map(|o| {
        let w = d.registers(b.point(*o), 2);
        (u32::from(w[0]) << 16) | u32::from(w[1])
    });
    one.chain(two).collect()
}

/// `[WMaxLimPctEna, WMaxLimPct, WMaxLimPctRvrtTms]` of `pv-d`.
fn der_limit(rig: &Rig) -> Vec<u32> {
    use M704 as M;
    let words = [M::W_MAX_LIM_PCT_ENA.offset, M::W_MAX_LIM_PCT.offset];
    der(rig, "pv-d", &words, &[M::W_MAX_LIM_PCT_RVRT_TMS.offset])
}

/// `[WSetEna, WSetMod, WSet (i32 as u32), WSetRvrtTms]` of `bat-d`.
fn der_power(rig: &Rig) -> Vec<u32> {
    use M704 as M;
    let words = [M::W_SET_ENA.offset, M::W_SET_MOD.offset];
    let longs = [M::W_SET.offset, M::W_SET_RVRT_TMS.offset];
    der(rig, "bat-d", &words, &longs)
}

/// Sungrow: EMS mode 13049, forced command 13050, power 13051.
fn sungrow(rig: &Rig) -> Vec<u16> {
    rig.device("bat-s").registers(13049, 3)
}

/// Huawei: direction 47100, and charge power 47247 / discharge power 47249 (u32).
fn huawei(rig: &Rig) -> (u16, u32, u32) {
    let d = rig.device("bat-h");
    let u32_at = |a| {
        let w = d.registers(a, 2);
        (u32::from(w[0]) << 16) | u32::from(w[1])
    };
    (d.registers(47100, 1)[0], u32_at(47247), u32_at(47249))
}

async fn all_applied(rig: &Rig) -> bool {
    rig.state().await["devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["state"] == "applied" && d["confirmed"] == true)
}

/// The accepted writes received so far, as `(server, address, values)`.
fn drain(rx: &mut tokio::sync::broadcast::Receiver<WriteEvent>) -> Vec<(String, u16, Vec<u16>)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if e.exception.is_none() {
            out.push((e.server, e.address, e.values));
        }
    }
    out
}

/// The writes of `events` to one server, as `(address, values)`.
fn to(events: &[(String, u16, Vec<u16>)], server: &str) -> Vec<(u16, Vec<u16>)> {
    events
        .iter()
        .filter(|e| e.0 == server)
        .map(|e| (e.1, e.2.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_batteries_and_a_704_inverter_follow_the_site_signal() {
    let rig = Rig::start_with(&config(), der_devices).await;
    // At fallback: the registers as found (the simulated profile devices
    // start in their own control; the 704 inverter with an installer's 80 %
    // limit enabled: it keeps it).
    assert_eq!(sungrow(&rig), [0, 0xCC, 0]);
    assert_eq!(huawei(&rig).0, 0);
    assert_eq!(der_limit(&rig), [1, 80, 0]);
    assert_eq!(der_power(&rig)[0], 0);

    // 10 kW discharge, by rating 4 + 2 + 4 kW; 10 kW curtailment, 5 kW each.
    let until = now_ms() + 60_000;
    let body = json!({"energyStorageSetting": {"value": 10, "unit": "kW"},
                      "productionCurtailment": {"value": 10, "unit": "kW"}, "validUntil": until});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
    eventually(
        "setpoints at the registers",
        Duration::from_secs(5),
        || async {
            sungrow(&rig) == [2, 0xBB, 4000]
                && huawei(&rig) == (2, 0, 2000)
                && rig.limit("pv-a") == Some(50.0)
                && der_limit(&rig) == [1, 50, u32::from(REVERT_S)]
                && der_power(&rig) == [1, 1, 4000, u32::from(REVERT_S)]
        },
    )
    .await;
    // Huawei's timer is in minutes: 30 s round up to one.
    assert_eq!(rig.device("bat-h").registers(47083, 1), [1]);
    assert_eq!(rig.device("bat-h").registers(47246, 1), [0]);
    eventually("all applied and confirmed", Duration::from_secs(10), || {
        all_applied(&rig)
    })
    .await;
    let s = rig.device_state("dvc_bat_s").await;
    assert_eq!(s["setpoint"], json!({"value": 4000, "unit": "W"}));
    assert_eq!(s["component"], "ess");
    assert_eq!(
        rig.device_state("dvc_pv_d").await["setpoint"],
        json!({"value": 5000, "unit": "W"})
    );

    // Charging 5 kW: direction and the other power register; 704 goes negative.
    let (s, _) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": -5000, "unit": "W"}, "validUntil": until}),
        )
        .await;
    assert_eq!(s, 200);
    eventually("5 kW charge", Duration::from_secs(10), || async {
        sungrow(&rig) == [2, 0xAA, 2000]
            && huawei(&rig) == (1, 1000, 0)
            && der_power(&rig)[2] == (-2000i32) as u32
    })
    .await;

    // Expiry: the storage gets the profiles' release writes within one interval.
    let mut writes = rig.sim.subscribe_writes();
    let end = now_ms() + 1000;
    let (s, _) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": 1, "unit": "kW"}, "validUntil": end}),
        )
        .await;
    assert_eq!(s, 200);
    eventually(
        "released after validUntil",
        Duration::from_secs(4),
        || async {
            // Every register each release ends with, so that the writes
            // drained below are all there.
            sungrow(&rig) == [0, 0xCC, 0] && huawei(&rig) == (0, 0, 0) && der_power(&rig)[0] == 0
        },
    )
    .await;
    let late = now_ms() - end;
    assert!(
        late <= INTERVAL_MS as i64,
        "released {late} ms after validUntil"
    );
    let events = drain(&mut writes);
    let s = to(&events, "bat-s");
    // The profile's release (13049, 13050) with the words found, then the
    // power register as found.
    assert!(
        s.ends_with(&[(13049, vec![0]), (13050, vec![0xCC]), (13051, vec![0])]),
        "{s:?}"
    );
    let h = to(&events, "bat-h");
    // The profile's release (47087, 47100) with the words found, then the
    // timer, the mode and the powers as found.
    let found = [
        (47087, vec![0]),
        (47100, vec![0]),
        (47083, vec![0]),
        (47246, vec![0]),
        (47247, vec![0, 0]),
        (47249, vec![0, 0]),
    ];
    assert!(h.ends_with(&found), "{h:?}");
    eventually("batteries at fallback", Duration::from_secs(10), || async {
        rig.device_state("dvc_bat_s").await["state"] == "fallback"
            && rig.device_state("dvc_bat_h").await["state"] == "fallback"
            && rig.device_state("dvc_bat_d").await["state"] == "fallback"
    })
    .await;
    // The curtailment holds meanwhile; DELETE releases 704's limit too, to
    // the installer's 80 %.
    assert_eq!(der_limit(&rig), [1, 50, u32::from(REVERT_S)]);
    let (s, _) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert_eq!(s, 200);
    eventually("limits released", Duration::from_secs(10), || async {
        der_limit(&rig) == [1, 80, 0] && rig.limit("pv-a").is_none()
    })
    .await;
    rig.shutdown().await;
}

/// A release leaves a device as the installer left it, also after an agent
/// that stopped while steering without releasing it (the device refused the
/// release at stop): the next start writes back the registers as first found
/// (kept in the store), not the setpoint it finds there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_writes_back_the_registers_as_first_found() {
    let rig = Rig::start_with(&config(), der_devices).await;
    assert_eq!(der_limit(&rig), [1, 80, 0], "found and left as it is");
    // The state says the inverter was found limited.
    eventually(
        "the found limit in the state",
        Duration::from_secs(5),
        || async {
            rig.device_state("dvc_pv_d").await["error"]
                .as_str()
                .is_some_and(|e| e.contains("found limited to 80 %"))
        },
    )
    .await;
    let until = now_ms() + 600_000;
    let body = json!({"setting": {"value": 5, "unit": "kW"}, "validUntil": until});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering/curtailment"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
    eventually(
        "the curtailment at the registers",
        Duration::from_secs(5),
        || async { der_limit(&rig) == [1, 25, u32::from(REVERT_S)] },
    )
    .await;
    // The agent stops while steering and the device refuses the release at
    // stop, so it keeps the setpoint. The signal is ended in the store, so
    // the next start releases.
    let pv = rig.device("pv-d");
    let id = rig.agent.live().find("dvc_pv_d").unwrap();
    let block = *rig.agent.device_maps().get(id).unwrap().model(704).unwrap();
    let enable = block.point(M704::W_MAX_LIM_PCT_ENA.offset);
    pv.set_refuse_writes(true);
    let rig = rig
        .restart_with(|config| {
            assert_eq!(pv.registers(enable, 1), [1], "still limited after the stop");
            pv.set_refuse_writes(false);
            let conn = rusqlite::Connection::open(&config.storage.path).expect("the database");
            conn.execute("DELETE FROM steering_timeline", [])
                .expect("end the stored signal");
        })
        .await;
    eventually(
        "the installer's limit back",
        Duration::from_secs(10),
        || async { der_limit(&rig) == [1, 80, 0] },
    )
    .await;
    rig.shutdown().await;
}

/// A device that reports a word it does not take (the found value of its
/// EMS command register, set by an installer tool, refused on write): the
/// release falls back to the profile's own release words, and the device is
/// released all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_found_word_the_device_refuses_falls_back_to_the_profile_release() {
    let rig = Rig::start_with(&config(), der_devices).await;
    assert_eq!(sungrow(&rig), [0, 0xCC, 0]);
    let device = rig.device("bat-s");
    // Between two runs an installer tool leaves a command the device reports
    // but refuses to be written.
    let rig = rig
        .restart_with(|_| {
            assert!(device.poke(sitegate::register::plan::Table::Holding, 13050, &[0x55]));
            device.refuse_word(13050, 0x55);
        })
        .await;
    eventually(
        "released with the profile's own words",
        Duration::from_secs(10),
        || async { sungrow(&rig)[..2] == [0, 0xCC] },
    )
    .await;
    rig.shutdown().await;
}
