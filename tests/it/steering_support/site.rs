//! The typed test site: what a test varies (its devices by kind and rating,
//! their buses, the grid limits, how the simulated devices respond, the
//! control interval, tokens, MQTT) set by methods, the config rendered by one
//! function ([`TestSite::text`]), and [`TestSite::start`] starting the
//! simulator, pointing the buses at it and starting the agent: a [`Rig`].
//! [`TestSite::bare`] starts from the agent's own defaults instead (a site
//! with no grid limits, no tokens), [`TestSite::small`] is the small site of
//! `common::site`, and [`TestSite::site`] adds another site.
//!
//! ```ignore
//! let rig = TestSite::new(300, 30)
//!     .battery("bat", "dvc_bat", 5.0, 10.0)
//!     .meter("grid", "dvc_grid")
//!     .grid_limits(30.0, 20.0)
//!     .start()
//!     .await;
//! rig.steer_ess(3.0, Duration::from_secs(600)).await;
//! ```

use sitegate::config::{parse, Config};
use sitegate::sim::{SimSite, SimSiteSpec};
use toml::{Table, Value};

use super::{start_sim_with, Rig, NOON, READ, SITE, STEER};
use crate::common::site::{ADMIN_TOKEN, READ_TOKEN, STEER_TOKEN};

/// A device's kind, as the config's `type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Inverter,
    Battery,
    Meter,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Inverter => "inverter",
            Kind::Battery => "battery",
            Kind::Meter => "meter",
        }
    }
}

/// `x` kW as the config writes a power ("200 kW").
pub fn kw(x: f64) -> String {
    format!("{x} kW")
}

/// `x` kWh as the config writes an energy.
pub fn kwh(x: f64) -> String {
    format!("{x} kWh")
}

struct Device {
    bus: String,
    keys: Table,
}

type Tweak = Box<dyn FnOnce(&mut SimSiteSpec) + Send>;

/// A simulated site, its config and the agent on it, built by typed methods.
/// Every device sits alone on a loopback bus of its own, at unit 1, unless
/// [`TestSite::unit_id`] or two devices naming one bus say otherwise; it
/// joins the site declared last ([`TestSite::site`]).
pub struct TestSite {
    gateway_id: Option<String>,
    http: Table,
    tokens: Vec<(String, String, Vec<&'static str>)>,
    /// Every `[[sites]]` table; devices join, and the site methods set, the
    /// one at `current`.
    sites: Vec<Table>,
    current: usize,
    bus_keys: Table,
    own_bus_keys: Vec<(String, String, Value)>,
    poll_interval_ms: u64,
    devices: Vec<Device>,
    buses: Vec<String>,
    sections: Table,
    raw: String,
    time_factor: f64,
    start_ms: i64,
    tweaks: Vec<Tweak>,
}

impl TestSite {
    /// The site [`SITE`] with no devices: grid limits far away (10 MW each
    /// way), proportional fulfilment, fallback `auto`, the site controlled
    /// every `control_interval_ms` and devices reverting after
    /// `revert_timeout_s`; the [`STEER`] and [`READ`] tokens; simulated time
    /// from [`NOON`] at real speed.
    pub fn new(control_interval_ms: u64, revert_timeout_s: u16) -> TestSite {
        let mut rig = TestSite::bare(SITE, "E2E farm")
            .gateway_id("e2e")
            .token("operator", STEER, &["read", "steer"])
            .token("viewer", READ, &["read"])
            .bus_key("timeout_ms", 500);
        for (k, v) in [
            ("max_import", "10 MW"),
            ("max_export", "10 MW"),
            ("ess_fulfilment", "proportional"),
            ("curtailment_fulfilment", "proportional"),
            ("ess_fallback", "auto"),
        ] {
            rig = rig.site_key(k, v);
        }
        rig.control_interval_ms(control_interval_ms)
            .revert_timeout_s(revert_timeout_s)
    }

