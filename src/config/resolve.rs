//! The cross-reference pass: derives device references, parses addresses, and
//! checks everything that spans sections. Collects problems; never stops early.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

use super::problem::Problem;
use super::raw::{RawBus, RawDevice, RawHttp, RawRtu};
use super::values::AuthMode;
use super::{
    BusConfig, Config, DeviceConfig, HttpConfig, LoggingConfig, MqttConfig, PollingConfig,
    ProfileRef, RtuConfig, SiteConfig, StorageConfig, TokenConfig, Transport,
};
use crate::model::DeviceId;

pub(super) struct Sections {
    pub gateway_id: String,
    pub gateway_id_source: super::GatewayIdSource,
    pub http: RawHttp,
    pub storage: StorageConfig,
    pub polling: PollingConfig,
    pub logging: LoggingConfig,
    pub clock: super::ClockConfig,
    pub ops: super::OpsConfig,
    pub mqtt: Option<MqttConfig>,
    pub simulator: super::SimulatorConfig,
    pub sites: Vec<Option<SiteConfig>>,
    pub buses: Vec<Option<RawBus>>,
    pub devices: Vec<Option<RawDevice>>,
    /// Site references and bus names written in the file, including those of
    /// entries that failed to parse.
    pub declared_sites: HashSet<String>,
    pub declared_buses: HashSet<String>,
    pub profiles_dir: std::path::PathBuf,
    pub profiles: super::profiles::Resolver,
}

