//! The `gateway_id` of files that do not set one.
//!
//! The contract's default is the host name. Controllers cloned from one image
//! share their host name, and two agents with one gateway id take the broker
//! session from each other and reuse sequence numbers; so `gateway_id_from =
//! "machine-id"` (set in the package's default config) derives the id from the
//! machine id instead (`/etc/machine-id`, which systemd creates once per
//! installation): `sg-` and the first 16 hex digits of a SHA-256 over a fixed
//! label and the id. The machine id differs as long as the image leaves
//! `/etc/machine-id` empty (systemd then makes a new one at first boot). The
//! machine id itself is not published. `check-config` warns whenever the host
//! name is used, and names the id this machine would get from its machine id.
//!
//! This file only reads those files; it decides nothing else.

use sha2::{Digest, Sha256};

use super::problem::Problem;

/// Where the machine id is looked for, in order.
const MACHINE_ID_FILES: [&str; 2] = ["/etc/machine-id", "/var/lib/dbus/machine-id"];
const HOSTNAME_FILE: &str = "/proc/sys/kernel/hostname";
/// What the digest covers besides the machine id, so the gateway id says
/// nothing about the machine id to anyone who knows it from elsewhere.
const LABEL: &[u8] = b"sitegate gateway id\0";

/// Where the gateway id came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatewayIdSource {
    /// `gateway_id` in the file.
    Configured,
    /// Derived from the machine id.
    MachineId,
    /// The host name: no usable machine id.
    HostName,
    /// Neither: the fixed name `sitegate`.
    Fallback,
}

/// Where an id that is not written in the file comes from (`gateway_id_from`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeriveFrom {
    /// The host name (the contract's default).
    HostName,
    /// The machine id, else the host name.
    MachineId,
}

impl DeriveFrom {
    pub fn parse(s: &str) -> Option<DeriveFrom> {
        match s {
            "hostname" => Some(DeriveFrom::HostName),
            "machine-id" => Some(DeriveFrom::MachineId),
            _ => None,
        }
    }
}

fn machine_id() -> Option<String> {
    MACHINE_ID_FILES
        .iter()
        .find_map(|f| std::fs::read_to_string(f).ok().and_then(usable_machine_id))
}

/// The id of a file without `gateway_id`, and its source, from this machine's files.
pub fn default_gateway_id(from: DeriveFrom) -> (String, GatewayIdSource) {
    let host = std::fs::read_to_string(HOSTNAME_FILE).ok();
    match from {
        DeriveFrom::MachineId => derive(machine_id().as_deref(), host.as_deref()),
        DeriveFrom::HostName => derive(None, host.as_deref()),
    }
}

/// A machine id is 32 hex digits, not all zero ("uninitialized" or an empty file
/// in an image that is yet to boot does not count).
fn usable_machine_id(text: String) -> Option<String> {
    let id = text.trim();
    let ok = id.len() == 32
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && id.bytes().any(|b| b != b'0');
    ok.then(|| id.to_ascii_lowercase())
}

/// The default id from a machine id (already checked) and a host name.
pub fn derive(machine_id: Option<&str>, host: Option<&str>) -> (String, GatewayIdSource) {
    if let Some(id) = machine_id {
        let digest = Sha256::new()
            .chain_update(LABEL)
            .chain_update(id.as_bytes())
            .finalize();
        return (
            format!("sg-{}", hex::encode(&digest[..8])),
            GatewayIdSource::MachineId,
        );
    }
    match host.map(str::trim).filter(|h| !h.is_empty()) {
        Some(h) => (h.to_string(), GatewayIdSource::HostName),
        None => ("sitegate".to_string(), GatewayIdSource::Fallback),
    }
}

/// What `check-config` (and the agent's log at start) should say about the id.
pub fn warning(id: &str, source: GatewayIdSource) -> Option<Problem> {
    warning_with(id, source, machine_id().as_deref())
}

fn warning_with(id: &str, source: GatewayIdSource, machine_id: Option<&str>) -> Option<Problem> {
    let why = match source {
        GatewayIdSource::Configured | GatewayIdSource::MachineId => return None,
        GatewayIdSource::HostName => format!("the host name {id:?} is used"),
        GatewayIdSource::Fallback => format!("the fixed name {id:?} is used"),
    };
    let fix = match machine_id {
        Some(m) => format!(
            "set gateway_id_from = \"machine-id\" (this machine: {:?}) or a gateway_id of its own",
            derive(Some(m), None).0
        ),
        None => format!(
            "set a gateway_id of its own (no machine id is readable in {})",
            MACHINE_ID_FILES.join(", ")
        ),
    };
    Some(Problem::new(
        "gateway_id",
        format!(
            "not set: {why}; controllers cloned from one image share it and take each other's MQTT session: {fix}"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_comes_from_the_machine_id_then_the_host_name() {
        let a = "0123456789abcdef0123456789abcdef";
        let (id, source) = derive(Some(a), Some("ctrl"));
        assert_eq!(source, GatewayIdSource::MachineId);
        assert!(id.starts_with("sg-") && id.len() == 19, "{id}");
        assert!(!id.contains(a) && !id.contains("0123456789"), "{id}");
        // Stable, and different per machine.
        assert_eq!(derive(Some(a), None).0, id);
        assert_ne!(derive(Some(&a.replace('0', "1")), Some("ctrl")).0, id);
        assert_eq!(
            derive(None, Some(" ctrl-7\n")),
            ("ctrl-7".to_string(), GatewayIdSource::HostName)
        );
        assert_eq!(derive(None, Some("")).1, GatewayIdSource::Fallback);
    }

    #[test]
    fn only_real_machine_ids_count() {
        let ok = "0123456789ABCDEF0123456789abcdef\n".to_string();
        assert_eq!(
            usable_machine_id(ok).as_deref(),
            Some("0123456789abcdef0123456789abcdef")
        );
        for bad in ["", "uninitialized\n", &"0".repeat(32), &"g".repeat(32)] {
            assert_eq!(usable_machine_id(bad.to_string()), None, "{bad:?}");
        }
    }

    #[test]
    fn a_host_name_id_is_warned_about() {
        assert!(warning("sg-1", GatewayIdSource::MachineId).is_none());
        assert!(warning("x", GatewayIdSource::Configured).is_none());
        let w = warning_with("ctrl", GatewayIdSource::HostName, None).expect("a warning");
        assert_eq!(w.path, "gateway_id");
        assert!(w.message.contains("\"ctrl\"") && w.message.contains("/etc/machine-id"));
        let m = "0123456789abcdef0123456789abcdef";
        let w = warning_with("ctrl", GatewayIdSource::HostName, Some(m)).expect("a warning");
        assert!(
            w.message.contains("gateway_id_from = \"machine-id\""),
            "{}",
            w.message
        );
        assert!(
            w.message.contains(&derive(Some(m), None).0),
            "{}",
            w.message
        );
    }

    #[test]
    fn the_source_names_parse() {
        assert_eq!(DeriveFrom::parse("hostname"), Some(DeriveFrom::HostName));
        assert_eq!(DeriveFrom::parse("machine-id"), Some(DeriveFrom::MachineId));
        assert_eq!(DeriveFrom::parse("mac"), None);
    }
}