    /// The site `reference` named `name` with no other key: the agent's
    /// defaults (no grid limits, controlled every second, devices reverting
    /// after 60 s); `[http]` on loopback without auth and no tokens, no
    /// gateway id (the agent derives one), the agent's bus timeout; devices
    /// polled every 200 ms; simulated time from [`NOON`] at real speed. For
    /// a test that wrote its config with only the keys it needs.
    pub fn bare(reference: &str, name: &str) -> TestSite {
        let mut http = Table::new();
        http.insert("listen".into(), Value::Array(vec!["127.0.0.1:0".into()]));
        http.insert("auth".into(), "none".into());
        TestSite {
            gateway_id: None,
            http,
            tokens: Vec::new(),
            sites: Vec::new(),
            current: 0,
            bus_keys: Table::new(),
            own_bus_keys: Vec::new(),
            poll_interval_ms: 200,
            devices: Vec::new(),
            buses: Vec::new(),
            sections: Table::new(),
            raw: String::new(),
            time_factor: 1.0,
            start_ms: NOON,
            tweaks: Vec::new(),
        }
        .site(reference, name)
    }

    /// The small site of the `common::site` tests: gateway `test`, its
    /// tokens ([`TestSite::common_tokens`]), backoff 100 to 400 ms, the site
    /// `ste_test` (30 kW import, 20 kW export), a 10 kW inverter `dvc_pv`
    /// on `pv`, a 5 kW / 10 kWh battery `dvc_bat` (SoC 10-90 %) on `bat`
    /// and a meter `dvc_grid` on `grid`, polled every 200 ms, 300 ms bus
    /// timeouts.
    pub fn small() -> TestSite {
        TestSite::bare("ste_test", "Test site")
            .gateway_id("test")
            .common_tokens()
            .polling(100, 400)
            .grid_limits(30.0, 20.0)
            .bus_key("timeout_ms", 300)
            .inverter("pv", "dvc_pv", 10.0)
            .name("PV")
            .battery("bat", "dvc_bat", 5.0, 10.0)
            .name("Battery")
            .soc(10, 90)
            .meter("grid", "dvc_grid")
            .name("Grid")
    }

    /// [`TestSite::small`] with each device under a unit id of its own on
    /// the Modbus server: the PV inverter 1, the battery 2, the grid meter 3
    /// (all three are unit 1 on their buses).
    pub fn small_own_units() -> TestSite {
        TestSite::small()
            .key_of("dvc_bat", "modbus_server_unit_id", 2)
            .key_of("dvc_grid", "modbus_server_unit_id", 3)
    }

    /// The seed's worked scenario scaled to be feasible: two 200 kW batteries
    /// (400 kWh, SoC 5-95 %), two 200 kW inverters, a meter; 400 kW rated
    /// production.
    pub fn e2e(control_interval_ms: u64, revert_timeout_s: u16) -> TestSite {
        TestSite::new(control_interval_ms, revert_timeout_s)
            .rated_production_kw(400.0)
            .battery("bat-a", "dvc_bat_a", 200.0, 400.0)
            .soc(5, 95)
            .battery("bat-b", "dvc_bat_b", 200.0, 400.0)
            .soc(5, 95)
            .inverter("pv-a", "dvc_pv_a", 200.0)
            .inverter("pv-b", "dvc_pv_b", 200.0)
            .meter("grid", "dvc_grid")
    }

    /// The demo's site: PV 30 + 20 kW, batteries 20 + 10 kW, a meter; 60 kW
    /// import, 40 kW export; every device polled and the site controlled
    /// every `interval_ms`.
    pub fn demo(interval_ms: u64) -> TestSite {
        TestSite::new(interval_ms, 30)
            .poll_interval_ms(interval_ms)
            .grid_limits(60.0, 40.0)
            .inverter("pv-east", "dvc_pv_east", 30.0)
            .inverter("pv-west", "dvc_pv_west", 20.0)
            .battery("bat-a", "dvc_bat_a", 20.0, 40.0)
            .soc(5, 95)
            .battery("bat-b", "dvc_bat_b", 10.0, 20.0)
            .soc(10, 90)
            .meter("grid", "dvc_grid")
    }

    // The site.

    /// The site `reference` (named `name`, no other key), added unless
    /// declared already: devices added from here on join it, and the site
    /// methods set its keys.
    pub fn site(mut self, reference: &str, name: &str) -> TestSite {
        let at = self
            .sites
            .iter()
            .position(|s| s.get("reference").and_then(Value::as_str) == Some(reference));
        self.current = at.unwrap_or_else(|| {
            let mut site = Table::new();
            site.insert("reference".into(), reference.into());
            site.insert("name".into(), name.into());
            self.sites.push(site);
            self.sites.len() - 1
        });
        self
    }

