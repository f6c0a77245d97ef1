//! The cross-reference pass: derives device references, parses addresses, and
//! checks everything that spans sections. Collects problems; never stops early.
//!
//! One file per section: `http.rs`, `storage.rs` (`[storage]`, `[mqtt]`),
//! `sites.rs`, `buses.rs` (`[[buses]]`, `[polling]`), `devices.rs`; here the
//! pass over them and the rules they share (identifiers, derived references).

mod buses;
mod devices;
mod http;
mod http_tls;
mod modbus_server;
mod sites;
mod storage;

use std::collections::HashSet;

use super::problem::Problem;
use super::raw::{RawBus, RawDevice, RawHttp};
use super::{
    Config, DeviceConfig, LoggingConfig, MqttConfig, PollingConfig, SiteConfig, StorageConfig,
};
use buses::check_polling;
use http::resolve_http;
use storage::{check_mqtt, check_storage};

pub use modbus_server::SITE_UNIT_BASE;

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
    pub modbus_server: Option<super::modbus_server::RawModbusServer>,
    pub simulator: super::SimulatorConfig,
    pub sites: Vec<Option<SiteConfig>>,
    pub buses: Vec<Option<RawBus>>,
    pub devices: Vec<Option<RawDevice>>,
    pub csip: Vec<Option<super::csip::RawCsip>>,
    pub eebus: Option<super::eebus::RawEebus>,
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
    let mut file_problems = Vec::new();
    let http = resolve_http(s.http, problems, &mut file_problems);
    check_storage(&s.storage, problems);
    check_polling(&s.polling, problems);
    if let Err(e) = super::log_level::check(&s.logging.level) {
        problems.push(Problem::new("logging.level", e));
    }
    if !(100..=3_600_000).contains(&s.clock.step_threshold_ms) {
        problems.push(Problem::new(
            "clock.step_threshold_ms",
            format!(
                "must be 100 to 3600000, found {}",
                s.clock.step_threshold_ms
            ),
        ));
    }
    if let Some(super::HttpTls::Files {
        cert_file,
        key_file,
    }) = &http.tls
    {
        if let Err(e) = super::tls_pair::load_files(cert_file, key_file) {
            let key = match e.part() {
                super::tls_pair::Part::Cert => "http.tls.cert_file",
                super::tls_pair::Part::Key => "http.tls.key_file",
            };
            file_problems.push(Problem::new(key, e.to_string()));
        }
    }
    if let Some(mqtt) = &s.mqtt {
        check_mqtt(mqtt, &s.storage, problems, &mut file_problems);
    }

    let sites = sites::resolve_sites(s.sites, &s.declared_buses, problems);
    let (buses, bus_kinds) = buses::resolve_buses(s.buses, problems);
    let declared = devices::Declared {
        sites: &s.declared_sites,
        buses: &s.declared_buses,
        bus_kinds: &bus_kinds,
    };
    let (devices, device_paths) =
        devices::resolve_devices(s.devices, &declared, &mut s.profiles, problems);
    let modbus_server = modbus_server::resolve_modbus_server(
        s.modbus_server,
        &devices,
        &device_paths,
        &sites,
        &buses,
        problems,
    );

    let csip = super::csip::resolve_csip(s.csip, &s.declared_sites, problems);
    let count = csip.len();
    for (i, c) in csip.iter().enumerate() {
        if let Err(found) = super::csip_files::load(c, i, count) {
            file_problems.extend(found);
        }
    }

    let eebus = super::eebus::resolve_eebus(s.eebus, &s.gateway_id, &sites, &devices, problems);

    let references: Vec<(&str, crate::model::DeviceType)> = devices
        .iter()
        .map(|d: &DeviceConfig| (d.reference.as_str(), d.device_type))
        .collect();
    let site_refs: Vec<&str> = s.declared_sites.iter().map(String::as_str).collect();
    s.simulator.check(&references, &site_refs, problems);

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
        modbus_server,
        csip,
        eebus,
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
