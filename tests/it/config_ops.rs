//! Configuration over the operations channel, with the agent as a process
//! and the test standing in for systemd (a process that exits 75 is started
//! again): `config.get` without secrets; an invalid `config.put` refused
//! with paths and a less-safe one refused without `allowLessSafe`, nothing
//! changed; a change that needs a restart applied (a new device online,
//! history `applied`); one that fails its health trial rolled back (the old
//! file back, the operation failed naming the device); a SIGKILL in the
//! middle of a change, after which the agent runs on a whole config and
//! resolves the change; a change that applies live (a new meter at a site
//! without grid limits) online in the same process, its measurements served
//! and stored, the history saying `live`; a live change that fails its
//! trial, restarted on the last good config; and a TOML merge patch (bad
//! ones refused naming the field and the position) that lowers a site's
//! `max_export` live, held by the grid loop at the meter at once, then
//! raised again only with `allowLessSafe`. No token hash or token appears
//! in any answer or state message.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use sitegate::api::hash_token;

use crate::common::broker::{kinds, Broker, Kind, Subscriber};
use crate::common::free_port;
use crate::common::mqtt::{mqtt_section, plain_url, ROOT};
use crate::common::process::{start_sim, AgentProcess, ConfigDir};
use crate::common::site::{small_site, ADMIN_TOKEN, READ_TOKEN, STEER_TOKEN};

const T: Duration = Duration::from_secs(30);
/// How long an agent may take to exit for a restart: a change's trial
/// window (5 s here), the restart delay and a shutdown within its grace,
/// once seen to take over 30 s with eight tests at once on two cores.
const RESTART_WITHIN: Duration = Duration::from_secs(90);

/// A second inverter on the PV bus: the simulator serves it from the start,
/// the agent's config gets it through a `config.put`.
const PV2: &str = r#"
[[devices]]
reference = "dvc_pv2"
name = "PV 2"
type = "inverter"
site = "ste_test"
bus = "pv"
unit_id = 2
poll_interval_ms = 200
rated_power = "5 kW"
"#;

/// `text` with `block` before its `[storage]` section.
fn with_block(text: &str, block: &str) -> String {
    text.replacen("\n[storage]", &format!("{block}\n[storage]"), 1)
}

/// The agent on its config file, restarted the way systemd would.
struct Site {
    port: u16,
    file: PathBuf,
    agent: Option<AgentProcess>,
    http: reqwest::Client,
}

impl Site {
    async fn start(broker: Option<&Broker>, window_s: u64) -> (Site, sitegate::sim::SimSite) {
        Site::start_with(broker, window_s, "", PV2).await
    }

    /// The small site with `extra` in its config, and the simulator serving
    /// `later` too (devices the config gets through a change).
    async fn start_with(
        broker: Option<&Broker>,
        window_s: u64,
        extra: &str,
        later: &str,
    ) -> (Site, sitegate::sim::SimSite) {
        let port = free_port().port();
        let text = small_site().replace(
            "listen = [\"127.0.0.1:0\"]",
            &format!("listen = [\"127.0.0.1:{port}\"]"),
        ) + extra;
        let sim = start_sim(&(text.clone() + later)).await;
        let mut extra = format!("[ops]\nrollback_after_s = {window_s}\n");
        if let Some(b) = broker {
            extra += &mqtt_section(&plain_url(b.addr("5")), "5", "");
        }
        let config = ConfigDir::write(&text, &sim, &extra);
        let file = config.file.clone();
        let mut site = Site {
            port,
            file,
            agent: None,
            http: crate::common::http_client().build().expect("http client"),
        };
        site.agent = Some(site.spawn(config));
        site.healthy().await;
        (site, sim)
    }

