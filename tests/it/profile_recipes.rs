//! What a profile battery's recipe leaves behind, on real sockets: the words
//! at the simulated device's registers after a setpoint, after the release,
//! and after the agent is gone (killed, no goodbye writes) and the device's
//! own timer has run out. No charge or discharge limit is left at 0 W and the
//! mode comes back; idle holds the battery without being a release; a
//! setpoint and its mode go out in one request where the device wants that.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::steering_support::*;
use serde_json::json;
use sitegate::config::{parse, Transport};
use sitegate::sim::{SimSite, WriteEvent};

const INTERVAL_MS: u64 = 300;
const REVERT_S: u16 = 2;

fn f32_lo(v: f32) -> Vec<u16> {
    let b = v.to_bits();
    vec![b as u16, (b >> 16) as u16]
}

fn battery(profile: &str) -> String {
    let mut t = site_header(INTERVAL_MS, REVERT_S).replace("{rated_production}", "");
    let bus = profile.replace('-', "_");
    t.push_str(&device_block(
        &bus,
        &format!("dvc_{bus}"),
        "battery",
        &format!("profile = \"{profile}\"\nrated_power = \"4 kW\"\ncapacity = \"10 kWh\""),
    ));
    t
}

async fn ess(rig: &Rig, watts: f64, valid_ms: i64) {
    let body = json!({"setting": {"value": watts, "unit": "W"}, "validUntil": now_ms() + valid_ms});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering/ess"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
}

/// SolarEdge: `[E00D mode, E00E charge limit (2), E010 discharge limit (2)]`.
fn solaredge(rig: &Rig) -> Vec<u16> {
    rig.device("solaredge_storage").registers(57357, 5)
}

