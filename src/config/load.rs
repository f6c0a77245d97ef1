//! From TOML text to a validated [`Config`], collecting every problem with its path.

use super::gateway_id::DeriveFrom;
use std::collections::HashSet;
use std::fmt;

use serde::de::DeserializeOwned;

use super::problem::Problem;
use super::raw::{RawBus, RawDevice, RawHttp};
use super::resolve::resolve;
use super::{
    Config, GatewayIdSource, LoggingConfig, MqttConfig, PollingConfig, SiteConfig, StorageConfig,
};

/// Every problem found in a config file.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigError {
    pub problems: Vec<Problem>,
}

impl ConfigError {
    pub fn single(path: &str, message: impl Into<String>) -> Self {
        Self {
            problems: vec![Problem::new(path, message)],
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "{n} problem{} in the config",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

const TOP_LEVEL_KEYS: &[&str] = &[
    "gateway_id",
    "gateway_id_from",
    "http",
    "storage",
    "polling",
    "logging",
    "clock",
    "ops",
    "sites",
    "buses",
    "devices",
    "mqtt",
    "modbus_server",
    "csip_aus",
    "eebus",
    "profiles_dir",
    "simulator",
];

/// Parses and validates config text; relative profile paths are taken from the
/// current directory.
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_in(text, std::path::Path::new("."))
}

/// Parses and validates config text read from a file in `dir`: relative
/// profile paths are taken from there.
pub fn parse_in(text: &str, dir: &std::path::Path) -> Result<Config, ConfigError> {
    let mut table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::single("", format!("not valid TOML: {e}")))?;
    let mut problems = Vec::new();

    unknown_keys(&table, &mut problems);
    let (gateway_id, gateway_id_source) = gateway_id(&mut table, &mut problems);
    let profiles_dir = profiles_dir(&mut table, dir, &mut problems);
    let http: Option<RawHttp> = optional_section(&mut table, "http", &mut problems);
    let storage: Option<StorageConfig> = optional_section(&mut table, "storage", &mut problems);
    let polling: Option<PollingConfig> = optional_section(&mut table, "polling", &mut problems);
    let logging: Option<LoggingConfig> = optional_section(&mut table, "logging", &mut problems);
    let clock: Option<super::ClockConfig> = optional_section(&mut table, "clock", &mut problems);
    let ops: Option<super::OpsConfig> = optional_section(&mut table, "ops", &mut problems);
    let mqtt: Option<MqttConfig> = optional_section(&mut table, "mqtt", &mut problems);
    let modbus_server: Option<super::modbus_server::RawModbusServer> =
        optional_section(&mut table, "modbus_server", &mut problems);
    let simulator: Option<super::SimulatorConfig> =
        optional_section(&mut table, "simulator", &mut problems);
    let eebus: Option<super::eebus::RawEebus> =
        optional_section(&mut table, "eebus", &mut problems);
    let declared_sites = declared_names(&table, "sites", "reference");
    let declared_buses = declared_names(&table, "buses", "name");
    let sites: Vec<Option<SiteConfig>> = array_section(&mut table, "sites", &mut problems);
    let buses: Vec<Option<RawBus>> = array_section(&mut table, "buses", &mut problems);
    let devices: Vec<Option<RawDevice>> = array_section(&mut table, "devices", &mut problems);
    let csip = csip_section(&mut table, &mut problems);

    let mut config = resolve(
        super::resolve::Sections {
            gateway_id,
            gateway_id_source,
            http: http.unwrap_or_default(),
            storage: storage.unwrap_or_default(),
            polling: polling.unwrap_or_default(),
            logging: logging.unwrap_or_default(),
            clock: clock.unwrap_or_default(),
            ops: ops.unwrap_or_default(),
            mqtt,
            modbus_server,
            simulator: simulator.unwrap_or_default(),
            sites,
            buses,
            devices,
            csip,
            eebus,
            declared_sites,
            declared_buses,
            profiles: super::profiles::Resolver::new(&profiles_dir, dir),
            profiles_dir,
        },
        &mut problems,
    );
    config.text_sha256 = text_sha256(text);
    problems.extend(super::size_floor::refusal(&config));
    if problems.is_empty() {
        Ok(config)
    } else {
        locate(text, &mut problems);
        Err(ConfigError { problems })
    }
}

/// A problem for each top-level key that is not one of [`TOP_LEVEL_KEYS`].
fn unknown_keys(table: &toml::Table, problems: &mut Vec<Problem>) {
    for key in table.keys() {
        if !TOP_LEVEL_KEYS.contains(&key.as_str()) {
            problems.push(Problem::new(
                key.clone(),
                format!(
                    "unknown key (expected one of: {})",
                    TOP_LEVEL_KEYS.join(", ")
                ),
            ));
        }
    }
}

/// `gateway_id`, else the one derived as `gateway_id_from` says (the host
/// name by default), and where it came from; both keys taken off `table`.
fn gateway_id(table: &mut toml::Table, problems: &mut Vec<Problem>) -> (String, GatewayIdSource) {
    let from = match table.remove("gateway_id_from") {
        None => DeriveFrom::HostName,
        Some(toml::Value::String(s)) => DeriveFrom::parse(&s).unwrap_or_else(|| {
            problems.push(Problem::new(
                "gateway_id_from",
                format!("{s:?} is not a source of the gateway id: \"hostname\" (the default) or \"machine-id\""),
            ));
            DeriveFrom::HostName
        }),
        Some(other) => {
            problems.push(Problem::new(
                "gateway_id_from",
                format!("expected a string, found {}", other.type_str()),
            ));
            DeriveFrom::HostName
        }
    };
    match table.remove("gateway_id") {
        None => super::gateway_id::default_gateway_id(from),
        Some(toml::Value::String(s)) => (s, GatewayIdSource::Configured),
        Some(other) => {
            problems.push(Problem::new(
                "gateway_id",
                format!("expected a string, found {}", other.type_str()),
            ));
            (String::new(), GatewayIdSource::Configured)
        }
    }
}

/// `profiles_dir`, taken from `dir` when relative (the default folder when
/// not given), taken off `table`.
fn profiles_dir(
    table: &mut toml::Table,
    dir: &std::path::Path,
    problems: &mut Vec<Problem>,
) -> std::path::PathBuf {
    match table.remove("profiles_dir") {
        None => std::path::PathBuf::from(super::profiles::DEFAULT_PROFILES_DIR),
        Some(toml::Value::String(s)) => dir.join(s),
        Some(other) => {
            problems.push(Problem::new(
                "profiles_dir",
                format!("expected a directory path, found {}", other.type_str()),
            ));
            std::path::PathBuf::from(super::profiles::DEFAULT_PROFILES_DIR)
        }
    }
}

/// `[csip_aus]` for one site, `[[csip_aus]]` for several, taken off `table`.
fn csip_section(
    table: &mut toml::Table,
    problems: &mut Vec<Problem>,
) -> Vec<Option<super::csip::RawCsip>> {
    match table.remove("csip_aus") {
        Some(toml::Value::Table(t)) => {
            vec![deserialize_at(toml::Value::Table(t), "csip_aus", problems)]
        }
        Some(other) => {
            table.insert("csip_aus".into(), other);
            array_section(table, "csip_aus", problems)
        }
        None => Vec::new(),
    }
}

/// Names the entry of each problem in `sites`, `buses` and `devices` by
/// its reference (a bus by its name) and the line of its `[[…]]` header:
/// `devices[17]` alone is hard to find in a file of forty devices.
fn locate(text: &str, problems: &mut [Problem]) {
    let Ok(table) = text.parse::<toml::Table>() else {
        return;
    };
    for p in problems.iter_mut() {
        let Some((key, rest)) = p.path.split_once('[') else {
            continue;
        };
        let (what, field) = match key {
            "sites" => ("site", "reference"),
            "devices" => ("device", "reference"),
            "buses" => ("bus", "name"),
            _ => continue,
        };
        let Some(index) = rest.split(']').next().and_then(|i| i.parse::<usize>().ok()) else {
            continue;
        };
        let entry = table.get(key).and_then(|v| v.get(index));
        let text_of = |f: &str| entry.and_then(|e| e.get(f)).and_then(|n| n.as_str());
        // A device without a reference (as `sitegate scan` writes it) is
        // named by the one derived from its site and name, as the API does.
        let derived = match (key, text_of("site"), text_of("name")) {
            ("devices", Some(site), Some(name)) => {
                Some(super::resolve::derive_reference(site, name))
            }
            _ => None,
        };
        let name = text_of(field).or(derived.as_deref());
        let header = format!("[[{key}]]");
        let line = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim_start().starts_with(&header))
            .nth(index)
            .map(|(n, _)| n + 1);
        p.entry = match (name, line) {
            (Some(n), Some(l)) => Some(format!("{what} {n:?}, line {l}")),
            (Some(n), None) => Some(format!("{what} {n:?}")),
            (None, Some(l)) => Some(format!("line {l}")),
            (None, None) => None,
        };
    }
}

