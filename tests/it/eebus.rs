//! The EEBus node against a control box (the `eebus` crate's Energy Guard)
//! over real sockets: TCP, TLS 1.2, WebSocket, SHIP, SPINE. The use-case
//! timings themselves run on explicit times in `src/eebus/policy/tests.rs`;
//! here the wire: what the box writes is in force before its
//! acknowledgement, a limit above the contract is refused and changes
//! nothing, an untrusted box never gets in, a restart keeps the limit, the
//! consumption limit holds at the meter over the batteries only, and the
//! box reads the grid connection point (MGCP) as the meter does.

use std::time::Duration;

use eebus::usecases::limitation::LimitWrite;
use serde_json::{json, Value};

use crate::common::eebus_box::{self, ControlBox};
use crate::csip_support::holds;
use crate::steering_support::*;

const WAIT: Duration = Duration::from_secs(30);

fn free_addr() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    l.local_addr().expect("its address")
}

const ADMIN: &str = "sgt_e2e_admin_token";

fn text(listen: std::net::SocketAddr, box_ski: &eebus::ship::Ski) -> String {
    let admin = hex::encode(sitegate::api::hash_token(ADMIN));
    format!(
        "{}\n[[http.tokens]]\nname = \"grid-admin\"\nsha256 = \"{admin}\"\nscopes = [\"admin\"]\n",
        node_text(listen, box_ski)
    )
}

fn node_text(listen: std::net::SocketAddr, box_ski: &eebus::ship::Ski) -> String {
    format!(
        "{}\n[eebus]\nsite = \"{SITE}\"\nlisten = \"{listen}\"\ntrusted_ski = \"{}\"\n\
         contractual_max_consumption_w = 60000\ncontractual_max_production_w = 40000\n\
         failsafe_consumption_w = 4200\nfailsafe_production_w = 20000\nmdns = false\n",
        demo_site(250),
        hex::encode(box_ski.as_bytes())
    )
}

/// The rig with its node's key made ahead, and the node's SKI and address.
async fn rig(box_ski: &eebus::ship::Ski) -> (Rig, eebus::ship::Ski, std::net::SocketAddr) {
    rig_with(box_ski, |_| {}).await
}

async fn rig_with(
    box_ski: &eebus::ship::Ski,
    tweak: impl FnOnce(&mut sitegate::sim::SimSiteSpec),
) -> (Rig, eebus::ship::Ski, std::net::SocketAddr) {
    let listen = free_addr();
    let text = text(listen, box_ski);
    let dir = tempfile::tempdir().expect("dir");
    let cfg = sitegate::config::parse(&text).expect("valid");
    let node = sitegate::eebus::identity::load_or_make(dir.path(), cfg.eebus.as_ref().unwrap())
        .expect("the node's key");
    let rig = Rig::start_in(&text, dir, tweak).await;
    (rig, node.ski, listen)
}

fn eebus_limit(st: &Value, kind: &str) -> Option<Value> {
    st["gridLoop"]["sources"]
        .as_array()?
        .iter()
        .find(|s| s["source"] == "eebus" && s["kind"] == kind)
        .cloned()
}

/// A box that dials the node and has its limit of `w` W accepted.
async fn accepted(
    key: eebus::cert::Identity,
    node_ski: eebus::ship::Ski,
    addr: std::net::SocketAddr,
    use_case: &str,
    w: f64,
) -> ControlBox {
    let b = ControlBox::start(key, node_ski, addr, use_case, Some(LimitWrite::active(w))).await;
    b.until("the limit accepted", WAIT, |s| !s.accepted.is_empty())
        .await;
    b
}

