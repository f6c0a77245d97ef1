//! `sitegate run` as systemd runs it (`Type=notify`, `WatchdogSec=`): the test
//! plays systemd's side of the notify socket, starts the binary on a config file
//! against the simulated site, and checks READY only once the API answers,
//! watchdog pings, SIGHUP re-reading tokens (RELOADING, then READY again), and
//! SIGTERM during ingest: STOPPING, exit 0, and every sample and steering
//! request the API had acknowledged is in the database afterwards.

use std::collections::BTreeSet;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tokio::time::Instant;

use crate::common::process::{start_sim, AgentProcess};
use crate::common::site::{READ_TOKEN, STEER_TOKEN};
use crate::steering_support::TestSite;
use nix::sys::signal::Signal;
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};
use sitegate::api::hash_token;
use sitegate::model::time::now_ms;

/// The token the reloaded config accepts instead of [`READ_TOKEN`].
const NEW_READ_TOKEN: &str = "sgt_test_reader_after_reload";

/// systemd's end of `NOTIFY_SOCKET`.
struct NotifySocket(UnixDatagram);

impl NotifySocket {
    fn bind(path: &Path) -> Self {
        let s = UnixDatagram::bind(path).expect("bind notify socket");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("read timeout");
        Self(s)
    }

    /// Waits for a datagram holding the line `want`; returns the whole datagram.
    fn expect(&self, want: &str, within: Duration) -> String {
        self.expect_where(&format!("{want:?}"), within, |m| {
            m.lines().any(|l| l == want)
        })
    }

    /// Waits for a datagram containing `part`; returns the whole datagram.
    fn expect_containing(&self, part: &str, within: Duration) -> String {
        self.expect_where(&format!("something with {part:?}"), within, |m| {
            m.contains(part)
        })
    }