/// Returns the config; `problems` says whether it may be used.
pub(super) fn resolve(mut s: Sections, problems: &mut Vec<Problem>) -> Config {
    check_identifier("gateway_id", &s.gateway_id, problems);
    let http = resolve_http(s.http, problems);
    check_storage(&s.storage, problems);
    check_polling(&s.polling, problems);
    if !(100..=3_600_000).contains(&s.clock.step_threshold_ms) {
        problems.push(Problem::new(
            "clock.step_threshold_ms",
            format!(
                "must be 100 to 3600000, found {}",
                s.clock.step_threshold_ms
            ),
        ));
    }
    let mut file_problems = Vec::new();
    if let Some(mqtt) = &s.mqtt {
        check_mqtt(mqtt, &s.storage, problems, &mut file_problems);
    }

    let mut site_refs = HashSet::new();
    let mut sites = Vec::new();
    for (i, site) in s.sites.into_iter().enumerate() {
        let Some(site) = site else { continue };
        let path = format!("sites[{i}]");
        check_identifier(&format!("{path}.reference"), &site.reference, problems);
        if !site_refs.insert(site.reference.clone()) {
            problems.push(Problem::new(
                format!("{path}.reference"),
                format!("duplicate site reference {:?}", site.reference),
            ));
        }
        for (key, p) in [
            ("max_import", site.max_import),
            ("max_export", site.max_export),
            ("rated_production_power", site.rated_production_power),
        ] {
            if let Some(p) = p {
                if p.watts() < 0.0 {
                    problems.push(Problem::new(
                        format!("{path}.{key}"),
                        format!("must not be negative, found {} W", p.watts()),
                    ));
                }
            }
        }
        if site.control_interval_ms < 100 {
            problems.push(Problem::new(
                format!("{path}.control_interval_ms"),
                format!("must be at least 100, found {}", site.control_interval_ms),
            ));
        }
        let ramp = site.grid_loop.ramp_percent_per_s;
        if !(ramp.is_finite() && ramp > 0.0 && ramp <= 100.0) {
            problems.push(Problem::new(
                format!("{path}.grid_loop.ramp_percent_per_s"),
                format!("must be above 0 and at most 100, found {ramp}"),
            ));
        }
        for (j, g) in site.grid_signals.iter().enumerate() {
            check_grid_signal(
                &format!("{path}.grid_signals[{j}]"),
                g,
                &s.declared_buses,
                problems,
            );
        }
        if site.revert_timeout_s < 2 {
            problems.push(Problem::new(
                format!("{path}.revert_timeout_s"),
                format!(
                    "must be 2 to 65535 seconds (setpoints are refreshed at half of it), found {}",
                    site.revert_timeout_s
                ),
            ));
        }
        sites.push(site);
    }

    let mut bus_kinds = HashMap::new();
    let mut buses = Vec::new();
    for (i, bus) in s.buses.into_iter().enumerate() {
        let Some(bus) = bus else { continue };
        let path = format!("buses[{i}]");
        if let Some(b) = resolve_bus(&path, bus, problems) {
            if bus_kinds
                .insert(b.name.clone(), matches!(b.transport, Transport::Tcp { .. }))
                .is_some()
            {
                problems.push(Problem::new(
                    format!("{path}.name"),
                    format!("duplicate bus name {:?}", b.name),
                ));
            }
            buses.push(b);
        }
    }

    let mut devices = Vec::new();
    let mut device_refs = HashSet::new();
    let mut addresses = HashSet::new();
    for (i, dev) in s.devices.into_iter().enumerate() {
        let Some(dev) = dev else { continue };
        let path = format!("devices[{i}]");
        let reference = dev
            .reference
            .clone()
            .unwrap_or_else(|| derive_reference(&dev.site, &dev.name));
        check_identifier(&format!("{path}.reference"), &reference, problems);
        if !device_refs.insert(reference.clone()) {
            problems.push(Problem::new(
                format!("{path}.reference"),
                format!("duplicate device reference {reference:?}"),
            ));
        }
        if dev.name.trim().is_empty() {
            problems.push(Problem::new(format!("{path}.name"), "must not be empty"));
        }
        // Declared names include those of valid entries: one set answers both.
        if !s.declared_sites.contains(&dev.site) {
            problems.push(Problem::new(
                format!("{path}.site"),
                format!(
                    "unknown site {:?} (no [[sites]] entry has that reference)",
                    dev.site
                ),
            ));
        }
        // `None` for a bus whose entry has problems of its own (reported there).
        let is_tcp = bus_kinds.get(&dev.bus).copied();
        if !s.declared_buses.contains(&dev.bus) {
            problems.push(Problem::new(
                format!("{path}.bus"),
                format!(
                    "unknown bus {:?} (no [[buses]] entry has that name)",
                    dev.bus
                ),
            ));
        } else {
            let valid =
                (1..=247).contains(&dev.unit_id) || (is_tcp != Some(false) && dev.unit_id == 255);
            if !valid {
                problems.push(Problem::new(
                    format!("{path}.unit_id"),
                    format!(
                        "{} is not a device address (1 to 247{})",
                        dev.unit_id,
                        if is_tcp == Some(false) {
                            ""
                        } else {
                            ", or 255 on TCP"
                        }
                    ),
                ));
            }
            if !addresses.insert((dev.bus.clone(), dev.unit_id)) {
                problems.push(Problem::new(
                    format!("{path}.unit_id"),
                    format!("unit id {} is used twice on bus {:?}", dev.unit_id, dev.bus),
                ));
            }
        }
        let device = resolve_device(
            &path,
            devices.len(),
            reference,
            dev,
            &mut s.profiles,
            problems,
        );
        devices.push(device);
    }

    let references: Vec<(&str, crate::model::DeviceType)> = devices
        .iter()
        .map(|d: &DeviceConfig| (d.reference.as_str(), d.device_type))
        .collect();
    s.simulator.check(&references, problems);

    Config {
        gateway_id: s.gateway_id,
        gateway_id_source: s.gateway_id_source,
        http,
        storage: s.storage,
        polling: s.polling,
        logging: s.logging,
        clock: s.clock,
        ops: s.ops,
        sites,
        buses,
        devices,
        mqtt: s.mqtt,
        simulator: s.simulator,
        profiles_dir: s.profiles_dir,
        file_problems,
        text_sha256: String::new(),
        file: None,
    }
}