/// The hex SHA-256 of a config's text: what the operations channel and the
/// support bundle name a configuration by.
pub fn text_sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// How many bad values of one entry are reported at most.
const BAD_VALUES_PER_ENTRY: usize = 16;

/// Deserializes one value, reporting unknown keys and every bad value under
/// `path`. A bad value's key is taken out and the rest read again, so the
/// next bad value is found too, and the rest is returned for the checks
/// that follow (the config is refused anyway: a problem was reported). A
/// key whose removal only makes a required key missing is not reported
/// twice, and gives no entry.
fn deserialize_at<T: DeserializeOwned>(
    mut value: toml::Value,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let mut unknown = Vec::new();
    let mut removed: Vec<String> = Vec::new();
    for _ in 0..BAD_VALUES_PER_ENTRY {
        // An optional table's path has a `?` segment for its `Some`
        // (`serial.?.speed`): the key as written has none.
        let mut on_unknown =
            |p: serde_ignored::Path<'_>| unknown.push(p.to_string().replace(".?", ""));
        let de = serde_ignored::Deserializer::new(value.clone(), &mut on_unknown);
        let result: Result<T, _> = serde_path_to_error::deserialize(de);
        match result {
            Ok(v) => {
                report_unknown(&mut unknown, path, problems);
                return Some(v);
            }
            Err(e) => {
                let inner = e.path().to_string();
                // The bare message: the error's Display appends the key again
                // ("in `max_import`"), which the path already says.
                let message = e.into_inner().message().to_string();
                let missing_removed = removed
                    .iter()
                    .any(|k| message == format!("missing field `{k}`"));
                if !missing_removed {
                    problems.push(Problem::new(join(path, &inner), message));
                }
                // Only a key of this entry's own table can be taken out.
                let key = inner
                    .split(['.', '['])
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let taken = match &mut value {
                    toml::Value::Table(t) if !key.is_empty() && !missing_removed => {
                        t.remove(&key).is_some()
                    }
                    _ => false,
                };
                if !taken {
                    break;
                }
                removed.push(key);
            }
        }
    }
    report_unknown(&mut unknown, path, problems);
    None
}

