//! CSIP-AUS controls held on a simulated site over real sockets, each test a
//! CACTUS client procedure: export and import limits at the meter (GEN-01,
//! GEN-13, LOA-01, LOA-13), defaults between events (GEN-03, LOA-03),
//! cancellation (GEN-09), primacy (GEN-10), generation limits over the DER
//! (GEN-02), storage targets (STO-03) and the responses (ALL-18, ALL-21,
//! ALL-24).

use std::time::Duration;

use crate::common::csip_server::{until, BaseSpec, CsipServer, DefaultSpec};
use crate::csip_support::*;
use crate::steering_support::{Rig, READ, SITE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gen_01_an_export_limit_is_held_at_the_meter_and_the_default_after() {
    let server = CsipServer::start(1).await;
    server.set_default(
        1,
        Some(DefaultSpec {
            base: BaseSpec::export(20_000.0),
            set_grad_w: None,
        }),
    );
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    // The default: 20 kW export, tighter than the configured 40 kW.
    holds(&rig, "the default's export limit", -20_000.0, -19_000.0).await;
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["maxExport"]["source"], "csip", "{st}");
    let mrid = server.add_control(1, "DERC1", 0, 12, BaseSpec::export(5_000.0));
    holds(&rig, "the control's export limit", -5_000.0, -4_400.0).await;
    let st = rig.state().await;
    let s = source(&st, "maxExport").unwrap();
    assert_eq!(s["reference"], mrid.as_str(), "{st}");
    assert!(s["until"].as_i64().is_some(), "{st}");
    assert_eq!(st["gridLoop"]["maxExport"]["value"], 5000, "{st}");
    // The control ends: the default holds again.
    until(&server, "completed", WAIT, |s| {
        s.responses_for(&mrid).contains(&3)
    })
    .await;
    holds(&rig, "the default again", -20_000.0, -19_000.0).await;
    assert_eq!(server.responses_for(&mrid), vec![1, 2, 3]);
    // The history records the control's life, the metrics the client's.
    let (status, history) = rig
        .get(&format!("/sites/{SITE}/steering/history"), READ)
        .await;
    assert_eq!(status, 200, "{history}");
    let events: Vec<&str> = history["records"]
        .as_array()
        .or_else(|| history.as_array())
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "csip" && r["mrid"] == mrid.as_str())
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(events.len(), 3, "{history}");
    for e in ["received", "started", "completed"] {
        assert!(events.contains(&e), "{e} in {events:?}");
    }
    let (status, metrics) = rig.get("/metrics", READ).await;
    assert_eq!(status, 200);
    let text = metrics.as_str().unwrap();
    for line in [
        format!("sitegate_csip_following{{site=\"{SITE}\"}} 1"),
        format!("sitegate_csip_responses_total{{site=\"{SITE}\",status=\"3\"}}"),
        format!("sitegate_csip_limit_watts{{site=\"{SITE}\",kind=\"maxExport\"}} 20000"),
        format!("sitegate_csip_polls_total{{site=\"{SITE}\",resource=\"derp\"}}"),
    ] {
        assert!(text.contains(&line), "{line} in the metrics");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gen_13_an_export_limit_is_tracked_through_a_moving_load() {
    let server = CsipServer::start(1).await;
    let rig = rig_full(&server).await;
    rig.sim.set_sun(Some(0.9));
    rig.sim.set_load(Some(0.0));
    server.add_control(1, "DERC2", 0, 120, BaseSpec::export(8_000.0));
    holds(&rig, "8 kW export with no load", -8_000.0, -7_300.0).await;
    for load in [10_000.0, 5_000.0, 0.0] {
        rig.sim.set_load(Some(load));
        holds(
            &rig,
            &format!("8 kW export with {load} W of load"),
            -8_000.0,
            -7_300.0,
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gen_03_and_09_a_cancelled_control_gives_way_to_the_default() {
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
    let mrid = server.add_control(1, "PRECONDITION", 0, 300, BaseSpec::export(3_000.0));
    holds(&rig, "the control", -3_000.0, -2_400.0).await;
    server.cancel_active();
    until(&server, "the cancellation answered", WAIT, |s| {
        s.responses_for(&mrid).contains(&6)
    })
    .await;
    holds(
        &rig,
        "the default after the cancellation",
        -15_000.0,
        -14_000.0,
    )
    .await;
    assert_eq!(server.responses_for(&mrid), vec![1, 2, 6]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loa_01_and_03_an_import_limit_is_held_by_the_batteries() {
    let server = CsipServer::start(1).await;
    server.set_default(
        1,
        Some(DefaultSpec {
            base: BaseSpec::import(12_000.0),
            set_grad_w: None,
        }),
    );
    // Batteries idle at their fallback: the import is the loop's to hold.
    server.register(111_115);
    let rig =
        Rig::start(&text(&server).replace("ess_fallback = \"auto\"", "ess_fallback = \"idle\""))
            .await;
    rig.sim.set_sun(Some(0.0));
    rig.sim.set_load(Some(20_000.0));
    holds(&rig, "the default's import limit", 10_000.0, 12_000.0).await;
    let mrid = server.add_control(1, "DERC1", 0, 15, BaseSpec::import(5_000.0));
    holds(&rig, "the control's import limit", 3_500.0, 5_000.0).await;
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["maxImport"]["source"], "csip", "{st}");
    assert_eq!(st["gridLoop"]["mode"], "holdingImport", "{st}");
    // LOA-13: the load moves; the import stays held.
    rig.sim.set_load(Some(25_000.0));
    holds(&rig, "the import with more load", 3_500.0, 5_000.0).await;
    until(&server, "completed", WAIT, |s| {
        s.responses_for(&mrid).contains(&3)
    })
    .await;
    holds(&rig, "the default again", 10_000.0, 12_000.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gen_10_primacy_decides_each_mode_and_defaults_go_by_primacy() {
    let server = CsipServer::start(1).await;
    // Program 1 (fsa 1) at primacy 0; program 2 in fsa 2 at primacy 2.
    let low = server.add_program(2, 2);
    server.set_default(
        1,
        Some(DefaultSpec {
            base: BaseSpec::export(30_000.0),
            set_grad_w: None,
        }),
    );
    server.set_default(
        low,
        Some(DefaultSpec {
            base: BaseSpec::export(10_000.0),
            set_grad_w: None,
        }),
    );
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    // The default of the lower primacy holds, though it is the looser one
    // (the tighter configured 40 kW beside it).
    let st = source_is(&rig, "maxExport", Some(30_000.0)).await;
    assert!(source(&st, "maxExport").unwrap()["reference"]
        .as_str()
        .is_some_and(|r| r.starts_with("DEFA")));
    let derc1 = server.add_control(low, "DERC1", 0, 60, BaseSpec::export(40_000.0));
    until(&server, "DERC1 started", WAIT, |s| {
        s.responses_for(&derc1).contains(&2)
    })
    .await;
    let derc2 = server.add_control(1, "DERC2", 0, 8, BaseSpec::export(0.0));
    until(&server, "DERC1 superseded", WAIT, |s| {
        s.responses_for(&derc1).contains(&7)
    })
    .await;
    holds(&rig, "DERC2's zero export", -500.0, 1_500.0).await;
    until(&server, "DERC2 completed", WAIT, |s| {
        s.responses_for(&derc2).contains(&3)
    })
    .await;
    // DERC1 stays superseded: the default holds again.
    source_is(&rig, "maxExport", Some(30_000.0)).await;
    // DERC4: generation off and a disconnect do not supersede an export
    // control of another program; both hold.
    let derc5 = server.add_control(low, "DERC5", 0, 60, BaseSpec::export(12_000.0));
    let derc4 = server.add_control(
        1,
        "DERC4",
        0,
        60,
        BaseSpec {
            generation_w: Some(6_000.0),
            ..BaseSpec::default()
        },
    );
    until(&server, "both started", WAIT, |s| {
        s.responses_for(&derc4).contains(&2) && s.responses_for(&derc5).contains(&2)
    })
    .await;
    let st = source_is(&rig, "maxGeneration", Some(6_000.0)).await;
    assert_eq!(
        source(&st, "maxExport").unwrap()["reference"],
        derc5.as_str(),
        "{st}"
    );
    assert_eq!(
        source(&st, "maxExport").unwrap()["value"]["value"],
        12_000,
        "{st}"
    );
    assert!(!server.responses_for(&derc5).contains(&7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gen_02_a_generation_limit_holds_over_the_der_not_at_the_meter() {
    let server = CsipServer::start(1).await;
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(30_000.0));
    rig.sim.set_sun(Some(0.95));
    server.add_control(
        1,
        "GEN",
        0,
        60,
        BaseSpec {
            generation_w: Some(10_000.0),
            ..BaseSpec::default()
        },
    );
    // 30 kW of load, the DER at most 10 kW: the site imports about 20 kW.
    holds(
        &rig,
        "the import the generation limit leaves",
        19_000.0,
        21_500.0,
    )
    .await;
    let produced: f64 = ["pv-east", "pv-west", "bat-a", "bat-b"]
        .iter()
        .map(|b| rig.device(b).state().ac_power_w)
        .sum();
    assert!(produced <= 10_300.0, "the DER produces {produced} W");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sto_03_a_storage_target_within_the_export_limit() {
    let server = CsipServer::start(1).await;
    server.set_default(
        1,
        Some(DefaultSpec {
            base: BaseSpec::export(0.0),
            set_grad_w: None,
        }),
    );
    let rig = rig(&server).await;
    rig.sim.set_sun(Some(0.0));
    rig.sim.set_load(Some(3_000.0));
    let mrid = server.add_control(
        1,
        "STO",
        0,
        30,
        BaseSpec {
            storage_w: Some(9_000.0),
            export_w: Some(18_000.0),
            ..BaseSpec::default()
        },
    );
    // 9 kW discharged, 3 kW of it used at home: 6 kW exported.
    holds(&rig, "the storage target", -6_500.0, -5_300.0).await;
    until(&server, "started", WAIT, |s| {
        s.responses_for(&mrid).contains(&2)
    })
    .await;
    assert_eq!(server.responses_for(&mrid), vec![1, 2]);
    // A target the export limit forbids is held to the limit.
    let tight = server.add_control(
        1,
        "STO2",
        0,
        30,
        BaseSpec {
            storage_w: Some(9_000.0),
            export_w: Some(2_000.0),
            ..BaseSpec::default()
        },
    );
    until(&server, "the first superseded", WAIT, |s| {
        s.responses_for(&mrid).contains(&7)
    })
    .await;
    holds(
        &rig,
        "the target within the export limit",
        -2_000.0,
        -1_200.0,
    )
    .await;
    assert!(server.responses_for(&tight).contains(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_18_21_24_responses_follow_each_event_and_multipliers_scale_them() {
    let server = CsipServer::start(1).await;
    let rig = rig_full(&server).await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    // ALL-21: back to back, none superseded.
    let now = server.now_s();
    let mut mrids = Vec::new();
    for (i, w) in [30_000.0, 6_000.0, 12_000.0].iter().enumerate() {
        let start = 2 + 4 * i as i64;
        mrids.push(server.add_control(1, &format!("DERC{i}"), start, 4, BaseSpec::export(*w)));
    }
    until(&server, "all three completed", WAIT, |s| {
        mrids.iter().all(|m| s.responses_for(m).contains(&3))
    })
    .await;
    for m in &mrids {
        assert_eq!(server.responses_for(m), vec![1, 2, 3], "{m}");
    }
    let _ = now;
    // ALL-24: a value in hundreds of W.
    server.add_control(
        1,
        "MULT",
        0,
        30,
        BaseSpec {
            export_w: Some(7_000.0),
            multiplier: 2,
            ..BaseSpec::default()
        },
    );
    holds(&rig, "7 kW sent as 70 x 10^2", -7_000.0, -6_300.0).await;
    // ALL-18: a scheduled control cancelled before it starts answers 6;
    // one superseded before its start by a newer one at the same start, 7.
    let c3 = server.add_control(1, "C3", 600, 120, BaseSpec::export(0.0));
    until(&server, "C3 received", WAIT, |s| {
        s.responses_for(&c3) == vec![1]
    })
    .await;
    server.cancel_active();
    until(&server, "C3 cancelled", WAIT, |s| {
        s.responses_for(&c3) == vec![1, 6]
    })
    .await;
    let at = server.now_s() + 600;
    let c4 = server.add_control_at(1, "C4", at, 600, BaseSpec::export(20_000.0), 0);
    until(&server, "C4 received", WAIT, |s| {
        s.responses_for(&c4) == vec![1]
    })
    .await;
    // A second later, at the same start: C5 is the newer by its creationTime (whole
    // seconds of the server's clock), and C4 would never run but under it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let c5 = server.add_control_at(1, "C5", at, 60, BaseSpec::export(0.0), 0);
    until(&server, "C4 superseded", WAIT, |s| {
        s.responses_for(&c4) == vec![1, 7]
    })
    .await;
    assert_eq!(server.responses_for(&c5), vec![1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_11_12_13_disconnect_and_ramp_reach_the_der_and_its_status() {
    let server = CsipServer::start(1).await;
    server.set_default(
        1,
        Some(DefaultSpec {
            base: BaseSpec::default(),
            set_grad_w: Some(100),
        }),
    );
    let rig = rig(&server).await;
    rig.sim.set_sun(Some(0.8));
    rig.sim.set_load(Some(5_000.0));
    // ALL-13: the default's setGradW goes to DERSettings.
    until(&server, "DERSettings with setGradW 100", WAIT, |s| {
        s.with(|st| {
            st.settings
                .as_deref()
                .is_some_and(|b| b.contains("<setGradW>100</setGradW>"))
        })
    })
    .await;
    until(&server, "a connected status", WAIT, |s| {
        s.last_status_bits().is_some_and(|(b, _)| b & 1 == 1)
    })
    .await;
    let off = server.add_control(
        1,
        "DISCONNECT",
        0,
        6,
        BaseSpec {
            connect: Some(false),
            ..BaseSpec::default()
        },
    );
    until(&server, "a disconnected status", WAIT, |s| {
        s.last_status_bits().is_some_and(|(b, _)| b & 1 == 0)
    })
    .await;
    crate::steering_support::eventually(
        "the inverters at 0 W and the batteries idle",
        WAIT,
        || async {
            ["pv-east", "pv-west", "bat-a", "bat-b"]
                .iter()
                .all(|b| rig.device(b).state().ac_power_w.abs() < 200.0)
        },
    )
    .await;
    holds(&rig, "the load from the grid", 4_500.0, 5_500.0).await;
    until(&server, "the disconnect over", WAIT, |s| {
        s.responses_for(&off).contains(&3)
    })
    .await;
    until(&server, "connected again", WAIT, |s| {
        s.last_status_bits()
            .is_some_and(|(b, _)| b & 0b101 == 0b101)
    })
    .await;
    // The production comes back along the ramp (1 %/s of 80 kW: 800 W/s),
    // not at once.
    let st = rig.state().await;
    let g = source(&st, "maxGeneration");
    assert!(
        g.is_some_and(|g| g["value"]["value"].as_f64().unwrap() < 40_000.0),
        "{st}"
    );
    let _ = Duration::ZERO;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_22_a_randomized_start_falls_within_its_window() {
    let server = CsipServer::start(1).await;
    let _rig = rig(&server).await;
    let starts: Vec<(String, i64)> = (0..4)
        .map(|i| {
            let at = server.now_s() + 2 + 6 * i;
            (
                server.add_control_at(1, &format!("R{i}"), at, 5, BaseSpec::export(20_000.0), 4),
                at,
            )
        })
        .collect();
    until(&server, "all four started", Duration::from_secs(40), |s| {
        starts.iter().all(|(m, _)| s.responses_for(m).contains(&2))
    })
    .await;
    // When each Started came, against its nominal start: within the 4 s
    // window (and the tick that posts it).
    let posts: Vec<i64> = server.times(axum::http::Method::POST, "/edev/1/rsps/site_control/rsp");
    let responses = server.responses();
    for (mrid, at) in &starts {
        let i = responses
            .iter()
            .position(|(m, st)| m == mrid && *st == 2)
            .unwrap();
        let late_ms = posts[i] - at * 1000;
        assert!(
            (-100..=5_600).contains(&late_ms),
            "{mrid} started {late_ms} ms after its start"
        );
    }
}