    fn expect_where(&self, what: &str, within: Duration, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.0.recv(&mut buf) {
                let msg = String::from_utf8_lossy(&buf[..n]).to_string();
                if ok(&msg) {
                    return msg;
                }
                seen.push(msg);
            }
        }
        panic!("no {what} within {within:?}; got {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_service_reloads_on_sighup_and_loses_nothing_acknowledged_on_sigterm() {
    let sim = start_sim(&TestSite::small().text()).await;
    // A long flush interval: at SIGTERM, samples are waiting in memory.
    let config = TestSite::small()
        .section_key(&["storage"], "flush_interval_ms", 10_000)
        .section_key(&["logging"], "level", "info")
        .write_for(&sim);
    let file = config.file.clone();
    let db = config.db();
    let notify = NotifySocket::bind(&config.dir.path().join("notify.sock"));
    // As systemd does, WATCHDOG_PID names the service's own process: `exec`
    // keeps the shell's pid.
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "WATCHDOG_PID=$$ exec \"$0\" run --config \"$1\"",
        env!("CARGO_BIN_EXE_sitegate"),
    ])
    .arg(&file)
    .env("NOTIFY_SOCKET", config.dir.path().join("notify.sock"))
    .env("WATCHDOG_USEC", "1000000");
    let mut agent = AgentProcess::run(config, cmd);

    // READY comes once the listener serves: the very first request succeeds.
    let ready = notify.expect("READY=1", Duration::from_secs(20));
    assert!(ready.contains("STATUS=serving 3 devices"), "{ready}");
    let addr = ready
        .split("API on ")
        .nth(1)
        .expect("status names the API address")
        .trim()
        .to_string();
    let base = format!("http://{addr}");
    let http = crate::common::http_client()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let health = http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .expect("serving at READY");
    assert_eq!(health.status(), StatusCode::OK);

    // The watchdog is fed while the main loops run (WATCHDOG_USEC = 1 s).
    for _ in 0..2 {
        notify.expect("WATCHDOG=1", Duration::from_secs(5));
    }

    // SIGHUP: the reader token is replaced by another one, the level goes to debug.
    let text = std::fs::read_to_string(&file).expect("config");
    let reader_hash = hex::encode(hash_token(READ_TOKEN));
    assert!(text.contains(&reader_hash));
    let reloaded = text
        .replace(&reader_hash, &hex::encode(hash_token(NEW_READ_TOKEN)))
        .replace("level = \"info\"", "level = \"debug\"");
    std::fs::write(&file, reloaded).expect("write");
    let get_devices = |token: &'static str| {
        let req = http.get(format!("{base}/devices")).bearer_auth(token);
        async move { req.send().await.expect("request").status() }
    };
    assert_eq!(get_devices(READ_TOKEN).await, StatusCode::OK);
    agent.signal(Signal::SIGHUP);
    notify.expect("RELOADING=1", Duration::from_secs(10));
    notify.expect("READY=1", Duration::from_secs(10));
    assert_eq!(get_devices(READ_TOKEN).await, StatusCode::UNAUTHORIZED);
    assert_eq!(get_devices(NEW_READ_TOKEN).await, StatusCode::OK);
    assert_eq!(get_devices(STEER_TOKEN).await, StatusCode::OK);

    // Acknowledged work: a steering request (200) and samples the API served.
    let steer = http
        .post(format!("{base}/sites/ste_test/steering/ess"))
        .bearer_auth(STEER_TOKEN)
        .json(&json!({"setting": {"value": 1, "unit": "kW"}, "validUntil": now_ms() + 600_000}))
        .send()
        .await
        .expect("steering POST");
    assert_eq!(steer.status(), StatusCode::OK);
    let request_id = steer.json::<Value>().await.expect("body")["requestId"]
        .as_str()
        .expect("requestId")
        .to_string();
    let mut served = BTreeSet::new();
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        for (device, property) in [
            ("dvc_pv", "activePower"),
            ("dvc_bat", "soc"),
            ("dvc_grid", "activePower"),
        ] {
            let r = http
                .get(format!(
                    "{base}/devices/{device}/measurement?property={property}"
                ))
                .bearer_auth(STEER_TOKEN)
                .send()
                .await
                .expect("GET measurement");
            if r.status() == StatusCode::OK {
                let b: Value = r.json().await.expect("body");
                let ts = b["timestamp"].as_i64().expect("timestamp");
                served.insert((device, property, ts, b["value"].to_string()));
            }
        }
        // Rounds 100 ms apart over 1.5 s of the agent's polls (every 200 ms): several
        // samples of each device served, each to be found in the store after SIGTERM.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served.len() >= 6, "served {served:?}");

    // SIGTERM in the middle of ingest (the flush interval has not passed).
    agent.signal(Signal::SIGTERM);
    notify.expect("STOPPING=1", Duration::from_secs(10));
    let status = agent.exited(Duration::from_secs(20)).await;
    let log = agent.log();
    assert!(status.success(), "exit status {status}:\n{log}");
    assert!(log.contains("SIGHUP: reloaded"), "{log}");
    assert!(log.contains("level=debug"), "{log}");
    // Debug lines appear only after the reload switched the level.
    let reload_at = log.find("SIGHUP: reloaded").unwrap_or(0);
    assert!(!log[..reload_at].contains("setpoint written"), "{log}");
    assert!(
        log[reload_at..].contains("setpoint written and confirmed"),
        "{log}"
    );
    assert!(log.contains("SIGTERM: shutting down"), "{log}");

    let db = rusqlite::Connection::open(&db).expect("open db");
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    let all = sitegate::store::stored_samples(&db, None).expect("stored samples");
    for (device, property, ts, value) in &served {
        let stored: Vec<f64> = all
            .iter()
            .filter(|s| s.device == *device && s.property.name() == *property && s.ts_ms == *ts)
            .map(|s| s.value)
            .collect();
        assert_eq!(
            stored.len(),
            1,
            "{device} {property} at {ts} (served {value}) is not stored once"
        );
        let served_value: f64 = value.parse().expect("number");
        assert!(
            (stored[0] - served_value).abs() < 1e-9,
            "{device} {property} {ts}"
        );
    }
    let steering_rows: i64 = db
        .query_row(
            "SELECT count(*) FROM steering_timeline WHERE request_id = ?1",
            [&request_id],
            |r| r.get(0),
        )
        .expect("timeline");
    assert_eq!(
        steering_rows, 1,
        "the acknowledged steering request is stored"
    );
    sim.shutdown().await;
}

