//! The transitions the grid loop causes itself, end to end: a simulated site
//! whose inverters and batteries follow a setpoint with a lag (inverters ramp
//! at most 10 % of their rating per second) and whose meter refreshes every
//! second with the power of half a second before, over real sockets.
//!
//! The transitions' timing is the subject of the pure core's tests, which run
//! the loop's decisions at explicit times on a model of such a site at lags of
//! 0.1, 3 and 8 s (`src/steering/decisions/hold/tests/transitions.rs`: a
//! tighter limit's end, a lost meter's return, clouds and a returning sun
//! under a cap, a tight limit without a cycle, load and sun steps). Here they
//! wait in real time because the devices and the meter are real sockets: one
//! transition shows that the running loop moves as that model does (the end
//! of a tighter limit, at a 3 s lag), and one shows what only a socket can (a
//! meter poll left unanswered).

use std::time::Duration;
use tokio::time::Instant;

use crate::common::proxy::behind_proxy;
use crate::steering_support::*;
use sitegate::sim::Fault;

/// The demo site with devices that respond like real ones: inverters and
/// batteries with a lag of `lag_s` (inverters ramping at most 10 % a
/// second), a meter refreshed every second with the power of 0.5 s before.
fn lagging_site(lag_s: f64) -> TestSite {
    TestSite::demo(1000)
        .lag_s(Kind::Inverter, lag_s)
        .ramp_percent_per_s(Kind::Inverter, 10.0)
        .lag_s(Kind::Battery, lag_s)
        .meter_refresh(1000, 500)
}

fn export_w(rig: &Rig) -> f64 {
    -rig.device("grid").state().ac_power_w
}

/// Watches the export at the simulated meter for `seconds`: its peak, W.
async fn peak_export(rig: &Rig, seconds: u64) -> f64 {
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut peak = f64::MIN;
    while Instant::now() < until {
        peak = peak.max(export_w(rig));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    peak
}

/// 40 kW and its band (2 %).
const EXPORT_BAND: f64 = 40_800.0;

async fn grid_limit(rig: &Rig, max_export_w: f64, seconds: u64) {
    rig.grid_limit(Side::Export, max_export_w, Duration::from_secs(seconds))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_a_tighter_limit_goes_to_what_the_configured_one_needs() {
    let rig = lagging_site(3.0).start().await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    grid_limit(&rig, 10_000.0, 20).await;
    // Real time for the lagging devices to settle under the 10 kW limit (3 s of
    // lag, inverters ramping at most 10 % a second), 8 s before the entry ends.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let held = export_w(&rig);
    assert!(held <= 10_500.0, "the 10 kW limit held: {held} W");
    // The entry ends 20 s after it began: 40 kW again, and the storage and the
    // inverters move there at their own pace.
    let peak = peak_export(&rig, 35).await;
    assert!(
        peak <= EXPORT_BAND,
        "the export reached {peak} W after the 10 kW limit ended; state: {}",
        rig.state().await
    );
    rig.shutdown().await;
}

/// A meter poll that goes unanswered once (a timeout on a loaded link) is
/// not a lost meter: the last reading serves until it is 3 poll intervals
/// old and the poll is retried at the meter's next one, so the site is not
/// dropped to its safe state (here: no production at all under a 0 W export
/// limit, the whole load imported) for a moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meter_poll_unanswered_once_is_not_a_lost_meter() {
    let site = lagging_site(0.1).full_batteries();
    let mut config = site.config();
    let dir = tempfile::tempdir().expect("a temporary folder");
    config.storage.path = dir.path().join("sitegate.db");
    let sim = site.start_sim(&mut config).await;
    // The meter's bus goes through a proxy that can leave a request
    // unanswered, at the default timeout (1 s, as long as the poll interval).
    // What this shows is the loop keeping the last reading; the retry at the
    // next poll is shown by modbus_faults.
    let peer = behind_proxy(&sim, &mut config, "grid").await;
    for bus in config.buses.iter_mut().filter(|b| b.name == "grid") {
        bus.timeout_ms = 1000;
    }
    let rig = Rig::join(sim, config, dir).await;
    rig.settle().await;
    rig.sim.set_load(Some(10_000.0));
    rig.sim.set_sun(Some(0.95));
    grid_limit(&rig, 0.0, 300).await;
    // Settled on the new load and the limit, as in the test above: the inverters
    // ramp at most 10 % of their rating a second: 10 s take them across their range.
    tokio::time::sleep(Duration::from_secs(10)).await;
    eventually("the 0 W limit held", Duration::from_secs(10), || async {
        rig.state().await["gridLoop"]["mode"] == "holdingExport" && export_w(&rig).abs() < 1_000.0
    })
    .await;
    for _ in 0..3 {
        peer.inject(Fault::Silence);
        eventually(
            "a meter request unanswered",
            Duration::from_secs(5),
            || async { peer.pending() == 0 },
        )
        .await;
        // The poll times out (1 s), the next one is answered.
        let until = Instant::now() + Duration::from_secs(3);
        let mut least = f64::MAX;
        while Instant::now() < until {
            least = least.min(export_w(&rig));
            let mode = rig.state().await["gridLoop"]["mode"].clone();
            assert_ne!(
                mode, "meterLost",
                "one unanswered meter poll lost the meter"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            least >= -6_000.0,
            "the export fell to {least} W after one unanswered meter poll; state: {}",
            rig.state().await
        );
    }
    assert_eq!(peer.applied(), vec![Fault::Silence; 3]);
    let failed = rig
        .metric("sitegate_device_poll_failures_total{device=\"dvc_grid\"}")
        .await;
    assert!(
        failed.is_some_and(|n| n >= 3.0),
        "the meter's failed polls: {failed:?}"
    );
    rig.shutdown().await;
}
