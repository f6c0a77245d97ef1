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

/// A free loopback port: bound, read and released (for a peer that cannot
/// report the port it took for port 0); the window for a clash is tiny.
pub fn free_port() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
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
