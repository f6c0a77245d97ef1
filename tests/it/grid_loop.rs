//! The grid loop on a simulated site over real sockets: the agent holds
//! `max_export` and `max_import` at the grid meter with no signal at all, wins
//! over a partner curtailment that is too loose, takes temporary `gridLimit`s
//! over HTTP (and refuses looser ones), and goes to its safe state while the
//! meter is away.

use std::time::Duration;

use crate::steering_support::*;
use serde_json::{json, Value};
use sitegate::steering::alloc::DYNAMIC_HEADROOM;
use sitegate::steering::settle::band_w;

const INTERVAL_MS: u64 = 250;

/// The demo's site, controlled and polled every `INTERVAL_MS`.
fn site() -> TestSite {
    TestSite::demo(INTERVAL_MS)
}

fn grid_w(rig: &Rig) -> f64 {
    rig.device("grid").state().ac_power_w
}

/// The demo site's inverters by bus, with their ratings in W.
const INVERTERS: [(&str, f64); 2] = [("pv-east", 30_000.0), ("pv-west", 20_000.0)];

/// The room the inverters' limits hold above what they produce, W, each at
/// most what the loop's spread and settling leave it: its room to grow
/// (`alloc::DYNAMIC_HEADROOM` of its rating above its production, in its
/// share) and its band around its share (`settle::band_w`). The loop counts
/// an inverter below its limit at its limit (the sun may come back:
/// `docs/steering.md`, "Every device counted at its worst"), so an export
/// held at its limit may fall short of its band by that much: an inverter
/// that took its limit while the other was held lower keeps it while it
/// stays within its band, though its sun gives less. More room than that
/// is a fault the bands still catch.
fn unused_room_w(rig: &Rig) -> f64 {
    INVERTERS
        .iter()
        .map(|(bus, rated)| {
            let st = rig.device(bus).state();
            st.limit_pct.map_or(0.0, |pct| {
                let most = DYNAMIC_HEADROOM * rated + band_w(*rated);
                (pct / 100.0 * rated - st.ac_power_w).clamp(0.0, most)
            })
        })
        .sum()
}

