//! RPC traffic can never delete measurements:
//!
//! - a flood of unique GET requests (the OpenAPI document, 87 KB an answer)
//!   against an agent whose database sits just under `storage.max_size_mb`
//!   leaves nothing behind and retention deletes nothing (GET answers were kept
//!   24 h before, and 350 of them pushed a site over its cap);
//! - answers to state-changing requests are kept within their bounds (rows and
//!   bytes), and the store does not count them against `max_size_mb`: with the
//!   file over the cap because of them, retention still deletes nothing.

use std::time::Duration;

use crate::common::broker::{on_every_kind, Broker, Kind, Subscriber};
use crate::common::mqtt::{self, plain_url, ROOT};
use crate::common::prom::scrape;
use crate::common::site::SmallSite;
use serde_json::json;
use sitegate::agent::Agent;
use sitegate::config::{parse, Config, StorageConfig};
use sitegate::model::time::now_ms;
use sitegate::model::{DeviceId, Property, Sample};
use sitegate::store::{StoreError, StoreHandle};
use sitegate::uplink::{Dedup, Seen, DEDUP_MAX_BYTES, DEDUP_MAX_ROWS};

const T: Duration = Duration::from_secs(60);
const DAY_MS: i64 = 86_400_000;
const MIB: u64 = 1 << 20;

/// One poll of eight properties of `device` at `ts_ms`.
fn poll(device: u16, ts_ms: i64, i: i64) -> Vec<Sample> {
    let x = i as f64;
    [
        Property::ActivePower,
        Property::ReactivePower,
        Property::Soc,
        Property::Frequency,
        Property::VoltageL1,
        Property::Temperature,
        Property::TotalEnergyProduced,
        Property::TotalEnergyConsumed,
    ]
    .into_iter()
    .enumerate()
    .map(|(k, property)| Sample {
        device: DeviceId(device),
        property,
        ts_ms,
        // Full-precision values, as noisy as they come: the history fills
        // its megabytes with fewer samples.
        value: (x * (0.1 + k as f64)).sin() * 480.0,
    })
    .collect()
}

/// Fills `store` with up to 30 days of polls of device 0 (10 s apart, within
/// the default 35-day retention) until its pages in use reach `bytes`; returns
/// the samples sent.
async fn fill(store: &StoreHandle, bytes: u64) -> u64 {
    let tx = store.sample_sender();
    let start = now_ms() - 30 * DAY_MS;
    let mut i = 0i64;
    while store.used_bytes().await.expect("size") < bytes {
        // Big rounds: each compaction has a cost of its own.
        for _ in 0..5_000 {
            tx.send(poll(0, start + i * 10_000, i)).await.expect("send");
            i += 1;
        }
        store.flush().await.expect("flush");
        // At rest, as the history would be: the staging ring is rewritten in place.
        store.compact().await.expect("compact");
        assert!(start + i * 10_000 < now_ms(), "30 days were not enough");
    }
    i as u64 * 8
}

/// Samples older than the last hour: only the prefilled history.
async fn history(store: &StoreHandle) -> i64 {
    let before = now_ms() - 3_600_000;
    store
        .read(move |c| {
            let all = sitegate::store::stored_samples(c, None)?;
            Ok::<_, StoreError>(all.iter().filter(|s| s.ts_ms < before).count() as i64)
        })
        .await
        .expect("count")
}