    /// The reference of the site devices join.
    fn reference(&self) -> String {
        self.sites[self.current]["reference"]
            .as_str()
            .expect("a site's reference")
            .to_string()
    }

    /// `max_import` and `max_export`, kW.
    pub fn grid_limits(self, max_import_kw: f64, max_export_kw: f64) -> TestSite {
        self.site_key("max_import", kw(max_import_kw))
            .site_key("max_export", kw(max_export_kw))
    }

    pub fn rated_production_kw(self, rated: f64) -> TestSite {
        self.site_key("rated_production_power", kw(rated))
    }

    pub fn control_interval_ms(self, ms: u64) -> TestSite {
        self.site_key("control_interval_ms", int(ms))
    }

    pub fn revert_timeout_s(self, s: u16) -> TestSite {
        self.site_key("revert_timeout_s", i64::from(s))
    }

    /// `ess_fallback` (`auto`, `idle`, ...).
    pub fn ess_fallback(self, fallback: &str) -> TestSite {
        self.site_key("ess_fallback", fallback)
    }

    /// No `max_import` or `max_export`: the site has no grid limits.
    pub fn no_grid_limits(mut self) -> TestSite {
        let site = &mut self.sites[self.current];
        site.remove("max_import");
        site.remove("max_export");
        self
    }

    /// The grid loop off: the limits only clamp what the agent commands.
    pub fn grid_loop_off(self) -> TestSite {
        let mut off = Table::new();
        off.insert("enabled".into(), false.into());
        self.site_key("grid_loop", off)
    }

    /// Any other key of the site's table, as a typed value.
    pub fn site_key(mut self, key: &str, value: impl Into<Value>) -> TestSite {
        self.sites[self.current].insert(key.into(), value.into());
        self
    }

    // Devices and buses.

    /// An inverter rated `rated_kw`, alone on `bus`.
    pub fn inverter(self, bus: &str, reference: &str, rated_kw: f64) -> TestSite {
        self.device(bus, reference, Kind::Inverter)
            .key("rated_power", kw(rated_kw))
    }

    /// A battery rated `rated_kw` holding `capacity_kwh`, alone on `bus`
    /// (its SoC window the agent's default unless [`TestSite::soc`]).
    pub fn battery(self, bus: &str, reference: &str, rated_kw: f64, capacity_kwh: f64) -> TestSite {
        self.device(bus, reference, Kind::Battery)
            .key("rated_power", kw(rated_kw))
            .key("capacity", kwh(capacity_kwh))
    }

    /// A grid meter alone on `bus`.
    pub fn meter(self, bus: &str, reference: &str) -> TestSite {
        self.device(bus, reference, Kind::Meter)
    }

    /// A device of `kind` with no more keys than its reference, its bus and
    /// unit 1 (add them with [`TestSite::key`]): a device a profile
    /// describes, or one the test leaves unrated.
    pub fn device(mut self, bus: &str, reference: &str, kind: Kind) -> TestSite {
        let mut keys = Table::new();
        keys.insert("reference".into(), reference.into());
        keys.insert("name".into(), reference.into());
        keys.insert("type".into(), kind.name().into());
        keys.insert("site".into(), self.reference().into());
        keys.insert("bus".into(), bus.into());
        keys.insert("unit_id".into(), 1.into());
        self.devices.push(Device {
            bus: bus.into(),
            keys,
        });
        self
    }

    /// The last device's display name (its reference unless set).
    pub fn name(self, name: &str) -> TestSite {
        self.key("name", name)
    }

    /// The last device's SoC window, %.
    pub fn soc(self, min: u8, max: u8) -> TestSite {
        self.key("soc_min", i64::from(min))
            .key("soc_max", i64::from(max))
    }

    /// The last device's unit id on its bus.
    pub fn unit_id(self, unit: u8) -> TestSite {
        self.key("unit_id", i64::from(unit))
    }

    /// The last device's profile (`sungrow-sh`, ...).
    pub fn profile(self, profile: &str) -> TestSite {
        self.key("profile", profile)
    }

    /// Any other key of the last device's table, as a typed value (or
    /// [`Value::Array`], a [`Table`]).
    pub fn key(mut self, key: &str, value: impl Into<Value>) -> TestSite {
        let device = self.devices.last_mut().expect("a device before its keys");
        device.keys.insert(key.into(), value.into());
        self
    }