/// References and ids go into URLs and MQTT topics: keep them to a safe alphabet.
fn check_identifier(path: &str, value: &str, problems: &mut Vec<Problem>) {
    if let Err(message) = identifier(value) {
        problems.push(Problem::new(path, message));
    }
}

/// The rule for references and ids (also `sitegate demo --gateway-id`).
pub(super) fn identifier(value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{value:?} must be 1 to 64 characters of A-Z, a-z, 0-9, '_', '-', '.'"
        ))
    }
}

/// A grid signal: its bus exists, its inputs are located, its levels are
/// distinct values the inputs can take, each with a limit.
fn check_grid_signal(
    path: &str,
    g: &super::GridSignalConfig,
    buses: &HashSet<String>,
    problems: &mut Vec<Problem>,
) {
    let mut bad =
        |key: &str, msg: String| problems.push(Problem::new(format!("{path}.{key}"), msg));
    if !buses.contains(&g.bus) {
        bad(
            "bus",
            format!("unknown bus {:?} (no [[buses]] entry has that name)", g.bus),
        );
    }
    if let Some(m) = &g.module {
        if crate::register::io::module(m).is_none() {
            bad(
                "module",
                format!(
                    "unknown module {m:?}; built-in modules: {}",
                    crate::register::io::module_names()
                ),
            );
        }
    }
    let block = g.block();
    if block.is_none() && g.module.is_none() {
        bad(
            "module",
            "give a module (e.g. \"generic-di\") or table, register and inputs".into(),
        );
    }
    let inputs = block.map_or(16, |b| b.inputs);
    if !(1..=16).contains(&inputs) {
        bad("inputs", format!("must be 1 to 16, found {inputs}"));
    }
    if g.poll_interval_ms < 100 || g.poll_interval_ms > 60_000 {
        bad(
            "poll_interval_ms",
            format!("must be 100 to 60000, found {}", g.poll_interval_ms),
        );
    }
    if g.levels.is_empty() {
        bad("levels", "at least one level is needed".into());
    }
    let max_value = (1u32 << inputs.clamp(1, 16)) - 1;
    let mut seen = HashSet::new();
    for (k, l) in g.levels.iter().enumerate() {
        if u32::from(l.value) > max_value {
            bad(
                &format!("levels[{k}].value"),
                format!(
                    "{} cannot come from {inputs} inputs (at most {max_value})",
                    l.value
                ),
            );
        }
        if !seen.insert(l.value) {
            bad(
                &format!("levels[{k}].value"),
                format!("value {} is listed twice", l.value),
            );
        }
        if l.max_import.is_none() && l.max_export.is_none() {
            bad(
                &format!("levels[{k}]"),
                "give max_import, max_export or both (\"100 %\" for no limit)".into(),
            );
        }
        for (key, v) in [("max_import", l.max_import), ("max_export", l.max_export)] {
            if let Some(super::PowerShare::Watts(w)) = v {
                if w < 0.0 {
                    bad(
                        &format!("levels[{k}].{key}"),
                        format!("must not be negative, found {w} W"),
                    );
                }
            }
        }
    }
    if let Some(v) = g.lost_value {
        if !g.levels.iter().any(|l| l.value == v) {
            bad(
                "lost_value",
                format!("{v} is not one of the levels' values"),
            );
        }
    }
}

/// `dvc_<site without its ste_ prefix>_<name as a slug>`: stable as long as the site
/// reference and the device name stay.
pub(super) fn derive_reference(site: &str, name: &str) -> String {
    let site = site.strip_prefix("ste_").unwrap_or(site);
    let mut slug = String::new();
    for c in format!("{site} {name}").chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('_') && !slug.is_empty() {
            slug.push('_');
        }
    }
    let slug = slug.trim_end_matches('_');
    format!("dvc_{slug}")
}

