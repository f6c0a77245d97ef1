//! Shared helpers for the integration tests: a simulated site with the agent on
//! it (in process, or the agent binary as a child), an HTTP client, MQTT brokers
//! (plain and TLS) with a recording subscriber, the agent's captured log, and
//! waiting for conditions instead of sleeping.
#![allow(dead_code)]

pub mod broker;
pub mod csip_server;
pub mod demo;
pub mod eebus_box;
pub mod farm;
pub mod logs;
pub mod mqtt;
pub mod process;
pub mod prom;
pub mod proxy;
pub mod site;
pub mod steer;
pub mod tls;
pub mod webdriver;

use std::future::Future;
use std::time::Duration;

/// Whether the environment requires what `SITEGATE_REQUIRE_<what>` names
/// (a browser, mosquitto, a tmpfs, libfaketime): set to `1`, a test that
/// cannot find it fails instead of skipping with a notice. Any other value,
/// or none, lets it skip; every gate reads the same rule.
pub fn required(what: &str) -> bool {
    std::env::var(format!("SITEGATE_REQUIRE_{what}")).is_ok_and(|v| v == "1")
}

/// Where the program `name` is installed, looked up in the system's binary
/// folders (a test's `PATH` may leave out the `sbin` ones that Debian's
/// mosquitto uses); `None` when it is not installed.
pub fn installed(name: &str) -> Option<std::path::PathBuf> {
    ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
        .iter()
        .map(|dir| std::path::Path::new(dir).join(name))
        .find(|p| p.is_file())
}

/// A free loopback port, for a peer that cannot report the port it took for
/// port 0 (a child process, a broker binary, a guide's shell).
///
/// It is chosen below the kernel's ephemeral range, which the suite's own
/// outgoing connections draw their source ports from by the hundred: a port
/// of that range, released, was now and then taken by one of them before its
/// peer bound it (mosquitto: "Address already in use"). Below it only a
/// caller of this function could take the port, and each port is handed out
/// once per run. Where the ephemeral range starts too low to leave room, the
/// kernel's choice for port 0 serves as before.
pub fn free_port() -> std::net::SocketAddr {
    use std::sync::atomic::{AtomicU32, Ordering};
    /// Ports from here up to the ephemeral range's start.
    const FIRST: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let bind =
        |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).and_then(|l| l.local_addr());
    let span = ephemeral_start().saturating_sub(FIRST);
    if span < 1_000 {
        return bind(0).expect("a free loopback port");
    }
    // A start of this process's own, so that two runs at once seldom meet.
    let offset = std::process::id().wrapping_mul(7_919) % span;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(
            n < span,
            "no free loopback port left below the ephemeral range"
        );
        let port = u16::try_from(FIRST + (offset + n) % span).expect("below 65536");
        if let Ok(addr) = bind(port) {
            return addr;
        }
    }
}

/// The first port of the kernel's ephemeral range (Linux's default 32768
/// where it cannot be read).
fn ephemeral_start() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// The holding registers of a simulated device at each `(address, count)`
/// span, one after the other.
pub fn words(dev: &sitegate::sim::SimDeviceHandle, spans: &[(u16, u16)]) -> Vec<u16> {
    spans
        .iter()
        .flat_map(|&(addr, n)| dev.registers(addr, n))
        .collect()
}

/// An HTTP client for the agent's API. The agent closes a connection idle
/// for 10 s between requests (it waits that long for the next request's
/// head, `http_server::HEAD_TIMEOUT`); a pooled connection reused at that
/// moment is reset under the request, so a client drops its idle ones
/// sooner, as any client of the agent should (docs/operations.md, "Limits
/// on the API").
pub fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder().pool_idle_timeout(Duration::from_secs(5))
}

/// Polls `check` until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A response's status and JSON body (`Value::Null` when empty); panics naming
/// `what` when the body is not JSON.
pub async fn status_and_json(
    resp: reqwest::Response,
    what: &str,
) -> (reqwest::StatusCode, serde_json::Value) {
    let status = resp.status();
    let text = resp.text().await.expect("body");
    let body = if text.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{what}: body is not JSON ({e}): {text}"))
    };
    (status, body)
}
