//! Steering latency: time from a steering POST leaving the client to the first
//! Modbus write arriving at a simulated device (target: p99 <= 20 ms).
//!
//! `cargo bench --bench steering_latency` (`-- N` for N rounds, default 300).
//! Each round changes the site's ESS setting, so every POST causes writes; the
//! write's arrival time is taken from the simulator's write events.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "../tests/it/steering_support/mod.rs"]
mod steering_support;

use std::time::Duration;
use tokio::time::Instant;

use serde_json::json;
use steering_support::*;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let rig = Rig::start(&config_text(1000, 60)).await;
        let mut writes = rig.sim.subscribe_writes();
        let url = format!("{}/sites/{SITE}/steering/ess", rig.base);
        let mut lat = Vec::with_capacity(rounds);
        for i in 0..rounds {
            // Let polls and the previous round's writes settle, then drain events.
            tokio::time::sleep(Duration::from_millis(30 + (i % 7) as u64 * 10)).await;
            while writes.try_recv().is_ok() {}
            let kw = 50 + (i % 2) * 10;
            let body = json!({"setting": {"value": kw, "unit": "kW"}, "validUntil": now_ms() + 600_000});
            let req = rig.http.post(&url).bearer_auth(STEER).json(&body);
            let t0 = Instant::now();
            let answer = req.send().await.unwrap();
            assert_eq!(answer.status(), 200);
            let first = loop {
                let e = tokio::time::timeout(Duration::from_secs(2), writes.recv())
                    .await
                    .expect("a write within 2 s")
                    .expect("write events");
                if e.at >= t0 {
                    break e.at;
                }
            };
            lat.push(first - t0);
        }
        lat.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "steering POST -> first Modbus write at the device, {} rounds: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            lat.len(),
            ms(percentile(&lat, 0.50)),
            ms(percentile(&lat, 0.90)),
            ms(percentile(&lat, 0.99)),
            ms(*lat.last().unwrap()),
        );
        rig.shutdown().await;
    });
}