fn resolve_http(raw: RawHttp, problems: &mut Vec<Problem>) -> HttpConfig {
    let mut listen = Vec::new();
    for (i, addr) in raw.listen.iter().enumerate() {
        match addr.parse::<SocketAddr>() {
            Ok(a) => listen.push(a),
            Err(_) => problems.push(Problem::new(
                format!("http.listen[{i}]"),
                format!("{addr:?} is not an IP address with a port, e.g. \"0.0.0.0:8080\""),
            )),
        }
    }
    if raw.listen.is_empty() {
        problems.push(Problem::new(
            "http.listen",
            "at least one address is needed",
        ));
    }
    if raw.auth == AuthMode::None {
        for (i, a) in listen.iter().enumerate() {
            if !a.ip().is_loopback() {
                problems.push(Problem::new(
                    format!("http.listen[{i}]"),
                    format!(
                        "auth = \"none\" is only allowed when every listener is on loopback, but {a} is reachable from the network; use auth = \"tokens\""
                    ),
                ));
            }
        }
    }
    let mut names = HashSet::new();
    let mut tokens = Vec::new();
    for (i, t) in raw.tokens.into_iter().enumerate() {
        let path = format!("http.tokens[{i}]");
        if t.name.trim().is_empty() {
            problems.push(Problem::new(format!("{path}.name"), "must not be empty"));
        } else if !names.insert(t.name.clone()) {
            problems.push(Problem::new(
                format!("{path}.name"),
                format!("duplicate token name {:?}", t.name),
            ));
        }
        if t.scopes.is_empty() {
            problems.push(Problem::new(
                format!("{path}.scopes"),
                "must name at least one scope (read, steer, admin)",
            ));
        }
        let mut hash = [0u8; 32];
        match hex::decode_to_slice(t.sha256.trim(), &mut hash) {
            Ok(()) => tokens.push(TokenConfig {
                name: t.name,
                sha256: hash,
                scopes: t.scopes,
            }),
            Err(_) => problems.push(Problem::new(
                format!("{path}.sha256"),
                format!(
                    "{:?} is not 64 hex characters (the SHA-256 of the token; `sitegate token new` prints it)",
                    t.sha256
                ),
            )),
        }
    }
    if raw.auth == AuthMode::Tokens && tokens.is_empty() && names.is_empty() {
        problems.push(Problem::new(
            "http.tokens",
            "auth = \"tokens\" but no [[http.tokens]] is configured: nobody could use the API (make one with `sitegate token new`)",
        ));
    }
    if !(raw.rate_limit.requests_per_s.is_finite() && raw.rate_limit.requests_per_s >= 0.0) {
        problems.push(Problem::new(
            "http.rate_limit.requests_per_s",
            format!(
                "must be a number >= 0 (0 turns the limit off), found {}",
                raw.rate_limit.requests_per_s
            ),
        ));
    }
    if raw.rate_limit.requests_per_s > 0.0 && raw.rate_limit.burst == 0 {
        problems.push(Problem::new(
            "http.rate_limit.burst",
            "must be at least 1 while requests_per_s is above 0, found 0",
        ));
    }
    if !(100..=600_000).contains(&raw.request_timeout_ms) {
        problems.push(Problem::new(
            "http.request_timeout_ms",
            format!("must be 100 to 600000, found {}", raw.request_timeout_ms),
        ));
    }
    HttpConfig {
        listen,
        auth: raw.auth,
        tokens,
        metrics: raw.metrics,
        request_timeout_ms: raw.request_timeout_ms,
        rate_limit: raw.rate_limit,
    }
}

