//! The typed test site: what a test varies (its devices by kind and rating,
//! their buses, the grid limits, how the simulated devices respond, the
//! control interval, tokens, MQTT) set by methods, the config rendered by one
//! function ([`TestSite::text`]), and [`TestSite::start`] starting the
//! simulator, pointing the buses at it and starting the agent: a [`Rig`].
//! [`TestSite::bare`] starts from the agent's own defaults instead (a site
//! with no grid limits, no tokens), [`TestSite::small`] is the small site of
//! `common::site`, and [`TestSite::site`] adds another site. The builder's
//! methods are here; its starting points are in `presets.rs`, the rendering
//! and the start in `render.rs`.
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

mod presets;
mod render;

use sitegate::sim::SimSiteSpec;
use toml::{Table, Value};

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

    /// A raw TOML fragment (whole tables) after the rendered config: where
    /// the TOML itself is the subject of the test, or a section another
    /// helper renders (the test CSIP-AUS server's `table`).
    pub fn raw(mut self, fragment: &str) -> TestSite {
        self.raw.push('\n');
        self.raw.push_str(fragment);
        self
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