/// A start that fails for a reason a restart may cure (its port is taken)
/// exits 1, and after failures in a row waits longer before exiting (counted
/// in `$STATE_DIRECTORY`, said on the notify socket); the start that reaches
/// READY clears the count. A database written by a newer version is left
/// alone: the agent runs on a temporary store (in `$RUNTIME_DIRECTORY`) and
/// says why on `/readyz`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_starts_exit_with_codes_systemd_acts_on_and_wait_longer_in_a_row() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let port = held.local_addr().expect("addr").port();
    let site = || TestSite::small().http_key("listen", vec![format!("127.0.0.1:{port}")]);
    let site_text = site().text();
    assert!(site_text.contains(&format!(":{port}\"")));
    let sim = start_sim(&site_text).await;
    let config = site().write_for(&sim);
    let state = tempfile::tempdir().expect("state dir");
    let count = state.path().join("start-failures");
    let socket = config.dir.path().join("notify.sock");
    let notify = NotifySocket::bind(&socket);
    let run = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sitegate"));
        cmd.arg("run")
            .arg("--config")
            .arg(&config.file)
            .env("STATE_DIRECTORY", state.path())
            .env("NOTIFY_SOCKET", &socket)
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd
    };
    // First failure: at once; second: waits 2 s and says so.
    let status = run().status().expect("runs");
    assert_eq!(status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&count).expect("count").trim(), "1");
    let mut second = run().spawn().expect("runs");
    let said = notify.expect_containing("exiting in 2 s", Duration::from_secs(20));
    assert!(said.contains("2 in a row"), "{said}");
    assert_eq!(second.wait().expect("exits").code(), Some(1));
    assert_eq!(std::fs::read_to_string(&count).expect("count").trim(), "2");
    // The port is free: the start reaches READY and clears the count.
    drop(held);
    let mut third = run().spawn().expect("runs");
    notify.expect("READY=1", Duration::from_secs(20));
    assert!(!count.exists(), "the count survived a good start");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(third.id()).expect("pid")),
        Signal::SIGTERM,
    )
    .expect("SIGTERM");
    assert_eq!(third.wait().expect("exits").code(), Some(0));

    // The database now records a migration this version does not know.
    let conn = rusqlite::Connection::open(config.db()).expect("db");
    conn.execute(
        "INSERT INTO schema_migrations (id, applied_at) VALUES ('9999_from_the_future', 0)",
        [],
    )
    .expect("insert");
    drop(conn);
    let runtime = tempfile::tempdir().expect("runtime dir");
    let mut fourth = run()
        .env("RUNTIME_DIRECTORY", runtime.path())
        .spawn()
        .expect("runs");
    notify.expect("READY=1", Duration::from_secs(20));
    assert!(runtime.path().join("temporary.db").exists());
    // Ready (degraded) once every device is polled.
    let mut ready = serde_json::Value::Null;
    for _ in 0..100 {
        ready = Client::new()
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
            .expect("readyz answers")
            .json()
            .await
            .expect("json");
        if ready["status"] == "degraded" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ready["status"], "degraded", "{ready}");
    let said = ready["degraded"].to_string();
    assert!(said.contains("temporary store"), "{ready}");
    assert!(said.contains("newer version"), "{ready}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(fourth.id()).expect("pid")),
        Signal::SIGTERM,
    )
    .expect("SIGTERM");
    assert_eq!(fourth.wait().expect("exits").code(), Some(0));
    assert!(!runtime.path().join("temporary.db").exists());
    assert!(
        !count.exists(),
        "a start on a temporary store is not a failure"
    );
    // The newer database is untouched.
    let conn = rusqlite::Connection::open(config.db()).expect("db");
    let future: i64 = conn
        .query_row(
            "SELECT count(*) FROM schema_migrations WHERE id = '9999_from_the_future'",
            [],
            |r| r.get(0),
        )
        .expect("migrations");
    assert_eq!(future, 1);
}
