//! The agent's bounds pushed past, through its real interfaces: MQTT RPC
//! requests past the workers' queue are answered 429 (or dropped and counted
//! without an id), HTTP connections past the cap wait in the listen backlog
//! until one closes, and a bus task whose store queue is full still serves
//! commands. Past a bound, none of them starts a task (or a thread) per
//! request.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::common::broker::{Broker, Kind, Subscriber};
use crate::common::mqtt::{self, mqtt_section, plain_url, site_config, ROOT};
use crate::common::prom::{scrape, Scrape};
use crate::common::site::{self, SmallSite, SUMMER_MORNING_MS};
use crate::common::wait_for;
use crate::steering_support::TestSite;
use crate::store_support::hold_reads;
use serde_json::{json, Value};
use sitegate::agent::{HTTP_MAX_CONNECTIONS, HTTP_MAX_PER_CLIENT, HTTP_RESERVE_CONNECTIONS};
use sitegate::modbus::{BusTask, DeviceMaps, Op, OpOutput};
use sitegate::model::time::{format_utc, now_ms};
use sitegate::register::plan::{Span, Table};
use sitegate::sim::{SimSite, SimSiteSpec};
use sitegate::telemetry::{Live, Telemetry};
use sitegate::uplink::{RPC_QUEUE, RPC_WORKERS};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(20);

/// Tasks alive on this test's runtime, which runs the agent (tests running
/// beside it have runtimes of their own, so this counts the agent's and this
/// test's only, unlike the threads of the process).
fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

async fn metric(site: &SmallSite, series: &str) -> f64 {
    scrape(&site.http, &site.base)
        .await
        .get(series)
        .unwrap_or_else(|| panic!("{series} missing from /metrics"))
}

