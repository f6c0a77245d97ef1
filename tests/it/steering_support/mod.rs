//! Shared rig of the steering tests: a simulated site (real Modbus TCP servers on
//! loopback), the agent on it, and an HTTP client with a read+steer token and a
//! read-only token.
#![allow(dead_code)]

mod site;

// Not every user of this module names them (the benches include it).
#[allow(unused_imports)]
pub use site::{kw, kwh, table, Kind, TestSite};

use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

use serde_json::{json, Value};
use sitegate::agent::Agent;
use sitegate::config::{parse, Config, Transport};
use sitegate::sim::{SimDeviceHandle, SimSite, SimSiteSpec, StorageControl};

pub const STEER: &str = "sgt_e2e_steer_token";
pub const READ: &str = "sgt_e2e_read_token";
pub const SITE: &str = "ste_e2e";
/// 2024-06-27T12:00:00Z: the simulated sun is up.
pub const NOON: i64 = 1_719_489_600_000;

/// The seed's worked scenario ([`TestSite::e2e`]) as TOML.
pub fn config_text(control_interval_ms: u64, revert_timeout_s: u16) -> String {
    TestSite::e2e(control_interval_ms, revert_timeout_s).text()
}

/// The demo's site ([`TestSite::demo`]) as TOML.
pub fn demo_site(interval_ms: u64) -> String {
    TestSite::demo(interval_ms).text()
}

/// Tokens, storage and the site `SITE` (grid limits far away, proportional
/// fulfilment, fallback `auto`); `{rated_production}` is left for the caller
/// to replace (with a `rated_production_power` line or nothing).
pub fn site_header(control_interval_ms: u64, revert_timeout_s: u16) -> String {
    let steer = hex::encode(sitegate::api::hash_token(STEER));
    let read = hex::encode(sitegate::api::hash_token(READ));
    format!(
        r#"
gateway_id = "e2e"
[http]
listen = ["127.0.0.1:0"]
auth = "tokens"
[[http.tokens]]
name = "operator"
sha256 = "{steer}"
scopes = ["read", "steer"]
[[http.tokens]]
name = "viewer"
sha256 = "{read}"
scopes = ["read"]

[storage]
path = "unused.db"

[[sites]]
reference = "{SITE}"
name = "E2E farm"
max_import = "10 MW"
max_export = "10 MW"
{{rated_production}}
ess_fulfilment = "proportional"
curtailment_fulfilment = "proportional"
ess_fallback = "auto"
control_interval_ms = {control_interval_ms}
revert_timeout_s = {revert_timeout_s}
"#
    )
}

/// A bus of its own (loopback, simulated) with one device at unit 1; `extra`
/// are more device keys, one per line.
pub fn device_block(bus: &str, reference: &str, kind: &str, extra: &str) -> String {
    format!(
        "\n[[buses]]\nname = \"{bus}\"\ntcp = \"127.0.0.1:0\"\ntimeout_ms = 500\n\n[[devices]]\nreference = \"{reference}\"\nname = \"{reference}\"\ntype = \"{kind}\"\nsite = \"{SITE}\"\nbus = \"{bus}\"\nunit_id = 1\npoll_interval_ms = 200\n{extra}\n"
    )
}

/// Starts the simulated site for `config` and points the config's buses at it.
pub async fn start_sim(config: &mut Config) -> SimSite {
    start_sim_with(config, |_| {}).await
}

/// As [`start_sim`], with `tweak` changing the simulated devices first (e.g. a
/// device kind the config cannot express).
pub async fn start_sim_with(config: &mut Config, tweak: impl FnOnce(&mut SimSiteSpec)) -> SimSite {
    let mut spec = SimSiteSpec::from_config(config, 1.0);
    spec.start = Some(NOON);
    tweak(&mut spec);
    let sim = SimSite::start(spec).await.expect("simulated site starts");
    for bus in &mut config.buses {
        if let Transport::Tcp { port, .. } = &mut bus.transport {
            *port = sim.addr(&bus.name).expect("a server per bus").port();
        }
    }
    sim
}

pub struct Rig {
    pub sim: SimSite,
    pub agent: Agent,
    pub base: String,
    pub http: reqwest::Client,
    pub config: Config,
    /// Holds the database.
    pub dir: tempfile::TempDir,
}

impl Rig {
    pub async fn start(text: &str) -> Rig {
        Rig::start_with(text, |_| {}).await
    }

    /// As [`Rig::start`], with `tweak` changing the simulated devices first.
    pub async fn start_with(text: &str, tweak: impl FnOnce(&mut SimSiteSpec)) -> Rig {
        let dir = tempfile::tempdir().expect("a temporary folder");
        Rig::start_in(text, dir, tweak).await
    }

    /// As [`Rig::start_with`], the database in `dir`.
    pub async fn start_in(
        text: &str,
        dir: tempfile::TempDir,
        tweak: impl FnOnce(&mut SimSiteSpec),
    ) -> Rig {
        let mut config = parse(text).expect("test config is valid");
        config.storage.path = dir.path().join("sitegate.db");
        let sim = start_sim_with(&mut config, tweak).await;
        let rig = Rig::join(sim, config, dir).await;
        rig.settle().await;
        rig
    }

