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
