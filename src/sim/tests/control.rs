//! Writes that steer: the model-123 limit, the model-124 window, revert timers,
//! SoC limits, and the simulated clock.

use std::time::Duration;
use tokio::time::Instant;

use sunspec::models::model103::Model103;
use sunspec::models::model123::Model123;
use sunspec::models::model124::Model124;
use sunspec::models::model701::Model701;
use sunspec::models::model802::Model802;
use tokio::time::sleep;

use super::*;
use crate::register::codec::ValueType::{I16, U16, U32};
use crate::sim::{physics, StorageControl};

/// Data start of model 123 on the inverter and of model 124 on the battery
/// (the layout test pins the chain addresses).
const M123: u16 = 40184;
const M124: u16 = 40255;

fn neg(v: i16) -> u16 {
    v as u16
}

#[tokio::test]
async fn production_limit_clamps_pv() {
    let site = standard_site(NOON, 1.0).await;
    let mut peer = Peer::connect(site.addr("sim").unwrap(), INVERTER).await;
    let pct = M123 + Model123::W_MAX_LIM_PCT.offset;
    let ena = M123 + Model123::W_MAX_LIM_ENA.offset;
    assert_eq!(peer.write1(pct, 3000).await, Ok(()));
    assert_eq!(peer.write1(ena, 1).await, Ok(()));
    settle().await;
    let (_, m) = peer.model(103).await;
    assert_eq!(scaled(&m, &Model103::W, I16, &Model103::W_SF), Some(3000.0));
    assert_eq!(raw(&m, &Model103::ST, U16), Some(5.0), "THROTTLED");
    let state = site.device("sim", INVERTER).unwrap().state();
    assert_eq!(state.limit_pct, Some(30.0));
    assert_eq!(state.ac_power_w, 3000.0);
    assert!(state.available_w.unwrap() > 9000.0);
    // Setpoints out of range are refused and leave the limit as it was.
    assert_eq!(
        peer.write1(pct, 10001).await,
        Err(ExceptionCode::IllegalDataValue)
    );
    assert_eq!(
        peer.write1(ena, 2).await,
        Err(ExceptionCode::IllegalDataValue)
    );
    assert_eq!(peer.read(pct, 1).await, Ok(vec![3000]));
    // Release.
    assert_eq!(peer.write1(ena, 0).await, Ok(()));
    settle().await;
    let state = site.device("sim", INVERTER).unwrap().state();
    assert_eq!(state.limit_pct, None);
    assert!(state.ac_power_w > 9000.0, "{}", state.ac_power_w);
    site.shutdown().await;
}