/// KOSTAL: `[1034 setpoint (2), 1038 charge limit (2), 1040 discharge limit (2)]`.
fn kostal(rig: &Rig) -> Vec<u16> {
    let d = rig.device("kostal_plenticore");
    [d.registers(1034, 2), d.registers(1038, 4)].concat()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solaredge_release_restores_limits() {
    let rig = Rig::start(&battery("solaredge-storage")).await;
    // As delivered: self-consumption, both limits free (the simulator's
    // battery takes 5 kW each way).
    let found = [vec![7], f32_lo(5000.0), f32_lo(5000.0)].concat();
    assert_eq!(solaredge(&rig), found);
    // Charging 2 kW: mode 3, charge limit 2 kW; the discharge limit stays
    // free (the rated 4 kW), never 0 W.
    ess(&rig, -2000.0, 60_000).await;
    eventually("charging", Duration::from_secs(5), || async {
        solaredge(&rig) == [vec![3], f32_lo(2000.0), f32_lo(4000.0)].concat()
    })
    .await;
    // Idle: command mode 0 (off), both limits free.
    ess(&rig, 0.0, 60_000).await;
    eventually("idle", Duration::from_secs(5), || async {
        solaredge(&rig) == [vec![0], f32_lo(4000.0), f32_lo(4000.0)].concat()
    })
    .await;
    // Released: the mode and both limits as found.
    let (s, _) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert_eq!(s, 200);
    eventually("released as found", Duration::from_secs(5), || async {
        solaredge(&rig) == found
    })
    .await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kostal_idle_holds_with_limits() {
    let rig = Rig::start(&battery("kostal-plenticore")).await;
    let free = [f32_lo(0.0), f32_lo(5000.0), f32_lo(5000.0)].concat();
    assert_eq!(kostal(&rig), free, "as delivered: no setpoint, limits free");
    // Idle is not a release: 1034 = 0 with both limits at 0 W holds it.
    ess(&rig, 0.0, 60_000).await;
    eventually(
        "idle held by the limits",
        Duration::from_secs(5),
        || async { kostal(&rig) == [f32_lo(0.0), f32_lo(0.0), f32_lo(0.0)].concat() },
    )
    .await;
    // A discharge frees the limits again (to the rated 4 kW).
    ess(&rig, 1500.0, 60_000).await;
    eventually("discharging", Duration::from_secs(5), || async {
        kostal(&rig) == [f32_lo(1500.0), f32_lo(4000.0), f32_lo(4000.0)].concat()
    })
    .await;
    ess(&rig, 0.0, 60_000).await;
    eventually("idle again", Duration::from_secs(5), || async {
        kostal(&rig)[2..] == [f32_lo(0.0), f32_lo(0.0)].concat()
    })
    .await;
    // Released: no setpoint, the limits as found.
    let (s, _) = rig.delete(&format!("/sites/{SITE}/steering"), STEER).await;
    assert_eq!(s, 200);
    eventually("released as found", Duration::from_secs(5), || async {
        kostal(&rig) == free
    })
    .await;
    rig.shutdown().await;
}

/// The accepted writes to one server so far, as `(address, values)`.
fn drain(
    rx: &mut tokio::sync::broadcast::Receiver<WriteEvent>,
    server: &str,
) -> Vec<(u16, Vec<u16>)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if e.exception.is_none() && e.server == server {
            out.push((e.address, e.values));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sma_setpoint_and_mode_in_one_request() {
    let rig = Rig::start(&battery("sma-storage")).await;
    let mut writes = rig.sim.subscribe_writes();
    ess(&rig, -1500.0, 60_000).await;
    let hi = |v: i32| vec![(v as u32 >> 16) as u16, v as u16];
    let one = (40149, [hi(-1500), vec![0, 802]].concat());
    eventually("one request", Duration::from_secs(5), || async {
        rig.device("sma_storage").registers(40149, 4) == one.1
    })
    .await;
    let seen = drain(&mut writes, "sma_storage");
    assert!(seen.contains(&one), "{seen:?}");
    assert!(
        seen.iter().all(|(a, v)| *a != 40151 && v.len() == 4),
        "the mode never goes out on its own: {seen:?}"
    );
    rig.shutdown().await;
}

/// The agent as its own process, so that it can be killed without goodbye
/// writes; its config points at `sim`'s ports.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn spawn_agent(text: &str, dir: &std::path::Path) -> (Killed, SimSite, String) {
    let mut config = parse(text).unwrap();
    let sim = start_sim(&mut config).await;
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = free.local_addr().unwrap();
    drop(free);
    let mut text = text.replace(
        "listen = [\"127.0.0.1:0\"]",
        &format!("listen = [\"{http}\"]"),
    );
    for bus in &config.buses {
        let Transport::Tcp { port, .. } = &bus.transport else {
            unreachable!("test buses are TCP")
        };
        text = text.replace(
            &format!("name = \"{}\"\ntcp = \"127.0.0.1:0\"", bus.name),
            &format!("name = \"{}\"\ntcp = \"127.0.0.1:{port}\"", bus.name),
        );
    }
    let file = dir.join("sitegate.toml");
    let db = dir.join("db.sqlite").display().to_string();
    std::fs::write(&file, text.replace("unused.db", &db)).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .arg("run")
        .arg("--config")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the agent binary starts");
    (Killed(child), sim, format!("http://{http}"))
}

/// SolarEdge after the agent dies: the device's own timer (0xE00B) runs out
/// and it goes back to its default mode 7; whatever the last setpoint was
/// (charge or idle), no limit is left at 0 W.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solaredge_reverts_without_a_limit_at_zero_when_the_agent_dies() {
    for (watts, during) in [
        (-2000.0, [vec![3], f32_lo(2000.0), f32_lo(4000.0)].concat()),
        (0.0, [vec![0], f32_lo(4000.0), f32_lo(4000.0)].concat()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (mut agent, sim, base) = spawn_agent(&battery("solaredge-storage"), dir.path()).await;
        let dev = sim.device("solaredge_storage", 1).unwrap();
        let client = reqwest::Client::new();
        eventually("agent up", Duration::from_secs(15), || async {
            client
                .get(format!("{base}/sites/{SITE}/steering"))
                .bearer_auth(READ)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        })
        .await;
        let body =
            json!({"setting": {"value": watts, "unit": "W"}, "validUntil": now_ms() + 120_000});
        let r = client
            .post(format!("{base}/sites/{SITE}/steering/ess"))
            .bearer_auth(STEER)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        eventually(
            &format!("{watts} W held"),
            Duration::from_secs(5),
            || async { dev.registers(57357, 5) == during },
        )
        .await;
        agent.0.kill().unwrap();
        agent.0.wait().unwrap();
        // The device's own timer: REVERT_S after the last refresh.
        eventually(
            &format!("{watts} W: reverted by the device"),
            Duration::from_secs(u64::from(REVERT_S) + 3),
            || async { dev.registers(57357, 1) == [7] },
        )
        .await;
        let after = dev.registers(57358, 4);
        assert!(
            after[..2] != f32_lo(0.0)[..] && after[2..] != f32_lo(0.0)[..],
            "{watts} W: a limit left at 0 W: {after:?}"
        );
        sim.shutdown().await;
    }
}
