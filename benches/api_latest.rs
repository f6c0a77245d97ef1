//! Latest-measurement GET throughput and latency (target: >= 30,000 requests/s
//! over loopback, p99 <= 2 ms), next to the naive way: the same HTTP stack and
//! auth answering each request from SQLite instead of the in-memory cache.
//!
//! `cargo bench --bench api_latest` (`-- SECONDS CONNECTIONS`, default 5 s, 32).
//! The server (the real agent on a simulated site, bearer-token auth on) and the
//! load run in one process: the server on a 1-worker runtime, the load on its own
//! thread and runtime, so on a 2-core machine each has about one core.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "../tests/it/steering_support/mod.rs"]
mod steering_support;

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use common::site::{self, READ_TOKEN, SUMMER_MORNING_MS};
use serde_json::{json, Value};
use sitegate::store::StoreHandle;
use steering_support::TestSite;

/// The naive design: look the latest value up in SQLite on every request.
async fn naive(
    State(store): State<StoreHandle>,
    Path((device, property)): Path<(String, String)>,
) -> Json<Value> {
    let found = store
        .read(move |conn| {
            let prop = property
                .parse::<sitegate::model::Property>()
                .expect("a property");
            let row = sitegate::store::latest_of(conn, &device, prop)
                .map_err(sitegate::store::StoreError::from)?;
            Ok::<_, sitegate::store::StoreError>(row.map(|(ts, v)| (device, property, ts, v)))
        })
        .await
        .unwrap();
    let (device, property, ts, value) = found.expect("a stored sample");
    Json(
        json!({"timestamp": ts, "property": property, "value": value, "unit": "%", "reference": device}),
    )
}

struct Run {
    requests: usize,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

/// `connections` workers, each sending GET `url` back to back for `seconds`.
fn load(url: String, seconds: u64, connections: usize) -> Run {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let deadline = Instant::now() + Duration::from_secs(seconds);
            let start = Instant::now();
            let mut workers = Vec::new();
            for i in 0..connections {
                // The agent holds at most 8 connections from one address (a
                // client), so the load comes from 127.0.0.10 on, as from
                // several clients on the site's LAN.
                let source = std::net::Ipv4Addr::new(127, 0, 0, 10 + (i / 8) as u8);
                let client = reqwest::Client::builder()
                    .local_address(std::net::IpAddr::V4(source))
                    .pool_max_idle_per_host(1)
                    .build()
                    .unwrap();
                let url = url.clone();
                workers.push(tokio::spawn(async move {
                    let mut lat = Vec::new();
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        let r = client
                            .get(&url)
                            .bearer_auth(READ_TOKEN)
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(r.status(), 200);
                        r.bytes().await.unwrap();
                        lat.push(t.elapsed());
                    }
                    lat
                }));
            }
            let mut all = Vec::new();
            for w in workers {
                all.extend(w.await.unwrap());
            }
            let elapsed = start.elapsed();
            all.sort();
            let pick = |p: f64| all[((all.len() as f64 - 1.0) * p).round() as usize];
            Run {
                requests: all.len(),
                elapsed,
                p50: pick(0.5),
                p99: pick(0.99),
                max: *all.last().unwrap(),
            }
        })
    })
    .join()
    .unwrap()
}

fn report(name: &str, r: &Run) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<34} {:>9.0} req/s   p50 {:>6.3} ms   p99 {:>6.3} ms   max {:>7.3} ms   ({} requests)",
        r.requests as f64 / r.elapsed.as_secs_f64(),
        ms(r.p50),
        ms(r.p99),
        ms(r.max),
        r.requests
    );
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<u64>().ok());
    let seconds = args.next().unwrap_or(5);
    let connections = args.next().unwrap_or(32) as usize;
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (site, naive_url) = server.block_on(async {
        let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
        site.ready().await;
        // Let a few polls reach the store, so the naive path has rows to find.
        site.agent.store().flush().await.unwrap();
        let store = site.agent.store().clone();
        let app = Router::new()
            .route("/naive/{device}/{property}", get(naive))
            .with_state(store);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (Arc::new(site), format!("http://{addr}/naive/dvc_bat/soc"))
    });
    let cached_url = format!("{}/devices/dvc_bat/measurement?property=soc", site.base);
    println!("{seconds} s per variant, {connections} connections, keep-alive, loopback\n");
    // Warm both paths.
    load(cached_url.clone(), 1, connections);
    load(naive_url.clone(), 1, connections);
    report(
        "latest GET (in-memory cache)",
        &load(cached_url, seconds, connections),
    );
    report(
        "naive: SQLite lookup per request",
        &load(naive_url, seconds, connections),
    );
    drop(server);
}