fn series_request(id: &str, start: &str, end: &str) -> Value {
    json!({
        "id": id,
        "method": "POST",
        "path": "/devices/dvc_bat/measurements/time-series",
        "body": {
            "property": "soc",
            "range": {"type": "absolute", "start": start, "end": end},
            "resolution": {"value": 1, "unit": "min"}
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_requests_past_the_queue_are_answered_429_without_new_tasks() {
    let broker = Broker::start(Kind::Rumqttd).await;
    let mut sub = Subscriber::connect(
        broker.addr("5"),
        "rpc-bounds",
        &format!("{ROOT}/rpc/response/#"),
    )
    .await;
    let text = site_config(
        &mqtt_section(&plain_url(broker.addr("5")), "5", ""),
        3_600_000,
    );
    let site = mqtt::start(&text).await;
    site.ready().await;
    mqtt::wait_connected(&site, true, T).await;
    wait_for("the first polls delivered", T, || async {
        (metric(&site, "sitegate_outbox_rows").await == 0.0).then_some(())
    })
    .await;
    let hour = 3_600_000;
    let now = now_ms();
    let start = format_utc(now - now.rem_euclid(hour) - hour);
    let end = format_utc(now - now.rem_euclid(hour));
    let (start, end) = (start.as_str(), end.as_str());

    // Every store read slot held: time-series requests wait for one inside the
    // workers, which are then all busy. The link reads its outbox in a turn of
    // its own, so it keeps taking requests meanwhile.
    let release = hold_reads(site.agent.store(), sitegate::store::MAX_READS_RUNNING).await;
    let request = format!("{ROOT}/rpc/request");
    for i in 0..RPC_WORKERS {
        sub.request(
            &request,
            &series_request(&format!("run-{i}"), start, end),
            None,
        )
        .await;
    }
    wait_for("every worker busy", T, || async {
        let running = metric(&site, "sitegate_mqtt_rpc_workload{state=\"running\"}").await;
        (running == RPC_WORKERS as f64).then_some(())
    })
    .await;
    let before = site.agent.uplink().expect("the uplink").tasks();
    // The link, the outbox's upkeep and the workers, and a dedup prune while
    // one runs.
    assert!(before > RPC_WORKERS, "the uplink's tasks: {before}");

    // The queue fills, and every request past it is refused at once.
    for i in 0..RPC_QUEUE {
        sub.request(
            &request,
            &series_request(&format!("q-{i}"), start, end),
            None,
        )
        .await;
    }
    let over = 10;
    for i in 0..over {
        sub.request(
            &request,
            &series_request(&format!("over-{i}"), start, end),
            None,
        )
        .await;
    }
    // Without an id there is nowhere to answer: dropped and counted.
    sub.request(
        &request,
        &json!({"method": "GET", "path": "/healthz"}),
        None,
    )
    .await;
    for i in 0..over {
        let topic = format!("{ROOT}/rpc/response/over-{i}");
        let m = sub
            .expect(&format!("429 for over-{i}"), T, |m| m.topic == topic)
            .await;
        let answer = m.json();
        assert_eq!(answer["status"], 429, "{answer}");
        assert_eq!(answer["body"]["code"], "rate_limited", "{answer}");
    }
    let scrape_now: Scrape = scrape(&site.http, &site.base).await;
    assert_eq!(
        scrape_now.get("sitegate_mqtt_rpc_refused_total{outcome=\"answered\"}"),
        Some(over as f64)
    );
    wait_for("the request without an id counted", T, || async {
        let dropped = metric(
            &site,
            "sitegate_mqtt_rpc_refused_total{outcome=\"dropped\"}",
        )
        .await;
        (dropped == 1.0).then_some(())
    })
    .await;
    assert_eq!(
        metric(&site, "sitegate_mqtt_rpc_workload{state=\"queued\"}").await,
        RPC_QUEUE as f64
    );
    assert_eq!(
        metric(&site, "sitegate_mqtt_rpc_workload{state=\"running\"}").await,
        RPC_WORKERS as f64
    );
    // A task per request would add 128 (the queued ones are still held).
    // The uplink counts its own tasks; the runtime's count would also hold
    // the HTTP connections of this test's scrapes, which come and go.
    // A dedup prune (one at a time) may have started or ended in between.
    let during = site.agent.uplink().expect("the uplink").tasks();
    assert!(
        during.abs_diff(before) <= 1,
        "{} requests in the agent: the uplink had {before} tasks before, {during} now",
        RPC_WORKERS + RPC_QUEUE + over + 1
    );

    // Released, every queued request is answered, none of the refused ones.
    drop(release);
    let mut answered = std::collections::HashSet::new();
    while answered.len() < RPC_WORKERS + RPC_QUEUE {
        let m = sub
            .expect("the queued answers", T, |m| {
                m.topic.contains("/rpc/response/")
            })
            .await;
        let answer = m.json();
        let id = answer["id"].as_str().expect("id").to_string();
        assert!(!id.starts_with("over-"), "{id} answered twice");
        assert_eq!(answer["status"], 200, "{answer}");
        answered.insert(id);
    }
    wait_for("the workers idle", T, || async {
        let s = scrape(&site.http, &site.base).await;
        let idle = s.get("sitegate_mqtt_rpc_workload{state=\"running\"}") == Some(0.0)
            && s.get("sitegate_mqtt_rpc_workload{state=\"queued\"}") == Some(0.0)
            && s.get("sitegate_mqtt_rpc_queued_bytes") == Some(0.0);
        idle.then_some(())
    })
    .await;
    // A retry of a refused id is served as new.
    let answer = mqtt::rpc(&mut sub, series_request("over-0", start, end)).await;
    assert_eq!(answer["status"], 200, "{answer}");
}

/// Sends `GET path` on an open keep-alive connection and reads the answer:
/// its status line and body.
async fn get_on(conn: &mut TcpStream, path: &str) -> (String, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: sitegate\r\n\r\n");
    conn.write_all(request.as_bytes()).await.expect("write");
    read_response(conn).await
}

async fn read_response(conn: &mut TcpStream) -> (String, String) {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed before an answer");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .expect("content-length");
    while buf.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed inside the body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let status = head.lines().next().unwrap_or_default().to_string();
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
    (status, body)
}

/// The number of open HTTP connections, scraped on a connection of its own
/// (closed after: no pooled connection holds a slot).
async fn open_connections(base: &str) -> f64 {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    scrape(&client, base)
        .await
        .get("sitegate_http_connections")
        .expect("sitegate_http_connections")
}

/// A connection from the loopback address `127.0.0.{host}` (every 127/8
/// address reaches the agent on 127.0.0.1: the tests play many clients).
async fn connect_from(host: u8, addr: std::net::SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, host], 0)))
        .expect("bind a loopback source address");
    socket.connect(addr).await.expect("connect")
}

