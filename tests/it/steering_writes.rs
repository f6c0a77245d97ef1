//! Steering writes as the simulated devices receive them: only changed setpoints
//! are written (plus the refreshes the devices' revert timers need, each the
//! recipe's first write alone), and a
//! steering write goes through its bus ahead of the polls queued there.
//!
//! The simulator numbers every request a server handles, reads included, and
//! reports each write with its number (`WriteEvent::seq`), so the order of
//! arrival is exact; it can also hold read requests, like a device that is slow
//! to answer, which pins the bus task inside one poll request.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use crate::steering_support::*;
use serde_json::{json, Value};
use sitegate::sim::WriteEvent;
use tokio::sync::broadcast::{self, error::TryRecvError};

/// Revert timeout of the first test: the actuators refresh every 1 s (half
/// of it: the 10 s margin `report::refresh_ms` keeps is more than half).
const REVERT_S: u16 = 2;
const REFRESH_MS: u128 = REVERT_S as u128 * 1000 / 2;
/// The control loop re-evaluates every 100 ms: ten times per refresh.
const INTERVAL_MS: u64 = 100;
const WAIT: Duration = Duration::from_secs(20);

/// One bus transaction as the device saw it: its writes, in order, with the
/// arrival of the first.
#[derive(Debug)]
struct Txn {
    at: Instant,
    writes: Vec<(u16, Vec<u16>)>,
}

/// Groups one server's write events into transactions: writes whose request
/// numbers follow each other without a read between them (a transaction's
/// writes are sent back to back; its read-back and the polls come after).
fn transactions(events: &[WriteEvent]) -> Vec<Txn> {
    let mut out: Vec<Txn> = Vec::new();
    let mut last_seq = None;
    for e in events {
        assert!(e.exception.is_none(), "a write was refused: {e:?}");
        match out.last_mut() {
            Some(t) if last_seq == Some(e.seq - 1) => t.writes.push((e.address, e.values.clone())),
            _ => out.push(Txn {
                at: e.at,
                writes: vec![(e.address, e.values.clone())],
            }),
        }
        last_seq = Some(e.seq);
    }
    out
}

/// Every write event received so far, by server.
fn drain(rx: &mut broadcast::Receiver<WriteEvent>, into: &mut BTreeMap<String, Vec<WriteEvent>>) {
    loop {
        match rx.try_recv() {
            Ok(e) => into.entry(e.server.clone()).or_default().push(e),
            Err(TryRecvError::Empty) => return,
            Err(e) => panic!("write events lost: {e}"),
        }
    }
}

/// Whether `t` is a refresh: the same writes as the transaction before it,
/// or one write of words the device's first (whole) transaction already
/// wrote (the recipe's first write, which restarts its revert timer: after a
/// confirmed write only what changed is sent, `WritePlan::narrowed`).
fn is_refresh(txns: &[Txn], i: usize) -> bool {
    let t = &txns[i];
    i > 0
        && (t.writes == txns[i - 1].writes
            || (t.writes.len() == 1 && txns[0].writes.contains(&t.writes[0])))
}

/// Checks one device's transactions: they form `changes` runs (a change, then
/// its refreshes), and within a run each refresh came at least a refresh
/// period after the write before (never once per evaluation). Returns the
/// number of refreshes in the last run.
fn check_runs(server: &str, txns: &[Txn], changes: usize) -> usize {
    let mut runs: Vec<&[Txn]> = Vec::new();
    let mut start = 0;
    for i in 1..=txns.len() {
        if i == txns.len() || !is_refresh(txns, i) {
            runs.push(&txns[start..i]);
            start = i;
        }
    }
    assert_eq!(
        runs.len(),
        changes,
        "{server}: expected {changes} distinct setpoints written, got {txns:#?}"
    );
    for run in &runs {
        for pair in run.windows(2) {
            let gap = pair[1].at.duration_since(pair[0].at).as_millis();
            // The refresh is due one period after the previous write *completed*
            // (on the agent's millisecond clock), so it arrives at least a period
            // after the previous one arrived; 20 ms for clock rounding.
            assert!(
                gap + 20 >= REFRESH_MS,
                "{server}: an unchanged setpoint written again after {gap} ms \
                 (refresh period {REFRESH_MS} ms): {txns:#?}"
            );
        }
    }
    runs.last().map_or(0, |r| r.len() - 1)
}

