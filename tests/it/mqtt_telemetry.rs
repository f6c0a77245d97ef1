//! The MQTT uplink end to end against real brokers (rumqttd in-process, and
//! mosquitto where installed): status and will (also when the agent process is
//! killed), the retained listing, telemetry in the contract's shape, and
//! store-and-forward through an outage and a restart: every stored sample
//! arrives, once, in order.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::common::broker::{kinds, Broker, Gate, Kind, Message, Subscriber};
use crate::common::mqtt::{self, plain_url, uplink};
use crate::common::process::{start_sim, AgentProcess};
use crate::common::site::SmallSite;
use serde_json::{json, Value};
use sitegate::store::StoreError;

const T: Duration = Duration::from_secs(20);
const ROOT: &str = "sitegate/test";

fn is_measurement(m: &Message) -> bool {
    m.topic.starts_with(&format!("{ROOT}/devices/")) && m.topic.ends_with("/measurements")
}

async fn shape_and_status(kind: Kind, protocol: &str) {
    let broker = Broker::start(kind).await;
    let mut sub = Subscriber::connect(
        broker.addr("5"),
        &format!("watch-{protocol}"),
        &format!("{ROOT}/#"),
    )
    .await;
    // A clock known not to be synchronised (timesyncd's file missing):
    // telemetry says so in an MQTT 5 user property, the body keeps the
    // contract's shape.
    let clock = tempfile::tempdir().expect("dir");
    let synced = clock.path().join("synchronized");
    let text = mqtt::small_site(200)
        .mqtt(&plain_url(broker.addr(protocol)), protocol)
        .section_key(&["clock"], "sync_source", "timesyncd")
        .section_key(&["clock"], "timesync_file", synced.display().to_string())
        .text();
    let site = mqtt::start(&text).await;

    let status = sub
        .expect("online status", T, |m| m.topic == format!("{ROOT}/status"))
        .await;
    let status = status.json();
    assert_eq!(status["online"], true, "{status}");
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert!(status["startedAt"].as_i64().is_some(), "{status}");

    let listing = sub
        .expect("device listing", T, |m| {
            m.topic == format!("{ROOT}/devices")
        })
        .await
        .json();
    let refs: Vec<_> = listing
        .as_array()
        .expect("array")
        .iter()
        .map(|d| {
            d["deviceReference"]
                .as_str()
                .expect("reference")
                .to_string()
        })
        .collect();
    assert_eq!(refs, ["dvc_pv", "dvc_bat", "dvc_grid"]);

    let m = sub
        .expect("measurements of the battery", T, |m| {
            m.topic == format!("{ROOT}/devices/dvc_bat/measurements")
        })
        .await;
    assert!(!m.retain);
    let body = m.json();
    let keys: BTreeSet<_> = body.as_object().expect("object").keys().cloned().collect();
    assert_eq!(
        keys,
        BTreeSet::from(["reference".into(), "measurements".into(), "seq".into()])
    );
    assert_eq!(body["reference"], "dvc_bat");
    assert!(body["seq"].as_u64().expect("seq") >= 1);
    let marked = [("sitegate-clock".to_string(), "unsynchronised".to_string())];
    if protocol == "5" {
        assert_eq!(m.user, marked, "{}", m.topic);
        // Synchronised: telemetry stamped from then on is not marked.
        std::fs::write(&synced, b"").expect("synchronised");
        sub.expect("telemetry not marked", T, |m| {
            is_measurement(m) && m.user.is_empty()
        })
        .await;
    } else {
        assert!(m.user.is_empty(), "3.1.1 has no user properties");
    }
    let ms = body["measurements"].as_array().expect("measurements");
    assert!(!ms.is_empty());
    for e in ms {
        let keys: BTreeSet<_> = e.as_object().expect("element").keys().cloned().collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                "timestamp".into(),
                "property".into(),
                "value".into(),
                "unit".into()
            ])
        );
        assert!(
            e["timestamp"].as_i64().is_some() && e["value"].is_number(),
            "{e}"
        );
    }
    assert!(
        ms.iter()
            .any(|e| e["property"] == "soc" && e["unit"] == "%"),
        "{body}"
    );

    // seq counts per gateway across devices: consecutive messages differ by one.
    let mut seqs = Vec::new();
    while seqs.len() < 10 {
        let m = sub.expect("more measurements", T, is_measurement).await;
        seqs.push(m.json()["seq"].as_u64().expect("seq"));
    }
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");

    // A late subscriber gets status and listing as retained messages.
    for topic in ["status", "devices"] {
        let full = format!("{ROOT}/{topic}");
        let mut late =
            Subscriber::connect(broker.addr("5"), &format!("late-{topic}-{protocol}"), &full).await;
        let m = late
            .expect(&format!("retained {topic} on {kind:?}"), T, |m| {
                m.topic == full
            })
            .await;
        assert!(m.retain, "{topic} is retained");
    }
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_status_and_listing_have_the_contract_shape() {
    for kind in kinds() {
        shape_and_status(kind, "5").await;
        shape_and_status(kind, "3.1.1").await;
    }
}

