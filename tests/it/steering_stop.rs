//! A clean stop leaves no device steered: the agent runs as its own process on
//! a simulated site, steers its batteries (a charge) and inverters (a limit),
//! gets SIGTERM, and releases every device before it exits. The registers are
//! read over the simulator's sockets, before the agent starts and after it has
//! exited, and must hold the same words: the ones found at first contact. The
//! cases are the families whose devices have no revert timer of their own
//! (Sungrow SH, GoodWe ET, Growatt TL: the release at stop is their only way
//! back) and SunSpec (model 124 storage, model 123 limit), whose timers stay
//! the backstop for an agent that dies (`steering_revert.rs`).
//!
//! A device that does not answer holds the stop up no longer than the
//! release bound: the agent exits all the same, says which device it could
//! not release, and releases the others.

use std::time::Duration;

use crate::common::process::AgentProcess;
use crate::common::proxy::behind_proxy;
use crate::steering_support::*;
use ::sunspec::models::{model123::Model123 as M123, model124::Model124 as M124};
use nix::sys::signal::Signal;
use serde_json::json;
use sitegate::config::{parse, Transport};
use sitegate::modbus::link::{Port, UnitReader};
use sitegate::modbus::sunspec::discover;
use sitegate::register::plan::{Span, Table};
use sitegate::sim::{Fault, SimSite};

/// Long enough that no simulated device's own timer runs out during a test:
/// what is seen at the registers is the agent's doing.
const REVERT_S: u16 = 60;

