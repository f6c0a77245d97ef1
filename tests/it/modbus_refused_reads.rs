//! SunSpec devices that refuse part of a model block: registers they leave out
//! (model 1's `Opt`, model 103's event registers, model 123's power factor,
//! 124's ramp times and grid-charge setting, 704's power factor) answer
//! "illegal data address" to any read that touches them, as some real devices
//! do. Each still comes online with its nameplate, `scan` still finds it, and
//! steering still writes, reads back and releases its controls: discovery,
//! scan and the steering read-backs read only what they need.

use std::time::Duration;

use crate::steering_support::*;
use ::sunspec::models::{
    model1::Model1 as M1, model103::Model103 as M103, model123::Model123 as M123,
    model124::Model124 as M124, model704::Model704 as M704,
};
use serde_json::json;
use sitegate::config::Transport;
use sitegate::modbus::link::{Port, UnitReader};
use sitegate::modbus::scan;
use sitegate::modbus::sunspec::{discover, ModelBlock};
use sitegate::model::Property;
use sitegate::register::plan::{Span, Table};
use sitegate::sim::{SimKind, SimSiteSpec, Variant};

/// A point of a model: offset and length.
#[derive(Clone, Copy)]
struct Pt(u16, u16);

fn p<G: ::sunspec::Group, T: ::sunspec::Value>(x: &::sunspec::Point<G, T>) -> Pt {
    Pt(x.offset, x.length)
}

/// The registers of `block` from point `from` to point `to`, both included.
fn span(block: &ModelBlock, from: Pt, to: Pt) -> Span {
    let start = block.point(from.0);
    let end = block.point(to.0) + to.1;
    Span::new(Table::Holding, start, end - start)
}

/// An inverter, a battery and a DER storage device, with no SoC window.
fn site() -> TestSite {
    TestSite::new(300, 30)
        .inverter("pv-r", "dvc_pv_r", 10.0)
        .battery("bat-r", "dvc_bat_r", 5.0, 10.0)
        .battery("der-r", "dvc_der_r", 10.0, 10.0)
}

/// `der-r` is a SunSpec DER storage device (701, 702, 704, 713): model 704 only.
fn der_storage(spec: &mut SimSiteSpec) {
    for s in spec.servers.iter_mut().filter(|s| s.name == "der-r") {
        s.devices[0].kind = SimKind::Fixed {
            variant: Variant::DerStorage,
            rated_w: 10_000.0,
        };
    }
}