    fn spawn(&self, config: ConfigDir) -> AgentProcess {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sitegate"));
        cmd.arg("run").arg("--config").arg(&config.file);
        AgentProcess::run(config, cmd)
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn agent(&mut self) -> &mut AgentProcess {
        self.agent.as_mut().expect("the agent runs")
    }

    /// Waits until the agent answers and, where its config has an uplink,
    /// until the uplink's subscription to ops requests is acknowledged: a
    /// request published before that reaches no one.
    async fn healthy(&self) {
        let base = self.base();
        let http = self.http.clone();
        crate::common::wait_for("the agent answers", T, || {
            let get = http.get(format!("{base}/healthz")).send();
            async move { get.await.ok().filter(|r| r.status() == 200).map(drop) }
        })
        .await;
        crate::common::wait_for("the uplink subscribed, where there is one", T, || async {
            let connected = crate::common::prom::scrape(&self.http, &base)
                .await
                .get("sitegate_mqtt_connected");
            (connected != Some(0.0)).then_some(())
        })
        .await;
    }

    /// Waits for the agent to exit 75 and starts it again on the same files.
    async fn restarted(&mut self) {
        let mut agent = self.agent.take().expect("the agent runs");
        let code = agent.exited(RESTART_WITHIN).await.code();
        assert_eq!(
            code,
            Some(i32::from(sitegate::ops::EXIT_RESTART)),
            "{}",
            agent.log()
        );
        let dir = std::mem::replace(&mut agent.dir, tempfile::tempdir().expect("temp dir"));
        self.agent = Some(self.spawn(ConfigDir {
            dir,
            file: self.file.clone(),
        }));
        self.healthy().await;
    }

    async fn post(&self, body: Value) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(format!("{}/admin/operations", self.base()))
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
            .await
            .expect("the agent answers");
        crate::common::status_and_json(resp, "/admin/operations").await
    }

    /// The operation once it ended (asked over HTTP, across restarts).
    async fn settled(&self, id: &str) -> Value {
        let url = format!("{}/admin/operations/{id}", self.base());
        let http = self.http.clone();
        crate::common::wait_for(&format!("operation {id} to end"), T, || {
            let get = http.get(&url).bearer_auth(ADMIN_TOKEN).send();
            async move {
                let v: Value = get.await.ok()?.json().await.ok()?;
                matches!(v["state"].as_str(), Some("succeeded" | "failed")).then_some(v)
            }
        })
        .await
    }

    async fn device_online(&self, reference: &str) -> bool {
        let text = self
            .http
            .get(format!("{}/metrics", self.base()))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text");
        text.lines().any(|l| {
            l.starts_with("sitegate_device_online{")
                && l.contains(&format!("device=\"{reference}\""))
                && l.ends_with(" 1")
        })
    }

    async fn wait_online(&self, reference: &str) {
        crate::common::wait_for(&format!("{reference} online"), T, || async {
            self.device_online(reference).await.then_some(())
        })
        .await;
    }

    /// Waits until the grid loop's last evaluation held `max_export` at `w`,
    /// from the config (`GET /sites/ste_test/steering`).
    async fn max_export_in_force(&self, w: u32) {
        let url = format!("{}/sites/ste_test/steering", self.base());
        let want = json!({"value": w, "unit": "W", "source": "config"});
        let http = self.http.clone();
        crate::common::wait_for(&format!("maxExport {w} W in force"), T, || {
            let get = http.get(&url).bearer_auth(READ_TOKEN).send();
            let want = want.clone();
            async move {
                let v: Value = get.await.ok()?.json().await.ok()?;
                (v["gridLoop"]["maxExport"] == want).then_some(())
            }
        })
        .await;
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.file).expect("the config file")
    }
}

fn sibling(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.file_name().expect("name").to_os_string();
    name.push(suffix);
    file.with_file_name(name)
}

/// Every token and token hash of the test config.
fn secrets() -> Vec<String> {
    [READ_TOKEN, STEER_TOKEN, ADMIN_TOKEN]
        .into_iter()
        .flat_map(|t| [t.to_string(), hex::encode(hash_token(t))])
        .collect()
}

fn assert_no_secret(what: &str, text: &str) {
    for s in secrets() {
        assert!(!text.contains(&s), "{what} holds a secret {s}: {text}");
    }
}

