//! `[storage]` and `[mqtt]`: the store's bounds and the uplink's settings,
//! with the files the uplink's TLS names (found later, as file problems).
//! Collects problems; never stops early.

use super::super::problem::Problem;
use super::super::{MqttConfig, StorageConfig};

/// `storage.wal_checkpoint_mb` at most: a WAL this large takes as long to
/// read back at a start after a power cut.
const MAX_WAL_CHECKPOINT_MB: u64 = 4096;

pub(super) fn check_storage(s: &StorageConfig, problems: &mut Vec<Problem>) {
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
    if s.retention_interval_s == 0 || s.retention_interval_s > 3600 {
        problems.push(Problem::new(
            "storage.retention_interval_s",
            format!("must be 1 to 3600, found {}", s.retention_interval_s),
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
    if let Some(mb) = s.wal_checkpoint_mb {
        if mb == 0 || mb > MAX_WAL_CHECKPOINT_MB {
            problems.push(Problem::new(
                "storage.wal_checkpoint_mb",
                format!("must be 1 to {MAX_WAL_CHECKPOINT_MB}, found {mb}"),
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

/// `mqtt.max_incoming_kb` bounds: room for the largest RPC request the API
/// takes, and MQTT's own largest packet (256 MiB).
const MIN_INCOMING_KB: u32 = 128;
const MAX_INCOMING_KB: u32 = 256 * 1024;
/// `mqtt.max_outgoing_kb` bounds: room for a telemetry batch and a small
/// answer, and MQTT's own largest packet.
const MIN_OUTGOING_KB: u32 = 16;

/// `problems` make the file unusable; `file_problems` are about the TLS files it
/// names, which `check-config` reports and the running agent survives.
pub(super) fn check_mqtt(
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
    check_tls_files(m, tls, problems, file_problems);
    check_bounds(m, storage, problems);
}

/// The TLS files, given only with an `mqtts://` url (`tls`), the client's
/// certificate and key together; then loaded, what fails to load going
/// to `file_problems`.
fn check_tls_files(
    m: &MqttConfig,
    tls: bool,
    problems: &mut Vec<Problem>,
    file_problems: &mut Vec<Problem>,
) {
    let mut bad =
        |key: &str, message: String| problems.push(Problem::new(format!("mqtt.{key}"), message));
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
        if let Err(found) = super::super::tls::load_tls(m) {
            file_problems.extend(found);
        }
    }
}

/// The packet sizes, the keep-alive, the outbox's age, size (below the
/// store's) and drain rate within their bounds.
fn check_bounds(m: &MqttConfig, storage: &StorageConfig, problems: &mut Vec<Problem>) {
    let mut bad =
        |key: &str, message: String| problems.push(Problem::new(format!("mqtt.{key}"), message));
    if !(MIN_INCOMING_KB..=MAX_INCOMING_KB).contains(&m.max_incoming_kb) {
        bad(
            "max_incoming_kb",
            format!(
                "must be {MIN_INCOMING_KB} to {MAX_INCOMING_KB} (MQTT's largest packet), found {}",
                m.max_incoming_kb
            ),
        );
    }
    if !(MIN_OUTGOING_KB..=MAX_INCOMING_KB).contains(&m.max_outgoing_kb) {
        bad(
            "max_outgoing_kb",
            format!(
                "must be {MIN_OUTGOING_KB} to {MAX_INCOMING_KB} (MQTT's largest packet), found {}",
                m.max_outgoing_kb
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