fn port_to(addr: std::net::SocketAddr) -> Port {
    Port::new(
        Transport::Tcp {
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        Duration::from_millis(500),
    )
}

/// The model chain of the device on `bus` (marker and headers are readable).
async fn chain(sim: &sitegate::sim::SimSite, bus: &str) -> Vec<ModelBlock> {
    let mut port = port_to(sim.addr(bus).unwrap());
    let chain = discover(&mut UnitReader {
        port: &mut port,
        unit: 1,
    })
    .await
    .expect("the map is there");
    port.close().await;
    chain
}

fn block(chain: &[ModelBlock], id: u16) -> ModelBlock {
    *chain.iter().find(|b| b.id == id).expect("model in chain")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_that_refuse_part_of_a_block_come_online_are_scanned_and_steered() {
    let site = site().sim(der_storage);
    let mut config = site.config();
    let dir = tempfile::tempdir().unwrap();
    config.storage.path = dir.path().join("sitegate.db");
    let sim = site.start_sim(&mut config).await;

    // The inverter leaves out Opt, its event registers and 123's power factor.
    let pv = chain(&sim, "pv-r").await;
    let (m1, m103, m123) = (block(&pv, 1), block(&pv, 103), block(&pv, 123));
    let h = sim.device("pv-r", 1).unwrap();
    h.refuse_reads(span(&m1, p(&M1::OPT), p(&M1::OPT)));
    h.refuse_reads(span(&m103, p(&M103::EVT1), p(&M103::EVT_VND4)));
    h.refuse_reads(span(&m123, p(&M123::OUT_PF_SET), p(&M123::OUT_PF_SET_ENA)));
    // The battery leaves out Opt and 124's VA limit, window and ramp times and
    // grid-charge setting (around the revert timer steering writes).
    let bat = chain(&sim, "bat-r").await;
    let (b1, b124) = (block(&bat, 1), block(&bat, 124));
    let h = sim.device("bat-r", 1).unwrap();
    h.refuse_reads(span(&b1, p(&M1::OPT), p(&M1::OPT)));
    for pt in [
        p(&M124::VA_CHA_MAX),
        p(&M124::IN_OUT_W_RTE_WIN_TMS),
        p(&M124::IN_OUT_W_RTE_RMP_TMS),
        p(&M124::CHA_GRI_SET),
    ] {
        h.refuse_reads(span(&b124, pt, pt));
    }
    // The DER storage leaves out 704's power factor block and its SF.
    let der = chain(&sim, "der-r").await;
    let d704 = block(&der, 704);
    let h = sim.device("der-r", 1).unwrap();
    h.refuse_reads(span(
        &d704,
        p(&M704::PFW_INJ_ENA),
        p(&M704::PFW_ABS_RVRT_REM),
    ));
    h.refuse_reads(span(&d704, p(&M704::PF_SF), p(&M704::PF_SF)));

    // Scan reads every nameplate despite the refusals.
    for bus in ["pv-r", "bat-r", "der-r"] {
        let mut port = port_to(sim.addr(bus).unwrap());
        let mut failed = Vec::new();
        let found = scan::scan(&mut port, &[1], |p| {
            if let scan::Progress::Failed(u, e) = p {
                failed.push((u, e.to_string()));
            }
        })
        .await;
        port.close().await;
        assert!(failed.is_empty(), "{bus}: {failed:?}");
        assert_eq!(found.len(), 1, "{bus}: scan found it");
        let info = &found[0].devices[0].info;
        assert!(info.manufacturer.is_some(), "{bus}: {info:?}");
        assert!(info.serial.is_some(), "{bus}: {info:?}");
    }

    let rig = Rig::join(sim, config, dir).await;
    let live = rig.agent.live().clone();
    for (reference, with) in [
        ("dvc_pv_r", Property::ActivePower),
        ("dvc_bat_r", Property::Soc),
        ("dvc_der_r", Property::Soc),
    ] {
        let id = live.find(reference).unwrap();
        eventually(
            &format!("{reference} online with values"),
            Duration::from_secs(10),
            || {
                let live = live.clone();
                async move {
                    let s = live.snapshot(id);
                    s.online && s.reading(with).is_some() && s.info.serial.is_some()
                }
            },
        )
        .await;
    }
    eventually(
        "devices at their fallback",
        Duration::from_secs(10),
        || async {
            rig.state().await["devices"]
                .as_array()
                .is_some_and(|d| d.iter().all(|x| x["state"] == "fallback"))
        },
    )
    .await;

    // 3 kW discharge (1 + 2 kW by rating) and a 5 kW production limit.
    let until = now_ms() + 60_000;
    let body = json!({"energyStorageSetting": {"value": 3, "unit": "kW"},
                      "productionCurtailment": {"value": 5, "unit": "kW"}, "validUntil": until});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
    let der_wset = |rig: &Rig| {
        let w = rig
            .device("der-r")
            .registers(d704.point(M704::W_SET_ENA.offset), 4);
        (w[0], ((u32::from(w[2]) << 16) | u32::from(w[3])) as i32)
    };
    eventually(
        "written, read back and confirmed",
        Duration::from_secs(5),
        || async {
            let st = rig.state().await;
            let all = st["devices"]
                .as_array()
                .unwrap()
                .iter()
                .all(|d| d["state"] == "applied" && d["confirmed"] == true);
            all && rig.limit("pv-r") == Some(50.0)
                && rig
                    .storage("bat-r")
                    .is_some_and(|c| c.mode == 3 && c.out_pct > 0.0)
                && der_wset(&rig) == (1, 2000)
        },
    )
    .await;

    // Released on DELETE, and reported at fallback again.
    let (s, _) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert_eq!(s, 200);
    eventually("released", Duration::from_secs(5), || async {
        let st = rig.state().await;
        st["devices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["state"] == "fallback" && d["confirmed"] == true)
            && rig.limit("pv-r").is_none()
            && rig.storage("bat-r").is_none()
            && der_wset(&rig).0 == 0
    })
    .await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_battery_whose_rating_cannot_be_read_is_held_at_0_w_and_says_why() {
    // No rating in the config, and the device refuses 120's WRtg, the only
    // rating its chain has: steering shares storage power by rating, so the
    // battery gets 0 W, and its steering state must say why.
    let site = TestSite::new(300, 30)
        .device("bat-u", "dvc_bat_u", Kind::Battery)
        .key("capacity", kwh(10.0));
    let mut config = site.config();
    let dir = tempfile::tempdir().unwrap();
    config.storage.path = dir.path().join("sitegate.db");
    let sim = site.start_sim(&mut config).await;
    let b120 = block(&chain(&sim, "bat-u").await, 120);
    sim.device("bat-u", 1).unwrap().refuse_reads(span(
        &b120,
        p(&::sunspec::models::model120::Model120::W_RTG),
        p(&::sunspec::models::model120::Model120::W_RTG_SF),
    ));
    let rig = Rig::join(sim, config, dir).await;
    eventually("at fallback", Duration::from_secs(10), || async {
        rig.device_state("dvc_bat_u").await["state"] == "fallback"
    })
    .await;
    let id = rig.agent.live().find("dvc_bat_u").unwrap();
    assert_eq!(rig.agent.live().snapshot(id).info.rated_power_w, None);

    rig.steer_ess(2.0, Duration::from_secs(60)).await;
    eventually(
        "held at 0 W, with the reason",
        Duration::from_secs(5),
        || async {
            let d = rig.device_state("dvc_bat_u").await;
            d["state"] == "applied"
                && d["confirmed"] == true
                && d["setpoint"] == json!({"value": 0, "unit": "W"})
                && d["error"].as_str().is_some_and(|e| {
                    e.contains("no power rating known") && e.contains("rated_power")
                })
        },
    )
    .await;
    // Released: nothing to explain any more.
    let (s, _) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert_eq!(s, 200);
    eventually(
        "fallback without a note",
        Duration::from_secs(5),
        || async {
            let d = rig.device_state("dvc_bat_u").await;
            d["state"] == "fallback" && d["error"].is_null()
        },
    )
    .await;
    rig.shutdown().await;
}
