//! A dead agent leaves no device steered: the agent runs as its own process, is
//! killed with SIGKILL while a signal is active, and the simulated devices go
//! back to their own defaults by their revert timers.

use std::time::Duration;
use tokio::time::Instant;

use crate::common::process::AgentProcess;
use crate::steering_support::*;
use serde_json::json;
use sitegate::config::parse;

const REVERT_S: u16 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_revert_by_their_own_timers_after_a_hard_stop() {
    let text = config_text(300, REVERT_S);
    let mut config = parse(&text).unwrap();
    let sim = start_sim(&mut config).await;
    let (mut agent, base) = AgentProcess::spawn_on(&text, &config).await;
    let client = crate::common::http_client().build().expect("http client");
    let get_state = || async {
        let r = client
            .get(format!("{base}/sites/{SITE}/steering"))
            .bearer_auth(READ)
            .send()
            .await
            .ok()?;
        r.json::<serde_json::Value>().await.ok()
    };
    eventually(
        "agent up, devices at fallback",
        Duration::from_secs(15),
        || async {
            get_state().await.is_some_and(|st| {
                st["devices"]
                    .as_array()
                    .is_some_and(|d| !d.is_empty() && d.iter().all(|x| x["state"] == "fallback"))
            })
        },
    )
    .await;

    let body = json!({"energyStorageSetting": {"value": 100, "unit": "kW"},
                      "productionCurtailment": {"value": 300, "unit": "kW"}, "validUntil": now_ms() + 120_000});
    post_signal(&base, &body).await;
    let storage = |bus: &str| sim.device(bus, 1).unwrap().state().storage_control;
    let limit = |bus: &str| sim.device(bus, 1).unwrap().state().limit_pct;
    eventually("steered", Duration::from_secs(10), || async {
        storage("bat-a") == window(25.0)
            && storage("bat-b") == window(25.0)
            && limit("pv-a") == Some(75.0)
    })
    .await;
    // Refreshed before the revert timers fire: still steered after twice their time.
    tokio::time::sleep(Duration::from_secs(u64::from(REVERT_S) * 2)).await;
    assert_eq!(
        storage("bat-a"),
        window(25.0),
        "the agent let the revert timer fire"
    );
    assert_eq!(limit("pv-b"), Some(75.0));

    // SIGKILL: no goodbye writes.
    agent.kill();
    let killed = Instant::now();
    eventually(
        "reverted by the devices' own timers",
        Duration::from_secs(u64::from(REVERT_S) + 3),
        || async {
            storage("bat-a").is_none()
                && storage("bat-b").is_none()
                && limit("pv-a").is_none()
                && limit("pv-b").is_none()
        },
    )
    .await;
    let took = killed.elapsed();
    assert!(
        took <= Duration::from_millis(u64::from(REVERT_S) * 1000 + 1500),
        "reverted after {took:?}"
    );
    sim.shutdown().await;
}
