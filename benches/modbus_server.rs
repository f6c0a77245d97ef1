//! The Modbus server's mirror reads (target: p99 <= 2 ms at 2,000 requests a
//! second over loopback), the agent's CPU per 1,000 of them, and the polls of
//! the devices while they run.
//!
//! `cargo bench --bench modbus_server` (`-- SECONDS CONNECTIONS RATE`,
//! default 10 s, 64 connections, 2,000 requests/s in all). The agent and the
//! simulated site run on a 1-worker runtime whose threads are named
//! `sg-agent`; the load on its own thread (`sg-load`). CPU is the process's
//! minus the load thread's, over the loaded window minus an idle window of
//! the same length (the polls and control ticks), per 1,000 requests.
//!
//! `cargo bench --bench modbus_server -- site [SECONDS]` (default 30 s): the
//! clients beside the site's own work instead. The small site polled every
//! second, its control loop holding the grid limits every second, first
//! alone for SECONDS, then with 64 connections each reading the inverter's
//! mirror 10 times a second for as long. Each window reports every device's
//! poll intervals (mean, max; from the poll times the agent stamps, seen by
//! an observer thread every 2 ms) and the control tick's p99 (the time a tick
//! took, and how late a timed tick woke), from the tick histograms on
//! `/metrics` (a bucket's bound: the p99 is at most that).
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/it/common/mod.rs"]
mod common;
#[path = "../tests/it/steering_support/mod.rs"]
mod steering_support;

use std::net::SocketAddr;
use std::time::Duration;
use tokio::time::Instant;

use common::prom::Scrape;
use common::site::{self, SUMMER_MORNING_MS};
use steering_support::TestSite;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The small site, each device a unit id of its own, the request rate bound
/// out of the way.
fn server_site() -> TestSite {
    TestSite::small_own_units()
        .modbus_server_key("listen", vec!["127.0.0.1:0"])
        .modbus_server_key("max_connections", 128)
        .modbus_server_key("max_connections_per_client", 128)
        .modbus_server_key("requests_per_s", 100_000)
        .modbus_server_key("burst", 100_000)
}

fn config() -> String {
    server_site().text()
}

/// Ticks of CPU (utime + stime) of every thread but the load's.
fn agent_ticks() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if stat[open + 1..close].starts_with("sg-load") {
            continue;
        }
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        // Fields 14 and 15 of stat; the slice starts at field 3.
        total += f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    }
    total
}

/// Clock ticks a second in `/proc` (Linux's `USER_HZ`, fixed at 100).
fn ticks_per_s() -> f64 {
    100.0
}

/// `connections` clients, each reading model 103 of unit 1 (50 registers)
/// at `rate / connections` a second for `seconds`; the latencies.
fn load(addr: SocketAddr, seconds: u64, connections: usize, rate: f64) -> Vec<Duration> {
    std::thread::Builder::new()
        .name("sg-load".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let every = Duration::from_secs_f64(connections as f64 / rate);
                let deadline = Instant::now() + Duration::from_secs(seconds);
                let mut workers = Vec::new();
                for i in 0..connections {
                    workers.push(tokio::spawn(async move {
                        let mut s = TcpStream::connect(addr).await.unwrap();
                        s.set_nodelay(true).unwrap();
                        // Spread the clients over one period.
                        tokio::time::sleep(every.mul_f64(i as f64 / connections as f64)).await;
                        let mut tick = tokio::time::interval(every);
                        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        let mut lat = Vec::new();
                        let mut answer = vec![0u8; 9 + 100];
                        let mut tid: u16 = 0;
                        while Instant::now() < deadline {
                            tick.tick().await;
                            tid = tid.wrapping_add(1);
                            let mut req = tid.to_be_bytes().to_vec();
                            req.extend_from_slice(&[0, 0, 0, 6, 1, 3]);
                            req.extend_from_slice(&40072u16.to_be_bytes());
                            req.extend_from_slice(&50u16.to_be_bytes());
                            let t = Instant::now();
                            s.write_all(&req).await.unwrap();
                            s.read_exact(&mut answer).await.unwrap();
                            lat.push(t.elapsed());
                            assert_eq!(answer[7], 3, "a read answer, not an exception");
                        }
                        lat
                    }));
                }
                let mut all = Vec::new();
                for w in workers {
                    all.extend(w.await.unwrap());
                }
                all
            })
        })
        .unwrap()
        .join()
        .unwrap()
}

