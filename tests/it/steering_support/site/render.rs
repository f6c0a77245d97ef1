//! A [`TestSite`] made real: its config rendered as TOML through one table
//! ([`TestSite::text`]), parsed, pointed at the simulator or written to a
//! file, and the simulator and the agent started on it.

use sitegate::config::{parse, Config};
use sitegate::sim::SimSite;
use toml::{Table, Value};

use super::{int, TestSite};
use crate::steering_support::{start_sim_with, Rig};

impl TestSite {
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
