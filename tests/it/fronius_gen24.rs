//! A Fronius GEN24 hybrid steered through the real agent over a real socket:
//! the simulator presents a Symo GEN24 Plus (Common model "Fronius" /
//! "Symo GEN24 ... Plus", model 124 with `InOutWRte_SF` −2), the agent tells
//! it from its Common model and writes the GEN24's recipes. Each test reads
//! the model-124 words the device holds: a charge is a negative `OutWRte`
//! under the discharge bit, a discharge a negative `InWRte` under the charge
//! bit, idle blocks both ways, a release gives back the words found, and an
//! agent killed while charging leaves the inverter back in its automatic
//! mode by the inverter's own revert timer.

use std::time::Duration;

use crate::common::process::AgentProcess;
use crate::common::words;
use crate::steering_support::*;
use ::sunspec::models::model124::Model124 as M124;
use serde_json::json;
use sitegate::config::parse;
use sitegate::modbus::control::Recipe;
use sitegate::model::DeviceType;
use sitegate::sim::{SimDeviceHandle, SimKind, SimSiteSpec, StorageControl};

const BUS: &str = "gen24";
/// The agent's revert timeout, written to `InOutWRte_RvrtTms`.
const REVERT_S: u16 = 3;

/// A site with the GEN24's battery (10 kW, so 1 % of `WChaMax` is 100 W).
fn site() -> String {
    let mut t = site_header(300, REVERT_S).replace("{rated_production}", "");
    t.push_str(&device_block(
        BUS,
        "dvc_gen24",
        "battery",
        "rated_power = \"10 kW\"\ncapacity = \"10 kWh\"\nsoc_min = 5\nsoc_max = 95",
    ));
    t
}

/// The simulated battery becomes a Fronius GEN24 with the same ratings.
fn as_gen24(spec: &mut SimSiteSpec) {
    for d in spec.servers.iter_mut().flat_map(|s| s.devices.iter_mut()) {
        if let SimKind::Battery {
            rated_w,
            capacity_wh,
            initial_soc,
            soc_min,
            soc_max,
        } = d.kind
        {
            d.kind = SimKind::FroniusGen24 {
                rated_w,
                capacity_wh,
                initial_soc,
                soc_min,
                soc_max,
            };
        }
    }
}

/// Model 124's written points as the device holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Words {
    stor_ctl_mod: u16,
    out_w_rte: i16,
    in_w_rte: i16,
    rvrt_tms: u16,
}

/// Where model 124's data starts, walking the chain from the marker.
fn block_124(dev: &SimDeviceHandle) -> u16 {
    assert_eq!(dev.registers(40000, 2), [0x5375, 0x6E53], "SunS at 40000");
    let mut at = 40002u16;
    loop {
        let header = dev.registers(at, 2);
        assert_ne!(header[0], 0xFFFF, "model 124 in the chain");
        if header[0] == 124 {
            return at + 2;
        }
        at += 2 + header[1];
    }
}

/// Model 124's storage control points of `dev`.
fn storage_points(dev: &SimDeviceHandle) -> Words {
    let data = block_124(dev);
    let word = |offset: u16| words(dev, &[(data + offset, 1)])[0];
    Words {
        stor_ctl_mod: word(M124::STOR_CTL_MOD.offset),
        out_w_rte: word(M124::OUT_W_RTE.offset) as i16,
        in_w_rte: word(M124::IN_W_RTE.offset) as i16,
        rvrt_tms: word(M124::IN_OUT_W_RTE_RVRT_TMS.offset),
    }
}

async fn steer_ess(rig: &Rig, kw: f64) {
    let body = json!({"setting": {"value": kw, "unit": "kW"}, "validUntil": now_ms() + 600_000});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering/ess"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
}