fn check_storage(s: &StorageConfig, problems: &mut Vec<Problem>) {
    if s.path.as_os_str().is_empty() {
        problems.push(Problem::new("storage.path", "must not be empty"));
    }
    if s.flush_interval_ms == 0 || s.flush_interval_ms > 60_000 {
        problems.push(Problem::new(
            "storage.flush_interval_ms",
            format!("must be 1 to 60000, found {}", s.flush_interval_ms),
        ));
    }
    if s.batch_size == 0 {
        problems.push(Problem::new("storage.batch_size", "must be at least 1"));
    }
    if s.compact_interval_s == 0 || s.compact_interval_s > 3600 {
        problems.push(Problem::new(
            "storage.compact_interval_s",
            format!("must be 1 to 3600, found {}", s.compact_interval_s),
        ));
    }
    if s.retention_days == 0 {
        problems.push(Problem::new("storage.retention_days", "must be at least 1"));
    }
    if let Some(days) = s.minute_rollup_retention_days {
        if days < s.retention_days || days > s.rollup_retention_days {
            problems.push(Problem::new(
                "storage.minute_rollup_retention_days",
                format!(
                    "{days} must be from retention_days ({}) to rollup_retention_days ({})",
                    s.retention_days, s.rollup_retention_days
                ),
            ));
        }
    }
    if s.rollup_retention_days < s.retention_days {
        problems.push(Problem::new(
            "storage.rollup_retention_days",
            format!(
                "{} is shorter than retention_days ({}): rollups must outlive raw samples",
                s.rollup_retention_days, s.retention_days
            ),
        ));
    }
}

fn check_polling(p: &PollingConfig, problems: &mut Vec<Problem>) {
    if p.min_backoff_ms == 0 || p.min_backoff_ms > p.max_backoff_ms {
        problems.push(Problem::new(
            "polling.min_backoff_ms",
            format!(
                "must be at least 1 and at most max_backoff_ms ({}), found {}",
                p.max_backoff_ms, p.min_backoff_ms
            ),
        ));
    }
    if p.coalesce_gap > 100 {
        problems.push(Problem::new(
            "polling.coalesce_gap",
            format!("must be at most 100 registers, found {}", p.coalesce_gap),
        ));
    }
}

/// `problems` make the file unusable; `file_problems` are about the TLS files it
/// names, which `check-config` reports and the running agent survives.
/// `mqtt.max_incoming_kb` bounds: room for the largest RPC request the API
/// takes, and MQTT's own largest packet (256 MiB).
const MIN_INCOMING_KB: u32 = 128;
const MAX_INCOMING_KB: u32 = 256 * 1024;

