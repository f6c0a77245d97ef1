//! The site as one SunSpec device on the Modbus server: a client walks its
//! map to the end marker and reads the values the API shows, and a SCADA's
//! write of `WMaxLimPct` becomes an export limit (source `modbus`) the grid
//! loop holds at the meter while the client refreshes it, and that ends
//! when the heartbeat stops. Each change of that limit is one record of the
//! site's steering history (read over HTTP, checked against the OpenAPI
//! document); a refresh is none.

use std::time::Duration;
use tokio::time::Instant;

use serde_json::{json, Value};
use sunspec::models::model103::Model103;
use sunspec::models::model123::Model123;
use sunspec::models::model203::Model203;
use sunspec::models::model802::Model802;

use crate::modbus_server::{demo_site_own_units, Client};
use crate::openapi_support::client::Checker;
use crate::openapi_support::document;
use crate::steering_support::*;

/// The site's unit id (the first site's default).
const SITE_UNIT: u8 = 200;

/// The demo site, each device a unit id of its own on the server.
fn text(extra: &str) -> String {
    let t = demo_site_own_units(250);
    t + "\n[modbus_server]\nlisten = [\"127.0.0.1:0\"]\nrequests_per_s = 10000\nburst = 1000\n"
        + extra
}

/// The site map's models: id, address of the ID register, `L`.
async fn walk(c: &mut Client) -> Vec<(u16, u16, u16)> {
    let marker = c.until(SITE_UNIT, 40000, 2).await;
    assert_eq!(marker, vec![0x5375, 0x6E53], "SunS at 40000");
    let mut at = 40002u16;
    let mut models = Vec::new();
    loop {
        let h = c.read(SITE_UNIT, at, 2).await.expect("a model header");
        if h == [0xFFFF, 0] {
            return models;
        }
        models.push((h[0], at, h[1]));
        // Every block reads whole.
        let len = h[1];
        let mut off = 0;
        while off < len {
            let n = (len - off).min(125);
            c.read(SITE_UNIT, at + 2 + off, n)
                .await
                .expect("the block reads");
            off += n;
        }
        at += 2 + h[1];
    }
}

fn block(models: &[(u16, u16, u16)], id: u16) -> u16 {
    models
        .iter()
        .find(|m| m.0 == id)
        .unwrap_or_else(|| panic!("model {id} in {models:?}"))
        .1
        + 2
}

fn scaled(raw: u16, sf: u16) -> f64 {
    f64::from(raw as i16) * 10f64.powi(i32::from(sf as i16))
}