/// An ops-channel request and its answer.
async fn ops(sub: &mut Subscriber, id: &str, body: Value) -> Value {
    let topic = format!("{ROOT}/ops/response/{id}");
    let request = json!({"id": id, "method": "POST", "path": "/admin/operations", "body": body});
    sub.request(&format!("{ROOT}/ops/request"), &request, None)
        .await;
    sub.expect(&format!("ops answer to {id}"), T, |m| m.topic == topic)
        .await
        .json()
}

/// Asserts that an operation ended `failed`; its error text.
fn failed_error(done: &Value) -> &str {
    assert_eq!(done["state"], "failed", "{done}");
    done["error"].as_str().unwrap_or("")
}

/// Puts `args` as operation `id` over MQTT and asserts that it is refused
/// as lowering safety, naming `change`.
async fn refused_as_less_safe(sub: &mut Subscriber, id: &str, args: Value, change: &str) {
    ops(sub, id, json!({"kind": "config.put", "args": args})).await;
    let (_, done) = final_state(sub, id).await;
    let error = failed_error(&done);
    assert!(error.contains(change), "{error}");
    assert!(error.contains("allowLessSafe"), "{error}");
}

/// The state messages of `id` until one is final.
async fn final_state(sub: &mut Subscriber, id: &str) -> (Vec<String>, Value) {
    let topic = format!("{ROOT}/ops/state/{id}");
    let mut states: Vec<String> = sub
        .seen
        .iter()
        .filter(|m| m.topic == topic)
        .map(|m| m.json()["state"].as_str().unwrap_or("").to_string())
        .collect();
    if let Some(v) = sub
        .seen
        .iter()
        .rev()
        .find(|m| m.topic == topic)
        .map(|m| m.json())
    {
        if matches!(v["state"].as_str(), Some("succeeded" | "failed")) {
            return (states, v);
        }
    }
    loop {
        let v = sub
            .expect(&format!("state of {id}"), T, |m| m.topic == topic)
            .await
            .json();
        states.push(v["state"].as_str().unwrap_or("").to_string());
        if matches!(v["state"].as_str(), Some("succeeded" | "failed")) {
            return (states, v);
        }
    }
}