fn check_mqtt(
    m: &MqttConfig,
    storage: &StorageConfig,
    problems: &mut Vec<Problem>,
    file_problems: &mut Vec<Problem>,
) {
    let mut bad =
        |key: &str, message: String| problems.push(Problem::new(format!("mqtt.{key}"), message));
    let tls = match m.broker() {
        Ok(b) => b.tls,
        Err(e) => {
            bad("url", e);
            true
        }
    };
    let topic_safe = |s: &str| !s.is_empty() && !s.contains(['+', '#', '\0']);
    if !topic_safe(&m.prefix) || m.prefix.starts_with('/') || m.prefix.ends_with('/') {
        bad(
            "prefix",
            format!(
                "{:?} must be a topic without +, #, or a leading or trailing /",
                m.prefix
            ),
        );
    }
    if let Some(id) = &m.client_id {
        if id.is_empty() || id.len() > 64 || !id.is_ascii() {
            bad(
                "client_id",
                format!("{id:?} must be 1 to 64 ASCII characters"),
            );
        }
    }
    if m.password.is_some() && m.username.is_none() {
        bad("password", "a password needs a username".to_string());
    }
    let mut files_ok = true;
    for (key, file) in [
        ("ca_file", &m.ca_file),
        ("client_cert_file", &m.client_cert_file),
        ("client_key_file", &m.client_key_file),
    ] {
        let Some(file) = file else { continue };
        if !tls {
            files_ok = false;
            bad(
                key,
                format!("{} is only used with an mqtts:// url", file.display()),
            );
        }
    }
    if m.client_cert_file.is_some() != m.client_key_file.is_some() {
        files_ok = false;
        bad(
            "client_key_file",
            "client_cert_file and client_key_file go together".to_string(),
        );
    }
    if tls && files_ok {
        if let Err(found) = super::tls::load_tls(m) {
            file_problems.extend(found);
        }
    }
    if !(MIN_INCOMING_KB..=MAX_INCOMING_KB).contains(&m.max_incoming_kb) {
        bad(
            "max_incoming_kb",
            format!(
                "must be {MIN_INCOMING_KB} to {MAX_INCOMING_KB} (MQTT's largest packet), found {}",
                m.max_incoming_kb
            ),
        );
    }
    if !(5..=3600).contains(&m.keep_alive_s) {
        bad(
            "keep_alive_s",
            format!("must be 5 to 3600, found {}", m.keep_alive_s),
        );
    }
    if m.outbox_max_age_h == 0 {
        bad("outbox_max_age_h", "must be at least 1".to_string());
    }
    if m.outbox_max_mb == 0 {
        bad("outbox_max_mb", "must be at least 1".to_string());
    }
    // The outbox is a table of the store: past its size cap the store would
    // delete measurement history to make room for telemetry waiting to be sent.
    if m.outbox_max_mb >= storage.max_size_mb {
        bad(
            "outbox_max_mb",
            format!(
                "{} must be below storage.max_size_mb ({}): the outbox is part of the same database",
                m.outbox_max_mb, storage.max_size_mb
            ),
        );
    }
    if m.drain_rate == 0 {
        bad(
            "drain_rate",
            "must be at least 1 message per second".to_string(),
        );
    }
}

fn resolve_bus(path: &str, bus: RawBus, problems: &mut Vec<Problem>) -> Option<BusConfig> {
    check_identifier(&format!("{path}.name"), &bus.name, problems);
    if bus.timeout_ms == 0 || bus.timeout_ms > 60_000 {
        problems.push(Problem::new(
            format!("{path}.timeout_ms"),
            format!("must be 1 to 60000, found {}", bus.timeout_ms),
        ));
    }
    let transport = match (bus.tcp, bus.rtu) {
        (Some(tcp), None) => parse_tcp(&format!("{path}.tcp"), &tcp, problems)?,
        (None, Some(rtu)) => Transport::Rtu(check_rtu(&format!("{path}.rtu"), rtu, problems)?),
        (Some(_), Some(_)) => {
            problems.push(Problem::new(path, "give either tcp or rtu, not both"));
            return None;
        }
        (None, None) => {
            problems.push(Problem::new(
                path,
                "missing transport: add tcp = \"host:port\" or rtu = { path = \"/dev/ttyUSB0\", ... }",
            ));
            return None;
        }
    };
    Some(BusConfig {
        name: bus.name,
        transport,
        timeout_ms: bus.timeout_ms,
    })
}

/// `host:port`, `host` (port 502), `[v6]:port`.
fn parse_tcp(path: &str, s: &str, problems: &mut Vec<Problem>) -> Option<Transport> {
    let bad = |problems: &mut Vec<Problem>, why: &str| {
        problems.push(Problem::new(
            path,
            format!("{s:?} is not a Modbus TCP address: {why}"),
        ));
        None
    };
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Some(Transport::Tcp {
            host: a.ip().to_string(),
            port: a.port(),
        });
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(Transport::Tcp {
            host: ip.to_string(),
            port: 502,
        });
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(p) => (h, p),
            Err(_) => return bad(problems, "the port must be a number from 0 to 65535"),
        },
        None => (s, 502),
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if !host_ok {
        return bad(problems, "expected host:port, e.g. \"192.168.1.50:502\"");
    }
    Some(Transport::Tcp {
        host: host.to_string(),
        port,
    })
}

