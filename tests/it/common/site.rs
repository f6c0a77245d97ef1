//! A simulated site and the agent polling it, on ephemeral ports.

use std::time::Duration;

use reqwest::{Client, Method, StatusCode};
use serde_json::Value;
use sitegate::agent::Agent;
use sitegate::api::hash_token;
use sitegate::config::{parse, Config};
use sitegate::sim::{SimSite, SimSiteSpec};

/// Tokens the test configs accept.
pub const READ_TOKEN: &str = "sgt_test_reader";
pub const STEER_TOKEN: &str = "sgt_test_steerer";
/// The `admin` scope only (the operations under `/admin`).
pub const ADMIN_TOKEN: &str = "sgt_test_admin";

/// 11:00 UTC on 2026-06-21: the sun is high in the simulated sky.
pub const SUMMER_MORNING_MS: i64 = 1_782_039_600_000;

/// The `[http]` section with the test tokens, listening on an ephemeral port.
/// The per-token rate limit is off: tests (and the latency benchmark) fire
/// requests far faster than a real client; tests/it/api_limits.rs tests the limit.
pub fn http_section() -> String {
    format!(
        r#"
[http]
listen = ["127.0.0.1:0"]
auth = "tokens"
rate_limit = {{ requests_per_s = 0 }}
[[http.tokens]]
name = "reader"
sha256 = "{}"
scopes = ["read"]
[[http.tokens]]
name = "operator"
sha256 = "{}"
scopes = ["read", "steer"]
[[http.tokens]]
name = "fleet-admin"
sha256 = "{}"
scopes = ["admin"]
"#,
        hex::encode(hash_token(READ_TOKEN)),
        hex::encode(hash_token(STEER_TOKEN)),
        hex::encode(hash_token(ADMIN_TOKEN)),
    )
}

/// The small site of `steering_support::TestSite::small` (one PV inverter,
/// one battery and one grid meter, each on its own loopback bus, polled
/// every 200 ms) as hand-written TOML: only for a test whose subject is the
/// config file's text (`config_ops`); every other test builds the site with
/// `TestSite::small()`, and [`small_site_is_the_builders`] holds the two
/// equal.
pub fn small_site() -> String {
    format!(
        r#"
gateway_id = "test"
{}
[polling]
min_backoff_ms = 100
max_backoff_ms = 400

[[sites]]
reference = "ste_test"
name = "Test site"
max_import = "30 kW"
max_export = "20 kW"

[[buses]]
name = "pv"
tcp = "127.0.0.1:0"
timeout_ms = 300
[[buses]]
name = "bat"
tcp = "127.0.0.1:0"
timeout_ms = 300
[[buses]]
name = "grid"
tcp = "127.0.0.1:0"
timeout_ms = 300

[[devices]]
reference = "dvc_pv"
name = "PV"
type = "inverter"
site = "ste_test"
bus = "pv"
unit_id = 1
poll_interval_ms = 200
rated_power = "10 kW"

[[devices]]
reference = "dvc_bat"
name = "Battery"
type = "battery"
site = "ste_test"
bus = "bat"
unit_id = 1
poll_interval_ms = 200
rated_power = "5 kW"
capacity = "10 kWh"
soc_min = 10
soc_max = 90

[[devices]]
reference = "dvc_grid"
name = "Grid"
type = "meter"
site = "ste_test"
bus = "grid"
unit_id = 1
poll_interval_ms = 200
"#,
        http_section()
    )
}

/// The simulator and the agent on it, for the small site of
/// `steering_support::TestSite::small` (site `ste_test`, its own tokens),
/// started from the config text it renders. New tests start theirs with
/// `TestSite::start` instead.
pub struct SmallSite {
    pub sim: SimSite,
    pub agent: Agent,
    pub base: String,
    pub http: Client,
    pub dir: tempfile::TempDir,
}

/// Starts the simulator for every loopback bus of `config_text` (time running
/// `time_factor` times faster, from `start_ms`), then the agent against it.
pub async fn start(config_text: &str, time_factor: f64, start_ms: i64) -> SmallSite {
    let dir = tempfile::tempdir().expect("temp dir");
    let config: Config = parse(config_text).expect("test config is valid");
    start_on(config, dir, time_factor, start_ms).await
}

/// [`start`], with the agent on `config_text` written to `sitegate.toml` in
/// its directory and loaded from there, as `sitegate run` loads it: the
/// operations that read the config file (`config.get`) have one.
pub async fn start_from_file(config_text: &str, time_factor: f64, start_ms: i64) -> SmallSite {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("sitegate.toml");
    std::fs::write(&file, config_text).expect("write the config file");
    let config = Config::load(&file).expect("test config is valid");
    start_on(config, dir, time_factor, start_ms).await
}

async fn start_on(
    mut config: Config,
    dir: tempfile::TempDir,
    time_factor: f64,
    start_ms: i64,
) -> SmallSite {
    config.storage.path = dir.path().join("sitegate.db");
    let mut spec = SimSiteSpec::from_config(&config, time_factor);
    spec.start = Some(start_ms);
    let sim = SimSite::start(spec).await.expect("simulator starts");
    sim.point_config_at_servers(&mut config);
    let agent = Agent::start(config).await.expect("agent starts");
    let base = format!("http://{}", agent.http_addrs()[0]);
    SmallSite {
        sim,
        agent,
        base,
        http: super::http_client()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("http client"),
        dir,
    }
}

impl SmallSite {
    /// Sends a request with an optional bearer token and JSON body; returns the
    /// status and the parsed body (`Value::Null` when empty).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{}", self.base, path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.expect("request reaches the agent");
        super::status_and_json(resp, path).await
    }

    /// GET with the read token, expecting 200.
    pub async fn get_ok(&self, path: &str) -> Value {
        let (status, body) = self.call(Method::GET, path, Some(READ_TOKEN), None).await;
        assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
        body
    }

    /// The latest value of one property, once the device has one.
    pub async fn latest(&self, device: &str, property: &str) -> Option<(i64, f64)> {
        let (status, body) = self
            .call(
                Method::GET,
                &format!("/devices/{device}/measurement?property={property}"),
                Some(READ_TOKEN),
                None,
            )
            .await;
        (status == StatusCode::OK).then(|| {
            (
                body["timestamp"].as_i64().expect("timestamp"),
                body["value"].as_f64().expect("value"),
            )
        })
    }

    /// Waits until every device was polled once.
    pub async fn ready(&self) {
        super::wait_for("readyz", Duration::from_secs(10), || async {
            let (s, _) = self.call(Method::GET, "/readyz", None, None).await;
            (s == StatusCode::OK).then_some(())
        })
        .await;
    }

    /// `GET /metrics`, parsed ([`super::prom::scrape`]).
    pub async fn scrape(&self) -> super::prom::Scrape {
        super::prom::scrape(&self.http, &self.base).await
    }

    pub async fn stop(self) {
        self.agent.shutdown().await;
        self.sim.shutdown().await;
    }
}

/// [`small_site`] parses to the config `TestSite::small()` renders (the
/// storage path and the text's hash aside): the numbers have one source.
#[test]
fn small_site_is_the_builders() {
    let normal = |mut c: Config| {
        c.storage.path = "sitegate.db".into();
        c.text_sha256 = String::new();
        format!("{c:?}")
    };
    assert_eq!(
        normal(parse(&small_site()).expect("small_site parses")),
        normal(crate::steering_support::TestSite::small().config())
    );
}
