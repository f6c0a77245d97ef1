//! A solar park on a noisy site (`docs/devices.md`, "Noisy mode": meter and
//! inverter readings with measurement noise, a load that walks and steps)
//! held at its export limit by the grid loop, over real sockets: the export
//! stays in its band at the meter while each inverter gets no more Modbus
//! writes than its revert timer's refreshes plus a few changes an hour, and
//! the audit log grows by one record per change, not per refresh
//! (`docs/steering.md`, "Writes only when they matter").

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

use crate::steering_support::*;
use serde_json::Value;
use sitegate::sim::WriteEvent;
use tokio::sync::broadcast::{self, error::TryRecvError};

const INVERTERS: u8 = 20;
const RATED_KW: f64 = 25.0;
/// The export limit: five times the load, as on the park of the footprint
/// bench (1 MW behind 200 kW).
const MAX_EXPORT_W: f64 = 100_000.0;
const LOAD_KW: f64 = 20.0;
/// The site's band around the limit (`hold::tolerance_w`): 2 %.
const TOLERANCE_W: f64 = 2_000.0;
/// The site's revert timer, 20 s: a refresh every 10 s (`report::refresh_ms`:
/// 10 s before it runs out).
const REVERT_S: u16 = 20;
const REFRESH_S: f64 = 10.0;
/// Changes an inverter may get per hour on top of its refreshes.
const CHANGES_PER_H: f64 = 30.0;
/// The largest step the noisy load takes at once (`sim::noise::STEP_SHARE`:
/// up to 20 % of the load's profile): no loop can act before the meter shows
/// it, so the export may pass its aim by this much for a few seconds.
const LOAD_STEP_W: f64 = 0.20 * 20_000.0;
/// How long the park is watched once it holds its limit: three and a third
/// refreshes, as 150 s are at the default timer (60 s, a refresh every 45 s).
/// The change budget is per hour, so the ratio of writes allowed to refreshes
/// needed stays what it is at the default.
const WATCH: Duration = Duration::from_millis(33_333);

/// Twenty inverters on one bus and a meter on another, polled every second,
/// on a noisy site with a 20 kW base load.
fn site() -> TestSite {
    let mut site = TestSite::new(1000, REVERT_S)
        .grid_limits(10_000.0, MAX_EXPORT_W / 1000.0)
        .poll_interval_ms(1000)
        .bus_key_of("park", "timeout_ms", 1000);
    for unit in 1..=INVERTERS {
        site = site
            .inverter("park", &format!("dvc_inv_{unit}"), RATED_KW)
            .key("name", format!("inverter {unit}"))
            .unit_id(unit);
    }
    site.meter("grid", "dvc_grid")
        .noisy(35)
        .base_load_kw(LOAD_KW)
}

/// The write requests one inverter received, told apart: a change writes
/// other words than the write before it, a refresh the same ones.
#[derive(Debug, Default)]
struct Received {
    changes: usize,
    refreshes: usize,
    last: Option<(u16, Vec<u16>)>,
}

impl Received {
    fn total(&self) -> usize {
        self.changes + self.refreshes
    }
}

/// The write requests received so far on the park's bus, by unit id: how
/// many of them were changes.
fn drain(rx: &mut broadcast::Receiver<WriteEvent>, into: &mut BTreeMap<u8, Received>) -> usize {
    let mut changes = 0;
    loop {
        match rx.try_recv() {
            Ok(e) if e.server == "park" => {
                assert!(e.exception.is_none(), "a write was refused: {e:?}");
                let r = into.entry(e.unit_id).or_default();
                let this = (e.address, e.values.clone());
                if r.last.as_ref() == Some(&this) {
                    r.refreshes += 1;
                } else {
                    r.changes += 1;
                    changes += 1;
                }
                r.last = Some(this);
            }
            Ok(_) => {}
            Err(TryRecvError::Empty) => return changes,
            Err(e) => panic!("write events lost: {e}"),
        }
    }
}

/// The write records of the history newer than `since_ms`.
async fn write_records(rig: &Rig, since_ms: i64) -> Vec<Value> {
    let (s, h) = rig
        .get(&format!("/sites/{SITE}/steering/history?limit=1000"), READ)
        .await;
    assert_eq!(s, 200, "{h}");
    h.as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"] == "write" && r["time"].as_i64().is_some_and(|t| t > since_ms))
        .cloned()
        .collect()
}

