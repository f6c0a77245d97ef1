//! Shared helpers for the integration tests: a simulated site with the agent on
//! it (in process, or the agent binary as a child), an HTTP client, MQTT brokers
//! (plain and TLS) with a recording subscriber, the agent's captured log, and
//! waiting for conditions instead of sleeping.
#![allow(dead_code)]

pub mod broker;
pub mod demo;
pub mod logs;
pub mod mqtt;
pub mod process;
pub mod prom;
pub mod site;
pub mod steer;
pub mod tls;
pub mod webdriver;

use std::future::Future;
use std::time::Duration;

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