async fn api_value(rig: &Rig, device: &str, property: &str) -> f64 {
    let (s, v) = rig
        .get(
            &format!("/devices/{device}/measurement?property={property}"),
            READ,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v["value"].as_f64().expect("a value")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sunspec_walk_finds_the_site_and_its_values_match_the_api() {
    let rig = Rig::start(&text("")).await;
    rig.sim.set_load(Some(5_000.0));
    rig.sim.set_sun(Some(0.5));
    let mut c = Client::connect_to(rig.agent.modbus_addrs()[0]).await;
    let models = walk(&mut c).await;
    let ids: Vec<u16> = models.iter().map(|m| m.0).collect();
    assert_eq!(ids, vec![1, 103, 120, 123, 203, 802, 64001]);
    let common = c.read(SITE_UNIT, block(&models, 1), 16).await.unwrap();
    let mn: String = common
        .iter()
        .flat_map(|w| w.to_be_bytes())
        .take_while(|b| *b != 0)
        .map(char::from)
        .collect();
    assert_eq!(mn, "sitegate");

    // Within one poll of the API: the meter, the production and the
    // storage's SoC weighted by capacity (40 and 20 kWh).
    let (m103, m203, m802) = (
        block(&models, 103),
        block(&models, 203),
        block(&models, 802),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let inv = c.read(SITE_UNIT, m103, 50).await.unwrap();
        let met = c.read(SITE_UNIT, m203, 105).await.unwrap();
        let bat = c.read(SITE_UNIT, m802, 62).await.unwrap();
        let at = |words: &[u16], offset: u16| words[usize::from(offset)];
        let production = scaled(
            at(&inv, Model103::W.offset),
            at(&inv, Model103::W_SF.offset),
        );
        let grid_w = scaled(
            at(&met, Model203::W.offset),
            at(&met, Model203::W_SF.offset),
        );
        let soc = scaled(
            at(&bat, Model802::SOC.offset),
            at(&bat, Model802::SOC_SF.offset),
        );
        let api_prod = api_value(&rig, "dvc_pv_east", "activePower").await
            + api_value(&rig, "dvc_pv_west", "activePower").await;
        let api_grid = api_value(&rig, "dvc_grid", "activePower").await;
        let soc_a = api_value(&rig, "dvc_bat_a", "soc").await;
        let soc_b = api_value(&rig, "dvc_bat_b", "soc").await;
        let weighted = (soc_a * 40.0 + soc_b * 20.0) / 60.0;
        let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol;
        if close(production, api_prod, 2.0)
            && close(grid_w, api_grid, 2.0)
            && close(soc, weighted, 0.11)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "site map production {production} W, grid {grid_w} W, SoC {soc} %; API {api_prod} W, {api_grid} W, {weighted} %"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The steering state in the vendor model: the configured limits in
    // force (60 kW import, 40 kW export, source config). The map shows the
    // limits of the loop's last evaluation, none before its first, which
    // on a loaded machine may come after the values above agree.
    let u32_at = |v: &[u16], i: usize| (u32::from(v[i]) << 16) | u32::from(v[i + 1]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let v = loop {
        let v = c.read(SITE_UNIT, block(&models, 64001), 16).await.unwrap();
        if u32_at(&v, 5) != u32::MAX || Instant::now() >= deadline {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(v[0], 1, "layout version");
    assert_eq!((u32_at(&v, 5), v[7]), (60_000, 1), "{v:?}");
    assert_eq!((u32_at(&v, 8), v[10]), (40_000, 1), "{v:?}");
    assert_eq!(u32_at(&v, 11), u32::MAX, "no SCADA limit");
    // Writes: this site takes no control (01).
    let pct = block(&models, 123) + Model123::W_MAX_LIM_PCT.offset;
    assert_eq!(c.write(SITE_UNIT, pct, &[5000]).await, Err(0x01));
    rig.shutdown().await;
}

/// How far below the loop's band the export may settle: an inverter the sun
/// holds below its limit keeps up to 5 % of its rating as room to grow
/// (`alloc::allocate_cap`; 1 kW on the 20 kW west array), which the loop
/// counts as production at its worst, so the export sits that much lower.
const ROOM_W: f64 = 1_000.0;

/// Waits until the meter has stayed within `lo..=hi + ROOM_W` W (+ import)
/// for 2 s: never past the limit `lo`, and near it.
async fn holds(rig: &Rig, what: &str, lo: f64, hi: f64) {
    let hi = hi + ROOM_W;
    let mut since: Option<Instant> = None;
    let start = Instant::now();
    loop {
        let g = rig.device("grid").state().ac_power_w;
        if (lo..=hi).contains(&g) {
            if since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(2) {
                return;
            }
        } else {
            since = None;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: the grid meter reads {g} W, not within {lo}..={hi} W for 2 s; state: {}",
            rig.state().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The site's history records of `kind`, oldest first; every answer is
/// checked against the OpenAPI document.
async fn history(rig: &Rig, kind: &str) -> Vec<Value> {
    let doc = document();
    let mut c = Checker::new(&doc, &rig.base);
    let all = c
        .get(
            &format!("/sites/{SITE}/steering/history?limit=200"),
            Some(READ),
            200,
        )
        .await;
    let mut of_kind: Vec<Value> = all
        .as_array()
        .expect("a list")
        .iter()
        .filter(|r| r["type"] == kind)
        .cloned()
        .collect();
    of_kind.reverse();
    of_kind
}

/// Waits until the history holds `n` records of `kind`; returns them.
async fn records(rig: &Rig, kind: &str, n: usize) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let r = history(rig, kind).await;
        if r.len() >= n || start.elapsed() > Duration::from_secs(10) {
            assert_eq!(r.len(), n, "{kind} records: {r:#?}");
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The parts of a `modbusLimit` record a test knows before.
fn limit_record(r: &Value) -> (Value, Value, Value) {
    assert_eq!(r["source"], "modbus", "{r}");
    assert!(
        r["client"]
            .as_str()
            .is_some_and(|c| c.starts_with("127.0.0.1:")),
        "{r}"
    );
    (
        r["reason"].clone(),
        r["register"].clone(),
        r["maxExport"]["value"].clone(),
    )
}

async fn max_export(rig: &Rig) -> Value {
    rig.state().await["gridLoop"]["maxExport"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scada_limit_tightens_the_export_and_ends_with_its_heartbeat() {
    let rig = Rig::start_full(&text(
        "[[modbus_server.sites]]\nsite = \"ste_e2e\"\ncontrol = true\nheartbeat_s = 2\n",
    ))
    .await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    // Open loop the site would export 47.5 - 2 = 45.5 kW: held at 40 kW.
    holds(&rig, "the configured max export", -40_000.0, -39_200.0).await;

    let addr = rig.agent.modbus_addrs()[0];
    let mut c = Client::connect_to(addr).await;
    let models = walk(&mut c).await;
    let m123 = block(&models, 123);
    let pct = m123 + Model123::W_MAX_LIM_PCT.offset;
    let sf = c
        .read(SITE_UNIT, m123 + Model123::W_MAX_LIM_PCT_SF.offset, 1)
        .await
        .unwrap()[0] as i16;
    // 40 % of the rated production (50 kW): 20 kW.
    let raw = (40.0 / 10f64.powi(i32::from(sf))).round() as u16;
    // Out of range (over 100 %): 03; another register: 02.
    let over = (101.0 / 10f64.powi(i32::from(sf))).round() as u16;
    assert_eq!(c.write(SITE_UNIT, pct, &[over]).await, Err(0x03));
    assert_eq!(c.write(SITE_UNIT, m123, &[1]).await, Err(0x02));

    // The SCADA writes its limit every 500 ms, well within the heartbeat.
    let scada = tokio::spawn(async move {
        let mut c = Client::connect_to(addr).await;
        loop {
            assert_eq!(c.write(SITE_UNIT, pct, &[raw]).await, Ok(()));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    eventually(
        "the SCADA's limit in force",
        Duration::from_secs(10),
        || async {
            max_export(&rig).await == json!({"value": 20000, "unit": "W", "source": "modbus"})
        },
    )
    .await;
    holds(&rig, "the SCADA's max export", -20_000.0, -19_200.0).await;
    // Written every 500 ms for seconds by now: one record, of the first.
    let set = records(&rig, "modbusLimit", 1).await;
    assert_eq!(
        limit_record(&set[0]),
        (json!("set"), json!(pct), json!(20000))
    );
    assert_eq!(set[0]["unitId"], SITE_UNIT);
    let v = c.read(SITE_UNIT, block(&models, 64001), 16).await.unwrap();
    let u32_at = |i: usize| (u32::from(v[i]) << 16) | u32::from(v[i + 1]);
    assert_eq!((u32_at(8), v[10]), (20_000, 4), "export limit from modbus");
    assert_eq!(u32_at(11), 20_000, "the SCADA's limit");
    assert_ne!(v[1] & (1 << 4), 0, "a SCADA limit is active");

    // The heartbeat stops: back to the configured limits.
    scada.abort();
    eventually(
        "the configured limit again",
        Duration::from_secs(10),
        || async {
            max_export(&rig).await == json!({"value": 40000, "unit": "W", "source": "config"})
        },
    )
    .await;
    holds(
        &rig,
        "the configured max export again",
        -40_000.0,
        -39_200.0,
    )
    .await;
    let r = records(&rig, "modbusLimit", 2).await;
    assert_eq!(
        limit_record(&r[1]),
        (json!("heartbeatEnded"), Value::Null, Value::Null)
    );
    assert_eq!(
        r[1]["client"], set[0]["client"],
        "the client that wrote last"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_heartbeat_goes_to_the_failsafe_limit_until_the_next_write() {
    let rig = Rig::start_full(&text(
        "[[modbus_server.sites]]\nsite = \"ste_e2e\"\nunit_id = 100\ncontrol = true\nheartbeat_s = 1\nfailsafe_export = \"10 kW\"\n",
    ))
    .await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    let mut c = Client::connect_to(rig.agent.modbus_addrs()[0]).await;
    c.until(100, 40000, 2).await;
    // The vendor model's export limit, in W: 30 kW, written once.
    let scada_export = 40349 + 11;
    assert_eq!(c.write(100, scada_export, &[0, 30_000]).await, Ok(()));
    eventually("the SCADA's limit", Duration::from_secs(10), || async {
        max_export(&rig).await == json!({"value": 30000, "unit": "W", "source": "modbus"})
    })
    .await;
    // No write within the heartbeat (1 s): the failsafe, 10 kW, holds.
    eventually("the failsafe limit", Duration::from_secs(10), || async {
        max_export(&rig).await == json!({"value": 10000, "unit": "W", "source": "modbus"})
    })
    .await;
    holds(&rig, "the failsafe max export", -10_000.0, -9_200.0).await;
    // A write ends the failsafe; 0xFFFFFFFF then ends the SCADA's limit.
    assert_eq!(c.write(100, scada_export, &[0xFFFF, 0xFFFF]).await, Ok(()));
    eventually("the configured limit", Duration::from_secs(10), || async {
        max_export(&rig).await == json!({"value": 40000, "unit": "W", "source": "config"})
    })
    .await;
    // Ending it again changes nothing: no record (the next write's record,
    // queued after it, is the next one).
    assert_eq!(c.write(100, scada_export, &[0xFFFF, 0xFFFF]).await, Ok(()));
    assert_eq!(c.write(100, scada_export, &[0, 25_000]).await, Ok(()));
    let r = records(&rig, "modbusLimit", 4).await;
    let seen: Vec<_> = r.iter().map(limit_record).collect();
    assert_eq!(
        seen,
        vec![
            (json!("set"), json!(scada_export), json!(30000)),
            (json!("heartbeatFailsafe"), Value::Null, json!(10000)),
            (json!("ended"), json!(scada_export), Value::Null),
            (json!("set"), json!(scada_export), json!(25000)),
        ]
    );
    assert!(r.iter().all(|x| x["unitId"] == 100));
    rig.shutdown().await;
}