/// `HTTP_MAX_CONNECTIONS` connections, `HTTP_MAX_PER_CLIENT` from each of
/// the loopback addresses from 127.0.0.10 on, each having asked for `/healthz`.
async fn fill_the_slots(addr: std::net::SocketAddr) -> Vec<TcpStream> {
    let mut open = Vec::new();
    for i in 0..HTTP_MAX_CONNECTIONS {
        let host = 10 + (i / HTTP_MAX_PER_CLIENT) as u8;
        let mut conn = connect_from(host, addr).await;
        let (status, _) = get_on(&mut conn, "/healthz").await;
        assert!(status.contains(" 200 "), "{status}");
        open.push(conn);
    }
    open
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_connections_past_the_cap_get_the_reserve_then_wait_until_one_closes() {
    // Not `site.ready()`: its pooled connection would hold a slot.
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    let addr = site.agent.http_addrs()[0];
    wait_for("nothing but the scrape open", T, || async {
        (open_connections(&site.base).await == 1.0).then_some(())
    })
    .await;
    let mut open = fill_the_slots(addr).await;
    // Past the cap: the reserve answers health, readiness and metrics only,
    // one request per connection.
    for (path, answer) in [
        ("/healthz", " 200 "),
        ("/metrics", " 200 "),
        ("/devices", " 503 "),
    ] {
        let mut conn = connect_from(99, addr).await;
        let (status, body) = get_on(&mut conn, path).await;
        assert!(status.contains(answer), "{path}: {status}");
        if answer == " 503 " {
            assert!(body.contains("\"busy\""), "{body}");
        }
    }
    // Connections that say nothing yet hold the reserve.
    let mut reserve = Vec::new();
    for i in 0..HTTP_RESERVE_CONNECTIONS {
        reserve.push(connect_from(100 + i as u8, addr).await);
    }
    // Every slot and the reserve held, counted over one of them (the agent
    // accepts the reserve's connections as they come).
    let full = (HTTP_MAX_CONNECTIONS + HTTP_RESERVE_CONNECTIONS) as f64;
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let (_, metrics) = get_on(&mut open[0], "/metrics").await;
        let held = Scrape::parse(&metrics).get("sitegate_http_connections");
        if held == Some(full) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slots and the reserve held: {held:?} connections"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One more: the kernel completes the handshake, the agent does not take it.
    let mut extra = connect_from(120, addr).await;
    extra
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: sitegate\r\n\r\n")
        .await
        .expect("write");
    let (_, metrics) = get_on(&mut open[0], "/metrics").await;
    let scraped = Scrape::parse(&metrics);
    assert!(scraped.get("sitegate_http_connection_cap_reached_total") >= Some(1.0));
    assert!(scraped.get("sitegate_http_reserve_served_total") >= Some(3.0));
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(300), extra.peek(&mut byte)).await;
    assert!(
        early.is_err(),
        "a connection past the cap and the reserve was served"
    );
    // The agent took no connection past the cap and the reserve.
    assert_eq!(
        scraped.get("sitegate_http_connections"),
        Some(full),
        "past the cap and the reserve"
    );

    // One closes: the waiting one is accepted and answered.
    drop(open.pop());
    let (status, _) = tokio::time::timeout(T, read_response(&mut extra))
        .await
        .expect("answered once a slot is free");
    assert!(status.contains(" 200 "), "{status}");
    drop(open);
    drop(reserve);
    drop(extra);
    wait_for("the slots free again", T, || async {
        (open_connections(&site.base).await == 1.0).then_some(())
    })
    .await;
}

