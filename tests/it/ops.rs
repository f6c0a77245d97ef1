//! The operations channel end to end, on every broker: the `logs` and
//! `bundle` operations within their bounds (the bundle's chunks on
//! `{root}/ops/bundle/{id}` add up to its text and hash, and hold no secret);
//! every state on `{root}/ops/state/{id}`; a repeated id answered with the
//! existing operation and run once; permissions (a `read` or `steer` token
//! cannot operate, `admin` cannot read device data, the RPC channel refuses
//! `/admin`, the ops channel serves nothing else); a bus re-scan proposing
//! config blocks; and a restart: `sitegate run` exits 75 for systemd, and
//! the same id after the restart restarts nothing; `sitegate diag` writes the
//! running agent's bundle to a file.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sitegate::api::hash_token;

use crate::common::broker::{kinds, Broker, Kind, Subscriber};
use crate::common::free_port;
use crate::common::mqtt::{self, mqtt_section, plain_url, rpc, site_config, ROOT};
use crate::common::process::{sitegate, start_sim, succeeded, AgentProcess, ConfigDir};
use crate::common::site::{ADMIN_TOKEN, READ_TOKEN, STEER_TOKEN};
use crate::steering_support::TestSite;

const T: Duration = Duration::from_secs(20);

/// Publishes an ops-channel request and waits for its answer on
/// `{ROOT}/ops/response/{id}`.
async fn ops(sub: &mut Subscriber, request: Value) -> Value {
    let id = request["id"].as_str().expect("id").to_string();
    let topic = format!("{ROOT}/ops/response/{id}");
    sub.request(&format!("{ROOT}/ops/request"), &request, None)
        .await;
    let m = sub
        .expect(&format!("ops answer to {id}"), T, |m| m.topic == topic)
        .await;
    m.json()
}

fn start(id: &str, body: Value) -> Value {
    json!({"id": id, "method": "POST", "path": "/admin/operations", "body": body})
}

/// The states published for operation `id` so far, waiting until it ended.
async fn states_until_final(sub: &mut Subscriber, id: &str) -> (Vec<String>, Value) {
    let topic = format!("{ROOT}/ops/state/{id}");
    let mut states: Vec<String> = sub
        .seen
        .iter()
        .filter(|m| m.topic == topic)
        .map(|m| m.json()["state"].as_str().unwrap_or("").to_string())
        .collect();
    if let Some(last) = sub.seen.iter().rev().find(|m| m.topic == topic) {
        let v = last.json();
        if matches!(v["state"].as_str(), Some("succeeded" | "failed")) {
            return (states, v);
        }
    }
    loop {
        let m = sub
            .expect(&format!("state of {id}"), T, |m| m.topic == topic)
            .await;
        let v = m.json();
        states.push(v["state"].as_str().unwrap_or("").to_string());
        if matches!(v["state"].as_str(), Some("succeeded" | "failed")) {
            return (states, v);
        }
    }
}