fn check_rtu(path: &str, rtu: RawRtu, problems: &mut Vec<Problem>) -> Option<RtuConfig> {
    let before = problems.len();
    if rtu.path.as_os_str().is_empty() {
        problems.push(Problem::new(format!("{path}.path"), "must not be empty"));
    }
    if !(300..=1_000_000).contains(&rtu.baud) {
        problems.push(Problem::new(
            format!("{path}.baud"),
            format!("{} is not a serial speed (300 to 1000000)", rtu.baud),
        ));
    }
    if !(5..=8).contains(&rtu.data_bits) {
        problems.push(Problem::new(
            format!("{path}.data_bits"),
            format!("must be 5 to 8, found {}", rtu.data_bits),
        ));
    }
    if !(1..=2).contains(&rtu.stop_bits) {
        problems.push(Problem::new(
            format!("{path}.stop_bits"),
            format!("must be 1 or 2, found {}", rtu.stop_bits),
        ));
    }
    (problems.len() == before).then_some(RtuConfig {
        path: rtu.path,
        baud: rtu.baud,
        parity: rtu.parity,
        data_bits: rtu.data_bits,
        stop_bits: rtu.stop_bits,
    })
}

fn resolve_device(
    path: &str,
    index: usize,
    reference: String,
    d: RawDevice,
    profiles: &mut super::profiles::Resolver,
    problems: &mut Vec<Problem>,
) -> DeviceConfig {
    if d.poll_interval_ms < 100 || d.poll_interval_ms > 3_600_000 {
        problems.push(Problem::new(
            format!("{path}.poll_interval_ms"),
            format!("must be 100 to 3600000, found {}", d.poll_interval_ms),
        ));
    }
    let profile = match d.profile.as_str() {
        "sunspec" => ProfileRef::Sunspec,
        "" => {
            problems.push(Problem::new(format!("{path}.profile"), "must not be empty"));
            ProfileRef::Sunspec
        }
        name => resolve_profile(
            &format!("{path}.profile"),
            name,
            d.device_type,
            profiles,
            problems,
        ),
    };
    let profile = named_variant(path, d.variant.as_deref(), profile, problems);
    unrated_profile_battery(path, &d, &profile, problems);
    for (key, v) in [("soc_min", d.soc_min), ("soc_max", d.soc_max)] {
        if let Some(v) = v {
            if !(0.0..=100.0).contains(&v) {
                problems.push(Problem::new(
                    format!("{path}.{key}"),
                    format!("must be a percentage from 0 to 100, found {v}"),
                ));
            }
        }
    }
    if let (Some(lo), Some(hi)) = (d.soc_min, d.soc_max) {
        if lo >= hi {
            problems.push(Problem::new(
                format!("{path}.soc_min"),
                format!("soc_min ({lo}) must be below soc_max ({hi})"),
            ));
        }
    }
    for (key, p) in [
        ("rated_power", d.rated_power.map(|p| p.watts())),
        ("capacity", d.capacity.map(|e| e.watt_hours())),
        ("max_charge_power", d.max_charge_power.map(|p| p.watts())),
        (
            "max_discharge_power",
            d.max_discharge_power.map(|p| p.watts()),
        ),
    ] {
        if let Some(v) = p {
            if v < 0.0 {
                problems.push(Problem::new(
                    format!("{path}.{key}"),
                    format!("must not be negative, found {v}"),
                ));
            }
        }
    }
    match d.report_lag_ms {
        Some(_) if d.device_type != crate::model::DeviceType::Meter => problems.push(Problem::new(
            format!("{path}.report_lag_ms"),
            "applies to meters only",
        )),
        Some(v) if v > 60_000 => problems.push(Problem::new(
            format!("{path}.report_lag_ms"),
            format!("must be 0 to 60000, found {v}"),
        )),
        _ => {}
    }
    DeviceConfig {
        id: DeviceId(index as u16),
        reference,
        name: d.name,
        device_type: d.device_type,
        site: d.site,
        bus: d.bus,
        unit_id: d.unit_id,
        profile,
        poll_interval_ms: d.poll_interval_ms,
        invert_power: d.invert_power,
        rated_power_w: d.rated_power.map(|p| p.watts()),
        capacity_wh: d.capacity.map(|e| e.watt_hours()),
        soc_min: d.soc_min,
        soc_max: d.soc_max,
        max_charge_power_w: d.max_charge_power.map(|p| p.watts()),
        report_lag_ms: d.report_lag_ms.unwrap_or(super::DEFAULT_REPORT_LAG_MS),
        max_discharge_power_w: d.max_discharge_power.map(|p| p.watts()),
        priority: d.priority,
    }
}