#[tokio::test]
async fn storage_window_sets_the_battery_power_and_the_meter_follows() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    let state = |u| site.device("sim", u).unwrap().state();
    settle().await;
    let (bat_before, grid_before) = (state(BATTERY), state(METER));
    assert_eq!(
        bat_before.ac_power_w, -5000.0,
        "self-consumption charges the noon surplus at full power"
    );
    assert_eq!(bat_before.storage_control, None);

    // Exactly 25 % of WChaMax (5 kW) discharge: InWRte = -25 %, OutWRte = +25 %.
    let mut peer = Peer::connect(addr, BATTERY).await;
    let out = M124 + Model124::OUT_W_RTE.offset;
    assert_eq!(Model124::IN_W_RTE.offset, Model124::OUT_W_RTE.offset + 1);
    assert_eq!(peer.write(out, &[2500, neg(-2500)]).await, Ok(()));
    assert_eq!(
        peer.write1(M124 + Model124::STOR_CTL_MOD.offset, 3).await,
        Ok(())
    );
    settle().await;

    let (_, m) = peer.model(701).await;
    assert_eq!(scaled(&m, &Model701::W, I16, &Model701::W_SF), Some(1250.0));
    let (_, b) = peer.model(802).await;
    assert_eq!(scaled(&b, &Model802::W, I16, &Model802::W_SF), Some(1250.0));
    assert_eq!(raw(&b, &Model802::CHA_ST, U16), Some(3.0), "DISCHARGING");
    let (_, c) = peer.model(124).await;
    assert_eq!(
        scaled(&c, &Model124::IN_W_RTE, I16, &Model124::IN_OUT_W_RTE_SF),
        Some(-25.0)
    );
    let bat = state(BATTERY);
    assert_eq!(bat.ac_power_w, 1250.0);
    assert_eq!(
        bat.storage_control,
        Some(StorageControl {
            mode: 3,
            in_pct: -25.0,
            out_pct: 25.0
        })
    );
    // The meter sees 6.25 kW less import (more export), and still balances.
    let (pv, grid) = (state(INVERTER), state(METER));
    approx(grid.ac_power_w - grid_before.ac_power_w, -6250.0, 150.0);
    let load = physics::load_w(site.now_ms(), 600.0);
    approx(grid.ac_power_w, load - pv.ac_power_w - 1250.0, 100.0);

    // A charge limit alone (bit 0) caps the own wish: 10 % = 500 W charging.
    assert_eq!(peer.write(out, &[10000, 1000, 0, 0, 0, 0]).await, Ok(()));
    assert_eq!(
        peer.write1(M124 + Model124::STOR_CTL_MOD.offset, 1).await,
        Ok(())
    );
    settle().await;
    assert_eq!(state(BATTERY).ac_power_w, -500.0);
    assert_eq!(
        peer.write1(out, neg(-10001)).await,
        Err(ExceptionCode::IllegalDataValue)
    );
    assert_eq!(
        peer.write1(M124 + Model124::STOR_CTL_MOD.offset, 4).await,
        Err(ExceptionCode::IllegalDataValue)
    );
    site.shutdown().await;
}

#[tokio::test]
async fn revert_timers_release_control_after_silence() {
    let site = standard_site(NOON, 1.0).await;
    let addr = site.addr("sim").unwrap();
    let state = |u| site.device("sim", u).unwrap().state();
    let mut inv = Peer::connect(addr, INVERTER).await;
    let mut bat = Peer::connect(addr, BATTERY).await;
    let t0 = Instant::now();
    // WMaxLimPct, WinTms, RvrtTms = 1 s, RmpTms, WMaxLim_Ena = 1 in one write.
    let pct = M123 + Model123::W_MAX_LIM_PCT.offset;
    assert_eq!(
        Model123::W_MAX_LIM_ENA.offset,
        Model123::W_MAX_LIM_PCT.offset + 4
    );
    assert_eq!(inv.write(pct, &[5000, 0, 1, 0, 1]).await, Ok(()));
    // OutWRte, InWRte, WinTms, RvrtTms = 1 s, then StorCtl_Mod.
    let out = M124 + Model124::OUT_W_RTE.offset;
    assert_eq!(
        Model124::IN_OUT_W_RTE_RVRT_TMS.offset,
        Model124::OUT_W_RTE.offset + 3
    );
    assert_eq!(bat.write(out, &[0, 0, 0, 1]).await, Ok(()));
    assert_eq!(
        bat.write1(M124 + Model124::STOR_CTL_MOD.offset, 3).await,
        Ok(())
    );

    sleep(Duration::from_millis(650).saturating_sub(t0.elapsed())).await;
    assert_eq!(state(INVERTER).limit_pct, Some(50.0));
    assert!(state(BATTERY).storage_control.is_some());
    // Any write to model 123 restarts its timer.
    assert_eq!(inv.write1(pct, 5000).await, Ok(()));

    sleep(Duration::from_millis(1350).saturating_sub(t0.elapsed())).await;
    assert_eq!(
        state(BATTERY).storage_control,
        None,
        "124 reverted after 1 s"
    );
    assert_eq!(
        bat.read(out, 2).await,
        Ok(vec![10000, 10000]),
        "rates back to 100 %"
    );
    assert_eq!(
        state(INVERTER).limit_pct,
        Some(50.0),
        "123 refreshed at 0.65 s"
    );

    sleep(Duration::from_millis(2050).saturating_sub(t0.elapsed())).await;
    assert_eq!(state(INVERTER).limit_pct, None, "123 reverted");
    assert_eq!(
        inv.read(M123 + Model123::W_MAX_LIM_ENA.offset, 1).await,
        Ok(vec![0])
    );
    assert_eq!(
        inv.read(pct, 1).await,
        Ok(vec![5000]),
        "only the enable reverts"
    );
    site.shutdown().await;
}

