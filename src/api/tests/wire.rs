//! The router served on a real socket, as the agent serves it.

use axum::http::header::ALLOW;

use super::*;

#[tokio::test]
async fn serves_over_tcp() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(state_with("tokens"));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let base = format!("http://{addr}");
    let client = reqwest::Client::new();

    let res = client
        .get(format!("{base}/devices/dvc_bat1/measurement?property=soc"))
        .bearer_auth(READ)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["value"], 65);

    let res = client.get(format!("{base}/devices")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers()["content-type"], PROBLEM_JSON);

    let res = client
        .delete(format!("{base}/devices"))
        .bearer_auth(READ)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert!(res.headers()[ALLOW.as_str()]
        .to_str()
        .unwrap()
        .contains("GET"));
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "method_not_allowed");

    server.abort();
}

/// An oversized body is answered 413 every time, whether its length is declared
/// or it arrives chunked, and the client reads the answer (it is not reset while
/// it still sends).
#[tokio::test]
async fn oversized_bodies_get_413_not_a_reset() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(state_with("tokens"));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("http://{addr}/devices/dvc_bat1/measurements/time-series");
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(300_000));
    let client = reqwest::Client::new();
    for _ in 0..20 {
        let res = client
            .post(&url)
            .bearer_auth(READ)
            .header("content-type", "application/json")
            .body(big.clone())
            .send()
            .await
            .expect("an answer, not a reset");
        assert_eq!(res.status(), 413);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["code"], "payload_too_large");
    }

    // Chunked, with no declared length: the limit is found while reading.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /devices/dvc_bat1/measurements/time-series HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {READ}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for chunk in big.as_bytes().chunks(16_384) {
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
        stream.write_all(&framed).await.unwrap();
    }
    stream.write_all(b"0\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");

    server.abort();
}
