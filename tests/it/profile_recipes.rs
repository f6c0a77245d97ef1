//! What a profile battery's recipe leaves behind, on real sockets: the words
//! at the simulated device's registers after a setpoint, after the release
//! (through the API, and at a clean stop), and after the agent is gone
//! (killed, no goodbye writes) and the device's own timer has run out. No charge or discharge limit is left at 0 W and the
//! mode comes back; idle holds the battery without being a release; a
//! setpoint and its mode go out in one request where the device wants that.

use std::time::Duration;

use crate::common::process::AgentProcess;
use crate::common::words;
use crate::steering_support::*;
use nix::sys::signal::Signal;
use serde_json::json;
use sitegate::config::parse;
use sitegate::sim::{SimDeviceHandle, SimSite, WriteEvent};

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
    // Discharging 1.5 kW: mode 4, discharge limit 1.5 kW; the charge limit
    // stays free (the rated 4 kW), never 0 W.
    ess(&rig, 1500.0, 60_000).await;
    eventually("discharging", Duration::from_secs(5), || async {
        solaredge(&rig) == [vec![4], f32_lo(4000.0), f32_lo(1500.0)].concat()
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

/// A steerable profile family as the dead-agent and SIGTERM tests see it.
struct Family {
    profile: &'static str,
    /// Every register the recipe writes (enable, setpoint, direction, limits,
    /// timer, release), as `(first, count)`.
    spans: &'static [(u16, u16)],
    /// With a device-side timer (`on_timeout`), what it leaves.
    dead: Option<Dead>,
}

/// What a family's device does on its own once the agent is gone.
struct Dead {
    /// The registers the recipe documents for that state.
    spans: &'static [(u16, u16)],
    /// The time is a menu setting (`after_s`), not a register the agent
    /// writes: the test sets it to `REVERT_S` instead of waiting for it.
    menu_timer: bool,
    /// `(setpoint W, words while it is held, words once the device's timer
    /// has run out with the agent killed)`.
    cases: fn() -> Vec<DeadCase>,
}

/// `(setpoint W, words while held, words after the device's timer)`.
type DeadCase = (f64, Vec<u16>, Vec<u16>);

/// Every profile family with a storage recipe. The words below are the ones
/// the profile headers and docs/devices.md ("State with the agent gone")
/// state; families whose sources do not say what the device does without
/// the agent have no `dead` entry (unverified there).
const FAMILIES: &[Family] = &[
    Family {
        profile: "alpha-ess",
        spans: &[(2176, 3), (2181, 4)],
        dead: None,
    },
    Family {
        profile: "goodwe-et",
        spans: &[(47511, 2)],
        dead: None,
    },
    Family {
        profile: "huawei-luna2000",
        spans: &[(47083, 1), (47087, 1), (47100, 1), (47246, 5)],
        dead: None,
    },
    Family {
        profile: "kostal-plenticore",
        spans: &[(1034, 2), (1038, 4)],
        dead: Some(Dead {
            spans: &[(1034, 2), (1038, 4)],
            menu_timer: true,
            // The setpoint lapses; the limits keep their last words: the
            // rated 4 kW after a charge, 0 W after an idle (until the agent's
            // next start releases to the words it found).
            cases: || {
                vec![
                    (
                        -2000.0,
                        [f32_lo(-2000.0), f32_lo(4000.0), f32_lo(4000.0)].concat(),
                        [f32_lo(0.0), f32_lo(4000.0), f32_lo(4000.0)].concat(),
                    ),
                    (
                        0.0,
                        [f32_lo(0.0), f32_lo(0.0), f32_lo(0.0)].concat(),
                        [f32_lo(0.0), f32_lo(0.0), f32_lo(0.0)].concat(),
                    ),
                ]
            },
        }),
    },
    Family {
        profile: "sma-storage",
        spans: &[(40149, 4)],
        dead: None,
    },
    Family {
        profile: "solaredge-storage",
        spans: &[(57348, 1), (57354, 8)],
        dead: Some(Dead {
            spans: &[(57357, 5)],
            menu_timer: false,
            // Back to the default mode 7; the commanded direction keeps its
            // setpoint, the other its rated 4 kW: never a limit at 0 W.
            cases: || {
                vec![
                    (
                        -2000.0,
                        [vec![3], f32_lo(2000.0), f32_lo(4000.0)].concat(),
                        [vec![7], f32_lo(2000.0), f32_lo(4000.0)].concat(),
                    ),
                    (
                        0.0,
                        [vec![0], f32_lo(4000.0), f32_lo(4000.0)].concat(),
                        [vec![7], f32_lo(4000.0), f32_lo(4000.0)].concat(),
                    ),
                ]
            },
        }),
    },
    Family {
        profile: "sungrow-sh",
        spans: &[(13049, 3)],
        dead: None,
    },
];

/// An agent process steering one family's battery on a simulated site.
struct Steered {
    agent: AgentProcess,
    sim: SimSite,
    dev: SimDeviceHandle,
    base: String,
    client: reqwest::Client,
}

impl Steered {
    async fn start(profile: &str) -> Steered {
        let text = battery(profile);
        let mut config = parse(&text).unwrap();
        let sim = start_sim(&mut config).await;
        let (agent, base) = AgentProcess::spawn_on(&text, &config).await;
        // Steered at once, the first write may wait for the device's first
        // contact inside the test's 5 s; with 24 tests at once it once
        // missed them.
        AgentProcess::ready(&base).await;
        let dev = sim.device(&profile.replace('-', "_"), 1).unwrap();
        Steered {
            agent,
            sim,
            dev,
            base,
            client: crate::common::http_client().build().expect("http client"),
        }
    }

    async fn ess(&self, watts: f64) {
        let body =
            json!({"setting": {"value": watts, "unit": "W"}, "validUntil": now_ms() + 120_000});
        let r = self
            .client
            .post(format!("{}/sites/{SITE}/steering/ess", self.base))
            .bearer_auth(STEER)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{watts} W");
    }

    /// Steers `watts` and waits until `spans` leave `before` and hold still
    /// for a few refreshes (every write of the recipe out).
    async fn steer_until_changed(
        &self,
        watts: f64,
        spans: &[(u16, u16)],
        before: &[u16],
    ) -> Vec<u16> {
        self.ess(watts).await;
        eventually(
            &format!("{watts} W written"),
            Duration::from_secs(5),
            || async { words(&self.dev, spans) != before },
        )
        .await;
        // Three control intervals (INTERVAL_MS, 300 ms): a recipe that writes in
        // several requests has sent them all before the words are read.
        tokio::time::sleep(Duration::from_millis(3 * INTERVAL_MS)).await;
        words(&self.dev, spans)
    }
}

/// After the agent dies (killed: no goodbye writes) the device's own timer
/// runs out and leaves the words its profile states: for every family with
/// `on_timeout`, after a charge and after a charge then idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_timer_after_the_agent_dies_leaves_the_stated_words() {
    for f in FAMILIES {
        let Some(dead) = &f.dead else { continue };
        for (watts, during, after) in (dead.cases)() {
            let case = format!("{} {watts} W", f.profile);
            let mut s = Steered::start(f.profile).await;
            if dead.menu_timer {
                assert!(s.dev.set_own_timeout(f64::from(REVERT_S)));
            }
            let found = words(&s.dev, dead.spans);
            s.steer_until_changed(-2000.0, dead.spans, &found).await;
            s.ess(watts).await;
            eventually(&format!("{case}: held"), Duration::from_secs(5), || async {
                words(&s.dev, dead.spans) == during
            })
            .await;
            s.agent.kill();
            eventually(
                &format!("{case}: the device's own timer"),
                Duration::from_secs(u64::from(REVERT_S) + 3),
                || async { words(&s.dev, dead.spans) == after },
            )
            .await;
            // And it stays so: the device writes nothing more on its own.
            tokio::time::sleep(Duration::from_secs(u64::from(REVERT_S))).await;
            assert_eq!(words(&s.dev, dead.spans), after, "{case}");
            s.sim.shutdown().await;
        }
    }
}

/// For every family with a storage recipe, on an agent process: the clean
/// release (the steering ended through the API) after a charge and an idle
/// leaves every register the recipe wrote at the word found before the
/// agent's first write (mode and limits as delivered). SIGTERM after a
/// second charge releases the same way before the agent exits
/// (docs/steering.md, "At shutdown"): a stopped agent leaves no device
/// steered, whether or not it has a timer of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_then_sigterm_for_every_family() {
    for f in FAMILIES {
        let mut s = Steered::start(f.profile).await;
        // The device's own timer out of the way: what is seen is the agent's.
        assert!(s.dev.set_own_timeout(600.0));
        let found = words(&s.dev, f.spans);
        let charging = s.steer_until_changed(-2000.0, f.spans, &found).await;
        s.steer_until_changed(0.0, f.spans, &charging).await;
        let r = s
            .client
            .delete(format!("{}/sites/{SITE}/steering", s.base))
            .bearer_auth(STEER)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", f.profile);
        eventually(
            &format!("{}: released as found", f.profile),
            Duration::from_secs(5),
            || async { words(&s.dev, f.spans) == found },
        )
        .await;
        let held = s.steer_until_changed(-2000.0, f.spans, &found).await;
        assert_ne!(held, found, "{}: steered again", f.profile);
        s.agent.signal(Signal::SIGTERM);
        let exit = s.agent.exited(Duration::from_secs(10)).await;
        assert!(exit.success(), "{}: {exit}", f.profile);
        assert_eq!(
            words(&s.dev, f.spans),
            found,
            "{}: released as found at SIGTERM",
            f.profile
        );
        s.sim.shutdown().await;
    }
}