    /// Starts the agent on `config` (its buses already pointed at `sim`, its
    /// database in `dir`) and returns at once: for a test that sets the
    /// simulated devices up between [`start_sim`] and the agent's first
    /// contact, and waits for what it needs itself.
    pub async fn join(sim: SimSite, config: Config, dir: tempfile::TempDir) -> Rig {
        let agent = Agent::start(config.clone()).await.expect("agent starts");
        let base = format!("http://{}", agent.http_addrs()[0]);
        Rig {
            sim,
            agent,
            base,
            // Idle connections dropped before the agent closes them (10 s),
            // as `common::http_client` does (this module serves a bench too).
            http: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .expect("http client"),
            config,
            dir,
        }
    }

    /// As [`Rig::start`] with every battery full (at its SoC max).
    pub async fn start_full(text: &str) -> Rig {
        Rig::start_with(text, fill_batteries).await
    }

    /// Stops the agent (gracefully) and starts it again on the same config and
    /// database; the simulated site keeps running.
    pub async fn restart(self) -> Rig {
        self.restart_with(|_| {}).await
    }

    /// [`Rig::restart`], running `between` while the agent is down.
    pub async fn restart_with(self, between: impl FnOnce(&Config)) -> Rig {
        let Rig {
            sim,
            agent,
            http,
            config,
            dir,
            ..
        } = self;
        agent.shutdown().await;
        between(&config);
        let agent = Agent::start(config.clone())
            .await
            .expect("agent starts again");
        let base = format!("http://{}", agent.http_addrs()[0]);
        let rig = Rig {
            sim,
            agent,
            base,
            http,
            config,
            dir,
        };
        rig.wait_discovered().await;
        rig
    }

    /// Waits until every device is discovered and at its fallback or applied.
    pub async fn settle(&self) {
        self.wait_discovered().await;
        let rig = self;
        // At their fallback, or applied where the grid loop holds a limit.
        eventually(
            "devices at their fallback",
            Duration::from_secs(10),
            || async {
                let st = rig.state().await;
                st["devices"].as_array().is_some_and(|d| {
                    d.iter()
                        .all(|x| x["state"] == "fallback" || x["state"] == "applied")
                })
            },
        )
        .await;
    }

    async fn wait_discovered(&self) {
        let rig = self;
        let maps = rig.agent.device_maps().clone();
        let n = rig.agent.live().devices().len();
        eventually("devices discovered", Duration::from_secs(10), || {
            let maps = maps.clone();
            async move { (0..n).all(|i| maps.get(sitegate::model::DeviceId(i as u16)).is_some()) }
        })
        .await;
    }

    pub fn device(&self, bus: &str) -> SimDeviceHandle {
        self.sim.device(bus, 1).expect("simulated device")
    }

    pub fn storage(&self, bus: &str) -> Option<StorageControl> {
        self.device(bus).state().storage_control
    }

    pub fn limit(&self, bus: &str) -> Option<f64> {
        self.device(bus).state().limit_pct
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> (u16, Value) {
        self.send(
            self.http.post(format!("{}{path}", self.base)).json(body),
            token,
        )
        .await
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.send(self.http.get(format!("{}{path}", self.base)), token)
            .await
    }

    pub async fn delete(&self, path: &str, token: &str) -> (u16, Value) {
        self.send(self.http.delete(format!("{}{path}", self.base)), token)
            .await
    }

    /// Night and a 20 kW load, so that no grid limit interferes, then a 15 kW
    /// discharge for ten minutes: its answer (asserted 200).
    pub async fn night_discharge(&self) -> Value {
        self.sim.set_sun(Some(0.0));
        self.sim.set_load(Some(20_000.0));
        let discharge =
            json!({"setting": {"value": 15, "unit": "kW"}, "validUntil": now_ms() + 600_000});
        let (s, v) = self
            .post(&format!("/sites/{SITE}/steering/ess"), STEER, &discharge)
            .await;
        assert_eq!(s, 200, "{v}");
        v
    }

    /// Waits until the site's history holds the record a start writes when
    /// it begins at the fallback because the last run lost changes (the
    /// queue writes it in the background).
    pub async fn fallback_recorded(&self) {
        let rig = self;
        eventually(
            "the fallback in the history",
            Duration::from_secs(10),
            || async {
                let (_, h) = rig
                    .get(&format!("/sites/{SITE}/steering/history?limit=1000"), READ)
                    .await;
                h.to_string().contains("changes of the last run were lost")
            },
        )
        .await;
    }

    /// A GET with `token`, the body as sent (to see how numbers are written).
    pub async fn get_raw(&self, path: &str, token: &str) -> String {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("HTTP answer")
            .text()
            .await
            .expect("body")
    }

    /// A GET without a token, answered as text (`/metrics`).
    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("HTTP answer");
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }

