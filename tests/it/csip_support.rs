//! Shared rig of the CSIP-AUS tests: the demo site (PV 30 + 20 kW,
//! batteries 20 + 10 kW, a meter; 60 kW import and 40 kW export
//! configured) with a `[csip_aus]` table for a test server, and waits on
//! what the meter holds and what the state shows.
#![allow(dead_code)]

use std::time::Duration;
use tokio::time::Instant;

use serde_json::Value;

use crate::common::csip_server::CsipServer;
use crate::steering_support::*;

pub const WAIT: Duration = Duration::from_secs(20);

/// The demo site with `server`'s table, the client's identity registered
/// out of band with PIN 111115.
pub async fn rig(server: &CsipServer) -> Rig {
    server.register(111_115);
    Rig::start(&text(server)).await
}

/// As [`rig`], every battery full: an export is held by curtailment only.
pub async fn rig_full(server: &CsipServer) -> Rig {
    server.register(111_115);
    Rig::start_full(&text(server)).await
}

pub fn text(server: &CsipServer) -> String {
    format!("{}{}", demo_site(250), server.table(SITE, Some(111_115)))
}

pub fn grid_w(rig: &Rig) -> f64 {
    rig.device("grid").state().ac_power_w
}

/// Waits until the meter has stayed within `lo..=hi` W (+ import) for 2 s.
pub async fn holds(rig: &Rig, what: &str, lo: f64, hi: f64) {
    let mut since: Option<Instant> = None;
    let start = Instant::now();
    loop {
        let g = grid_w(rig);
        if (lo..=hi).contains(&g) {
            if since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(2) {
                return;
            }
        } else {
            since = None;
        }
        assert!(
            start.elapsed() < WAIT,
            "{what}: the grid meter reads {g} W, not within {lo}..={hi} W for 2 s; state: {}",
            rig.state().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The utility's limit of `kind` in the state (`sources`), if any.
pub fn source(state: &Value, kind: &str) -> Option<Value> {
    state["gridLoop"]["sources"]
        .as_array()?
        .iter()
        .find(|s| s["kind"] == kind)
        .cloned()
}

/// Waits until the state's utility limit of `kind` is `w` W (`None`: gone).
pub async fn source_is(rig: &Rig, kind: &str, w: Option<f64>) -> Value {
    let start = Instant::now();
    loop {
        let st = rig.state().await;
        let got = source(&st, kind).and_then(|s| s["value"]["value"].as_f64());
        if got.map(f64::round) == w.map(f64::round) {
            return st;
        }
        assert!(start.elapsed() < WAIT, "{kind} is {got:?}, not {w:?}: {st}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