async fn operations_over_the_ops_channel(kind: Kind) {
    let _logs = crate::common::logs::capture();
    let broker = Broker::start(kind).await;
    let mut sub =
        Subscriber::connect(broker.addr("5"), "ops-client", &format!("{ROOT}/ops/#")).await;
    sub.client
        .subscribe(
            format!("{ROOT}/rpc/response/#"),
            rumqttc::v5::mqttbytes::QoS::AtLeastOnce,
        )
        .await
        .expect("subscribe");
    let text = site_config(&mqtt_section(&plain_url(broker.addr("5")), "5", ""), 200);
    let site = mqtt::start(&text).await;
    site.ready().await;
    mqtt::wait_connected(&site, true, T).await;

    // Logs: within the count and the size asked for, every state published.
    let a = ops(
        &mut sub,
        start(
            "logs-1",
            json!({"kind": "logs", "args": {"lines": 5, "level": "info", "maxBytes": 600}}),
        ),
    )
    .await;
    assert_eq!(a["status"], 202, "{a}");
    let (states, done) = states_until_final(&mut sub, "logs-1").await;
    assert_eq!(states, ["accepted", "running", "succeeded"], "{done}");
    assert_eq!(
        done["source"],
        json!({"transport": "mqtt", "caller": "mqtt"})
    );
    let lines = done["result"]["lines"].as_array().expect("lines").clone();
    assert!(!lines.is_empty() && lines.len() <= 5, "{done}");
    let bytes: usize = lines
        .iter()
        .map(|l| l["text"].as_str().map_or(0, str::len) + l["target"].as_str().map_or(0, str::len))
        .sum();
    assert!(bytes <= 600, "{bytes} bytes: {done}");
    assert!(lines
        .iter()
        .all(|l| ["info", "warn", "error"].contains(&l["level"].as_str().unwrap_or(""))));
    assert_eq!(done["result"]["truncated"], true, "{done}");
    // Warnings only: nothing below.
    let warn = ops(
        &mut sub,
        start(
            "logs-warn",
            json!({"kind": "logs", "args": {"level": "warn"}}),
        ),
    )
    .await;
    let lines = warn["body"]["result"]["lines"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        lines
            .iter()
            .all(|l| ["warn", "error"].contains(&l["level"].as_str().unwrap_or(""))),
        "{warn}"
    );

    // The same id again: the operation it names, not run again; other
    // arguments under it are refused.
    let again = ops(
        &mut sub,
        start(
            "logs-1",
            json!({"kind": "logs", "args": {"lines": 5, "level": "info", "maxBytes": 600}}),
        ),
    )
    .await;
    assert_eq!(again["status"], 200, "{again}");
    assert_eq!(again["body"]["acceptedAt"], done["acceptedAt"]);
    assert_eq!(again["body"]["result"], done["result"]);
    let reused = ops(
        &mut sub,
        start("logs-1", json!({"kind": "logs", "args": {"lines": 6}})),
    )
    .await;
    assert_eq!(reused["status"], 422, "{reused}");
    assert_eq!(reused["body"]["code"], "idempotency_key_reused");
    assert_eq!(reused["body"]["field"], "id");
    let history = ops(
        &mut sub,
        json!({"id": "hist-1", "method": "GET", "path": "/admin/operations?limit=1000"}),
    )
    .await;
    let ids: Vec<&str> = history["body"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|o| o["id"].as_str())
        .collect();
    assert_eq!(ids.iter().filter(|i| **i == "logs-1").count(), 1, "{ids:?}");
    let entry = history["body"]
        .as_array()
        .and_then(|h| h.iter().find(|o| o["id"] == "logs-1"))
        .expect("logs-1 in the history");
    assert_eq!(entry["source"]["transport"], "mqtt");
    assert_eq!(entry["state"], "succeeded");

    // A bundle: chunks on the bundle topic that add up to its text and hash,
    // within the bound, naming the config's hash and holding no token hash.
    let a = ops(&mut sub, start("bundle-1", json!({"kind": "bundle"}))).await;
    assert!(
        [200, 202].contains(&a["status"].as_u64().unwrap_or(0)),
        "{a}"
    );
    let (_, done) = states_until_final(&mut sub, "bundle-1").await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let count = done["result"]["chunks"].as_u64().expect("chunks") as usize;
    let bundle_topic = format!("{ROOT}/ops/bundle/bundle-1");
    let mut parts = vec![String::new(); count];
    let mut take = |m: &crate::common::broker::Message| {
        let c = m.json();
        assert!(
            m.payload.len() < 64 * 1024,
            "a chunk of {} bytes",
            m.payload.len()
        );
        let i = c["chunk"].as_u64().expect("index") as usize;
        parts[i] = c["data"].as_str().expect("data").to_string();
    };
    // Those that came while the answer and the states were awaited, then the rest.
    let early: Vec<_> = sub
        .seen
        .iter()
        .filter(|m| m.topic == bundle_topic)
        .cloned()
        .collect();
    early.iter().for_each(&mut take);
    for _ in early.len()..count {
        let m = sub
            .expect("a bundle chunk", T, |m| m.topic == bundle_topic)
            .await;
        take(&m);
    }
    let bundle = parts.concat();
    assert_eq!(
        bundle.len() as u64,
        done["result"]["bytes"].as_u64().expect("bytes")
    );
    assert!(bundle.len() <= sitegate::ops::BUNDLE_MAX);
    assert_eq!(
        sitegate::config::text_sha256(&bundle),
        done["result"]["sha256"].as_str().expect("sha256")
    );
    let config_hash = sitegate::config::text_sha256(&text);
    for needle in [
        "## agent",
        &format!("config_sha256: {config_hash}"),
        "## devices",
        "dvc_bat\tste_test\tbat\t1\tbattery\tyes",
        "## events",
        "## store",
        "## steering history",
        "site ste_test:",
        "## metrics",
        "sitegate_build_info",
        "## log",
    ] {
        assert!(
            bundle.contains(needle),
            "the bundle lacks {needle:?}:\n{bundle}"
        );
    }
    for secret in [READ_TOKEN, STEER_TOKEN, ADMIN_TOKEN] {
        assert!(!bundle.contains(secret));
        assert!(
            !bundle.contains(&hex::encode(hash_token(secret))),
            "a token hash in the bundle"
        );
    }
    // Over HTTP, the same chunks.
    let (status, chunk) = site
        .call(
            Method::GET,
            "/admin/operations/bundle-1/bundle?chunk=0",
            Some(ADMIN_TOKEN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(chunk["data"].as_str(), Some(parts[0].as_str()));

    // Permissions. Each channel serves its own paths only.
    let refused = rpc(
        &mut sub,
        json!({"id": "rpc-admin", "method": "GET", "path": "/admin/operations"}),
    )
    .await;
    assert_eq!(
        (refused["status"].as_u64(), refused["body"]["code"].as_str()),
        (Some(403), Some("forbidden")),
        "{refused}"
    );
    let refused = rpc(
        &mut sub,
        json!({"id": "rpc-admin-token", "method": "POST", "path": "/admin/operations", "token": ADMIN_TOKEN, "body": {"kind": "restart"}}),
    )
    .await;
    assert_eq!(refused["status"], 403, "{refused}");
    let refused = ops(
        &mut sub,
        json!({"id": "ops-devices", "method": "GET", "path": "/devices"}),
    )
    .await;
    assert_eq!(refused["status"], 403, "{refused}");
    assert!(
        refused["body"]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("rpc/request"),
        "{refused}"
    );
    for (token, status) in [
        (STEER_TOKEN, 403),
        (READ_TOKEN, 403),
        ("sgt_nobody", 401),
        (ADMIN_TOKEN, 200),
    ] {
        let a = ops(
            &mut sub,
            json!({"id": format!("tok-{status}-{}", &token[9..]), "method": "GET", "path": "/admin/operations", "token": token}),
        )
        .await;
        assert_eq!(a["status"], status, "{token}: {a}");
    }
    for token in [STEER_TOKEN, READ_TOKEN] {
        let (status, body) = site
            .call(
                Method::POST,
                "/admin/operations",
                Some(token),
                Some(&json!({"id": "http-1", "kind": "restart"})),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(
            body["detail"].as_str().unwrap_or("").contains("\"admin\""),
            "{body}"
        );
    }
    let (status, _) = site
        .call(Method::GET, "/devices", Some(ADMIN_TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "admin does not imply read");
    assert!(!site.agent.restart_requested().is_cancelled());

    // A re-scan of a bus proposes blocks and applies nothing.
    let a = ops(
        &mut sub,
        start(
            "scan-1",
            json!({"kind": "scan", "args": {"bus": "bat", "units": "1-2", "timeoutMs": 300}}),
        ),
    )
    .await;
    assert!(
        [200, 202].contains(&a["status"].as_u64().unwrap_or(0)),
        "{a}"
    );
    let (_, done) = states_until_final(&mut sub, "scan-1").await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["result"]["found"], 1, "{done}");
    let blocks = done["result"]["config"].as_str().expect("config");
    assert!(
        blocks.contains("[[buses]]\nname = \"bat\"")
            && blocks.contains("[[devices]]")
            && blocks.contains("unit_id = 1"),
        "{blocks}"
    );
    let bad = ops(
        &mut sub,
        start("scan-2", json!({"kind": "scan", "args": {"bus": "nope"}})),
    )
    .await;
    assert_eq!(
        (bad["status"].as_u64(), bad["body"]["field"].as_str()),
        (Some(400), Some("args.bus")),
        "{bad}"
    );
    assert_eq!(site.agent.config().devices.len(), 3);

    // A restart asked of an agent in this process: its token is cancelled
    // (`sitegate run` exits on it; see the process test below).
    let a = ops(&mut sub, start("restart-1", json!({"kind": "restart"}))).await;
    assert_eq!(a["body"]["state"], "succeeded", "{a}");
    tokio::time::timeout(
        Duration::from_secs(5),
        site.agent.restart_requested().cancelled(),
    )
    .await
    .expect("the restart is asked for");
    site.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_over_the_ops_channel_on_every_broker() {
    for kind in kinds() {
        operations_over_the_ops_channel(kind).await;
    }
}

/// The small site for `sitegate run` on a fixed port.
fn process_site(port: u16) -> TestSite {
    TestSite::small().http_key("listen", vec![format!("127.0.0.1:{port}")])
}

async fn post_restart(base: &str) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{base}/admin/operations"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"id": "restart-7", "kind": "restart"}))
        .send()
        .await
        .expect("the agent answers");
    crate::common::status_and_json(resp, "/admin/operations").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_exits_for_systemd_and_its_id_restarts_nothing_again() {
    let port = free_port().port();
    let sim = start_sim(&process_site(port).text()).await;
    let base = format!("http://127.0.0.1:{port}");
    let run = |config: ConfigDir| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sitegate"));
        cmd.arg("run").arg("--config").arg(&config.file);
        AgentProcess::run(config, cmd)
    };
    let config = process_site(port).write_for(&sim);
    let file = config.file.clone();
    let mut agent = run(config);
    let health = || async {
        reqwest::get(format!("{base}/healthz"))
            .await
            .ok()
            .filter(|r| r.status().is_success())
            .map(drop)
    };
    crate::common::wait_for("the agent answers", T, health).await;

    // `sitegate diag` writes the running agent's bundle to a file.
    let out = agent.dir.path().join("bundle.txt");
    let (file_text, out_text) = (file.to_string_lossy(), out.to_string_lossy());
    succeeded(&sitegate([
        "diag",
        "--config",
        &file_text,
        "--output",
        &out_text,
        "--token",
        ADMIN_TOKEN,
    ]));
    let bundle = std::fs::read_to_string(&out).expect("the bundle file");
    let hash = sitegate::config::text_sha256(&std::fs::read_to_string(&file).expect("config"));
    assert!(
        bundle.starts_with("# sitegate support bundle\n"),
        "{bundle}"
    );
    assert!(
        bundle.contains(&format!("config_sha256: {hash}")),
        "{bundle}"
    );
    assert!(bundle.len() <= sitegate::ops::BUNDLE_MAX);
    // The same by the agent's address alone, without its config.
    let text = succeeded(&sitegate([
        "diag",
        "--url",
        &base,
        "--output",
        "-",
        "--token",
        ADMIN_TOKEN,
    ]));
    assert!(text.contains(&format!("config_sha256: {hash}")), "{text}");
    let no_pin = sitegate(["diag", "--url", &base.replace("http://", "https://")]);
    assert_eq!(no_pin.status.code(), Some(64), "{no_pin:?}");
    assert!(
        String::from_utf8_lossy(&no_pin.stderr).contains("needs --fingerprint"),
        "{no_pin:?}"
    );
    let refused = sitegate([
        "diag",
        "--config",
        &file_text,
        "--output",
        "-",
        "--token",
        STEER_TOKEN,
    ]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("\"admin\""),
        "{refused:?}"
    );

    let (status, body) = post_restart(&base).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["state"], "succeeded", "{body}");
    let exit = agent.exited(T).await;
    assert_eq!(
        exit.code(),
        Some(i32::from(sitegate::ops::EXIT_RESTART)),
        "{}",
        agent.log()
    );
    assert!(agent.log().contains("restart operation"), "{}", agent.log());

    // systemd starts it again (here: the test), on the same files.
    let dir = std::mem::replace(&mut agent.dir, tempfile::tempdir().expect("temp dir"));
    let mut agent = run(ConfigDir { dir, file });
    crate::common::wait_for("the agent answers again", T, health).await;
    let (status, body) = post_restart(&base).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the id names the finished restart: {body}"
    );
    assert_eq!(body["state"], "succeeded");
    assert!(
        body["summary"]
            .as_str()
            .unwrap_or("")
            .starts_with("exit for a restart"),
        "{body}"
    );
    // A restart run again would exit RESTART_DELAY (500 ms) after the POST: 2 s
    // later the agent process must still answer.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        health().await.is_some(),
        "the agent did not restart again:\n{}",
        agent.log()
    );
    agent.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(agent.exited(T).await.code(), Some(0));
}