/// Polls the steering state until `done` holds for the write events collected so
/// far; returns how many distinct evaluations (`evaluatedAt`) it saw meanwhile.
async fn observe(
    rig: &Rig,
    rx: &mut broadcast::Receiver<WriteEvent>,
    events: &mut BTreeMap<String, Vec<WriteEvent>>,
    what: &str,
    done: impl Fn(&BTreeMap<String, Vec<WriteEvent>>) -> bool,
) -> usize {
    let start = Instant::now();
    let mut evaluations = std::collections::BTreeSet::new();
    loop {
        drain(rx, events);
        if let Some(t) = rig.state().await["evaluatedAt"].as_i64() {
            evaluations.insert(t);
        }
        if done(events) {
            return evaluations.len();
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn refreshes(events: &BTreeMap<String, Vec<WriteEvent>>, server: &str) -> usize {
    let txns = transactions(events.get(server).map_or(&[], Vec::as_slice));
    (0..txns.len())
        .rev()
        .take_while(|&i| is_refresh(&txns, i))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_setpoints_are_not_written_again_except_to_refresh() {
    let rig = TestSite::e2e(INTERVAL_MS, REVERT_S).start().await;
    let mut rx = rig.sim.subscribe_writes();
    let mut events = BTreeMap::new();
    let steered = ["bat-a", "bat-b", "pv-a", "pv-b"];

    // At the fallback (released controls) nothing is written at all, however
    // often the loop evaluates: releases are not refreshed.
    let idle_from = Instant::now();
    let evaluated = observe(&rig, &mut rx, &mut events, "idle evaluations", |_| {
        idle_from.elapsed() >= Duration::from_millis(20 * INTERVAL_MS)
    })
    .await;
    assert!(evaluated >= 5, "only {evaluated} evaluations seen");
    if !events.is_empty() {
        // Seen once on a loaded CI machine and not reproduced since: the
        // devices' history and state say which decision wrote again.
        let (_, history) = rig
            .get(&format!("/sites/{SITE}/steering/history?limit=50"), STEER)
            .await;
        panic!(
            "writes at the fallback: {events:#?}\nhistory: {history:#}\nstate: {:#}",
            rig.state().await
        );
    }

    // A signal: 100 kW discharge, 300 kW curtailment.
    let until = now_ms() + 600_000;
    let body = json!({"energyStorageSetting": {"value": 100, "unit": "kW"},
                      "productionCurtailment": {"value": 300, "unit": "kW"}, "validUntil": until});
    let (s, answer) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{answer}");
    // The same signal again (a new request, same setpoints): nothing to write.
    let (s, again) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{again}");
    assert_ne!(answer["requestId"], again["requestId"]);
    // Several refreshes per device, over many more evaluations.
    let evaluated = observe(&rig, &mut rx, &mut events, "two refreshes", |ev| {
        steered.iter().all(|s| refreshes(ev, s) >= 2)
    })
    .await;
    for server in steered {
        let txns = transactions(&events[server]);
        assert!(check_runs(server, &txns, 1) >= 2);
    }
    assert!(evaluated >= 10, "only {evaluated} evaluations seen");
    assert_eq!(rig.storage("bat-a"), window(25.0));
    assert_eq!(rig.limit("pv-a"), Some(75.0));

    // The storage target changes; the curtailment does not: the batteries get
    // their new setpoint, the inverters only their refreshes.
    let (s, answer) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": 300, "unit": "kW"}, "validUntil": until}),
        )
        .await;
    assert_eq!(s, 200, "{answer}");
    let evaluated = observe(&rig, &mut rx, &mut events, "refreshes of 300 kW", |ev| {
        let runs = |s: &str| {
            let txns = transactions(ev.get(s).map_or(&[], Vec::as_slice));
            (1..txns.len()).filter(|&i| !is_refresh(&txns, i)).count() + 1
        };
        ["bat-a", "bat-b"]
            .iter()
            .all(|s| runs(s) == 2 && refreshes(ev, s) >= 2)
    })
    .await;
    for server in ["bat-a", "bat-b"] {
        check_runs(server, &transactions(&events[server]), 2);
    }
    for server in ["pv-a", "pv-b"] {
        check_runs(server, &transactions(&events[server]), 1);
    }
    assert!(evaluated >= 10, "only {evaluated} evaluations seen");
    assert_eq!(rig.storage("bat-a"), window(75.0));
    rig.shutdown().await;
}

/// A battery and three meters on one bus (an RS-485 line behind one gateway),
/// each polled every 100 ms; a bus timeout long enough to hold a read. The
/// grid loop is off: the held line holds the meters' polls too, and after
/// three intervals (300 ms) the loop may count the meters lost and hold the
/// storage at its safe state, which the partner's request cannot move, so
/// that no write need follow it (on a loaded machine none was queued within
/// 20 s once). What is tested is the bus's order, not the loop.
fn shared_bus_site() -> TestSite {
    let mut site = TestSite::new(1000, 60)
        .grid_loop_off()
        .poll_interval_ms(100)
        .battery("line", "dvc_bat", 10.0, 20.0)
        .soc(5, 95);
    for unit in 2..=4 {
        site = site
            .meter("line", &format!("dvc_meter_{unit}"))
            .unit_id(unit);
    }
    site.bus_key_of("line", "timeout_ms", 30_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steering_write_goes_ahead_of_the_polls_queued_on_its_bus() {
    let rig = shared_bus_site().start().await;
    let bus = rig.agent.bus("line").expect("the bus").clone();
    let mut rx = rig.sim.subscribe_writes();

    // Pin the bus task inside one poll request: the device does not answer it
    // until released.
    assert!(rig.sim.hold_reads("line", true));
    eventually("a poll request held", WAIT, || async {
        rig.sim.held_reads("line") == 1
    })
    .await;
    // Not handled yet: the held read will get this number.
    let held = rig.sim.request_count("line").expect("the server");

    let (s, answer) = rig
        .post(
            &format!("/sites/{SITE}/steering/ess"),
            STEER,
            &json!({"setting": {"value": 2, "unit": "kW"}, "validUntil": now_ms() + 600_000}),
        )
        .await;
    assert_eq!(s, 200, "{answer}");
    eventually("the steering write queued on the bus", WAIT, || async {
        bus.queued() >= 1
    })
    .await;
    // Meanwhile every device's next poll has fallen due (100 ms intervals): a bus
    // that served polls first would now send a dozen reads before the write.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rig.sim.hold_reads("line", false));

    let first = tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("a write arrives")
        .expect("write events");
    assert_eq!(first.unit_id, 1, "{first:?}");
    assert_eq!(
        first.seq,
        held + 1,
        "requests between the held poll request ({held}) and the write: {first:?}"
    );
    eventually("2 kW discharge at the battery", WAIT, || async {
        rig.storage("line") == window(20.0)
    })
    .await;
    // The held line also held the battery's polls: its report comes back to
    // the partner's setpoint once it is read again.
    eventually("the battery reported at 2 kW", WAIT, || async {
        let reported: Value = rig.device_state("dvc_bat").await;
        reported["setpoint"] == json!({"value": 2000, "unit": "W"})
    })
    .await;
    rig.shutdown().await;
}