    /// A key of the device `reference`'s table (one added earlier, where
    /// [`TestSite::key`] sets the last one's).
    pub fn key_of(mut self, reference: &str, key: &str, value: impl Into<Value>) -> TestSite {
        let device = self
            .devices
            .iter_mut()
            .find(|d| d.keys.get("reference").and_then(Value::as_str) == Some(reference))
            .unwrap_or_else(|| panic!("no device {reference}"));
        device.keys.insert(key.into(), value.into());
        self
    }

    /// How often every device is polled (200 ms unless set).
    pub fn poll_interval_ms(mut self, ms: u64) -> TestSite {
        self.poll_interval_ms = ms;
        self
    }

    /// A loopback bus no device of the config sits on (one a grid signal
    /// or a test's own device uses).
    pub fn bus(mut self, name: &str) -> TestSite {
        self.buses.push(name.into());
        self
    }

    /// A key of every bus's table (`timeout_ms` is 500 unless set).
    pub fn bus_key(mut self, key: &str, value: impl Into<Value>) -> TestSite {
        self.bus_keys.insert(key.into(), value.into());
        self
    }

    /// A key of one bus's table, over [`TestSite::bus_key`]'s: `tcp` for
    /// an address of the test's own, or an `rtu` table for a serial line
    /// (in place of the loopback `tcp`).
    pub fn bus_key_of(mut self, bus: &str, key: &str, value: impl Into<Value>) -> TestSite {
        self.own_bus_keys
            .push((bus.into(), key.into(), value.into()));
        self
    }

    // The simulator.

    /// `[simulator.<kind>]`: the first-order lag toward a new setpoint, s.
    pub fn lag_s(self, kind: Kind, lag_s: f64) -> TestSite {
        self.simulator(&[kind.name()], "lag_s", lag_s)
    }

    /// `[simulator.<kind>]`: the most the output moves in a second, % of
    /// the rating.
    pub fn ramp_percent_per_s(self, kind: Kind, pct: f64) -> TestSite {
        self.simulator(&[kind.name()], "ramp_percent_per_s", pct)
    }

    /// `[simulator.meter]`: refreshed every `refresh_ms`, showing the power of
    /// `report_lag_ms` before.
    pub fn meter_refresh(self, refresh_ms: u64, report_lag_ms: u64) -> TestSite {
        self.simulator(&["meter"], "refresh_ms", int(refresh_ms))
            .simulator(&["meter"], "report_lag_ms", int(report_lag_ms))
    }

    /// Noisy mode with `seed`.
    pub fn noisy(self, seed: u64) -> TestSite {
        self.simulator(&[], "noisy", true)
            .simulator(&[], "seed", int(seed))
    }

    /// The site's simulated base load, kW.
    pub fn base_load_kw(self, load: f64) -> TestSite {
        let site = self.reference();
        self.simulator(&["sites", &site], "base_load", kw(load))
    }

    /// A key of `[simulator.<path...>]`.
    pub fn simulator(self, path: &[&str], key: &str, value: impl Into<Value>) -> TestSite {
        let mut full = vec!["simulator"];
        full.extend_from_slice(path);
        self.section_key(&full, key, value)
    }

    /// Simulated time `factor` times faster than real, from `start_ms`
    /// (real time from [`NOON`] unless set).
    pub fn time(mut self, factor: f64, start_ms: i64) -> TestSite {
        self.time_factor = factor;
        self.start_ms = start_ms;
        self
    }

    /// Changes the simulated devices before they start (what the config
    /// cannot express).
    pub fn sim(mut self, tweak: impl FnOnce(&mut SimSiteSpec) + Send + 'static) -> TestSite {
        self.tweaks.push(Box::new(tweak));
        self
    }

    /// Every simulated battery full (at its SoC max).
    pub fn full_batteries(self) -> TestSite {
        self.sim(super::fill_batteries)
    }

    // HTTP, tokens, MQTT and other sections.

