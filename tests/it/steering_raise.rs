//! A partner's raise of its curtailment reaches the inverters on the
//! evaluation its POST wakes, when the site can take all the inverters could
//! give (grid limits far away): the grid loop's ramp, and its wait for a meter
//! reading from after its last change, are for moves towards a limit that can
//! bind, and none can here.
//!
//! Causality, not speed: the control loop ticks once a minute and the grid
//! meter is polled every 30 s, so after the first POST no tick and no meter
//! reading comes within the test's wait. A raise held for either would not be
//! written within it.

use std::time::Duration;

use crate::steering_support::*;
use serde_json::json;

/// Longer than the test waits for any write.
const INTERVAL_MS: u64 = 60_000;
const METER_POLL_MS: u64 = 30_000;
const WAIT: Duration = Duration::from_secs(20);

/// Two 200 kW inverters and a grid meter polled every [`METER_POLL_MS`];
/// limits 10 MW; the control loop every [`INTERVAL_MS`].
fn site() -> TestSite {
    TestSite::new(INTERVAL_MS, 120)
        .rated_production_kw(400.0)
        .inverter("pv-a", "dvc_pv_a", 200.0)
        .inverter("pv-b", "dvc_pv_b", 200.0)
        .meter("grid", "dvc_grid")
        .key("poll_interval_ms", METER_POLL_MS as i64)
}

async fn curtail(rig: &Rig, pct: u32) {
    let body = json!({"setting": {"value": pct, "unit": "%"}, "validUntil": now_ms() + 600_000});
    let (s, answer) = rig
        .post(&format!("/sites/{SITE}/steering/curtailment"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{answer}");
}

async fn limits_at(rig: &Rig, pct: f64, what: &str) {
    eventually(what, WAIT, || async {
        ["pv-a", "pv-b"].iter().all(|b| rig.limit(b) == Some(pct))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_of_the_curtailment_is_written_without_waiting_for_a_tick_or_the_meter() {
    let rig = site().start().await;
    // The meter's first reading, so that the loop runs on a fresh meter.
    eventually("the grid meter read", WAIT, || async {
        rig.get("/devices/dvc_grid/measurement?property=activePower", READ)
            .await
            .0
            == 200
    })
    .await;

    // A lower: at once (a move towards safety never waits).
    curtail(&rig, 50).await;
    limits_at(&rig, 50.0, "the inverters limited to 50 %").await;

    // The loop changed the production just now; the meter's reading is from
    // before, and the next tick is a minute away. The raise is written on the
    // evaluation this POST wakes.
    curtail(&rig, 60).await;
    limits_at(
        &rig,
        60.0,
        "the inverters raised to 60 % before the next tick",
    )
    .await;
    rig.shutdown().await;
}
