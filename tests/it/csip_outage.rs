//! When the utility server is gone (ALL-23, ALL-30): the schedule as last
//! received stays in force to its end, then the default; a restart in the
//! middle of an outage resumes the same control from the store; the server
//! back, its lists are read again within a minute. And the server's clock,
//! not the controller's, decides when events start.

use std::time::Duration;

use axum::http::Method;

use crate::common::csip_server::{until, BaseSpec, CsipServer, DefaultSpec};
use crate::csip_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_23_the_schedule_runs_through_an_outage_then_the_default() {
    let server = CsipServer::start(1).await;
    server.set_default(
        1,
        Some(DefaultSpec {
            base: BaseSpec::export(15_000.0),
            set_grad_w: None,
        }),
    );
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    let first = server.add_control(1, "DERC1", 2, 8, BaseSpec::export(4_000.0));
    let second = server.add_control(1, "DERC2", 10, 8, BaseSpec::export(9_000.0));
    until(&server, "both received", WAIT, |s| {
        s.responses_for(&first).contains(&1) && s.responses_for(&second).contains(&1)
    })
    .await;
    server.set_offline(true);
    holds(&rig, "DERC1 through the outage", -4_000.0, -3_400.0).await;
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["csip"]["state"], "unreachable", "{st}");
    assert_eq!(source(&st, "maxExport").unwrap()["failsafe"], true, "{st}");
    holds(&rig, "DERC2 through the outage", -9_000.0, -8_300.0).await;
    source_is(&rig, "maxExport", Some(15_000.0)).await;
    holds(&rig, "the default after the schedule", -15_000.0, -14_300.0).await;
    // Back: the lists are read again, and the answers owed are sent.
    let back = server.requests().len();
    server.set_offline(false);
    until(
        &server,
        "the control list read again",
        Duration::from_secs(65),
        |s| {
            s.requests()[back..]
                .iter()
                .any(|r| r.method == Method::GET && r.path == "/edev/1/derp/1/derc")
        },
    )
    .await;
    until(&server, "the owed responses", WAIT, |s| {
        s.responses_for(&first) == vec![1, 2, 3] && s.responses_for(&second) == vec![1, 2, 3]
    })
    .await;
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["csip"]["state"], "following", "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_30_a_restart_in_an_outage_resumes_the_same_control() {
    let server = CsipServer::start(1).await;
    server.set_default(
        1,
        Some(DefaultSpec {
            base: BaseSpec::export(12_000.0),
            set_grad_w: None,
        }),
    );
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    let mrid = server.add_control(1, "DERC1", 0, 25, BaseSpec::export(6_000.0));
    holds(&rig, "the control", -6_000.0, -5_400.0).await;
    server.set_offline(true);
    let rig = rig.restart().await;
    // Before any contact: the control from the store.
    let st = source_is(&rig, "maxExport", Some(6_000.0)).await;
    assert_eq!(
        source(&st, "maxExport").unwrap()["reference"],
        mrid.as_str(),
        "{st}"
    );
    holds(&rig, "the control after the restart", -6_000.0, -5_400.0).await;
    // Its end, still offline: the stored default.
    source_is(&rig, "maxExport", Some(12_000.0)).await;
    holds(&rig, "the stored default", -12_000.0, -11_300.0).await;
    server.set_offline(false);
    let newer = server.add_control(1, "DERC2", 0, 30, BaseSpec::export(3_000.0));
    until(
        &server,
        "the new control started",
        Duration::from_secs(65),
        |s| s.responses_for(&newer).contains(&2),
    )
    .await;
    holds(&rig, "the new control", -3_000.0, -2_400.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_start_on_the_servers_clock_whatever_the_controllers_says() {
    let server = CsipServer::start(1).await;
    // The server is an hour and a half ahead of the controller.
    server.with(|s| s.clock_offset_s = 5_400);
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    until(&server, "the time read", WAIT, |s| {
        s.paths(Method::GET).contains(&"/tm".to_string())
    })
    .await;
    let mrid = server.add_control(1, "SOON", 3, 6, BaseSpec::export(5_000.0));
    until(&server, "received", WAIT, |s| {
        s.responses_for(&mrid) == vec![1]
    })
    .await;
    until(
        &server,
        "started on the server's time",
        Duration::from_secs(8),
        |s| s.responses_for(&mrid).contains(&2),
    )
    .await;
    holds(&rig, "the control", -5_000.0, -4_400.0).await;
    // The state shows its end in the controller's time.
    let st = rig.state().await;
    let until_ms = source(&st, "maxExport").unwrap()["until"].as_i64().unwrap();
    let now = sitegate::model::time::now_ms();
    assert!(
        (now..now + 10_000).contains(&until_ms),
        "ends within 10 s of the controller's now: {until_ms} vs {now}"
    );
}