#[tokio::test]
async fn soc_never_leaves_its_limits() {
    // Battery 2 forced to charge near SoC max, battery 4 forced to discharge near
    // SoC min, one simulated hour per 0.5 real seconds.
    let devices = vec![battery(2, 89.0), battery(4, 11.0)];
    let site = SimSite::start(site_spec(devices, NOON, 7200.0))
        .await
        .unwrap();
    let addr = site.addr("sim").unwrap();
    let out = M124 + Model124::OUT_W_RTE.offset;
    let mode = M124 + Model124::STOR_CTL_MOD.offset;
    let mut full = Peer::connect(addr, 2).await;
    assert_eq!(full.write(out, &[neg(-10000), 10000]).await, Ok(()));
    assert_eq!(full.write1(mode, 3).await, Ok(()));
    let mut empty = Peer::connect(addr, 4).await;
    assert_eq!(empty.write(out, &[10000, neg(-10000)]).await, Ok(()));
    assert_eq!(empty.write1(mode, 3).await, Ok(()));
    let (h2, h4) = (
        site.device("sim", 2).unwrap(),
        site.device("sim", 4).unwrap(),
    );
    for _ in 0..12 {
        sleep(Duration::from_millis(80)).await;
        for h in [&h2, &h4] {
            let soc = h.state().soc.unwrap();
            assert!((10.0..=90.0).contains(&soc), "SoC {soc}");
        }
    }
    let (s2, s4) = (h2.state(), h4.state());
    approx(s2.soc.unwrap(), 90.0, 1e-9);
    assert_eq!(s2.ac_power_w, 0.0);
    approx(s4.soc.unwrap(), 10.0, 1e-9);
    assert_eq!(s4.ac_power_w, 0.0);
    let (_, c) = full.model(124).await;
    assert_eq!(raw(&c, &Model124::CHA_ST, U16), Some(5.0), "FULL");
    assert_eq!(
        scaled(&c, &Model124::CHA_STATE, U16, &Model124::CHA_STATE_SF),
        Some(90.0)
    );
    let (_, c) = empty.model(124).await;
    assert_eq!(raw(&c, &Model124::CHA_ST, U16), Some(2.0), "EMPTY");
    site.shutdown().await;
}

#[tokio::test]
async fn the_time_factor_moves_pv_and_soc() {
    // 04:00 UTC, two simulated hours per real second.
    let start = NOON - 8 * HOUR;
    let site = standard_site(start, 7200.0).await;
    let state = |u| site.device("sim", u).unwrap().state();
    let wh0 = state(INVERTER).energy_produced_wh;
    sleep(Duration::from_millis(600)).await;
    // Around 05:12: no sun yet; the battery has covered the night load.
    assert_eq!(state(INVERTER).ac_power_w, 0.0);
    let soc = state(BATTERY).soc.unwrap();
    assert!(soc < 48.0, "SoC {soc}");
    approx(
        (site.now_ms() - start) as f64,
        1.2 * HOUR as f64,
        0.4 * HOUR as f64,
    );
    sleep(Duration::from_millis(900)).await;
    // Around 07:00: the sun is up and the yield counter moves, by what the
    // power carried in real time (a fraction of a Wh here), not in
    // simulated time: the agent stamps its readings with the wall clock.
    let pv = state(INVERTER);
    assert!(pv.ac_power_w > 1000.0, "PV {}", pv.ac_power_w);
    let grown = pv.energy_produced_wh - wh0;
    assert!(grown > 0.0 && grown < 2.0, "{grown} Wh in 1.5 s");
    let mut peer = Peer::connect(site.addr("sim").unwrap(), INVERTER).await;
    let (_, m) = peer.model(103).await;
    let register = scaled(&m, &Model103::WH, U32, &Model103::WH_SF).unwrap();
    assert!(
        (register - state(INVERTER).energy_produced_wh).abs() <= 1.0,
        "{register}"
    );
    site.shutdown().await;
}