async fn record_rows(store: &StoreHandle) -> (i64, i64) {
    store
        .read(|c| {
            Ok::<_, StoreError>(c.query_row(
                "SELECT count(*), coalesce(sum(length(id) + length(response)), 0) FROM uplink_rpc_seen",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .await
        .expect("record")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_answers_are_bounded_and_never_count_against_the_store_cap() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = StorageConfig {
        path: dir.path().join("r.db"),
        flush_interval_ms: 50,
        max_size_mb: 4,
        ..StorageConfig::default()
    };
    let store = StoreHandle::open(&config, vec!["dvc_a".into()]).expect("open");
    fill(&store, 3 * MIB).await;
    let report = store.enforce_retention(now_ms()).await.expect("retention");
    assert_eq!(report.evicted.total(), 0, "the history fits under the cap");
    let kept = history(&store).await;

    // 300 state-changing answers of 60 KB: far more than the record keeps.
    let dedup = Dedup::new(store.clone());
    let now = now_ms();
    for i in 0..300 {
        let Seen::New(claim) = dedup.claim(&format!("post-{i}"), now).await.expect("claim") else {
            panic!("post-{i} is new");
        };
        dedup
            .record(claim, vec![b'a'; 60_000], now)
            .await
            .expect("record");
    }
    let (rows, bytes) = record_rows(&store).await;
    assert!(
        rows as u64 <= DEDUP_MAX_ROWS && bytes as u64 <= DEDUP_MAX_BYTES,
        "{rows} rows, {bytes} bytes"
    );
    assert!(
        bytes as u64 > DEDUP_MAX_BYTES - 60_100,
        "the record is full: {bytes}"
    );
    assert!(
        dedup
            .stats()
            .dropped
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    // The newest answers are the ones kept.
    assert!(matches!(
        dedup.claim("post-299", now).await.expect("claim"),
        Seen::Answered(_)
    ));

    // The file is over the cap only because of the record: nothing is deleted.
    let used = store.used_bytes().await.expect("size");
    assert!(
        used > 4 * MIB,
        "the record must push the file over the cap: {used}"
    );
    let report = store.enforce_retention(now_ms()).await.expect("retention");
    assert_eq!(report.evicted.total(), 0, "{report:?}");
    assert_eq!(history(&store).await, kept);
    store.close().await.expect("close");
}

/// The small test site with a 6 MiB store cap whose history already fills
/// about 4.5 MiB of it.
async fn near_the_cap(broker: &Broker) -> (SmallSite, String) {
    let text = mqtt::small_site(200)
        .mqtt(&plain_url(broker.addr("5")), "5")
        .mqtt_key("outbox_max_mb", 1)
        .section_key(&["storage"], "max_size_mb", 6)
        .text();
    let site = mqtt::start(&text).await;
    let SmallSite {
        sim,
        agent,
        http,
        dir,
        ..
    } = site;
    agent.shutdown().await;
    let path = dir.path().join("sitegate.db");
    let store = StoreHandle::open(
        &StorageConfig {
            path: path.clone(),
            flush_interval_ms: 50,
            ..StorageConfig::default()
        },
        vec!["dvc_pv".into()],
    )
    .expect("open the agent's store");
    fill(&store, 9 * MIB / 2).await;
    store.close().await.expect("close");
    let mut config: Config = parse(&text).expect("test config");
    config.storage.path = path;
    sim.point_config_at_servers(&mut config);
    let agent = Agent::start(config).await.expect("agent restarts");
    let base = format!("http://{}", agent.http_addrs()[0]);
    (
        SmallSite {
            sim,
            agent,
            base,
            http,
            dir,
        },
        text,
    )
}

async fn get_flood(kind: Kind) {
    let broker = Broker::start(kind).await;
    let mut answers = Subscriber::connect(
        broker.addr("5"),
        &format!("flood-{kind:?}"),
        &format!("{ROOT}/rpc/response/#"),
    )
    .await;
    let (site, _) = near_the_cap(&broker).await;
    mqtt::wait_connected(&site, true, T).await;
    let store = site.agent.store().clone();
    let report = store.enforce_retention(now_ms()).await.expect("retention");
    assert_eq!(report.evicted.total(), 0, "the history fits under the cap");
    let kept = history(&store).await;

    // 24 answers of the OpenAPI document (some 170 kB each): kept, they
    // would be 4 MB, well past the 1.5 MiB the history leaves under the cap.
    let n = 24;
    for i in 0..n {
        let request = json!({"id": format!("get-{i}"), "method": "GET", "path": "/openapi.json"});
        answers
            .request(&format!("{ROOT}/rpc/request"), &request, None)
            .await;
    }
    // Answers come in any order.
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < n {
        let m = answers
            .expect("the answers", T, |m| {
                m.topic.starts_with(&format!("{ROOT}/rpc/response/get-"))
            })
            .await;
        assert_eq!(m.json()["status"], 200);
        answered.insert(m.topic);
    }
    assert_eq!(
        record_rows(&store).await,
        (0, 0),
        "GET answers are not kept"
    );
    let m = scrape(&site.http, &site.base).await;
    assert_eq!(m.get("sitegate_mqtt_rpc_record_rows"), Some(0.0));
    let report = store.enforce_retention(now_ms()).await.expect("retention");
    assert_eq!(report.evicted.total(), 0, "{kind:?}: {report:?}");
    assert_eq!(history(&store).await, kept, "{kind:?}: history changed");
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unique_get_requests_leaves_the_history_untouched() {
    on_every_kind(get_flood).await;
}