/// Each unknown key once, under `path`.
fn report_unknown(unknown: &mut Vec<String>, path: &str, problems: &mut Vec<Problem>) {
    unknown.sort();
    unknown.dedup();
    for key in unknown.drain(..) {
        problems.push(Problem::new(join(path, &key), "unknown key"));
    }
}

fn join(base: &str, inner: &str) -> String {
    match (base.is_empty(), inner.is_empty() || inner == ".") {
        (_, true) => base.to_string(),
        (true, false) => inner.to_string(),
        (false, false) if inner.starts_with('[') => format!("{base}{inner}"),
        (false, false) => format!("{base}.{inner}"),
    }
}

fn optional_section<T: DeserializeOwned>(
    table: &mut toml::Table,
    key: &str,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let value = table.remove(key)?;
    deserialize_at(value, key, problems)
}

/// The string `field` of every entry of the array `key`, whether the entry is
/// valid or not: what other sections may refer to. A reference to an entry that
/// has problems of its own is not also reported as unknown.
fn declared_names(table: &toml::Table, key: &str, field: &str) -> HashSet<String> {
    let Some(toml::Value::Array(items)) = table.get(key) else {
        return HashSet::new();
    };
    items
        .iter()
        .filter_map(|item| item.get(field)?.as_str().map(str::to_string))
        .collect()
}

/// Deserializes each entry of an array of tables on its own, so that one bad entry
/// does not hide problems in the next. A failed entry is `None` in its slot.
fn array_section<T: DeserializeOwned>(
    table: &mut toml::Table,
    key: &str,
    problems: &mut Vec<Problem>,
) -> Vec<Option<T>> {
    match table.remove(key) {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| deserialize_at(item, &format!("{key}[{i}]"), problems))
            .collect(),
        Some(other) => {
            problems.push(Problem::new(
                key,
                format!(
                    "expected an array of tables ([[{key}]]), found {}",
                    other.type_str()
                ),
            ));
            Vec::new()
        }
    }
}
