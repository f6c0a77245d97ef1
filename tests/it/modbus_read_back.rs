//! What a steering write costs in reads, counted at the simulated device: the
//! registers written are read back in one range request; a device that
//! refuses that range ("illegal data address") still gets its write
//! confirmed, point by point, and is read back that way from then on; and a
//! device that refuses a write has its static points (the scale factors the
//! write was computed from) read again, so that the retry is computed from
//! what it holds now.

use std::time::Duration;

use ::sunspec::models::model123::Model123 as M123;
use serde_json::json;
use sitegate::model::time::now_ms;
use sitegate::model::Property;
use sitegate::register::plan::{Span, Table};
use sitegate::sim::SimDeviceHandle;

use crate::common::farm::{FarmInverter, Measurements};
use crate::steering_support::*;

const T: Duration = Duration::from_secs(15);

/// One inverter, `pv`, polled every `poll_ms`.
fn site(rated_kw: f64, poll_ms: u64) -> TestSite {
    TestSite::new(300, 30)
        .inverter("pv", "dvc_pv", rated_kw)
        .poll_interval_ms(poll_ms)
}

/// Polls a minute apart: every read in a test's window is steering's.
const RARELY: u64 = 60_000;

/// The agent on `site`, `prepare` run on the device before the agent
/// starts; returns once the inverter is at its fallback.
async fn start(site: TestSite, prepare: impl FnOnce(&SimDeviceHandle)) -> Rig {
    let mut config = site.config();
    let dir = tempfile::tempdir().unwrap();
    config.storage.path = dir.path().join("sitegate.db");
    let sim = site.start_sim(&mut config).await;
    prepare(&sim.device("pv", 1).unwrap());
    let rig = Rig::join(sim, config, dir).await;
    eventually("the inverter at its fallback", T, || async {
        let d = rig.device_state("dvc_pv").await;
        d["state"] == "fallback" && d["confirmed"] == true
    })
    .await;
    rig
}

/// Limits production to `kw` and waits until the device holds `pct_word` in
/// `WMaxLimPct` and the write is confirmed; returns the reads the device
/// answered meanwhile.
async fn limit(rig: &Rig, kw: f64, pct_at: u16, pct_word: u16) -> u64 {
    let dev = rig.device("pv");
    let before = dev.read_count();
    let body = json!({"setting": {"value": kw, "unit": "kW"}, "validUntil": now_ms() + 60_000});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering/curtailment"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
    eventually(&format!("{kw} kW written and confirmed"), T, || async {
        let d = rig.device_state("dvc_pv").await;
        d["state"] == "applied"
            && d["confirmed"] == true
            && rig.device("pv").registers(pct_at, 1) == [pct_word]
    })
    .await;
    dev.read_count() - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steered_inverters_write_is_read_back_in_one_request() {
    let rig = start(site(10.0, RARELY), |_| {}).await;
    let mut writes = rig.sim.subscribe_writes();
    // 5 kW of 10: WMaxLimPct 50.00 %, its revert time, WMaxLim_Ena, at
    // 40187, 40189 and 40191 on the simulator's inverter.
    let reads = limit(&rig, 5.0, 40187, 5000).await;
    assert_eq!(reads, 1, "one read-back request");
    let mut last = None;
    while let Ok(w) = writes.try_recv() {
        assert!(w.exception.is_none(), "{w:?}");
        last = Some(w.seq);
    }
    let last = last.expect("the limit was written");
    assert_eq!(
        rig.sim.request_count("pv"),
        Some(last + 2),
        "the read-back is the one request after the last write"
    );
    assert_eq!(rig.limit("pv"), Some(50.0));
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_refuses_the_range_is_read_back_point_by_point() {
    // The inverter leaves out WMaxLimPct_WinTms and _RmpTms, between the
    // registers a limit writes: a read across them is refused.
    let leave_out = |dev: &SimDeviceHandle| {
        dev.refuse_reads(Span::new(Table::Holding, 40188, 1));
        dev.refuse_reads(Span::new(Table::Holding, 40190, 1));
    };
    let rig = start(site(10.0, RARELY), leave_out).await;
    // The release at start (the registers as found, 40187..40191) was the
    // first write: its range was refused and read again point by point.
    let id = rig.agent.live().find("dvc_pv").unwrap();
    let map = rig.agent.device_maps().get(id).unwrap();
    assert!(map.reads_back_by_point());
    // Learned: each limit's three registers are read back one by one, at once.
    assert_eq!(limit(&rig, 5.0, 40187, 5000).await, 3);
    assert_eq!(rig.limit("pv"), Some(50.0));
    assert_eq!(limit(&rig, 3.0, 40187, 3000).await, 3);
    assert_eq!(rig.limit("pv"), Some(30.0));
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_points_are_read_again_after_a_refused_write() {
    let mut farm = FarmInverter::new(Measurements::Int);
    let kind = farm.sim_kind();
    let tweak = move |spec: &mut sitegate::sim::SimSiteSpec| {
        spec.servers[0].devices[0].kind = kind;
    };
    // Polled often: the poll decodes with what steering read again.
    let rig = start(site(25.0, 200).sim(tweak), |dev| farm.lay(dev)).await;
    let dev = rig.device("pv");
    let pct = farm.addr(123, &M123::W_MAX_LIM_PCT);
    let ena = farm.addr(123, &M123::W_MAX_LIM_ENA);
    // 12.5 kW of 25: 50.00 % at WMaxLimPct_SF −2.
    limit(&rig, 12.5, pct, 5000).await;
    assert_eq!(dev.registers(ena, 1), [1]);

    // The device's scale factor becomes −1 (a firmware update, say); the
    // agent, computing from the kept −2, would write 4000 for 40 %, which
    // the device refuses.
    farm.poke(&dev, 123, &M123::W_MAX_LIM_PCT_SF, &[(-1i16) as u16]);
    dev.refuse_word(pct, 4000);
    let mut writes = rig.sim.subscribe_writes();
    limit(&rig, 10.0, pct, 400).await;
    let mut refused = 0;
    while let Ok(w) = writes.try_recv() {
        if w.address == pct && w.exception.is_some() {
            refused += 1;
        }
    }
    assert_eq!(
        refused, 1,
        "refused once, then written from the new scale factor"
    );
    // The poll decodes the limit with the new scale factor too.
    let live = rig.agent.live().clone();
    let id = live.find("dvc_pv").unwrap();
    eventually("the limit read as 40 %", T, || async {
        live.snapshot(id)
            .reading(Property::ActivePowerLimit)
            .is_some_and(|r| r.value == 40.0)
    })
    .await;
    rig.shutdown().await;
}