/// A lagging inverter follows a new limit in seconds, not at once; a late
/// meter shows a load step only after its refresh and its reporting lag.
#[tokio::test]
async fn devices_follow_with_their_lag_and_the_meter_reports_late() {
    use crate::sim::SimResponse;
    use sunspec::models::model203::Model203;
    let mut inv = inverter(INVERTER);
    inv.response = SimResponse {
        lag_s: 0.5,
        ramp_percent_per_s: Some(40.0),
        ..SimResponse::IDEAL
    };
    let mut mtr = meter(METER);
    mtr.response = SimResponse {
        refresh_ms: 1000,
        report_lag_ms: 500,
        ..SimResponse::IDEAL
    };
    let site = SimSite::start(site_spec(vec![inv, mtr], NOON, 1.0))
        .await
        .unwrap();
    site.set_sun(Some(1.0));
    site.set_load(Some(1_000.0));
    let handle = site.device("sim", INVERTER).unwrap();
    // Up from 0 W at most 4 kW a second (40 % of 10 kW), the ramp binding
    // until 2 kW short (ramp × lag), then the lag's tail: there in about 3.5 s.
    sleep(Duration::from_millis(1050)).await;
    let w = handle.state().ac_power_w;
    assert!((1_000.0..=4_600.0).contains(&w), "{w}");
    sleep(Duration::from_secs(3)).await;
    approx(handle.state().ac_power_w, 10_000.0, 100.0);

    // A 30 % limit: on the way down after 300 ms, there after about 3.1 s.
    let mut peer = Peer::connect(site.addr("sim").unwrap(), INVERTER).await;
    assert_eq!(
        peer.write1(M123 + Model123::W_MAX_LIM_PCT.offset, 3000)
            .await,
        Ok(())
    );
    assert_eq!(
        peer.write1(M123 + Model123::W_MAX_LIM_ENA.offset, 1).await,
        Ok(())
    );
    sleep(Duration::from_millis(300)).await;
    let w = handle.state().ac_power_w;
    assert!((4_000.0..=9_900.0).contains(&w), "{w}");
    sleep(Duration::from_millis(3_500)).await;
    approx(handle.state().ac_power_w, 3_000.0, 50.0);

    // The meter: the grid is 1 kW − 3 kW = −2 kW; a 4 kW load step shows in
    // the meter's state at once, in its registers only after the lag.
    let mut mtr = Peer::connect(site.addr("sim").unwrap(), METER).await;
    let grid = |m: &[u16]| scaled(m, &Model203::W, I16, &Model203::W_SF).unwrap();
    // Its registers show the settled inverter within a refresh and the lag.
    let since = Instant::now();
    let mut shown = grid(&mtr.model(203).await.1);
    while (shown + 2_000.0).abs() > 150.0 && since.elapsed() < Duration::from_secs(2) {
        sleep(Duration::from_millis(100)).await;
        shown = grid(&mtr.model(203).await.1);
    }
    approx(shown, -2_000.0, 150.0);
    let t0 = Instant::now();
    site.set_load(Some(5_000.0));
    sleep(Duration::from_millis(250)).await;
    approx(
        site.device("sim", METER).unwrap().state().ac_power_w,
        2_000.0,
        150.0,
    );
    let mut first_new = None;
    while t0.elapsed() < Duration::from_secs(3) {
        let shown = grid(&mtr.model(203).await.1);
        if shown > 0.0 {
            first_new = Some(t0.elapsed());
            break;
        }
        sleep(Duration::from_millis(50)).await;
    }
    let at = first_new.expect("the meter shows the step within 3 s");
    // At least the reporting lag, at most a refresh period plus the lag (and
    // a physics step of slack).
    assert!(
        at >= Duration::from_millis(450) && at <= Duration::from_millis(1700),
        "{at:?}"
    );
    site.shutdown().await;
}