/// Waits until the device holds `want`; fails naming what it holds.
async fn holds(dev: &SimDeviceHandle, want: Words) {
    let mut seen = storage_points(dev);
    for _ in 0..300 {
        seen = storage_points(dev);
        if seen == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the GEN24 holds {seen:?}, not {want:?}");
}

/// The battery's power (W, + discharging) settles near `w`.
async fn runs_at(dev: &SimDeviceHandle, w: f64) {
    eventually(&format!("battery at {w} W"), Duration::from_secs(5), || {
        let p = dev.state().ac_power_w;
        async move { (p - w).abs() < 50.0 }
    })
    .await;
}

/// The agent on a GEN24 at night with a small house load, so that the
/// battery's own wish stays below every forced power.
async fn start() -> Rig {
    let rig = Rig::start_with(&site(), as_gen24).await;
    rig.sim.set_sun(Some(0.0));
    rig.sim.set_load(Some(500.0));
    rig
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fronius_gen24_is_told_by_its_common_model() {
    let rig = start().await;
    let map = rig
        .agent
        .device_maps()
        .get(sitegate::model::DeviceId(0))
        .expect("the GEN24 discovered");
    assert_eq!(map.info.manufacturer.as_deref(), Some("Fronius"));
    assert_eq!(map.info.model.as_deref(), Some("Symo GEN24 10.0 Plus"));
    assert!(matches!(
        Recipe::for_device(DeviceType::Battery, None, &map),
        Ok(Recipe::StorageGen24(_))
    ));
    rig.shutdown().await;
}

/// Steers the GEN24 to `kw` (+ discharge) and checks the model-124 words it
/// holds and the power it then runs at.
async fn steered_to(kw: f64, (stor_ctl_mod, out_w_rte, in_w_rte): (u16, i16, i16), runs_w: f64) {
    let rig = start().await;
    let dev = rig.device(BUS);
    steer_ess(&rig, kw).await;
    let expected = Words {
        stor_ctl_mod,
        out_w_rte,
        in_w_rte,
        rvrt_tms: REVERT_S,
    };
    holds(&dev, expected).await;
    runs_at(&dev, runs_w).await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fronius_gen24_charge_is_a_negative_discharge_rate() {
    // StorCtl_Mod 2 (discharge limit), OutWRte −50 %, InWRte 100 % (SF −2).
    steered_to(-5.0, (2, -5000, 10_000), -5000.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fronius_gen24_discharge_is_a_negative_charge_rate() {
    // StorCtl_Mod 1 (charge limit), InWRte −40 %, OutWRte 100 %.
    steered_to(4.0, (1, 10_000, -4000), 4000.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fronius_gen24_idle_blocks_charge_and_discharge() {
    // StorCtl_Mod 3 (both limits), both rates 0.
    steered_to(0.0, (3, 0, 0), 0.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fronius_gen24_release_gives_back_automatic_mode_and_full_rates() {
    let rig = start().await;
    let dev = rig.device(BUS);
    let found = storage_points(&dev);
    assert_eq!(
        found,
        Words {
            stor_ctl_mod: 0,
            out_w_rte: 10_000,
            in_w_rte: 10_000,
            rvrt_tms: 0,
        },
        "the GEN24 as installed"
    );
    steer_ess(&rig, 0.0).await;
    holds(
        &dev,
        Words {
            stor_ctl_mod: 3,
            out_w_rte: 0,
            in_w_rte: 0,
            rvrt_tms: REVERT_S,
        },
    )
    .await;
    let (s, v) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert!((200..300).contains(&s), "{s} {v}");
    // No rate left at 0: both back at 100 %, the mode automatic.
    holds(&dev, found).await;
    assert_eq!(dev.state().storage_control, None::<StorageControl>);
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fronius_gen24_returns_to_automatic_mode_by_its_own_timer_after_a_hard_stop() {
    let text = site();
    let mut config = parse(&text).unwrap();
    let sim = start_sim_with(&mut config, as_gen24).await;
    let dev = sim.device(BUS, 1).expect("the GEN24");
    let (mut agent, base) = AgentProcess::spawn_on(&text, &config).await;
    let body = json!({"energyStorageSetting": {"value": -5, "unit": "kW"},
                      "validUntil": now_ms() + 600_000});
    post_signal(&base, &body).await;
    let charging = Words {
        stor_ctl_mod: 2,
        out_w_rte: -5000,
        in_w_rte: 10_000,
        rvrt_tms: REVERT_S,
    };
    holds(&dev, charging).await;
    // Refreshed before the timer runs out: still charging after twice its time.
    tokio::time::sleep(Duration::from_secs(u64::from(REVERT_S) * 2)).await;
    assert_eq!(
        storage_points(&dev),
        charging,
        "the agent let the timer run out"
    );

    // SIGKILL: no release, only the inverter's own timer.
    agent.kill();
    eventually(
        "back in automatic mode",
        Duration::from_secs(u64::from(REVERT_S) + 3),
        || async { dev.state().storage_control.is_none() },
    )
    .await;
    // The mode is automatic; the rates keep their last words (no source
    // says the GEN24 resets them), which StorCtl_Mod 0 does not apply.
    assert_eq!(
        storage_points(&dev),
        Words {
            stor_ctl_mod: 0,
            ..charging
        }
    );
    sim.shutdown().await;
}