async fn polls(site: &site::SmallSite) -> Vec<(String, f64)> {
    let s = site.scrape().await;
    ["pv", "bat", "grid"]
        .iter()
        .map(|bus| {
            let key = format!("sitegate_bus_polls_total{{bus=\"{bus}\",result=\"ok\"}}");
            (bus.to_string(), s.samples.get(&key).copied().unwrap_or(0.0))
        })
        .collect()
}

/// The small site polled every second (its control loop at its default
/// 1 s), each device a unit id of its own.
fn site_config() -> String {
    server_site().poll_interval_ms(1000).text()
}

/// Every device's poll times (ms, as the agent stamps them) seen while `run`
/// runs, by device reference.
fn poll_times<T>(
    live: &sitegate::telemetry::Live,
    run: impl FnOnce() -> T,
) -> (T, Vec<(String, Vec<i64>)>) {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let devices = live.devices();
    std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut seen: Vec<Vec<i64>> = vec![Vec::new(); devices.len()];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for (d, times) in devices.iter().zip(seen.iter_mut()) {
                    if let Some(t) = live.snapshot(d.id).last_seen {
                        if times.last() != Some(&t) {
                            times.push(t);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            devices
                .iter()
                .map(|d| d.reference.clone())
                .zip(seen)
                .collect::<Vec<_>>()
        });
        let out = run();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (out, watcher.join().unwrap())
    })
}

/// A histogram's buckets on `/metrics`: `(le, cumulative count)`.
fn buckets(s: &Scrape, name: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{le=\"");
    let mut b: Vec<(f64, f64)> = s
        .samples
        .iter()
        .filter_map(|(k, v)| {
            let le = k.strip_prefix(&prefix)?.strip_suffix("\"}")?;
            Some((le.parse::<f64>().unwrap_or(f64::INFINITY), *v))
        })
        .collect();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    b
}

/// The bound of the bucket that holds the 99th percentile of what was
/// observed between two scrapes, and the count.
fn p99(before: &Scrape, after: &Scrape, name: &str) -> (f64, f64) {
    let (a, b) = (buckets(before, name), buckets(after, name));
    let total = b.last().map_or(0.0, |x| x.1) - a.last().map_or(0.0, |x| x.1);
    let want = (total * 0.99).ceil();
    let bound = b
        .iter()
        .zip(&a)
        .find(|((_, nb), (_, na))| nb - na >= want)
        .map_or(f64::INFINITY, |((le, _), _)| *le);
    (bound, total)
}

/// The agent on a runtime of one worker thread (as on a small controller),
/// its site started and ready.
fn agent_on_one_worker(config: &str) -> (tokio::runtime::Runtime, site::SmallSite) {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("sg-agent")
        .enable_all()
        .build()
        .unwrap();
    let site = server.block_on(async {
        let site = site::start(config, 1.0, SUMMER_MORNING_MS).await;
        site.ready().await;
        site
    });
    (server, site)
}

