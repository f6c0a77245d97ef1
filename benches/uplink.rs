//! Uplink benchmark: ingest throughput into the store with its outbox (every
//! sample in the measurement tables and in the outbox, one transaction) and the
//! backlog drain rate after a simulated time offline (20 devices polled at 1 Hz,
//! 8 properties each), drained through an in-process rumqttd broker.
//!
//! `cargo bench --bench uplink` (a day: `SITEGATE_BENCH_HOURS=24`, default 1).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use sitegate::api::{router, ApiState, Auth};
use sitegate::config::{parse, AuthMode, HttpConfig, MqttConfig, StorageConfig};
use sitegate::model::{DeviceId, Property, Sample};
use sitegate::store::StoreHandle;
use sitegate::telemetry::Live;
use sitegate::uplink::outbox;
use sitegate::uplink::{Cap, Outbox, SteeringFeed, Uplink, UplinkParts};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const DEVICES: usize = 20;
const PROPS: [Property; 8] = [
    Property::ActivePower,
    Property::ReactivePower,
    Property::Soc,
    Property::Frequency,
    Property::TotalEnergyProduced,
    Property::TotalEnergyConsumed,
    Property::Temperature,
    Property::StateOfHealth,
];

fn poll(device: usize, ts_ms: i64) -> Vec<Sample> {
    PROPS
        .iter()
        .enumerate()
        .map(|(i, &property)| Sample {
            device: DeviceId(device as u16),
            property,
            ts_ms,
            value: ((ts_ms / 1000 + i as i64 * 37 + device as i64) % 5000) as f64 / 10.0,
        })
        .collect()
}

fn rumqttd() -> SocketAddr {
    use rumqttd::{Config, ConnectionSettings, RouterConfig, ServerSettings};
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let server = ServerSettings {
        name: "v5".into(),
        listen: addr,
        tls: None,
        next_connection_delay_ms: 1,
        connections: ConnectionSettings {
            connection_timeout_ms: 60_000,
            max_payload_size: 1 << 20,
            max_inflight_count: 500,
            auth: None,
            external_auth: None,
            dynamic_filters: true,
        },
    };
    let config = Config {
        router: RouterConfig {
            max_connections: 10,
            max_outgoing_packet_count: 200,
            max_segment_size: 100 << 20,
            max_segment_count: 10,
            custom_segment: None,
            initialized_filters: None,
            shared_subscriptions_strategy: Default::default(),
        },
        v5: Some(HashMap::from([("1".to_string(), server)])),
        ..Default::default()
    };
    std::thread::spawn(move || {
        let _ = rumqttd::Broker::new(config).start();
    });
    addr
}

#[allow(clippy::print_stdout, reason = "a benchmark reports its figures")]
fn main() {
    let hours: i64 = std::env::var("SITEGATE_BENCH_HOURS")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let dir = tempfile::tempdir().expect("temp dir");
        let cap = Cap {
            max_age_ms: i64::MAX,
            max_bytes: u64::MAX,
        };
        let storage = StorageConfig {
            path: dir.path().join("b.db"),
            ..StorageConfig::default()
        };
        let devices = (0..DEVICES).map(|d| format!("dvc_{d:02}")).collect();
        let (sink, state) = outbox::sink(cap);
        let store = StoreHandle::open_with_hook(&storage, devices, Some(Box::new(sink)))
            .expect("store");
        let outbox = Outbox::new(store.clone(), state);
        let samples_tx = store.sample_sender();
        let seconds = hours * 3600;
        let t0 = Instant::now();
        // Recent timestamps, so the store's retention leaves them alone.
        let start_ms = sitegate::model::time::now_ms() - seconds * 1000;
        for s in 0..seconds {
            let ts = start_ms + s * 1000;
            for d in 0..DEVICES {
                samples_tx.send(poll(d, ts)).await.expect("send");
            }
        }
        store.flush().await.expect("flush");
        let took = t0.elapsed().as_secs_f64();
        let stats = outbox.stats();
        let samples = stats.rows * PROPS.len() as u64;
        println!(
            "ingest with outbox: {} messages ({} samples, {} h offline) in {took:.1} s: {:.0} messages/s, {:.0} samples/s; outbox {:.1} MiB counted, {:.1} bytes/sample",
            stats.rows,
            samples,
            hours,
            stats.rows as f64 / took,
            samples as f64 / took,
            stats.bytes as f64 / 1048576.0,
            stats.bytes as f64 / samples as f64,
        );

        println!(
            "database: {:.1} MiB in use (measurements, rollups and outbox)",
            store.used_bytes().await.expect("size") as f64 / 1048576.0
        );

        let broker = rumqttd();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let config = parse("gateway_id = \"bench\"\n[http]\nlisten = [\"127.0.0.1:0\"]\nauth = \"none\"\n").expect("config");
        let live = Arc::new(Live::new(&config.devices));
        let http = HttpConfig { listen: vec![], auth: AuthMode::None, tokens: vec![], metrics: true, request_timeout_ms: 30_000, rate_limit: Default::default(), https_listen: vec![], tls: None, allow_plain_tokens: false };
        let mqtt = MqttConfig {
            url: format!("mqtt://{broker}"),
            drain_rate: 1_000_000,
            ..MqttConfig::default()
        };
        let (_catalog_tx, catalog) = tokio::sync::watch::channel(0);
        let tracker = TaskTracker::new();
        let cancel = CancellationToken::new();
        let t1 = Instant::now();
        let uplink = Uplink::start(
            UplinkParts {
                config: mqtt,
                gateway_id: "bench".into(),
                router: router(ApiState::new(&config, live.clone())),
                auth: Arc::new(Auth::new(&http)),
                live,
                catalog,
                outbox: outbox.clone(),
                steering: SteeringFeed::new(),
                ops: None,
            },
            &tracker,
            cancel.clone(),
        );
        while uplink.stats().rows > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let took = t1.elapsed().as_secs_f64();
        println!(
            "drain: {} messages acknowledged by the broker in {took:.1} s: {:.0} messages/s ({:.0} samples/s); a day of backlog drains in {:.1} min",
            stats.rows,
            stats.rows as f64 / took,
            samples as f64 / took,
            (DEVICES as f64 * 86_400.0) / (stats.rows as f64 / took) / 60.0,
        );
        cancel.cancel();
        tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(3), tracker.wait()).await;
        store.close().await.expect("close");
    });
}