async fn outage_and_restart(kind: Kind) {
    let broker = Broker::start(kind).await;
    let gate = Gate::start(broker.addr("5")).await;
    let mut sub = Subscriber::connect(broker.addr("5"), "watch-outage", &format!("{ROOT}/#")).await;
    let text = mqtt::small_site(200)
        .mqtt(&plain_url(gate.addr), "5")
        .text();
    let site = mqtt::start(&text).await;
    sub.expect("first measurements", T, is_measurement).await;

    // The broker goes away; the agent keeps measuring into the outbox.
    gate.close();
    mqtt::wait_connected(&site, false, T).await;
    let before = uplink(&site).stats().last_seq;
    crate::common::wait_for("telemetry piling up while offline", T, || async {
        (uplink(&site).stats().last_seq >= before + 15).then_some(())
    })
    .await;

    // The agent restarts while the broker is still away.
    let site = mqtt::restart(site, &text).await;
    let after_restart = uplink(&site).stats().last_seq;
    assert!(after_restart >= before + 15, "seq survives the restart");
    crate::common::wait_for("more telemetry after the restart", T, || async {
        (uplink(&site).stats().last_seq >= after_restart + 15).then_some(())
    })
    .await;

    gate.reopen();
    mqtt::wait_connected(&site, true, Duration::from_secs(90)).await;
    let target = uplink(&site).stats().last_seq;
    let mut got: BTreeMap<u64, Value> = BTreeMap::new();
    for m in sub.seen.iter().filter(|m| is_measurement(m)) {
        absorb(&mut got, m);
    }
    while (1..=target).any(|s| !got.contains_key(&s)) {
        let m = sub.expect("the backlog", T, is_measurement).await;
        absorb(&mut got, &m);
    }
    // Every seq from 1 on arrived.
    let max = *got.keys().last().expect("some");
    assert_eq!(
        got.len() as u64,
        max,
        "gap in seq: {:?}",
        got.keys().collect::<Vec<_>>()
    );
    // Per device, the samples in seq order go forward in time, and they are
    // exactly what the store holds up to the newest one received.
    let mut sent: BTreeMap<String, Vec<Stored>> = BTreeMap::new();
    for v in got.values() {
        let device = v["reference"].as_str().expect("reference").to_string();
        let samples = sent.entry(device).or_default();
        for e in v["measurements"].as_array().expect("measurements") {
            let ts = e["timestamp"].as_i64().expect("timestamp");
            if let Some(prev) = samples.last() {
                assert!(ts >= prev.1, "seq {} goes back in time: {e}", v["seq"]);
            }
            let property = e["property"].as_str().expect("property").to_string();
            samples.push((property, ts, e["value"].as_f64().expect("value")));
        }
    }
    assert_eq!(sent.len(), 3, "{:?}", sent.keys());
    for (device, mut samples) in sent {
        let newest = samples.last().expect("samples").1;
        let stored = stored(&site, &device, newest).await;
        samples.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        assert_eq!(
            samples.len(),
            stored.len(),
            "{device}: {} samples over MQTT, {} stored up to {newest}",
            samples.len(),
            stored.len()
        );
        for (m, s) in samples.iter().zip(&stored) {
            assert!(
                m.0 == s.0 && m.1 == s.1 && same(m.2, s.2),
                "{device}: {m:?} sent, {s:?} stored"
            );
        }
    }
    // Acknowledged rows leave with the next commit: the whole backlog goes.
    crate::common::wait_for("the backlog deleted after its PUBACKs", T, || async {
        let left = uplink(&site).outbox().fetch(0, target, 1).await.ok()?;
        left.is_empty().then_some(())
    })
    .await;
    site.stop().await;
}