/// Waits until the meter has stayed within `lo..=hi` W (+ import) for 2 s;
/// an export band (`hi` < 0) short by no more than [`unused_room_w`].
async fn holds(rig: &Rig, what: &str, lo: f64, hi: f64) {
    let mut since: Option<tokio::time::Instant> = None;
    let start = tokio::time::Instant::now();
    loop {
        let g = grid_w(rig);
        let short = if hi < 0.0 { unused_room_w(rig) } else { 0.0 };
        if (lo..=hi + short).contains(&g) {
            let s = *since.get_or_insert_with(tokio::time::Instant::now);
            if s.elapsed() >= Duration::from_secs(2) {
                return;
            }
        } else {
            since = None;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: the grid meter reads {g} W, not within {lo}..={hi} W (+ {short:.0} W of room the inverters do not use) for 2 s; state: {}",
            rig.state().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn limits_naming(state: &Value, component: &str) -> Vec<Value> {
    state["limits"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter(|n| n["component"] == component)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noon_with_full_batteries_holds_max_export_without_a_signal() {
    let rig = site().full_batteries().start().await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    // Open loop the site would export 47.5 - 2 = 45.5 kW.
    holds(&rig, "max export", -40_000.0, -39_200.0).await;
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["mode"], "holdingExport", "{st}");
    assert_eq!(
        st["gridLoop"]["maxExport"],
        json!({"value": 40000, "unit": "W", "source": "config"})
    );
    let notes = limits_naming(&st, "curtailment");
    assert_eq!(notes.len(), 1, "{st}");
    assert_eq!(notes[0]["requested"], Value::Null);
    assert_eq!(notes[0]["devices"], json!(["dvc_pv_east", "dvc_pv_west"]));
    assert!(notes[0]["reason"]
        .as_str()
        .is_some_and(|r| r.starts_with("maxExport 40000 W (config)")));
    for d in ["dvc_pv_east", "dvc_pv_west"] {
        let dev = rig.device_state(d).await;
        assert_eq!(dev["component"], "gridLimit", "{dev}");
        assert_eq!(dev["state"], "applied", "{dev}");
    }
    // Clouds: production drops below the limit; the cap stays in place (at
    // what the site can take: load + limit), so the sun's return meets it.
    rig.sim.set_sun(Some(0.5));
    eventually(
        "the loop no longer holds",
        Duration::from_secs(5),
        || async { rig.state().await["gridLoop"]["mode"] == "free" },
    )
    .await;
    let st = rig.state().await;
    let notes = limits_naming(&st, "curtailment");
    assert!(
        notes[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("capped in advance")),
        "{st}"
    );
    // 2 kW of load + 39.6 kW (the aim) of 50 kW: about 83 %, each inverter
    // within 8 % of its rating of its share (`settle.rs`), together no more.
    let east = rig.limit("pv-east").expect("a cap held in advance");
    let west = rig.limit("pv-west").expect("a cap held in advance");
    for cap in [east, west] {
        assert!((75.0..=91.0).contains(&cap), "{east} {west}");
    }
    let together = 0.3 * east + 0.2 * west;
    assert!((40.0..=43.0).contains(&together), "{east} {west}");
    rig.sim.set_sun(Some(1.0));
    let start = tokio::time::Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        let g = grid_w(&rig);
        assert!(g >= -40_800.0, "the returning sun passed the cap: {g} W");
        // For 3 s of the returning sun (twelve of the loop's 250 ms intervals), read
        // every 50 ms: the export never passes the cap held in advance.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_step_above_max_import_is_shaved_by_the_storage() {
    // Storage idle at fallback (in `auto` the simulated batteries would cover
    // the load on their own).
    let rig = site().ess_fallback("idle").start().await;
    rig.sim.set_sun(Some(0.0));
    rig.sim.set_load(Some(20_000.0));
    holds(&rig, "no limit binding", 19_000.0, 21_000.0).await;
    rig.sim.set_load(Some(80_000.0));
    holds(&rig, "max import", 58_800.0, 60_000.0).await;
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["mode"], "holdingImport", "{st}");
    assert!(rig.device("bat-a").state().ac_power_w > 10_000.0);
    // The load goes: the storage is back at its fallback.
    rig.sim.set_load(Some(20_000.0));
    eventually("storage back to idle", Duration::from_secs(5), || async {
        rig.storage("bat-a") == window(0.0) && rig.storage("bat-b") == window(0.0)
    })
    .await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partner_curtailment_looser_than_the_limit_is_tightened() {
    let rig = site().full_batteries().start().await;
    rig.sim.set_load(Some(0.0));
    rig.sim.set_sun(Some(1.0));
    let body = json!({"setting": {"value": 45, "unit": "kW"}, "validUntil": now_ms() + 60_000});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering/curtailment"), STEER, &body)
        .await;
    assert_eq!(s, 200, "{v}");
    holds(
        &rig,
        "max export under a looser curtailment",
        -40_000.0,
        -39_200.0,
    )
    .await;
    let st = rig.state().await;
    let notes = limits_naming(&st, "curtailment");
    assert_eq!(notes.len(), 1, "{st}");
    assert_eq!(notes[0]["requested"], json!({"value": 45000, "unit": "W"}));
    // The partner's entry itself is unchanged.
    assert_eq!(
        st["productionCurtailment"]["setting"],
        json!({"value": 45, "unit": "kW"})
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_grid_limit_over_http() {
    let rig = site().full_batteries().start().await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    holds(&rig, "configured export", -40_000.0, -39_200.0).await;
    let path = format!("/sites/{SITE}/steering/grid-limit");

    // Looser than configured: refused, naming the field and the limit.
    let loose = json!({"setting": {"maxExport": {"value": 50, "unit": "kW"}}, "validUntil": now_ms() + 60_000});
    let (s, v) = rig.post(&path, STEER, &loose).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["code"], "invalid_value");
    assert_eq!(v["field"], "setting.maxExport");
    assert!(v["detail"].as_str().unwrap().contains("40000 W"), "{v}");

    // Zero export for a while.
    let zero = json!({"setting": {"maxExport": {"value": 0, "unit": "W"}}, "validUntil": now_ms() + 60_000});
    let (s, v) = rig.post(&path, STEER, &zero).await;
    assert_eq!(s, 200, "{v}");
    assert!(v["requestId"]
        .as_str()
        .is_some_and(|r| r.starts_with("req_")));
    holds(&rig, "zero export", 0.0, 500.0).await;
    let st = rig.state().await;
    let zero_shown = json!({"maxExport": {"value": 0, "unit": "W"}});
    assert_eq!(st["gridLimit"]["setting"], zero_shown);
    assert_eq!(st["gridLoop"]["maxExport"]["source"], "gridLimit");

    // A site request without gridLimit leaves it alone (rule 3 only touches mgi).
    let other = json!({"productionCurtailment": {"value": 100, "unit": "%"}, "validUntil": now_ms() + 60_000});
    let (s, v) = rig
        .post(&format!("/sites/{SITE}/steering"), STEER, &other)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(rig.state().await["gridLimit"]["setting"], zero_shown);

    // DELETE of the component: back to the configured limit.
    let (s, v) = rig
        .delete(
            &format!("/sites/{SITE}/steering?component=gridLimit"),
            STEER,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["gridLimit"], Value::Null);
    holds(&rig, "configured export again", -40_000.0, -39_200.0).await;

    // The history has both requests (among the loop's writes: all of them).
    let (_, h) = rig
        .get(&format!("/sites/{SITE}/steering/history?limit=1000"), READ)
        .await;
    let actions: Vec<&str> = h
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["action"].as_str())
        .collect();
    assert!(
        actions.contains(&"POST /sites/ste_e2e/steering/grid-limit"),
        "{actions:?}"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meter_offline_is_a_safe_state_and_the_loop_resumes() {
    let rig = site().start().await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    rig.steer_ess(15.0, Duration::from_secs(60)).await;
    // The storage takes what the export cannot (storage first), and a
    // little more while the inverters show what they could give.
    holds(
        &rig,
        "export held with a discharge asked",
        -40_000.0,
        -36_000.0,
    )
    .await;

    rig.sim.stop_server("grid").await;
    eventually("meter lost", Duration::from_secs(10), || async {
        rig.state().await["gridLoop"]["mode"] == "meterLost"
    })
    .await;
    // No discharge; production at most 40 kW in total (24 + 16).
    eventually(
        "safe state at the devices",
        Duration::from_secs(5),
        || async {
            rig.storage("bat-a") == window(0.0)
                && rig.storage("bat-b") == window(0.0)
                && rig.limit("pv-east") == Some(80.0)
                && rig.limit("pv-west") == Some(80.0)
        },
    )
    .await;
    let st = rig.state().await;
    assert!(
        st["limits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["reason"].as_str().unwrap().contains("grid meter lost")),
        "{st}"
    );
    let (_, metrics) = rig.get_text("/metrics").await;
    assert!(
        metrics.contains("sitegate_steering_grid_meter_lost{site=\"ste_e2e\"} 1"),
        "{metrics}"
    );

    rig.sim.start_server("grid").await.expect("meter back");
    eventually("meter back", Duration::from_secs(10), || async {
        rig.state().await["gridLoop"]["mode"] != "meterLost"
    })
    .await;
    holds(&rig, "export held again", -40_000.0, -36_000.0).await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grid_operator_input_flipping_on_a_real_socket() {
    let levels = [(0, "100 %"), (1, "60 %"), (2, "30 %"), (4, "0 %")].map(|(value, max_export)| {
        table([("value", value.into()), ("max_export", max_export.into())])
    });
    let ripple = table([
        ("name", "ripple control".into()),
        ("bus", "io".into()),
        ("unit_id", 3.into()),
        ("module", "generic-di".into()),
        ("poll_interval_ms", 200.into()),
        ("levels", toml::Value::Array(levels.to_vec())),
    ]);
    let rig = site()
        .rated_production_kw(50.0)
        .site_key("grid_signals", toml::Value::Array(vec![ripple]))
        .bus("io")
        .full_batteries()
        .start()
        .await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    let io = rig.sim.device("io", 3).expect("the I/O module");
    holds(
        &rig,
        "configured export (input value 0: 100 %)",
        -40_000.0,
        -39_200.0,
    )
    .await;
    let st = rig.state().await;
    assert_eq!(
        st["gridLoop"]["signals"],
        json!([{"name": "ripple control", "inputs": 0, "online": true, "failsafe": false, "error": null}])
    );

    // Input 1 on: 60 % of 50 kW.
    assert!(io.set_inputs(0b0001));
    holds(&rig, "60 % of the rated production", -30_000.0, -29_400.0).await;
    let st = rig.state().await;
    assert_eq!(st["gridLoop"]["maxExport"]["source"], "gridSignal", "{st}");
    assert_eq!(st["gridLoop"]["signals"][0]["inputs"], 1);

    // A partner's temporary limit looser than the operator's changes nothing.
    rig.grid_limit(Side::Export, 35_000.0, Duration::from_secs(60))
        .await;
    holds(&rig, "the operator's limit wins", -30_000.0, -29_400.0).await;

    // Input 3 on alone: 0 % (zero export).
    assert!(io.set_inputs(0b0100));
    holds(&rig, "zero export", 0.0, 500.0).await;

    // All off again: the partner's 35 kW is the tightest now.
    assert!(io.set_inputs(0));
    holds(&rig, "the partner's limit", -35_000.0, -34_300.0).await;
    assert_eq!(
        rig.state().await["gridLoop"]["maxExport"]["source"],
        "gridLimit"
    );

    // The module stops answering its inputs: the failsafe, the tightest
    // level (0 %), never "no limit" and never the last value read.
    io.refuse_reads(sitegate::register::plan::Span::new(
        sitegate::register::plan::Table::DiscreteInput,
        0,
        4,
    ));
    holds(
        &rig,
        "zero export while the inputs cannot be read",
        0.0,
        500.0,
    )
    .await;
    let st = rig.state().await;
    let s = &st["gridLoop"]["signals"][0];
    assert_eq!(
        (&s["online"], &s["failsafe"]),
        (&json!(false), &json!(true)),
        "{st}"
    );
    assert_eq!(st["gridLoop"]["maxExport"]["source"], "gridSignal", "{st}");
    rig.shutdown().await;
}

/// Zero export beside a partner's 10 kW charge request (storage first):
/// the batteries take what the export limit leaves of the sun, more than
/// asked, and the state says so; the production is capped only as far as
/// the batteries charging all they can leave no room; the site never
/// exports past its band, and the import the loop keeps as its margin
/// while it curtails stays within its bound (`docs/steering.md`, "Zero
/// export beside a charge request").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_export_beside_a_charge_request_charges_more_and_keeps_a_bounded_margin() {
    let rig = site().start().await;
    rig.sim.set_load(Some(2_000.0));
    rig.sim.set_sun(Some(0.95));
    rig.grid_limit(Side::Export, 0.0, Duration::from_secs(600))
        .await;
    post_signal(
        &rig.base,
        &json!({"energyStorageSetting": {"value": -10, "unit": "kW"}, "validUntil": now_ms() + 600_000}),
    )
    .await;
    holds(&rig, "zero export", -500.0, MARGIN_BOUND_W).await;
    // 10 s of readings (40 of the loop's 250 ms intervals) while the production is
    // curtailed: the band and the margin hold throughout, not at one moment.
    let mut import = Vec::new();
    for _ in 0..100 {
        let g = grid_w(&rig);
        assert!(g >= -500.0, "exported {g} W past zero export's band");
        let unused: f64 = INVERTERS
            .iter()
            .map(|(bus, _)| {
                let s = rig.device(bus).state();
                s.available_w.unwrap_or(0.0) - s.ac_power_w
            })
            .sum();
        if unused > 500.0 {
            import.push(g);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        import.len() >= 50,
        "the sun was curtailed in {} of 100 readings",
        import.len()
    );
    let mean = import.iter().sum::<f64>() / import.len() as f64;
    println!(
        "import while curtailing: mean {mean:.0} W over {} readings",
        import.len()
    );
    assert!(
        mean <= MARGIN_BOUND_W,
        "the site imported {mean:.0} W on average while it curtailed; bound {MARGIN_BOUND_W} W"
    );
    let st = rig.state().await;
    let ess = limits_naming(&st, "ess");
    assert!(
        ess.iter().any(|n| n["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("storage first: charging more than the 10000 W asked"))),
        "{st}"
    );
    let charge = -ess[0]["applied"]["value"].as_f64().unwrap_or(0.0);
    assert!(
        charge > 25_000.0,
        "the batteries were told {charge} W: {st}"
    );
    let pv = limits_naming(&st, "curtailment");
    assert!(
        pv.iter().any(|n| n["reason"]
            .as_str()
            .is_some_and(|r| r.ends_with("the storage charging all it can"))),
        "{st}"
    );
    rig.shutdown().await;
}

/// The import the loop may keep while it curtails under a zero export
/// limit on devices that follow at once: its aim (half the limit's 500 W
/// tolerance inside it) and a deadband (500 W) of doubt, W. Devices that lag
/// keep more: `cargo bench --bench grid_loop -- charge`.
const MARGIN_BOUND_W: f64 = 750.0;