async fn config_changes_over_the_ops_channel(kind: Kind) {
    let broker = Broker::start(kind).await;
    let mut sub =
        Subscriber::connect(broker.addr("5"), "config-ops", &format!("{ROOT}/ops/#")).await;
    let (mut site, _sim) = Site::start(Some(&broker), 20).await;
    for d in ["dvc_pv", "dvc_bat", "dvc_grid"] {
        site.wait_online(d).await;
    }
    let before = site.text();
    let hash = sitegate::config::text_sha256(&before);

    // The running config: its hash, version 0, secrets replaced.
    let got = ops(&mut sub, "get-1", json!({"kind": "config.get"})).await;
    let result = &got["body"]["result"];
    assert_eq!(got["body"]["state"], "succeeded", "{got}");
    assert_eq!(result["sha256"], hash.as_str(), "{got}");
    assert_eq!(result["version"], 0, "{got}");
    let toml = result["toml"].as_str().expect("toml");
    assert!(toml.contains("sha256 = \"<redacted>\""), "{toml}");
    assert!(toml.contains("name = \"fleet-admin\""), "{toml}");
    assert_eq!(result["redacted"][2], "http.tokens[2].sha256", "{got}");

    // Invalid: refused with the problems' paths; nothing changes.
    let bad = ops(
        &mut sub,
        "put-bad",
        json!({"kind": "config.put", "args": {"patch": {"ops": {"rollback_after_s": 1}, "buses": null}}}),
    )
    .await;
    let (states, done) = final_state(&mut sub, "put-bad").await;
    assert_eq!(states, ["accepted", "running", "failed"], "{bad}");
    assert_eq!(done["result"]["result"], "refused", "{done}");
    let paths: Vec<&str> = done["result"]["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(|p| p["path"].as_str())
        .collect();
    assert!(paths.contains(&"ops.rollback_after_s"), "{done}");
    assert!(paths.contains(&"devices[0].bus"), "{done}");
    assert_eq!(site.text(), before);

    // Less safe without the flag: refused, naming the change.
    let raised =
        with_block(&before, PV2).replace("max_import = \"30 kW\"", "max_import = \"40 kW\"");
    refused_as_less_safe(
        &mut sub,
        "put-unsafe",
        json!({"toml": raised}),
        "max_import raised from 30 kW to 40 kW",
    )
    .await;
    assert_eq!(site.text(), before);

    // With the flag: written, the agent restarts on it, the new device comes
    // online, the change is applied.
    let put = ops(
        &mut sub,
        "put-ok",
        json!({"kind": "config.put", "args": {"toml": raised, "allowLessSafe": true}}),
    )
    .await;
    assert_eq!(put["body"]["state"], "running", "{put}");
    assert_eq!(put["body"]["result"]["result"], "pending", "{put}");
    site.restarted().await;
    let (states, done) = final_state(&mut sub, "put-ok").await;
    assert_eq!(done["state"], "succeeded", "{states:?} {done}");
    assert_eq!(done["result"]["result"], "applied", "{done}");
    assert_eq!(done["result"]["version"], 1, "{done}");
    assert_eq!(site.text(), raised);
    assert_eq!(
        std::fs::read_to_string(sibling(&site.file, ".last-good")).expect("last good"),
        before
    );
    assert!(!sibling(&site.file, ".pending").exists());
    site.wait_online("dvc_pv2").await;

    // The history: who, how, the hashes and the results, newest first.
    let h = ops(&mut sub, "history-1", json!({"kind": "config.history"})).await;
    let changes = h["body"]["result"]["changes"]
        .as_array()
        .expect("changes")
        .clone();
    let results: Vec<(&str, &str)> = changes
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap_or(""),
                c["result"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("put-ok", "applied"),
            ("put-unsafe", "refused"),
            ("put-bad", "refused")
        ],
        "{h}"
    );
    assert_eq!(
        changes[0]["source"],
        json!({"transport": "mqtt", "caller": "mqtt"})
    );
    assert_eq!(changes[0]["oldSha256"], hash.as_str());
    assert_eq!(
        changes[0]["newSha256"],
        sitegate::config::text_sha256(&raised).as_str()
    );

    // No answer or state message held a token or a token's hash (the
    // requests, ours, do).
    sub.drain();
    let requests = format!("{ROOT}/ops/request");
    for m in sub.seen.iter().filter(|m| m.topic != requests) {
        assert_no_secret(&m.topic, &String::from_utf8_lossy(&m.payload));
    }
    site.agent().signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(site.agent().exited(T).await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_changes_over_the_ops_channel_on_every_broker() {
    for kind in kinds() {
        config_changes_over_the_ops_channel(kind).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_fails_its_health_trial_is_rolled_back() {
    let broker = Broker::start(kinds()[0]).await;
    let (mut site, sim) = Site::start(Some(&broker), 5).await;
    for d in ["dvc_pv", "dvc_bat", "dvc_grid"] {
        site.wait_online(d).await;
    }
    let before = site.text();
    let bat = sim.addr("bat").expect("the battery's bus").to_string();
    let dead = free_port().to_string();
    let broken = before.replace(&bat, &dead);
    assert_ne!(broken, before);
    let (status, body) = site
        .post(json!({"id": "put-dead", "kind": "config.put", "args": {"toml": broken}}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["state"], "running", "{body}");
    // Restarted on the new config, not healthy within 5 s, restored, and
    // restarted on the old one.
    site.restarted().await;
    assert_eq!(site.text(), broken);
    site.restarted().await;
    assert_eq!(site.text(), before);
    let done = site.settled("put-dead").await;
    let error = failed_error(&done);
    assert!(
        error.starts_with("rolled_back: not healthy within 5 s"),
        "{error}"
    );
    assert!(error.contains("dvc_bat"), "{error}");
    assert!(!error.contains("dvc_pv"), "{error}");
    assert!(!sibling(&site.file, ".pending").exists());
    site.wait_online("dvc_bat").await;
    let (_, h) = site
        .post(json!({"id": "history-dead", "kind": "config.history"}))
        .await;
    assert_eq!(h["result"]["changes"][0]["result"], "rolled_back", "{h}");
    assert_eq!(
        h["result"]["changes"][0]["source"]["caller"], "fleet-admin",
        "{h}"
    );
    assert_no_secret("history", &h.to_string());
    site.agent().signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(site.agent().exited(T).await.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_in_the_middle_of_a_change_leaves_a_working_config() {
    let (mut site, _sim) = Site::start(None, 10).await;
    site.wait_online("dvc_bat").await;
    let before = site.text();
    let new = with_block(&before, PV2);
    let marker = sibling(&site.file, ".pending");
    let base = site.base();
    let put = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{base}/admin/operations"))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"id": "put-killed", "kind": "config.put", "args": {"toml": new}}))
            .send()
            .await
    });
    // Killed as soon as the change is under way: its marker is on disk.
    crate::common::wait_for("the change marker", T, || {
        std::future::ready(marker.exists().then_some(()))
    })
    .await;
    site.agent().signal(nix::sys::signal::Signal::SIGKILL);
    let status = site.agent().exited(T).await;
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{status}");
    let _ = put.await;
    // Whatever the kill interrupted, the file is a whole config: the old
    // one or the new one.
    let text = site.text();
    assert!(text == before || text == with_block(&before, PV2), "{text}");
    sitegate::config::Config::load(&site.file).expect("a working config");

    // systemd starts it again: it runs and resolves the change.
    let mut agent = site.agent.take().expect("agent");
    let dir = std::mem::replace(&mut agent.dir, tempfile::tempdir().expect("temp dir"));
    site.agent = Some(site.spawn(ConfigDir {
        dir,
        file: site.file.clone(),
    }));
    site.healthy().await;
    let done = site.settled("put-killed").await;
    if text == before {
        assert_eq!(done["state"], "failed", "{done}");
        assert!(
            done["error"].as_str().unwrap_or("").contains("interrupted"),
            "{done}"
        );
    } else {
        assert_eq!(done["state"], "succeeded", "{done}");
        site.wait_online("dvc_pv2").await;
    }
    assert!(!marker.exists());
    site.agent().signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(site.agent().exited(T).await.code(), Some(0));
}

/// A site that holds no grid limit, and a meter for it on the PV bus (unit
/// 2): the simulator serves the meter from the start, the agent's config
/// gets it through a `config.put` that applies live.
const AUX_SITE: &str = "\n[[sites]]\nreference = \"ste_aux\"\nname = \"Auxiliary\"\n";
const AUX_METER: &str = r#"
[[devices]]
reference = "dvc_aux"
name = "Auxiliary meter"
type = "meter"
site = "ste_aux"
bus = "pv"
unit_id = 2
poll_interval_ms = 200
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_meter_comes_online_live_without_a_restart() {
    let broker = Broker::start(kinds()[0]).await;
    let mut sub = Subscriber::connect(broker.addr("5"), "config-live", &format!("{ROOT}/#")).await;
    let (mut site, _sim) = Site::start_with(Some(&broker), 20, AUX_SITE, AUX_METER).await;
    for d in ["dvc_pv", "dvc_bat", "dvc_grid"] {
        site.wait_online(d).await;
    }
    let pid = site.agent().pid();
    let before = site.text();
    let new = with_block(&before, AUX_METER);
    let put = ops(
        &mut sub,
        "put-live",
        json!({"kind": "config.put", "args": {"toml": new}}),
    )
    .await;
    assert_eq!(put["body"]["state"], "running", "{put}");
    assert_eq!(put["body"]["result"]["live"], true, "{put}");
    let watch = &put["body"]["result"]["watch"];
    assert!(
        watch
            .as_array()
            .is_some_and(|w| w.contains(&json!("dvc_aux"))),
        "{put}"
    );
    let (states, done) = final_state(&mut sub, "put-live").await;
    assert_eq!(done["state"], "succeeded", "{states:?} {done}");
    assert_eq!(done["result"]["result"], "applied", "{done}");
    // The same process all along: no exit 75, no restart.
    assert!(site.agent().running(), "{}", site.agent().log());
    assert_eq!(site.agent().pid(), pid);
    assert!(
        site.agent().log().contains("device added live"),
        "{}",
        site.agent().log()
    );
    site.wait_online("dvc_aux").await;
    for d in ["dvc_pv", "dvc_bat", "dvc_grid"] {
        assert!(site.device_online(d).await, "{d}");
    }
    assert_eq!(site.text(), new);
    assert_eq!(
        std::fs::read_to_string(sibling(&site.file, ".last-good")).expect("last good"),
        before
    );
    assert!(!sibling(&site.file, ".pending").exists());

    // Its measurements over HTTP: the latest ones, and stored ones.
    let base = site.base();
    let latest: Value = site
        .http
        .get(format!("{base}/devices/dvc_aux/measurements"))
        .bearer_auth(READ_TOKEN)
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert!(
        latest["measurements"]
            .as_array()
            .is_some_and(|m| !m.is_empty()),
        "{latest}"
    );
    let http = site.http.clone();
    crate::common::wait_for("stored samples of dvc_aux", T, || {
        let now = sitegate::model::time::now_ms();
        let fmt = sitegate::model::time::format_utc;
        let body = json!({
            "property": "activePower",
            "range": {"type": "absolute", "start": fmt(now - 600_000), "end": fmt(now + 60_000)},
            "resolution": {"value": 1, "unit": "s"},
        });
        let post = http
            .post(format!("{base}/devices/dvc_aux/measurements/time-series"))
            .bearer_auth(READ_TOKEN)
            .json(&body)
            .send();
        async move {
            let v: Value = post.await.ok()?.json().await.ok()?;
            v["data"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
                .then_some(())
        }
    })
    .await;

    // The MQTT device listing names it (seen already, or still to come).
    let listing = |m: &crate::common::broker::Message| {
        m.topic == format!("{ROOT}/devices")
            && String::from_utf8_lossy(&m.payload).contains("dvc_aux")
    };
    sub.drain();
    if !sub.seen.iter().any(listing) {
        sub.expect("a device listing with dvc_aux", T, listing)
            .await;
    }

    // The history says it applied live; the running config is the new one.
    let h = ops(&mut sub, "history-live", json!({"kind": "config.history"})).await;
    let change = &h["body"]["result"]["changes"][0];
    assert_eq!(change["id"], "put-live", "{h}");
    assert_eq!(change["result"], "applied", "{h}");
    assert_eq!(change["live"], true, "{h}");
    assert_eq!(change["version"], 1, "{h}");
    let got = ops(&mut sub, "get-live", json!({"kind": "config.get"})).await;
    assert_eq!(
        got["body"]["result"]["sha256"],
        sitegate::config::text_sha256(&new).as_str(),
        "{got}"
    );
    site.agent().signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(site.agent().exited(T).await.code(), Some(0));
}

/// A meter at a unit nobody answers: applied live, not online within the
/// window, so the last good config is restored and the agent restarts on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_change_that_fails_its_trial_restarts_on_the_last_good_config() {
    let (mut site, _sim) = Site::start_with(None, 5, AUX_SITE, "").await;
    for d in ["dvc_pv", "dvc_bat", "dvc_grid"] {
        site.wait_online(d).await;
    }
    let before = site.text();
    let silent = with_block(&before, &AUX_METER.replace("unit_id = 2", "unit_id = 9"));
    let (status, body) = site
        .post(json!({"id": "put-silent", "kind": "config.put", "args": {"toml": silent}}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["result"]["live"], true, "{body}");
    // Applied live (the same process), then rolled back by a restart.
    site.restarted().await;
    assert_eq!(site.text(), before);
    let done = site.settled("put-silent").await;
    let error = failed_error(&done);
    assert!(
        error.starts_with("rolled_back: not healthy within 5 s"),
        "{error}"
    );
    assert!(error.contains("dvc_aux"), "{error}");
    let (_, h) = site
        .post(json!({"id": "history-silent", "kind": "config.history"}))
        .await;
    let change = &h["result"]["changes"][0];
    assert_eq!(change["result"], "rolled_back", "{h}");
    assert_eq!(change["live"], true, "{h}");
    site.wait_online("dvc_pv").await;
    assert!(!site.device_online("dvc_aux").await);
    site.agent().signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(site.agent().exited(T).await.code(), Some(0));
}

/// The site's whole `[[sites]]` entry with `max_export` at `export`: a merge
/// patch replaces an array (here `sites`) whole.
fn sites_with_export(export: &str) -> String {
    format!(
        "[[sites]]\nreference = \"ste_test\"\nname = \"Test site\"\nmax_import = \"30 kW\"\nmax_export = \"{export}\"\n"
    )
}

/// The grid meter's power at the simulator (+ import, - export), W.
fn grid_w(sim: &sitegate::sim::SimSite) -> f64 {
    sim.device("grid", 1)
        .expect("the grid meter")
        .state()
        .ac_power_w
}

/// A `config.put` as a TOML merge patch: a bad one refused over HTTP naming
/// the field and the position, an invalid config refused with its paths,
/// nothing changed; then one over the ops channel that merges a table into
/// `[http]` (the tokens stay) and lowers the site's `max_export`: applied
/// live in the same process, and the grid loop holds the new limit at the
/// meter at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_toml_merge_patch_lowers_max_export_live_and_the_loop_holds_it() {
    let broker = Broker::start(kinds()[0]).await;
    let mut sub =
        Subscriber::connect(broker.addr("5"), "config-toml", &format!("{ROOT}/ops/#")).await;
    let (mut site, sim) = Site::start(Some(&broker), 20).await;
    for d in ["dvc_pv", "dvc_bat", "dvc_grid"] {
        site.wait_online(d).await;
    }
    // Full sun on the 10 kW inverter, little load: the site exports several
    // kW, well within its 20 kW limit.
    sim.set_sun(Some(1.0));
    sim.set_load(Some(500.0));
    crate::common::wait_for("the site exporting more than 3 kW", T, || {
        std::future::ready((grid_w(&sim) < -3_000.0).then_some(()))
    })
    .await;
    let pid = site.agent().pid();
    let before = site.text();

    // Not TOML: 400 naming args.patchToml, the line, the column and the
    // line's text; nothing runs, nothing changes.
    let (status, body) = site
        .post(json!({"id": "toml-bad", "kind": "config.put", "args": {"patchToml": "[ops]\nrollback_after_s = 3 0\n"}}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["code"], "invalid_value", "{body}");
    assert_eq!(body["field"], "args.patchToml", "{body}");
    let detail = body["detail"].as_str().unwrap_or("");
    assert!(
        detail.starts_with("args.patchToml is not valid TOML at line 2, column"),
        "{detail}"
    );
    assert!(detail.contains("rollback_after_s = 3 0"), "{detail}");
    // Two ways of saying the change at once: refused, naming both.
    let (status, body) = site
        .post(
            json!({"id": "toml-two", "kind": "config.put", "args": {"patch": {}, "patchToml": ""}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["field"], "args.patchToml", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or("")
            .ends_with("not args.patch and args.patchToml"),
        "{body}"
    );
    // TOML, but the config it makes is invalid: refused with the paths.
    let (status, body) = site
        .post(json!({"id": "toml-invalid", "kind": "config.put", "args": {"patchToml": "[ops]\nrollback_after_s = 1\n"}}))
        .await;
    assert!(status.is_success(), "{status} {body}");
    let done = site.settled("toml-invalid").await;
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["result"]["result"], "refused", "{done}");
    assert_eq!(
        done["result"]["problems"][0]["path"], "ops.rollback_after_s",
        "{done}"
    );
    assert_eq!(site.text(), before);
    // A log level that would silence the agent: refused, naming the key.
    let (status, body) = site
        .post(json!({"id": "toml-loud", "kind": "config.put", "args": {"patchToml": "[logging]\nlevel = \"loud\"\n"}}))
        .await;
    assert!(status.is_success(), "{status} {body}");
    let done = site.settled("toml-loud").await;
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["result"]["result"], "refused", "{done}");
    assert_eq!(
        done["result"]["problems"][0]["path"], "logging.level",
        "{done}"
    );
    let message = done["result"]["problems"][0]["message"]
        .as_str()
        .unwrap_or("");
    assert!(
        message.contains("off, error, warn, info, debug, trace"),
        "{done}"
    );
    assert_eq!(site.text(), before);

    // Over the ops channel: `[http]` merged (its tokens kept), `sites`
    // replaced whole with max_export lowered to 2 kW.
    let patch = format!(
        "[http]\nrate_limit = {{ requests_per_s = 500 }}\n\n{}",
        sites_with_export("2 kW")
    );
    let put = ops(
        &mut sub,
        "toml-export",
        json!({"kind": "config.put", "args": {"patchToml": patch}}),
    )
    .await;
    assert_eq!(put["body"]["result"]["live"], true, "{put}");
    let (states, done) = final_state(&mut sub, "toml-export").await;
    assert_eq!(done["state"], "succeeded", "{states:?} {done}");
    assert_eq!(done["result"]["result"], "applied", "{done}");
    assert!(site.agent().running(), "{}", site.agent().log());
    assert_eq!(site.agent().pid(), pid);
    assert!(
        site.agent()
            .log()
            .contains("configured grid limits changed live"),
        "{}",
        site.agent().log()
    );
    let text = site.text();
    assert!(text.contains("max_export = \"2 kW\""), "{text}");
    assert!(text.contains("requests_per_s = 500"), "{text}");
    assert!(text.contains("name = \"fleet-admin\""), "{text}");

    // The limit in force is the new one, from the config, and held at the
    // meter: export at most 2 kW (within the loop's band).
    let base = site.base();
    site.max_export_in_force(2000).await;
    let view: Value = site
        .http
        .get(format!("{base}/sites/ste_test"))
        .bearer_auth(READ_TOKEN)
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(view["gridConnection"]["maxExport"]["value"], 2000, "{view}");
    let mut since: Option<tokio::time::Instant> = None;
    crate::common::wait_for("export held at 2 kW for 2 s", T, || {
        let held = grid_w(&sim) >= -2_500.0;
        let s = if held {
            *since.get_or_insert_with(tokio::time::Instant::now)
        } else {
            since = None;
            tokio::time::Instant::now()
        };
        std::future::ready((held && s.elapsed() >= Duration::from_secs(2)).then_some(()))
    })
    .await;

    let h = ops(&mut sub, "toml-history", json!({"kind": "config.history"})).await;
    let change = &h["body"]["result"]["changes"][0];
    assert_eq!(change["id"], "toml-export", "{h}");
    assert_eq!(change["live"], true, "{h}");

    // Over the ops channel too, a bad TOML patch is a 400 naming the field.
    let bad = ops(
        &mut sub,
        "toml-bad-mqtt",
        json!({"kind": "config.put", "args": {"patchToml": "[[sites]\n"}}),
    )
    .await;
    assert_eq!(bad["status"], 400, "{bad}");
    assert_eq!(bad["body"]["field"], "args.patchToml", "{bad}");
    assert!(
        bad["body"]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("at line 1, column"),
        "{bad}"
    );

    // Raising it again lowers safety: refused without the flag, applied
    // live with it (here as a JSON merge patch).
    let sites: toml::Table = sites_with_export("20 kW").parse().expect("toml");
    let sites = serde_json::to_value(&sites).expect("json");
    refused_as_less_safe(
        &mut sub,
        "json-raise",
        json!({"patch": sites}),
        "max_export raised from 2 kW to 20 kW",
    )
    .await;
    let put = ops(
        &mut sub,
        "json-raise-ok",
        json!({"kind": "config.put", "args": {"patch": sites, "allowLessSafe": true}}),
    )
    .await;
    assert_eq!(put["body"]["result"]["live"], true, "{put}");
    let (_, done) = final_state(&mut sub, "json-raise-ok").await;
    assert_eq!(done["state"], "succeeded", "{done}");
    site.max_export_in_force(20_000).await;
    assert_eq!(site.agent().pid(), pid);
    site.agent().signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(site.agent().exited(T).await.code(), Some(0));
}