    pub async fn send(&self, req: reqwest::RequestBuilder, token: &str) -> (u16, Value) {
        let r = req.bearer_auth(token).send().await.expect("HTTP answer");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// POSTs an ESS setting of `kw` (discharge; negative: charge) valid for
    /// `valid_for`, and requires it taken: its answer.
    pub async fn steer_ess(&self, kw: f64, valid_for: Duration) -> Value {
        let body = json!({"setting": {"value": number(kw), "unit": "kW"}, "validUntil": valid_until(valid_for)});
        let (s, v) = self
            .post(&format!("/sites/{SITE}/steering/ess"), STEER, &body)
            .await;
        assert_eq!(s, 200, "ESS {kw} kW: {v}");
        v
    }

    /// POSTs a `gridLimit` of `w` on `side` valid for `valid_for`, and
    /// requires it taken: its answer.
    pub async fn grid_limit(&self, side: Side, w: f64, valid_for: Duration) -> Value {
        let key = match side {
            Side::Export => "maxExport",
            Side::Import => "maxImport",
        };
        let body = json!({
            "setting": {key: {"value": number(w), "unit": "W"}},
            "validUntil": valid_until(valid_for),
        });
        let (s, v) = self
            .post(&format!("/sites/{SITE}/steering/grid-limit"), STEER, &body)
            .await;
        assert_eq!(s, 200, "gridLimit {key} {w} W: {v}");
        v
    }

    /// The latest measurement of `property` of `device` (a reference) as
    /// the API gives it, `(timestamp, value)`; `None` before it has one.
    pub async fn read(&self, device: &str, property: &str) -> Option<(i64, f64)> {
        let (s, v) = self
            .get(
                &format!("/devices/{device}/measurement?property={property}"),
                READ,
            )
            .await;
        (s == 200).then(|| {
            (
                v["timestamp"].as_i64().expect("timestamp"),
                v["value"].as_f64().expect("value"),
            )
        })
    }

    /// `GET /metrics`, parsed (checked as a Prometheus scraper would).
    pub async fn scrape(&self) -> crate::common::prom::Scrape {
        crate::common::prom::scrape(&self.http, &self.base).await
    }

    /// The value of one series of `GET /metrics` (`name{labels}`).
    pub async fn metric(&self, series: &str) -> Option<f64> {
        self.scrape().await.get(series)
    }

    /// Waits until `check` is true ([`eventually`]).
    pub async fn wait_for<F, Fut>(&self, what: &str, within: Duration, check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        eventually(what, within, check).await;
    }

    /// `sitegate check-config` on `text`, written to a file in the rig's
    /// folder.
    pub fn check_config(&self, text: &str) -> std::process::Output {
        let file = self.dir.path().join("checked.toml");
        std::fs::write(&file, text).expect("write the config to check");
        crate::common::process::check_config(&file)
    }

    pub async fn state(&self) -> Value {
        let (s, v) = self.get(&format!("/sites/{SITE}/steering"), READ).await;
        assert_eq!(s, 200, "{v}");
        v
    }

    /// The report of one device in the steering state.
    pub async fn device_state(&self, reference: &str) -> Value {
        let st = self.state().await;
        st["devices"]
            .as_array()
            .and_then(|d| d.iter().find(|x| x["deviceReference"] == reference))
            .cloned()
            .unwrap_or(Value::Null)
    }

    pub async fn shutdown(self) {
        self.agent.shutdown().await;
        self.sim.shutdown().await;
    }
}

/// Every simulated battery full (at its SoC max).
pub fn fill_batteries(spec: &mut SimSiteSpec) {
    for d in spec.servers.iter_mut().flat_map(|s| s.devices.iter_mut()) {
        if let sitegate::sim::SimKind::Battery {
            initial_soc,
            soc_max,
            ..
        } = &mut d.kind
        {
            *initial_soc = *soc_max;
        }
    }
}

/// Which side of the grid connection a limit holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Export,
    Import,
}

/// `x` as JSON, an integer when it is one (as a client writes `15`, not
/// `15.0`: the state shows a setting as it was sent).
pub fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// `valid_for` from now, in epoch ms (a `validUntil`).
pub fn valid_until(valid_for: Duration) -> i64 {
    now_ms() + i64::try_from(valid_for.as_millis()).expect("a duration in range")
}

pub fn now_ms() -> i64 {
    sitegate::model::time::now_ms()
}

/// POSTs a site signal to an agent at `base` (one run as a child process)
/// with the steer token, and requires it taken.
pub async fn post_signal(base: &str, body: &Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/sites/{SITE}/steering"))
        .bearer_auth(STEER)
        .json(body)
        .send()
        .await
        .expect("the steering request");
    assert_eq!(r.status(), 200, "POST {body}");
}

/// Waits until `check` is true, polling every 20 ms; panics with `what` after `within`.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return;
        }
        assert!(start.elapsed() < within, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A storage window of `pct` % discharge (negative: charge), as model 124 shows it.
pub fn window(pct: f64) -> Option<StorageControl> {
    Some(StorageControl {
        mode: 3,
        in_pct: -pct,
        out_pct: pct,
    })
}