/// Where a case's control registers are.
#[derive(Clone, Copy)]
enum Registers {
    /// A register-map profile: `(address, count)`.
    Fixed(&'static [(u16, u16)]),
    /// A SunSpec model's points, `(offset, length)` in its block.
    Sunspec(u16, &'static [(u16, u16)]),
}

/// One steered device of the site.
#[derive(Clone, Copy)]
struct Case {
    bus: &'static str,
    kind: &'static str,
    keys: &'static str,
    registers: Registers,
}

const fn pt(offset: u16, length: u16) -> (u16, u16) {
    (offset, length)
}

/// What model 124's recipe writes: `StorCtl_Mod`, `OutWRte`, `InWRte`,
/// `InOutWRte_RvrtTms`.
const M124_WRITTEN: &[(u16, u16)] = &[
    pt(M124::STOR_CTL_MOD.offset, M124::STOR_CTL_MOD.length),
    pt(M124::OUT_W_RTE.offset, M124::OUT_W_RTE.length),
    pt(M124::IN_W_RTE.offset, M124::IN_W_RTE.length),
    pt(
        M124::IN_OUT_W_RTE_RVRT_TMS.offset,
        M124::IN_OUT_W_RTE_RVRT_TMS.length,
    ),
];

/// What model 123's recipe writes: `WMaxLimPct`, `WMaxLimPct_RvrtTms`,
/// `WMaxLim_Ena`.
const M123_WRITTEN: &[(u16, u16)] = &[
    pt(M123::W_MAX_LIM_PCT.offset, M123::W_MAX_LIM_PCT.length),
    pt(
        M123::W_MAX_LIM_PCT_RVRT_TMS.offset,
        M123::W_MAX_LIM_PCT_RVRT_TMS.length,
    ),
    pt(M123::W_MAX_LIM_ENA.offset, M123::W_MAX_LIM_ENA.length),
];

const CASES: &[Case] = &[
    Case {
        bus: "sungrow",
        kind: "battery",
        keys: "profile = \"sungrow-sh\"\nrated_power = \"4 kW\"\ncapacity = \"10 kWh\"",
        registers: Registers::Fixed(&[(13049, 3)]),
    },
    Case {
        bus: "goodwe",
        kind: "battery",
        keys: "profile = \"goodwe-et\"\nrated_power = \"4 kW\"\ncapacity = \"10 kWh\"",
        registers: Registers::Fixed(&[(47511, 2)]),
    },
    Case {
        bus: "sunspec-bat",
        kind: "battery",
        keys: "rated_power = \"4 kW\"\ncapacity = \"10 kWh\"\nsoc_min = 5\nsoc_max = 95",
        registers: Registers::Sunspec(124, M124_WRITTEN),
    },
    Case {
        bus: "growatt",
        kind: "inverter",
        keys: "profile = \"growatt-tl\"\nrated_power = \"4 kW\"",
        registers: Registers::Fixed(&[(3, 1)]),
    },
    Case {
        bus: "sunspec-pv",
        kind: "inverter",
        keys: "rated_power = \"4 kW\"",
        registers: Registers::Sunspec(123, M123_WRITTEN),
    },
];

fn reference(bus: &str) -> String {
    format!("dvc_{}", bus.replace('-', "_"))
}

/// A site of `cases`, one bus each; `timeout_ms` for the bus named `slow`.
fn site(cases: &[&Case], slow: Option<(&str, u64)>) -> String {
    let mut t = site_header(300, REVERT_S).replace("{rated_production}", "");
    for c in cases {
        let mut block = device_block(c.bus, &reference(c.bus), c.kind, c.keys);
        if let Some((bus, ms)) = slow.filter(|(bus, _)| *bus == c.bus) {
            block = block.replace(
                &format!("name = \"{bus}\"\ntcp = \"127.0.0.1:0\"\ntimeout_ms = 500"),
                &format!("name = \"{bus}\"\ntcp = \"127.0.0.1:0\"\ntimeout_ms = {ms}"),
            );
        }
        t.push_str(&block);
    }
    t
}

/// A connection to the simulated server of `bus`, as a client on the LAN.
fn port_to(sim: &SimSite, bus: &str) -> Port {
    let addr = sim.addr(bus).expect("a server per bus");
    Port::new(
        Transport::Tcp {
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        Duration::from_millis(500),
    )
}

/// The words of `case`'s control registers, read over the socket.
async fn read(sim: &SimSite, case: &Case) -> Vec<u16> {
    let mut port = port_to(sim, case.bus);
    let spans: Vec<Span> = match &case.registers {
        Registers::Fixed(spans) => spans
            .iter()
            .map(|&(a, n)| Span::new(Table::Holding, a, n))
            .collect(),
        Registers::Sunspec(model, points) => {
            let chain = discover(&mut UnitReader {
                port: &mut port,
                unit: 1,
            })
            .await
            .expect("the SunSpec map");
            let block = *chain
                .iter()
                .find(|b| b.id == *model)
                .expect("the model in the chain");
            points
                .iter()
                .map(|&(offset, n)| Span::new(Table::Holding, block.point(offset), n))
                .collect()
        }
    };
    let mut words = Vec::new();
    for span in spans {
        let read = port.read(1, span).await;
        words.extend(read.unwrap_or_else(|e| panic!("{}: read {span:?}: {e}", case.bus)));
    }
    port.close().await;
    words
}

/// Steers the site: every battery charging, every inverter limited (when
/// it has any), for longer than the test runs.
async fn steer(base: &str, cases: &[&Case]) {
    let mut body = json!({"energyStorageSetting": {"value": -6, "unit": "kW"},
                          "validUntil": now_ms() + 600_000});
    if cases.iter().any(|c| c.kind == "inverter") {
        body["productionCurtailment"] = json!({"value": 4, "unit": "kW"});
    }
    post_signal(base, &body).await;
}

/// Waits until every case's registers have left the words found.
async fn steered(sim: &SimSite, cases: &[&Case], found: &[Vec<u16>]) {
    for (c, found) in cases.iter().zip(found) {
        let mut now = Vec::new();
        for _ in 0..250 {
            now = read(sim, c).await;
            if now != *found {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_ne!(now, *found, "{}: steered", c.bus);
    }
    // Every write of each recipe out (some write in several requests): a second,
    // over three of the site's 300 ms control intervals, before the test goes on.
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_releases_every_steered_device_to_the_words_found() {
    let cases: Vec<&Case> = CASES.iter().collect();
    let text = site(&cases, None);
    let mut config = parse(&text).unwrap();
    let sim = start_sim(&mut config).await;
    let mut found = Vec::new();
    for c in &cases {
        found.push(read(&sim, c).await);
    }
    let (mut agent, base) = AgentProcess::spawn_on(&text, &config).await;
    steer(&base, &cases).await;
    steered(&sim, &cases, &found).await;

    agent.signal(Signal::SIGTERM);
    let exit = agent.exited(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit}");
    for (c, found) in cases.iter().zip(&found) {
        assert_eq!(read(&sim, c).await, *found, "{}: released as found", c.bus);
    }
    let log = agent.log();
    for c in &cases {
        let device = reference(c.bus);
        assert!(
            log.lines()
                .any(|l| l.contains("agent stopping: device released") && l.contains(&device)),
            "{device} released in the log:\n{log}"
        );
    }
    sim.shutdown().await;
}

/// A battery that stops answering (a silent gateway, its bus timeout longer
/// than the bound) while another is steered beside it: SIGTERM ends the
/// agent all the same, the log names the silent one as not released, and
/// the other is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_device_does_not_hold_the_stop_past_the_bound() {
    let silent = Case {
        bus: "silent",
        ..CASES[0]
    };
    let cases = [&CASES[0], &silent];
    let text = site(&cases, Some(("silent", 4000)));
    let mut config = parse(&text).unwrap();
    let sim = start_sim(&mut config).await;
    let found = [read(&sim, cases[0]).await, read(&sim, cases[1]).await];
    // The silent battery's bus goes through a proxy that can stop answering.
    let peer = behind_proxy(&sim, &mut config, "silent").await;
    let (mut agent, base) = AgentProcess::spawn_on(&text, &config).await;
    steer(&base, &cases).await;
    steered(&sim, &cases, &found).await;

    for _ in 0..1000 {
        peer.inject(Fault::Silence);
    }
    // A poll of the silent battery is under way.
    eventually("a request unanswered", Duration::from_secs(5), || async {
        peer.applied().contains(&Fault::Silence)
    })
    .await;
    agent.signal(Signal::SIGTERM);
    // Liveness, not a timing figure: without the bound the release would
    // wait out the 4 s bus timeout behind the poll under way.
    let exit = agent.exited(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit}");
    assert_eq!(read(&sim, cases[0]).await, found[0], "the other released");
    assert_ne!(
        read(&sim, cases[1]).await,
        found[1],
        "the silent one as it was"
    );
    let log = agent.log();
    let device = reference("silent");
    // Given up at the bound, not after the bus timeout of the release itself.
    assert!(
        log.lines().any(
            |l| l.contains("agent stopping: the device was not released")
                && l.contains(&device)
                && l.contains("stop bound")
        ),
        "{device} named as not released within the bound:\n{log}"
    );
    peer.stop().await;
    sim.shutdown().await;
}

/// `steered` of the device's registers as first found, in the store.
fn steered_mark(db: &std::path::Path, device: &str) -> Option<i64> {
    let conn = rusqlite::Connection::open(db).expect("the database");
    conn.query_row(
        "SELECT steered FROM device_originals WHERE device = ?1",
        [device],
        |r| r.get(0),
    )
    .ok()
}

/// The release at stop is recorded as a release at expiry is: a confirmed
/// write record without a component, last in the history, and the store's
/// steered mark cleared (the next start takes the registers it finds for
/// the installer's). A restart then steers the device again from the
/// stored signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_at_stop_is_recorded_like_any_release() {
    let case = &CASES[0];
    let device = reference(case.bus);
    let rig = Rig::start(&site(&[case], None)).await;
    let found = read(&rig.sim, case).await;
    steer(&rig.base, &[case]).await;
    steered(&rig.sim, &[case], std::slice::from_ref(&found)).await;
    let db = rig.config.storage.path.clone();
    let dev = rig.device(case.bus);
    let Registers::Fixed(&[(addr, count)]) = case.registers else {
        unreachable!("Sungrow SH's control registers are one span")
    };
    eventually("marked steered", Duration::from_secs(5), || async {
        steered_mark(&db, &device) == Some(1)
    })
    .await;
    let rig = rig
        .restart_with(|config| {
            assert_eq!(dev.registers(addr, count), found, "released at the stop");
            assert_eq!(steered_mark(&config.storage.path, &device), Some(0));
            let conn = rusqlite::Connection::open(&config.storage.path).expect("the database");
            let last: String = conn
                .query_row(
                    "SELECT record FROM steering_audit WHERE kind = 'write' ORDER BY at_ms DESC LIMIT 1",
                    [],
                    |r| r.get(0),
                )
                .expect("a write record");
            let last: serde_json::Value = serde_json::from_str(&last).expect("JSON");
            assert_eq!(last["deviceReference"], device.as_str(), "{last}");
            assert_eq!(last["action"], "storage control released", "{last}");
            assert_eq!(last["component"], serde_json::Value::Null, "{last}");
            assert_eq!(last["confirmed"], true, "{last}");
        })
        .await;
    // The stored signal is taken up again by the next start.
    eventually("steered again", Duration::from_secs(5), || async {
        read(&rig.sim, case).await != found
    })
    .await;
    rig.shutdown().await;
}