/// Slowloris: clients that send a request line and then a header byte now
/// and then. They cannot hold more than their share of the slots, they lose
/// their connection when the head is not in within its deadline, and a
/// normal request meanwhile answers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_cannot_starve_the_api() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let addr = site.agent.http_addrs()[0];
    // 5 addresses, 12 slow connections each: 8 each are taken, 4 each are
    // refused at once with 503 busy.
    let mut slow = Vec::new();
    let mut refused = 0;
    for host in 20..25u8 {
        for _ in 0..12 {
            let mut conn = connect_from(host, addr).await;
            conn.write_all(b"GET /devices HTTP/1.1\r\nHost: sitegate\r\nX-Slow: ")
                .await
                .expect("write");
            let mut buf = [0u8; 512];
            match tokio::time::timeout(Duration::from_millis(200), conn.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {
                    let answer = String::from_utf8_lossy(&buf[..n]);
                    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
                    assert!(answer.contains("\"busy\""), "{answer}");
                    refused += 1;
                }
                _ => slow.push(conn),
            }
        }
    }
    assert_eq!(refused, 5 * (12 - HTTP_MAX_PER_CLIENT));
    assert_eq!(slow.len(), 5 * HTTP_MAX_PER_CLIENT);
    // They trickle a byte a second; a normal client is served at once.
    let started = tokio::time::Instant::now();
    for _ in 0..3 {
        for c in &mut slow {
            let _ = c.write_all(b"x").await;
        }
        let t0 = tokio::time::Instant::now();
        site.get_ok("/devices").await;
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        // A byte a second, as a slow client sends it: 3 s of it stay well within the
        // head deadline (HEAD_TIMEOUT, 10 s), so the connections are held meanwhile.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The head deadline closes them, whatever they trickle.
    let mut closed = 0;
    while started.elapsed() < Duration::from_secs(20) && closed < slow.len() {
        closed = 0;
        for c in &mut slow {
            let _ = c.write_all(b"x").await;
            let mut buf = [0u8; 64];
            if let Ok(Ok(0) | Err(_)) =
                tokio::time::timeout(Duration::from_millis(5), c.read(&mut buf)).await
            {
                closed += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(closed, slow.len(), "slow clients kept their connections");
    let scraped = scrape(&site.http, &site.base).await;
    assert!(scraped.get("sitegate_http_head_timeouts_total") >= Some(slow.len() as f64));
    assert_eq!(
        scraped.get("sitegate_http_refused_total{reason=\"per_client\"}"),
        Some(refused as f64)
    );
}

/// A monitoring system behind the same address (a NAT) as a slow client:
/// while that address holds every one of its connections mid-head, a new one
/// from it is still served `/healthz`, `/readyz` and `/metrics` from the
/// reserve; anything else is answered 503 `busy` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_from_an_address_holding_all_its_connections() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let addr = site.agent.http_addrs()[0];
    let mut slow = Vec::new();
    for _ in 0..HTTP_MAX_PER_CLIENT {
        let mut conn = connect_from(45, addr).await;
        conn.write_all(b"GET /devices HTTP/1.1\r\nHost: sitegate\r\nX-Slow: ")
            .await
            .expect("write");
        slow.push(conn);
    }
    // Read by the server (a connection with nothing read yet counts as
    // between requests, and would give up its place).
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (path, answer) in [
        ("/healthz", " 200 "),
        ("/readyz", " 200 "),
        ("/metrics", " 200 "),
        ("/devices", " 503 "),
    ] {
        let mut conn = connect_from(45, addr).await;
        let (status, body) = tokio::time::timeout(T, get_on(&mut conn, path))
            .await
            .expect("answered");
        assert!(status.contains(answer), "{path}: {status} {body}");
        if answer == " 503 " {
            assert!(body.contains("\"busy\""), "{body}");
            assert!(
                body.contains("too many connections from your address"),
                "{body}"
            );
        }
    }
    // The request line may come in pieces, within the head deadline.
    let mut conn = connect_from(45, addr).await;
    for piece in [
        "GE",
        "T /hea",
        "lthz HTTP/1.1\r\nHost: s",
        "itegate\r\n\r\n",
    ] {
        conn.write_all(piece.as_bytes()).await.expect("write");
        // Apart in time, so that each piece reaches the agent's socket on its own.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _) = read_response(&mut conn).await;
    assert!(status.contains(" 200 "), "{status}");
    // The slow ones still hold their places.
    for c in &mut slow {
        let mut buf = [0u8; 16];
        let r = tokio::time::timeout(Duration::from_millis(5), c.read(&mut buf)).await;
        assert!(
            r.is_err(),
            "a slow connection was answered or closed: {r:?}"
        );
    }
    let scraped = scrape(&site.http, &site.base).await;
    assert_eq!(
        scraped.get("sitegate_http_refused_total{reason=\"per_client\"}"),
        Some(1.0)
    );
    assert!(scraped.get("sitegate_http_reserve_served_total") >= Some(4.0));
}

/// A browser keeps connections open between requests. Past its share, a new
/// connection takes the place of its longest-idle one (which closes), and is
/// served; a connection in the middle of a request keeps its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_takes_the_place_of_an_idle_one_from_its_address() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let addr = site.agent.http_addrs()[0];
    // One mid-head (busy), then the rest served and left open, oldest first.
    let mut busy = connect_from(40, addr).await;
    busy.write_all(b"GET /healthz HTTP/1.1\r\nHost: sitegate\r\n")
        .await
        .expect("write");
    let mut idle = Vec::new();
    for _ in 1..HTTP_MAX_PER_CLIENT {
        let mut conn = connect_from(40, addr).await;
        let (status, _) = get_on(&mut conn, "/healthz").await;
        assert!(status.contains(" 200 "), "{status}");
        idle.push(conn);
        // Each idle from a millisecond of its own (the agent keeps when a connection
        // last moved in whole ms), so that the oldest is the first to give way.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for round in 0..2 {
        let mut next = connect_from(40, addr).await;
        let (status, _) = get_on(&mut next, "/healthz").await;
        assert!(status.contains(" 200 "), "round {round}: {status}");
        // The longest-idle one was closed to make room.
        let mut buf = [0u8; 16];
        let oldest = tokio::time::timeout(T, idle[round].read(&mut buf)).await;
        assert!(
            matches!(oldest, Ok(Ok(0) | Err(_))),
            "round {round}: the longest-idle connection stays open: {oldest:?}"
        );
        idle.push(next);
    }
    // The busy one kept its place: its request completes.
    busy.write_all(b"\r\n").await.expect("write");
    let (status, _) = read_response(&mut busy).await;
    assert!(status.contains(" 200 "), "{status}");
    // The newest idle ones are still served on their connections.
    let (status, _) = get_on(idle.last_mut().expect("one"), "/healthz").await;
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(metric(&site, "sitegate_http_reclaimed_total").await, 2.0);
    assert_eq!(
        metric(&site, "sitegate_http_refused_total{reason=\"per_client\"}").await,
        0.0
    );
}

/// Request heads hyper refuses before any route sees them answer
/// problem+json like every other error: a raw byte the request line does not
/// allow, a target over 64 KiB, a 1 MB header, more than 100 headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_heads_refused_before_routing_answer_problem_json() {
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    site.ready().await;
    let addr = site.agent.http_addrs()[0];
    let many_headers: String = (0..101).map(|i| format!("X-H{i}: v\r\n")).collect();
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "a raw 0xFF in the query",
            b"GET /devices?x=\xff HTTP/1.1\r\nHost: sitegate\r\n\r\n".to_vec(),
            "400",
            "bad_request",
        ),
        (
            "a 70 KiB target",
            format!(
                "GET /devices?x={} HTTP/1.1\r\nHost: sitegate\r\n\r\n",
                "a".repeat(70_000)
            )
            .into_bytes(),
            "414",
            "uri_too_long",
        ),
        (
            "a 1 MB header",
            format!(
                "GET /devices HTTP/1.1\r\nHost: sitegate\r\nX-Big: {}\r\n\r\n",
                "a".repeat(1 << 20)
            )
            .into_bytes(),
            "431",
            "headers_too_large",
        ),
        (
            "101 headers",
            format!("GET /devices HTTP/1.1\r\nHost: sitegate\r\n{many_headers}\r\n").into_bytes(),
            "431",
            "headers_too_large",
        ),
    ];
    for (what, request, status, code) in cases {
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        // The agent may answer and close before it has read the whole of a
        // large head: a failed write is part of the case.
        let _ = conn.write_all(&request).await;
        let (line, body) = read_response(&mut conn).await;
        assert!(line.contains(&format!(" {status} ")), "{what}: {line}");
        let v: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"));
        assert_eq!(v["code"], code, "{what}: {v}");
        assert_eq!(v["status"].as_u64(), status.parse().ok(), "{what}: {v}");
        assert!(
            v["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{what}: {v}"
        );
    }
    let scraped = scrape(&site.http, &site.base).await;
    assert_eq!(
        scraped.get("sitegate_http_bad_heads_total{status=\"400\"}"),
        Some(1.0)
    );
    assert_eq!(
        scraped.get("sitegate_http_bad_heads_total{status=\"414\"}"),
        Some(1.0)
    );
    assert_eq!(
        scraped.get("sitegate_http_bad_heads_total{status=\"431\"}"),
        Some(2.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_to_free_its_slot() {
    // A request time limit of 500 ms: connections silent for 1 s are closed.
    let text = TestSite::small().http_key("request_timeout_ms", 500).text();
    assert!(text.contains("request_timeout_ms = 500"));
    let site = site::start(&text, 60.0, SUMMER_MORNING_MS).await;
    let addr = site.agent.http_addrs()[0];
    // One never says anything; one asks once and keeps the connection alive.
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let mut kept = TcpStream::connect(addr).await.expect("connect");
    let (status, _) = get_on(&mut kept, "/healthz").await;
    assert!(status.contains(" 200 "), "{status}");
    for (name, conn) in [("silent", &mut silent), ("kept alive", &mut kept)] {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(T, conn.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("the {name} connection was never closed"));
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "the {name} connection got bytes: {read:?}"
        );
    }
    let client = reqwest::Client::new();
    let scraped = scrape(&client, &site.base).await;
    assert!(
        scraped.get("sitegate_http_idle_closed_total") >= Some(2.0),
        "{:?}",
        scraped.get("sitegate_http_idle_closed_total")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_idle_for_10_s_is_closed() {
    // The wait for the next request's head is held to the head's 10 s
    // (`http_server::HEAD_TIMEOUT`), well before the silence rule's 60 s:
    // clients' pools must drop idle connections sooner (`common::http_client`).
    let site = site::start(&TestSite::small().text(), 60.0, SUMMER_MORNING_MS).await;
    let mut kept = TcpStream::connect(site.agent.http_addrs()[0])
        .await
        .expect("connect");
    let (status, _) = get_on(&mut kept, "/healthz").await;
    assert!(status.contains(" 200 "), "{status}");
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_secs(8), kept.read(&mut buf)).await;
    assert!(early.is_err(), "closed or answered within 8 s: {early:?}");
    let read = tokio::time::timeout(Duration::from_secs(7), kept.read(&mut buf))
        .await
        .expect("the idle connection is closed by 15 s");
    assert!(matches!(read, Ok(0) | Err(_)), "bytes: {read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bus_waiting_for_the_store_still_serves_commands() {
    let mut config = TestSite::small().config();
    let spec = SimSiteSpec::from_config(&config, 60.0);
    let sim = SimSite::start(spec).await.expect("simulator");
    sim.point_config_at_servers(&mut config);
    let bus = config.buses[0].clone();
    let devices: Vec<_> = config.devices_on_bus(&bus.name).cloned().collect();
    let unit = devices[0].unit_id;
    // A store that takes one batch and then none: the queue stays full.
    let (store, mut stalled) = tokio::sync::mpsc::channel(1);
    let live = Arc::new(Live::new(&config.devices));
    let telemetry = Telemetry::new(live, Some(store));
    let maps = Arc::new(DeviceMaps::new(config.devices.len()));
    let (task, handle) = BusTask::new(&bus, devices, config.polling.clone(), telemetry, maps);
    let cancel = CancellationToken::new();
    let running = tokio::spawn(task.run(cancel.clone()));

    wait_for("the bus waiting for the store", T, || async {
        handle
            .stats()
            .waiting_for_store
            .load(Ordering::Relaxed)
            .then_some(())
    })
    .await;
    let before = tasks();
    // Commands are served while it waits: the SunSpec marker, read twice.
    let marker = Span {
        table: Table::Holding,
        addr: 40000,
        len: 2,
    };
    for _ in 0..2 {
        let out = handle
            .transact(unit, vec![Op::Read(marker)])
            .await
            .expect("a command served while the store is full");
        assert_eq!(out, [OpOutput::Words(vec![0x5375, 0x6e53])]);
    }
    assert!(handle.stats().waiting_for_store.load(Ordering::Relaxed));
    assert_eq!(handle.queued(), 0);
    assert!(tasks() <= before + 2);

    // Room again: the waiting batch goes on, then the next poll's.
    assert!(stalled.recv().await.is_some());
    assert!(stalled.recv().await.is_some());
    cancel.cancel();
    drop(stalled);
    running.await.expect("bus task");
}