    /// One more API token (and `auth = "tokens"`).
    pub fn token(mut self, name: &str, token: &str, scopes: &[&'static str]) -> TestSite {
        self.tokens
            .push((name.into(), token.into(), scopes.to_vec()));
        self.http_key("auth", "tokens")
    }

    /// The tokens of `common::site` in place of any set before: reader
    /// ([`READ_TOKEN`]), operator ([`STEER_TOKEN`]) and fleet-admin
    /// ([`ADMIN_TOKEN`]), and the per-token rate limit off (as
    /// `common::site::http_section` writes `[http]` as text).
    pub fn common_tokens(mut self) -> TestSite {
        self.tokens.clear();
        self.token("reader", READ_TOKEN, &["read"])
            .token("operator", STEER_TOKEN, &["read", "steer"])
            .token("fleet-admin", ADMIN_TOKEN, &["admin"])
            .http_key("rate_limit", table([("requests_per_s", 0.into())]))
    }

    /// A key of `[http]`.
    pub fn http_key(mut self, key: &str, value: impl Into<Value>) -> TestSite {
        self.http.insert(key.into(), value.into());
        self
    }

    pub fn gateway_id(mut self, id: &str) -> TestSite {
        self.gateway_id = Some(id.into());
        self
    }

    /// `[polling]`: the backoff of a device that fails, from
    /// `min_backoff_ms` to `max_backoff_ms`.
    pub fn polling(self, min_backoff_ms: u64, max_backoff_ms: u64) -> TestSite {
        self.section_key(&["polling"], "min_backoff_ms", int(min_backoff_ms))
            .section_key(&["polling"], "max_backoff_ms", int(max_backoff_ms))
    }

    /// `[storage] path` (`unused.db` unless set: [`TestSite::start`] puts
    /// the database in a temporary folder).
    pub fn storage_path(self, path: &std::path::Path) -> TestSite {
        self.section_key(&["storage"], "path", path.display().to_string())
    }

    /// `[mqtt]` for a broker at `url` speaking `protocol` (`"4"`, `"5"`),
    /// with a 5 s keep-alive and a 2000/s drain.
    pub fn mqtt(self, url: &str, protocol: &str) -> TestSite {
        self.mqtt_key("url", url)
            .mqtt_key("protocol", protocol)
            .mqtt_key("keep_alive_s", 5)
            .mqtt_key("drain_rate", 2000)
    }

    /// A key of `[mqtt]`.
    pub fn mqtt_key(self, key: &str, value: impl Into<Value>) -> TestSite {
        self.section_key(&["mqtt"], key, value)
    }

    /// A key of `[modbus_server]`.
    pub fn modbus_server_key(self, key: &str, value: impl Into<Value>) -> TestSite {
        self.section_key(&["modbus_server"], key, value)
    }

    /// A key of the table at `path` (`["eebus"]`, `["storage"]`, ...).
    pub fn section_key(mut self, path: &[&str], key: &str, value: impl Into<Value>) -> TestSite {
        let mut table = &mut self.sections;
        for part in path {
            table = table
                .entry(*part)
                .or_insert_with(|| Value::Table(Table::new()))
                .as_table_mut()
                .expect("a table on the path");
        }
        table.insert(key.into(), value.into());
        self
    }

    /// A raw TOML fragment (whole tables) after the rendered config: only
    /// where the TOML itself is the subject of the test.
    pub fn raw(mut self, fragment: &str) -> TestSite {
        self.raw.push('\n');
        self.raw.push_str(fragment);
        self
    }

    // The config and the rig.

    /// The config as TOML: every table the methods set, then the raw
    /// fragments.
    pub fn text(&self) -> String {
        let mut root = self.sections.clone();
        if let Some(id) = &self.gateway_id {
            root.insert("gateway_id".into(), id.clone().into());
        }
        let mut http = self.http.clone();
        let tokens = self
            .tokens
            .iter()
            .map(|(name, token, scopes)| {
                let mut t = Table::new();
                t.insert("name".into(), name.clone().into());
                t.insert(
                    "sha256".into(),
                    hex::encode(sitegate::api::hash_token(token)).into(),
                );
                t.insert(
                    "scopes".into(),
                    Value::Array(scopes.iter().map(|s| (*s).into()).collect()),
                );
                Value::Table(t)
            })
            .collect();
        if !self.tokens.is_empty() {
            http.insert("tokens".into(), Value::Array(tokens));
        }
        root.insert("http".into(), Value::Table(http));
        let storage = root
            .entry("storage")
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .expect("[storage] is a table");
        storage.entry("path").or_insert_with(|| "unused.db".into());
        root.insert(
            "sites".into(),
            Value::Array(self.sites.iter().cloned().map(Value::Table).collect()),
        );
        let mut names: Vec<&str> = Vec::new();
        let mut devices = Vec::new();
        for d in &self.devices {
            names.push(&d.bus);
            let mut keys = d.keys.clone();
            keys.entry("poll_interval_ms")
                .or_insert_with(|| int(self.poll_interval_ms));
            devices.push(Value::Table(keys));
        }
        names.extend(self.buses.iter().map(String::as_str));
        let mut buses: Vec<Value> = Vec::new();
        for name in names {
            let declared = buses
                .iter()
                .any(|b| b.get("name").and_then(Value::as_str) == Some(name));
            if !declared {
                let mut bus = self.bus_keys.clone();
                bus.insert("name".into(), name.into());
                bus.insert("tcp".into(), "127.0.0.1:0".into());
                for (_, key, value) in self.own_bus_keys.iter().filter(|(b, ..)| b == name) {
                    bus.insert(key.clone(), value.clone());
                }
                if bus.contains_key("rtu") {
                    bus.remove("tcp");
                }
                buses.push(Value::Table(bus));
            }
        }
        root.insert("buses".into(), Value::Array(buses));
        root.insert("devices".into(), Value::Array(devices));
        let mut text = toml::to_string(&root).expect("the test config renders");
        text.push_str(&self.raw);
        text
    }

    /// The config parsed.
    pub fn config(&self) -> Config {
        parse(&self.text()).expect("test config is valid")
    }

    /// This config with each bus's `tcp` at `sim`'s server of its name (for
    /// a config the test writes to a file for the agent binary).
    pub fn pointed_at(mut self, sim: &SimSite) -> TestSite {
        let mut names: Vec<String> = self.devices.iter().map(|d| d.bus.clone()).collect();
        names.extend(self.buses.iter().cloned());
        names.sort();
        names.dedup();
        for name in names {
            if let Some(addr) = sim.addr(&name) {
                self = self.bus_key_of(&name, "tcp", addr.to_string());
            }
        }
        self
    }

    /// The config written to `sitegate.toml` in a temporary folder, its
    /// buses at `sim`'s servers and the database beside it (as
    /// `ConfigDir::write` writes one): for the agent binary.
    pub fn write_for(self, sim: &SimSite) -> crate::common::process::ConfigDir {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let file = dir.path().join("sitegate.toml");
        let text = self
            .pointed_at(sim)
            .storage_path(&dir.path().join("sitegate.db"))
            .text();
        std::fs::write(&file, text).expect("write the config");
        crate::common::process::ConfigDir { dir, file }
    }

    /// The simulator started for `config`'s buses (with this site's time and
    /// tweaks), and the buses pointed at it: for a test that runs the agent
    /// itself (as a process, or after setting devices up).
    pub async fn start_sim(self, config: &mut Config) -> SimSite {
        let TestSite {
            time_factor,
            start_ms,
            tweaks,
            ..
        } = self;
        start_sim_with(config, |spec| {
            spec.time_factor = time_factor;
            spec.start = Some(start_ms);
            for tweak in tweaks {
                tweak(spec);
            }
        })
        .await
    }

    /// The simulator, then the agent on it (its database in a temporary
    /// folder); returns once every device is discovered and at its fallback
    /// (or applied where the grid loop holds a limit), as the [`SITE`]'s
    /// steering state shows it to the [`READ`] token: a site of
    /// [`TestSite::new`]. Other sites start with [`TestSite::launch_in`], or
    /// [`TestSite::config`] and [`TestSite::start_sim`].
    pub async fn start(self) -> Rig {
        let dir = tempfile::tempdir().expect("a temporary folder");
        self.start_in(dir).await
    }

    /// [`TestSite::start`] with the database in `dir`.
    pub async fn start_in(self, dir: tempfile::TempDir) -> Rig {
        let rig = self.launch_in(dir).await;
        rig.settle().await;
        rig
    }

    /// The simulator and the agent, returning at once (the test waits for
    /// what it needs itself).
    pub async fn launch_in(self, dir: tempfile::TempDir) -> Rig {
        let mut config = self.config();
        config.storage.path = dir.path().join("sitegate.db");
        let sim = self.start_sim(&mut config).await;
        Rig::join(sim, config, dir).await
    }
}

/// A TOML table of `pairs`, for a typed value of a table or an array of
/// them (`grid_signals`, `levels`, ...).
pub fn table<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn int(v: u64) -> Value {
    Value::Integer(i64::try_from(v).expect("fits a TOML integer"))
}
