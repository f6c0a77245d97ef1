//! A SunSpec inverter an installer had limited through model 123
//! (`WMaxLimPct` 75.5 %, `WMaxLim_Ena` = 1), on a real socket: the agent's
//! first contact leaves the limit as found, the steering state says the
//! inverter was found limited, a curtailment writes the agent's own limit,
//! and each release (through the API, then at a clean stop) writes back
//! 75.5 % with the limit switched on, never `WMaxLim_Ena` = 0.

use std::time::Duration;

use crate::common::words;
use crate::steering_support::*;
use ::sunspec::models::model123::Model123 as M123;
use serde_json::json;
use sitegate::config::Transport;
use sitegate::modbus::link::{Port, UnitReader};
use sitegate::modbus::sunspec::discover;
use sitegate::sim::SimSite;

const REVERT_S: u16 = 60;
/// `WMaxLimPct` of 75.5 % at the simulator's `WMaxLimPct_SF` of −2.
const FOUND_PCT: u16 = 7550;

/// One 10 kW SunSpec inverter, polled every 200 ms, the site controlled
/// every 300 ms.
fn site() -> TestSite {
    TestSite::new(300, REVERT_S).inverter("pv", "dvc_pv", 10.0)
}

/// An installer's tool on the LAN: finds the model-123 block over the
/// socket, switches a limit of 75.5 % on, and returns the addresses of
/// `[WMaxLimPct, WMaxLimPct_RvrtTms, WMaxLim_Ena]`.
async fn limit_as_installer(sim: &SimSite) -> [u16; 3] {
    let addr = sim.addr("pv").expect("the inverter's server");
    let mut port = Port::new(
        Transport::Tcp {
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        Duration::from_millis(500),
    );
    let chain = discover(&mut UnitReader {
        port: &mut port,
        unit: 1,
    })
    .await
    .expect("the SunSpec map");
    let block = *chain.iter().find(|b| b.id == 123).expect("model 123");
    let points = [
        block.point(M123::W_MAX_LIM_PCT.offset),
        block.point(M123::W_MAX_LIM_PCT_RVRT_TMS.offset),
        block.point(M123::W_MAX_LIM_ENA.offset),
    ];
    port.write(1, points[0], &[FOUND_PCT])
        .await
        .expect("WMaxLimPct written");
    port.write(1, points[2], &[1])
        .await
        .expect("WMaxLim_Ena written");
    port.close().await;
    points
}

async fn curtail(rig: &Rig, points: [u16; 3]) {
    let body = json!({"setting": {"value": 5, "unit": "kW"}, "validUntil": now_ms() + 600_000});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering/curtailment"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
    eventually(
        "the agent's limit at the registers",
        Duration::from_secs(5),
        || async {
            let w = words(&rig.device("pv"), &points.map(|a| (a, 1)));
            w[0] != FOUND_PCT && w[1] == REVERT_S && w[2] == 1
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sunspec_inverter_found_limited_is_released_to_its_own_limit() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let site = site();
    let mut config = site.config();
    config.storage.path = dir.path().join("sitegate.db");
    let sim = site.start_sim(&mut config).await;
    // The installer's limit, in place before the agent's first contact.
    let points = limit_as_installer(&sim).await;
    let found = [FOUND_PCT, 0, 1];
    let rig = Rig::join(sim, config, dir).await;

    // First contact: the limit stays, and the state says it was found.
    eventually(
        "the found limit in the state",
        Duration::from_secs(10),
        || async {
            rig.device_state("dvc_pv").await["error"]
                .as_str()
                .is_some_and(|e| e.contains("found limited to 75.5 %"))
        },
    )
    .await;
    assert_eq!(
        words(&rig.device("pv"), &points.map(|a| (a, 1))),
        found,
        "left as found at start"
    );
    assert_eq!(rig.limit("pv"), Some(75.5));

    // Steered, then released through the API: the installer's limit back.
    curtail(&rig, points).await;
    let (s, _) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert_eq!(s, 200);
    eventually(
        "released to the limit found",
        Duration::from_secs(5),
        || async { words(&rig.device("pv"), &points.map(|a| (a, 1))) == found },
    )
    .await;
    assert_eq!(rig.limit("pv"), Some(75.5));

    // Steered again, then a clean stop: the same words.
    curtail(&rig, points).await;
    let Rig {
        sim, agent, dir, ..
    } = rig;
    agent.shutdown().await;
    let at_stop = points.map(|a| sim.device("pv", 1).expect("the inverter").registers(a, 1)[0]);
    assert_eq!(
        at_stop, found,
        "released to the limit found at a clean stop"
    );
    sim.shutdown().await;
    drop(dir);
}