async fn consumption_is(rig: &Rig, w: f64, failsafe: bool) -> Value {
    let start = tokio::time::Instant::now();
    loop {
        let st = rig.state().await;
        if let Some(l) = eebus_limit(&st, "maxConsumption") {
            if l["value"]["value"].as_f64() == Some(w) && l["failsafe"] == json!(failsafe) {
                return st;
            }
        }
        assert!(
            start.elapsed() < WAIT,
            "maxConsumption {w} W (failsafe {failsafe}) not shown: {st}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the box reads, over MPC, the controllable consumers' power
/// within `band` and both their energies.
async fn consumers_draw(b: &ControlBox, what: &str, band: std::ops::RangeInclusive<f64>) {
    let energies = ["energyConsumed", "energyProduced"];
    b.until(what, WAIT, |s| {
        let read = |k: &str| s.consumers.get(k).copied().flatten();
        read("totalActivePower").is_some_and(|w| band.contains(&w))
            && energies.iter().all(|k| read(k).is_some_and(|wh| wh >= 0.0))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_is_in_force_before_its_acknowledgement_and_holds_over_the_batteries() {
    let key = eebus_box::key();
    let box_ski = key.ski;
    let (rig, node_ski, addr) = rig(&box_ski).await;
    // Before the box: the failsafe value, in init.
    let st = consumption_is(&rig, 4_200.0, true).await;
    assert_eq!(
        eebus_limit(&st, "maxConsumption").unwrap()["reference"],
        "lpc: init"
    );
    rig.sim.set_sun(Some(0.0));
    rig.sim.set_load(Some(2_000.0));
    let b = accepted(key, node_ski, addr, "lpc", 4_200.0).await;
    // Read once the acknowledgement arrived: the limit is in force already.
    let st = rig.state().await;
    let l = eebus_limit(&st, "maxConsumption").expect("the box's limit");
    assert_eq!(
        (l["value"]["value"].as_f64(), l["failsafe"].clone()),
        (Some(4_200.0), json!(false)),
        "{st}"
    );
    assert_eq!(l["reference"], "lpc: limited");
    assert_eq!(st["gridLoop"]["eebus"]["state"], "connected", "{st}");
    // /metrics: the limit in force, not in failsafe, and the events counted.
    let (code, text) = rig.get_text("/metrics").await;
    assert_eq!(code, 200);
    let sample = |name: &str| {
        text.lines()
            .find(|l| {
                l.starts_with(name)
                    && l.contains("source=\"eebus\"")
                    && l.contains("kind=\"maxConsumption\"")
            })
            .map(|l| l.rsplit(' ').next().unwrap_or("").to_string())
    };
    assert_eq!(
        sample("sitegate_grid_operator_limit_watts").as_deref(),
        Some("4200"),
        "{text}"
    );
    assert_eq!(
        sample("sitegate_grid_operator_failsafe{").as_deref(),
        Some("0"),
        "{text}"
    );
    assert!(
        text.contains("sitegate_grid_events_total{site=\"ste_e2e\"}"),
        "{text}"
    );
    // The history: the use case's init failsafe, then the box's limit.
    let (code, history) = rig
        .get(&format!("/sites/{SITE}/steering/history?limit=1000"), READ)
        .await;
    assert_eq!(code, 200, "{history}");
    let lpc: Vec<(String, Option<f64>, bool)> = history["records"]
        .as_array()
        .or_else(|| history.as_array())
        .expect("records")
        .iter()
        .filter(|r| r["type"] == "eebus" && r["useCase"] == "lpc")
        .map(|r| {
            (
                r["state"].as_str().unwrap_or("").to_string(),
                r["limit"]["value"].as_f64(),
                r["failsafe"] == true,
            )
        })
        .collect();
    assert!(
        lpc.contains(&("limited".into(), Some(4_200.0), false)),
        "{history}"
    );
    assert!(
        lpc.contains(&("init".into(), Some(4_200.0), true)),
        "{history}"
    );
    // The partner asks the batteries to charge 30 kW from the grid at night:
    // they get the household's import plus 4.2 kW.
    post_signal(
        &rig.base,
        &json!({"energyStorageSetting": {"value": -30, "unit": "kW"}, "validUntil": now_ms() + 600_000}),
    )
    .await;
    holds(&rig, "2 kW household + 4.2 kW charge", 5_700.0, 6_700.0).await;
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["maxImport"]["source"], "eebus", "{st}");
    // MPC: the box reads what the controllable consumers draw (load
    // convention: the batteries' charge is positive), with their energies.
    consumers_draw(&b, "the batteries' 4.2 kW charge", 3_200.0..=5_400.0).await;
    // The household's load steps up: it is not dimmed, the batteries keep 4.2 kW.
    rig.sim.set_load(Some(7_000.0));
    holds(&rig, "7 kW household + 4.2 kW charge", 10_700.0, 11_700.0).await;
    // Discharging stays free under a consumption limit.
    post_signal(
        &rig.base,
        &json!({"energyStorageSetting": {"value": 10, "unit": "kW"}, "validUntil": now_ms() + 600_000}),
    )
    .await;
    holds(&rig, "7 kW household - 10 kW discharge", -3_600.0, -2_400.0).await;
    consumers_draw(&b, "the batteries' 10 kW discharge", -11_000.0..=-9_000.0).await;
    b.stop();
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_above_the_contract_is_refused_and_changes_nothing() {
    let key = eebus_box::key();
    let (rig, node_ski, addr) = rig(&key.ski).await;
    let b = ControlBox::start(
        key,
        node_ski,
        addr,
        "lpc",
        Some(LimitWrite::active(90_000.0)),
    )
    .await;
    b.until("the write refused", WAIT, |s| !s.refused.is_empty())
        .await;
    let st = consumption_is(&rig, 4_200.0, true).await;
    assert!(b.seen().accepted.is_empty());
    assert_eq!(
        eebus_limit(&st, "maxConsumption").unwrap()["reference"],
        "lpc: init",
        "{st}"
    );
    b.stop();
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_box_whose_ski_is_not_trusted_never_gets_in() {
    let trusted = eebus_box::key();
    let (rig, node_ski, addr) = rig(&trusted.ski).await;
    let stranger = eebus_box::key();
    let b = ControlBox::start(
        stranger,
        node_ski,
        addr,
        "lpc",
        Some(LimitWrite::active(1_000.0)),
    )
    .await;
    // Real sockets: the box dials, is refused, and redials after about a second
    // (the eebus runtime's reconnect_delay: 1 s, then 2 s, each ±25 %): 3 s hold
    // the dial and its redial, and it never gets in.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = b.seen();
    assert!(!seen.connected && seen.accepted.is_empty(), "{seen:?}");
    let st = consumption_is(&rig, 4_200.0, true).await;
    assert_eq!(st["gridLoop"]["eebus"]["state"], "waiting", "{st}");
    b.stop();
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_boxs_limit_until_the_box_is_back() {
    let key = eebus_box::key();
    let (rig, node_ski, addr) = rig(&key.ski).await;
    let b = accepted(key, node_ski, addr, "lpc", 3_000.0).await;
    consumption_is(&rig, 3_000.0, false).await;
    b.stop();
    let rig = rig.restart().await;
    // In init after the restart, the kept limit holds beside the failsafe:
    // the tighter 3 kW, not the 4.2 kW failsafe.
    let st = consumption_is(&rig, 3_000.0, true).await;
    assert_eq!(
        eebus_limit(&st, "maxConsumption").unwrap()["reference"],
        "lpc: init",
        "{st}"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_limit_is_held_at_the_connection_point() {
    let key = eebus_box::key();
    // Full batteries: the export is held by curtailment.
    let (rig, node_ski, addr) = rig_with(&key.ski, fill_batteries).await;
    rig.sim.set_sun(Some(0.95));
    rig.sim.set_load(Some(2_000.0));
    let b = accepted(key, node_ski, addr, "lpp", 5_000.0).await;
    let st = rig.state().await;
    let l = eebus_limit(&st, "maxExport").expect("the box's export limit");
    assert_eq!(l["reference"], "lpp: limited", "{st}");
    holds(&rig, "export held at 5 kW", -5_000.0, -4_300.0).await;
    // MGCP: the box reads the connection point as the meter does (load
    // convention: the export is negative), with its energies and frequency.
    let seen = b
        .until("MGCP's power and frequency", WAIT, |s| {
            s.grid.get("totalActivePower").copied().flatten().is_some()
                && s.grid.get("frequency").copied().flatten().is_some()
        })
        .await;
    let power = seen.grid["totalActivePower"].expect("a power reading");
    assert!(
        (-5_600.0..=-3_700.0).contains(&power),
        "the box read {power} W; it saw {seen:?}"
    );
    let hz = seen.grid["frequency"].expect("a frequency");
    assert!((49.0..=51.0).contains(&hz), "{seen:?}");
    for energy in ["energyConsumed", "energyProduced"] {
        assert!(
            seen.grid
                .get(energy)
                .copied()
                .flatten()
                .is_some_and(|wh| wh >= 0.0),
            "{energy}: {seen:?}"
        );
    }
    b.stop();
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evidence_log_keeps_the_boxs_limit_with_what_the_meter_saw() {
    let key = eebus_box::key();
    let box_ski = key.ski;
    let (rig, node_ski, addr) = rig(&box_ski).await;
    rig.sim.set_sun(Some(0.0));
    rig.sim.set_load(Some(2_000.0));
    let b = accepted(key, node_ski, addr, "lpc", 3_000.0).await;
    post_signal(
        &rig.base,
        &json!({"energyStorageSetting": {"value": -30, "unit": "kW"}, "validUntil": now_ms() + 600_000}),
    )
    .await;
    holds(&rig, "2 kW household + 3 kW charge", 4_500.0, 5_500.0).await;
    b.stop();
    let db = rig.config.storage.path.clone();
    let text = text(addr, &box_ski).replace(
        "path = \"unused.db\"",
        &format!("path = {:?}", db.display().to_string()),
    );
    let file = rig.dir.path().join("sitegate.toml");
    std::fs::write(&file, &text).expect("config file");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sitegate"))
            .arg("grid-events")
            .arg("--config")
            .arg(&file)
            .args(args)
            .output()
            .expect("sitegate grid-events");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, csv, err) = run(&["--since", "2020-01-01", "--csv"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        csv.starts_with("site,source,kind,reference,limit_w,failsafe"),
        "{csv}"
    );
    // The box's 3 kW, open while the agent runs.
    let lines: Vec<&str> = csv
        .lines()
        .filter(|l| l.contains("maxConsumption"))
        .collect();
    let limited = lines
        .iter()
        .find(|l| l.contains(",lpc: limited,3000,false,"))
        .unwrap_or_else(|| panic!("the box's limit in {csv}"));
    let cols: Vec<&str> = limited.split(',').collect();
    let max_import: f64 = cols[10].parse().unwrap_or(0.0);
    // Written with its extremes at the latest when the agent stops.
    let Rig {
        agent, sim, dir, ..
    } = rig;
    agent.shutdown().await;
    sim.shutdown().await;
    let (_, csv, _) = run(&["--since", "2020-01-01", "--csv"]);
    let limited = csv
        .lines()
        .find(|l| l.contains(",lpc: limited,3000,false,"))
        .unwrap_or_else(|| panic!("the box's limit in {csv}"));
    let cols: Vec<&str> = limited.split(',').collect();
    let max_import_after: f64 = cols[10].parse().expect("the most imported");
    assert!(
        (4_500.0..6_500.0).contains(&max_import_after) && max_import_after >= max_import,
        "{limited}"
    );
    // The same log through the admin operations, from afar.
    let rig = Rig::start_in(&text, dir, |_| {}).await;
    let (code, op) = rig
        .post(
            "/admin/operations",
            ADMIN,
            &json!({"id": "evidence-1", "kind": "gridEvents.export", "args": {"since": 0}}),
        )
        .await;
    assert!(code == 200 || code == 202, "{op}");
    let op = {
        let start = tokio::time::Instant::now();
        loop {
            let (_, op) = rig.get("/admin/operations/evidence-1", ADMIN).await;
            if op["state"] == "succeeded" || start.elapsed() > WAIT {
                break op;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    assert_eq!(op["state"], "succeeded", "{op}");
    let csv = op["result"]["csv"].as_str().expect("the CSV");
    assert!(csv.contains(",lpc: limited,3000,false,"), "{op}");
    let (code, bad) = rig
        .post(
            "/admin/operations",
            ADMIN,
            &json!({"id": "evidence-2", "kind": "gridEvents.export", "args": {"since": "last week"}}),
        )
        .await;
    assert_eq!(code, 400, "{bad}");
    assert!(
        bad["detail"].as_str().unwrap_or("").contains("args.since"),
        "{bad}"
    );
    let Rig {
        agent, sim, dir, ..
    } = rig;
    agent.shutdown().await;
    sim.shutdown().await;
    // A bad time names the flag and the value.
    let (code, _, err) = run(&["--since", "yesterday"]);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("--since \"yesterday\""), "{err}");
    drop(dir);
}

#[test]
fn every_mistake_in_the_eebus_table_is_named_at_once() {
    let text = format!(
        "{}\n[eebus]\nsite = \"nowhere\"\nlisten = \"4712\"\ntrusted_ski = \"12ab\"\n\
         contractual_max_consumption_w = -5\nfailsafe_duration_h = 30\nserial = \"a b\"\nmodel = \"E M S\"\ncolour = 1\n",
        demo_site(250)
    );
    let err = sitegate::config::parse(&text).unwrap_err().to_string();
    for want in [
        "eebus.site: \"nowhere\" is not a site",
        "eebus.listen: \"4712\" is not an address:port",
        "eebus.trusted_ski: \"12ab\" is not a SKI: 40 hex digits, found 4",
        "eebus.contractual_max_consumption_w: must be 0 to 1000000000 W, found -5",
        "eebus.failsafe_production_w: the failsafe production limit is needed",
        "eebus.failsafe_duration_h: must be 2 to 24 h (LPC/LPP-022), found 30",
        "eebus.serial: \"a b\"",
        "eebus.model: \"E M S\": 1 to 32 printable characters, no space or ';'",
        "eebus.colour: unknown key",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_bad_connections_neither_stops_control_nor_keeps_the_box_out() {
    use tokio::io::AsyncWriteExt;
    let key = eebus_box::key();
    let (rig, node_ski, addr) = rig(&key.ski).await;
    // 40 connections: half send garbage where TLS is due, half say nothing.
    let mut held = Vec::new();
    for i in 0..40 {
        if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
            if i % 2 == 0 {
                let _ = s
                    .write_all(b"GET / HTTP/1.1\r\n\r\n\x16\x03\x01garbage")
                    .await;
            }
            held.push(s);
        }
    }
    // Control goes on meanwhile: the state is evaluated again and again.
    let first = rig.state().await["evaluatedAt"].as_i64();
    // Real sockets: a second, four of the loop's 250 ms control intervals, while
    // the flood sits on the node's sockets; a stalled loop keeps its `evaluatedAt`.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let later = rig.state().await["evaluatedAt"].as_i64();
    assert!(later > first, "control stalled: {first:?} then {later:?}");
    // The trusted box still gets in and its limit is taken.
    let b = ControlBox::start(
        key,
        node_ski,
        addr,
        "lpc",
        Some(LimitWrite::active(5_000.0)),
    )
    .await;
    b.until(
        "the limit accepted despite the flood",
        Duration::from_secs(60),
        |s| !s.accepted.is_empty(),
    )
    .await;
    consumption_is(&rig, 5_000.0, false).await;
    drop(held);
    b.stop();
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_announces_itself_over_mdns_for_the_box_to_find() {
    let key = eebus_box::key();
    let serial = format!("mdns-{}", std::process::id());
    // On every interface: mDNS announces the interfaces' addresses (the
    // loopback carries no multicast).
    let listen: std::net::SocketAddr = format!("0.0.0.0:{}", free_addr().port())
        .parse()
        .expect("an address");
    let text = text(listen, &key.ski).replace(
        "mdns = false\n",
        &format!("mdns = true\nserial = \"{serial}\"\n"),
    );
    let browser = eebus::mdns::Mdns::new().expect("an mDNS browser");
    let browse = browser.browse().expect("a browse for _ship._tcp");
    let rig = Rig::start(&text).await;
    let instance = format!("sitegate-{serial}");
    // The browse answers on the mDNS daemon's own thread.
    let found = tokio::task::spawn_blocking(move || {
        #[allow(clippy::disallowed_methods)]
        let until = std::time::Instant::now() + Duration::from_secs(20);
        #[allow(clippy::disallowed_methods)]
        while std::time::Instant::now() < until {
            if let Some(eebus::mdns::BrowseEvent::Found(f)) =
                browse.recv_timeout(Duration::from_secs(1))
            {
                if f.instance == instance {
                    return Some(f);
                }
            }
        }
        None
    })
    .await
    .expect("the browse")
    .expect("the node's announcement found within 20 s");
    let node = sitegate::eebus::identity::load_or_make(
        rig.dir.path(),
        rig.config.eebus.as_ref().expect("[eebus]"),
    )
    .expect("the node's key");
    assert_eq!(found.ski, node.ski, "the SKI the box is asked to trust");
    assert_eq!(found.port, listen.port(), "{found:?}");
    assert!(
        !found.addresses.is_empty() && found.addresses.iter().all(|a| !a.is_loopback()),
        "{found:?}"
    );
    assert_eq!(found.record.brand.as_deref(), Some("sitegate"));
    rig.shutdown().await;
}