/// Keeps a measurement message by its seq; a batch sent again after a
/// reconnect must be the same message.
fn absorb(got: &mut BTreeMap<u64, Value>, m: &Message) {
    let v = m.json();
    let seq = v["seq"].as_u64().expect("seq");
    if let Some(before) = got.insert(seq, v.clone()) {
        assert_eq!(before, v, "seq {seq} arrived twice with different bodies");
    }
}

/// (property, timestamp, value)
type Stored = (String, i64, f64);

/// What the store holds of `device` up to `until_ms`, by time and property.
async fn stored(site: &SmallSite, device: &str, until_ms: i64) -> Vec<Stored> {
    let device = device.to_string();
    site.agent
        .store()
        .read(move |c| {
            let mut rows: Vec<Stored> = sitegate::store::stored_samples(c, Some(&device))?
                .into_iter()
                .filter(|s| s.ts_ms <= until_ms)
                .map(|s| (s.property.name().to_string(), s.ts_ms, s.value))
                .collect();
            rows.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
            Ok::<_, StoreError>(rows)
        })
        .await
        .expect("read the store")
}

/// Equal but for the last bit JSON number parsing may round differently.
fn same(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_arrives_after_an_outage_and_a_restart() {
    for kind in kinds() {
        outage_and_restart(kind).await;
    }
}

async fn will_on_death(kind: Kind) {
    let broker = Broker::start(kind).await;
    let mut sub =
        Subscriber::connect(broker.addr("5"), "watch-will", &format!("{ROOT}/status")).await;
    let text = mqtt::small_site(200)
        .mqtt(&plain_url(broker.addr("5")), "5")
        .text();
    let site = mqtt::start(&text).await;
    sub.expect("online", T, |m| m.json()["online"] == true)
        .await;
    uplink(&site).kill();
    let m = sub
        .expect("the will", T, |m| m.json()["online"] == false)
        .await;
    assert_eq!(m.json(), serde_json::json!({"online": false}));
    site.stop().await;

    // A clean stop says offline too.
    let site = mqtt::start(&text).await;
    sub.expect("online again", T, |m| m.json()["online"] == true)
        .await;
    site.stop().await;
    sub.expect("offline on shutdown", T, |m| m.json()["online"] == false)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_goes_offline_through_the_will_when_the_agent_dies() {
    for kind in kinds() {
        will_on_death(kind).await;
    }
}

async fn will_on_sigkill(kind: Kind) {
    let broker = Broker::start(kind).await;
    let status = format!("{ROOT}/status");
    let mut sub = Subscriber::connect(broker.addr("5"), "watch-kill", &status).await;
    let site = || mqtt::small_site(200).mqtt(&plain_url(broker.addr("5")), "5");
    let sim = start_sim(&site().text()).await;
    let config = site().write_for(&sim);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sitegate"));
    cmd.arg("run").arg("--config").arg(&config.file);
    let mut agent = AgentProcess::run(config, cmd);
    let online = sub
        .expect("online from the agent process", T, |m| {
            m.json()["online"] == true
        })
        .await
        .json();
    assert!(online["startedAt"].as_i64().is_some(), "{online}");

    agent.kill();
    let m = sub
        .expect(&format!("the will on {kind:?}"), T, |m| {
            m.json()["online"] == false
        })
        .await;
    assert_eq!(m.json(), json!({"online": false}), "{}", agent.log());
    // It stays: a late subscriber is told the agent is offline.
    let mut late = Subscriber::connect(broker.addr("5"), "late-kill", &status).await;
    let m = late
        .expect("the retained status", T, |m| m.topic == status)
        .await;
    assert!(m.retain);
    assert_eq!(m.json(), json!({"online": false}));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_goes_offline_through_the_will_when_the_agent_process_is_killed() {
    for kind in kinds() {
        will_on_sigkill(kind).await;
    }
}