/// The 64 clients beside the site's own work: poll intervals and tick p99
/// alone and with the clients.
fn site_run(seconds: u64) {
    let (server, site) = agent_on_one_worker(&site_config());
    let addr = site.agent.modbus_addrs()[0];
    let live = site.agent.live().clone();
    // The mirror answers once the inverter's first poll is in.
    load(addr, 2, 64, 640.0);
    println!("small site polled every 1 s, control loop every 1 s; {seconds} s a window, 1-worker agent runtime\n");
    for (label, clients) in [("alone", false), ("64 clients x 10 reads/s", true)] {
        let before = server.block_on(site.scrape());
        let ((), times) = poll_times(&live, || {
            if clients {
                let lat = load(addr, seconds, 64, 640.0);
                let n = lat.len() as f64;
                println!("{label}: {n:.0} mirror reads ({:.0}/s)", n / seconds as f64);
            } else {
                std::thread::sleep(Duration::from_secs(seconds));
                println!("{label}:");
            }
        });
        let after = server.block_on(site.scrape());
        for (device, t) in times {
            let gaps: Vec<i64> = t.windows(2).map(|w| w[1] - w[0]).collect();
            let mean = gaps.iter().sum::<i64>() as f64 / gaps.len().max(1) as f64;
            println!(
                "  poll interval of {device}: mean {mean:.1} ms, max {} ms ({} intervals)",
                gaps.iter().max().copied().unwrap_or(0),
                gaps.len()
            );
        }
        let (took, n) = p99(&before, &after, "sitegate_steering_tick_duration_seconds");
        let (late, _) = p99(&before, &after, "sitegate_steering_tick_delay_seconds");
        println!(
            "  control tick p99: took <= {:.2} ms, woke late <= {:.2} ms ({n:.0} ticks)",
            took * 1000.0,
            late * 1000.0
        );
    }
    drop(server);
}

fn main() {
    if std::env::args().any(|a| a == "site") {
        let seconds = std::env::args()
            .filter_map(|a| a.parse::<u64>().ok())
            .next()
            .unwrap_or(30);
        return site_run(seconds);
    }
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<f64>().ok());
    let seconds = args.next().unwrap_or(10.0) as u64;
    let connections = args.next().unwrap_or(64.0) as usize;
    let rate = args.next().unwrap_or(2000.0);
    let (server, site) = agent_on_one_worker(&config());
    let addr = site.agent.modbus_addrs()[0];
    // Warm up, then an idle window for the baseline.
    load(addr, 1, connections, rate);
    let (p0, c0, t0) = (server.block_on(polls(&site)), agent_ticks(), Instant::now());
    std::thread::sleep(Duration::from_secs(seconds));
    let (p1, c1, idle_s) = (server.block_on(polls(&site)), agent_ticks(), t0.elapsed());
    let t1 = Instant::now();
    let mut lat = load(addr, seconds, connections, rate);
    let (p2, c2, busy_s) = (server.block_on(polls(&site)), agent_ticks(), t1.elapsed());

    lat.sort();
    let pick = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let n = lat.len() as f64;
    println!(
        "{connections} connections, {rate} requests/s in all, {seconds} s, loopback; mirror read of 50 registers\n"
    );
    println!(
        "mirror reads: {:.0} req/s   p50 {:.3} ms   p99 {:.3} ms   max {:.3} ms   ({} requests)",
        n / busy_s.as_secs_f64(),
        ms(pick(0.5)),
        ms(pick(0.99)),
        ms(*lat.last().unwrap()),
        lat.len()
    );
    let idle_ticks = (c1 - c0) as f64 / idle_s.as_secs_f64() * busy_s.as_secs_f64();
    let extra_ms = ((c2 - c1) as f64 - idle_ticks) / ticks_per_s() * 1000.0;
    println!(
        "agent CPU: {:.1} ms per 1,000 requests ({:.1} % of a core idle, {:.1} % loaded)",
        extra_ms / n * 1000.0,
        (c1 - c0) as f64 / ticks_per_s() / idle_s.as_secs_f64() * 100.0,
        (c2 - c1) as f64 / ticks_per_s() / busy_s.as_secs_f64() * 100.0,
    );
    for ((bus, a), ((_, b), (_, c))) in p0.iter().zip(p1.iter().zip(p2.iter())) {
        println!(
            "polls of {bus}: {:.2}/s idle, {:.2}/s loaded (every 200 ms: 5/s)",
            (b - a) / idle_s.as_secs_f64(),
            (c - b) / busy_s.as_secs_f64()
        );
    }
    drop(server);
}