/// The concrete profile of the variant the device names (`variant = "..."`);
/// without one, a family's variant is told from the device at first contact.
fn named_variant(
    path: &str,
    variant: Option<&str>,
    profile: ProfileRef,
    problems: &mut Vec<Problem>,
) -> ProfileRef {
    let Some(name) = variant else {
        return profile;
    };
    match &profile {
        ProfileRef::Sunspec => {
            problems.push(Problem::new(
                format!("{path}.variant"),
                format!("{name:?}: a variant belongs to a register-map profile, not to sunspec"),
            ));
            profile
        }
        ProfileRef::Registers(p) => match p.with_variant(name) {
            Ok(concrete) => ProfileRef::Registers(std::sync::Arc::new(concrete)),
            Err(e) => {
                problems.push(Problem::new(format!("{path}.variant"), e.to_string()));
                profile
            }
        },
    }
}

/// A battery steered through a profile's `ess_power` needs a rating from the
/// config: profiles read none, and steering shares storage power by rating, so
/// without one every setpoint would be 0 W.
fn unrated_profile_battery(
    path: &str,
    d: &RawDevice,
    profile: &ProfileRef,
    problems: &mut Vec<Problem>,
) {
    let ProfileRef::Registers(p) = profile else {
        return;
    };
    let steered =
        d.device_type == crate::model::DeviceType::Battery && p.controls.ess_power.is_some();
    let rated =
        d.rated_power.is_some() || d.max_charge_power.is_some() || d.max_discharge_power.is_some();
    if steered && !rated {
        problems.push(Problem::new(
            format!("{path}.rated_power"),
            format!(
                "required for a battery steered through profile {:?}, which reads no rating: \
                 without it every setpoint would be 0 W (or give max_charge_power and \
                 max_discharge_power)",
                p.name
            ),
        ));
    }
}

/// A named or path profile, or the problems that make it unusable (each with the
/// profile file's own path inside it). On failure the device falls back to
/// SunSpec so that checking goes on; the config is refused anyway.
fn resolve_profile(
    path: &str,
    name: &str,
    device_type: crate::model::DeviceType,
    profiles: &mut super::profiles::Resolver,
    problems: &mut Vec<Problem>,
) -> ProfileRef {
    use crate::profile::ProfileError;
    match profiles.resolve(name) {
        Ok(p) => {
            if !p.device_types.is_empty() && !p.device_types.contains(&device_type) {
                let types: Vec<&str> = p.device_types.iter().map(|t| t.as_str()).collect();
                problems.push(Problem::new(
                    path,
                    format!(
                        "profile {name:?} is written for {} devices, not {}",
                        types.join(", "),
                        device_type.as_str()
                    ),
                ));
            }
            ProfileRef::Registers(p)
        }
        Err(ProfileError::Invalid {
            origin,
            problems: found,
        }) => {
            for f in found {
                problems.push(Problem::new(path, format!("profile {origin}: {f}")));
            }
            ProfileRef::Sunspec
        }
        Err(e) => {
            problems.push(Problem::new(path, e.to_string()));
            ProfileRef::Sunspec
        }
    }
}
