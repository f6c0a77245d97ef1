//! The API's protective limits over HTTP: the per-token rate limit (429
//! `rate_limited` with `Retry-After`, one bucket per token, operational
//! endpoints exempt) and the request time limit (503 `timeout` for a client
//! that sends its body too slowly).

use std::time::Duration;

use crate::common::site::{self, READ_TOKEN, STEER_TOKEN, SUMMER_MORNING_MS};
use crate::steering_support::{table, TestSite};
use reqwest::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_over_its_rate_gets_429_with_retry_after() {
    let text = TestSite::small()
        .http_key(
            "rate_limit",
            table([("requests_per_s", 2.into()), ("burst", 3.into())]),
        )
        .text();
    let site = site::start(&text, 60.0, SUMMER_MORNING_MS).await;
    let path = format!("{}/devices", site.base);
    let get = |token: &'static str| {
        let req = site.http.get(&path).bearer_auth(token);
        async move { req.send().await.expect("request") }
    };
    for i in 0..3 {
        assert_eq!(
            get(READ_TOKEN).await.status(),
            StatusCode::OK,
            "request {i}"
        );
    }
    let refused = get(READ_TOKEN).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let body: serde_json::Value = refused.json().await.expect("problem body");
    assert_eq!(body["code"], "rate_limited");
    assert_eq!(body["status"], 429);
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("\"reader\""), "{detail}");

    // Another token has its own bucket; operational endpoints have none.
    assert_eq!(get(STEER_TOKEN).await.status(), StatusCode::OK);
    for _ in 0..10 {
        let (s, _) = site.call(Method::GET, "/healthz", None, None).await;
        assert_eq!(s, StatusCode::OK);
        crate::common::prom::scrape(&site.http, &site.base).await;
    }

    // After Retry-After the token may go on: its bucket refills by the real clock
    // (2 requests a second); 1.1 s is the Retry-After of 1 s and 100 ms to spare.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(get(READ_TOKEN).await.status(), StatusCode::OK);
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_time_limit_gets_503_timeout() {
    let text = TestSite::small().http_key("request_timeout_ms", 300).text();
    let site = site::start(&text, 60.0, SUMMER_MORNING_MS).await;
    let addr = site.agent.http_addrs()[0];

    // Announce a 100-byte body, send 10 bytes, and stall.
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /sites/ste_test/steering/ess HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: Bearer {STEER_TOKEN}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\nConnection: close\r\n\r\n{{\"setting\""
    );
    conn.write_all(head.as_bytes()).await.expect("write");
    // Read the answer (the server need not close: the body it waits for never
    // comes, so read until the problem body is complete).
    let mut raw = Vec::new();
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            let n = conn.read(&mut buf).await.expect("read");
            raw.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&raw).to_string();
            if n == 0 || text.trim_end().ends_with('}') {
                return text;
            }
        }
    })
    .await
    .expect("answered before the client gave up");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");
    assert!(answer.contains("\"code\":\"timeout\""), "{answer}");
    assert!(answer.contains("http.request_timeout_ms"), "{answer}");

    // Nothing was applied, and the agent serves on.
    let state = site.get_ok("/sites/ste_test/steering").await;
    assert!(state["energyStorageSetting"].is_null(), "{state}");
    site.stop().await;
}
