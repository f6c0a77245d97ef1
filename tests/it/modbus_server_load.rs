//! 64 Modbus server clients beside the site's own work: while they read a
//! device's mirror in a loop (10 reads a second each), the devices are still
//! polled at their rate and a steering POST still reaches the batteries.
//! Rates are checked within a wide margin; no latency is asserted (the
//! figures are the bench's, `benches/modbus_server.rs -- site`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use crate::common::prom::Scrape;
use crate::modbus_server::{demo_site_own_units, Client};
use crate::steering_support::*;

const CLIENTS: usize = 64;
/// The PV inverter's unit id on the server.
const PV_UNIT: u8 = 11;

/// The demo site polled and controlled every second, each device a unit id
/// of its own, bounds that 64 clients from one address stay within.
fn text() -> String {
    let t = demo_site_own_units(1000);
    t + "\n[modbus_server]\nlisten = [\"127.0.0.1:0\"]\nmax_connections = 128\nmax_connections_per_client = 128\n"
}

async fn metrics(rig: &Rig) -> Scrape {
    Scrape::parse(&rig.get_text("/metrics").await.1)
}

/// Successful polls of every bus so far.
fn polls(s: &Scrape) -> Vec<(String, f64)> {
    ["pv-east", "pv-west", "bat-a", "bat-b", "grid"]
        .iter()
        .map(|bus| {
            let key = format!("sitegate_bus_polls_total{{bus=\"{bus}\",result=\"ok\"}}");
            (bus.to_string(), s.get(&key).unwrap_or(0.0))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_leave_polls_and_steering_alone() {
    let rig = Rig::start(&text()).await;
    let addr = rig.agent.modbus_addrs()[0];
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        let (stop, reads) = (stop.clone(), reads.clone());
        clients.push(tokio::spawn(async move {
            let mut c = Client::connect_to(addr).await;
            let expected = c.until(PV_UNIT, 40000, 70).await;
            // Spread the clients over the 100 ms period.
            tokio::time::sleep(Duration::from_micros(100_000 * i as u64 / CLIENTS as u64)).await;
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let words = c.read(PV_UNIT, 40000, 70).await;
                assert_eq!(
                    words.as_ref().map(|w| w[..2].to_vec()),
                    Ok(expected[..2].to_vec())
                );
                n += 1;
                reads.fetch_add(1, Ordering::Relaxed);
            }
            n
        }));
    }
    eventually("64 clients connected", Duration::from_secs(20), || async {
        metrics(&rig)
            .await
            .get("sitegate_modbus_server_connections")
            == Some(CLIENTS as f64)
    })
    .await;
    let first = reads.load(Ordering::Relaxed);
    eventually("every client reading", Duration::from_secs(20), || async {
        reads.load(Ordering::Relaxed) >= first + 4 * CLIENTS as u64
    })
    .await;

    // Polls every second go on: over a window of at least 5 s, each bus
    // polled within half and one and a half times its rate.
    let (before, t0) = (polls(&metrics(&rig).await), Instant::now());
    // The steering POST reaches the batteries meanwhile: 15 kW over 20 and
    // 10 kW rated, half of each.
    rig.night_discharge().await;
    eventually(
        "the discharge at the batteries",
        Duration::from_secs(20),
        || async { rig.storage("bat-a") == window(50.0) && rig.storage("bat-b") == window(50.0) },
    )
    .await;
    // The window is the measurement: polls counted over at least 5 s.
    tokio::time::sleep_until(t0 + Duration::from_secs(5)).await;
    let (after, secs) = (polls(&metrics(&rig).await), t0.elapsed().as_secs_f64());
    for ((bus, a), (_, b)) in before.iter().zip(&after) {
        let rate = (b - a) / secs;
        assert!(
            (0.5..=1.5).contains(&rate),
            "bus {bus}: {rate:.2} polls/s over {secs:.1} s with {CLIENTS} clients (every 1 s: 1/s)"
        );
    }

    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let n = c.await.expect("a client ran to the end");
        assert!(n >= 4, "a client read {n} times");
    }
    let s = metrics(&rig).await;
    assert_eq!(crate::modbus_server::requests(&s, "server_busy"), 0.0);
    rig.shutdown().await;
}