fn export_w(rig: &Rig) -> f64 {
    -rig.device("grid").state().ac_power_w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noisy_park_holds_its_export_with_few_writes_per_inverter() {
    let rig = site().start().await;
    let mut rx = rig.sim.subscribe_writes();
    let mut writes: BTreeMap<u8, Received> = BTreeMap::new();
    // Steady state: the export within its band for 5 s and, as long, no
    // inverter told a new limit (the loop's first moves to its shares are
    // done). The budget below is a steady state's.
    let start = Instant::now();
    let mut since: Option<Instant> = None;
    let mut last_change = Instant::now();
    loop {
        if drain(&mut rx, &mut writes) > 0 {
            last_change = Instant::now();
        }
        let x = export_w(&rig);
        if (x - MAX_EXPORT_W).abs() <= TOLERANCE_W {
            let held = since.get_or_insert_with(Instant::now).elapsed();
            if held >= Duration::from_secs(5) && last_change.elapsed() >= Duration::from_secs(5) {
                break;
            }
        } else {
            since = None;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "the park never held {MAX_EXPORT_W} W of export quietly: {x} W, the last change {:.1} s ago; state: {}",
            last_change.elapsed().as_secs_f64(),
            rig.state().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let held_after_s = start.elapsed().as_secs_f64();
    // Counted from here; what each inverter was told last stays, so that
    // its first write in the watch is told apart as well.
    for r in writes.values_mut() {
        (r.changes, r.refreshes) = (0, 0);
    }
    let from_ms = now_ms();
    let began = Instant::now();
    let (mut samples, mut within, mut above) = (0usize, 0usize, 0usize);
    let mut worst = 0.0f64;
    let mut sum = 0.0f64;
    while began.elapsed() < WATCH {
        // The refreshes counted come from the revert timer, which runs in real time:
        // the watch lasts WATCH, the export read four times a second.
        tokio::time::sleep(Duration::from_millis(250)).await;
        drain(&mut rx, &mut writes);
        let x = export_w(&rig);
        samples += 1;
        if (x - MAX_EXPORT_W).abs() <= TOLERANCE_W {
            within += 1;
        }
        if x > MAX_EXPORT_W + TOLERANCE_W {
            above += 1;
        }
        worst = worst.max(x);
        sum += x;
    }
    drain(&mut rx, &mut writes);
    let watched_s = began.elapsed().as_secs_f64();
    let records = write_records(&rig, from_ms).await;

    // Per inverter: the refreshes its revert timer needs, plus changes at
    // 30 an hour (with one more for where the watch cuts a refresh).
    let refreshes = (watched_s / REFRESH_S).ceil();
    let changes_allowed = (CHANGES_PER_H * watched_s / 3600.0).ceil();
    let allowed = refreshes + changes_allowed + 1.0;
    let got: Vec<(usize, usize)> = (1..=INVERTERS)
        .map(|u| writes.get(&u).map_or((0, 0), |r| (r.changes, r.refreshes)))
        .collect();
    let total: usize = writes.values().map(Received::total).sum();
    let changes: usize = writes.values().map(|r| r.changes).sum();
    eprintln!(
        "held after {held_after_s:.0} s; {watched_s:.0} s: write requests per inverter (changes, refreshes) {got:?}: {:.1} per inverter \
         (allowed {allowed}); audit write records {}; export within ±{TOLERANCE_W} W of the limit in \
         {within} of {samples} samples, above it in {above}, at most {worst:.0} W, {:.0} W on average",
        total as f64 / f64::from(INVERTERS),
        records.len(),
        sum / samples as f64
    );
    // On average the budget; any one inverter at most two more (the turns
    // that spread the site's moves over the inverters are not even within
    // a couple of minutes).
    let mean = total as f64 / f64::from(INVERTERS);
    assert!(
        mean <= refreshes + changes_allowed,
        "{mean} write requests per inverter in {watched_s:.0} s: {got:?}"
    );
    for (u, (c, r)) in (1..=INVERTERS).zip(&got) {
        assert!(
            (c + r) as f64 <= allowed + 2.0,
            "inverter {u}: {c} changes and {r} refreshes in {watched_s:.0} s, more than {allowed}: {got:?}"
        );
        assert!(
            *r as f64 <= refreshes,
            "inverter {u}: {r} refreshes in {watched_s:.0} s"
        );
    }
    // Export in its band at the meter: the load walks and steps (5 to 20 %
    // of it at once), and the loop follows within seconds; on average near
    // its aim, half a tolerance inside the limit, above the band rarely, and
    // never past the aim by more than the largest load step plus a tolerance
    // for the walk and the meter's noise in the seconds the loop takes.
    // (Below the aim by up to a tolerance: in a watch of half a minute, one
    // load step up that the loop follows at its ramp weighs on the mean.)
    let mean_x = sum / samples as f64;
    let aim = MAX_EXPORT_W - 0.5 * TOLERANCE_W;
    assert!(
        (aim - TOLERANCE_W..=aim + 0.5 * TOLERANCE_W).contains(&mean_x),
        "export {mean_x} W on average"
    );
    assert!(
        within as f64 >= 0.7 * samples as f64,
        "export in its band in only {within} of {samples} samples"
    );
    assert!(
        above as f64 <= 0.05 * samples as f64,
        "export above its band in {above} of {samples} samples"
    );
    assert!(
        worst <= aim + LOAD_STEP_W + TOLERANCE_W,
        "export reached {worst} W"
    );
    // The audit: a record per change (each inverter's first write seen may
    // be a refresh taken for a change), none per refresh.
    assert!(
        records.len() <= changes,
        "{} write records for {changes} changes and {} refreshes",
        records.len(),
        total - changes
    );
    rig.shutdown().await;
}
