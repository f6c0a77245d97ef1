//! The support bundle's sections, read from the running agent: version and
//! build, the config's hash, the device table with each device's last error,
//! the event list, the store's health, the metrics text, the recent steering history of each
//! site and the newest log lines. Each section has its bound
//! (`bundle::assemble` cuts it there).
//!
//! It must not hold a lock across an await, change anything, or put a secret
//! in a section: tokens and TLS files are not read, only the config's hash is.

use std::fmt::Write as _;

use tracing::Level;

use super::bundle::Section;
use super::operation::level_name;
use super::OpsContext;
use crate::model::time::{format_utc, now_ms};

/// Steering records per site.
const HISTORY_PER_SITE: usize = 50;
/// Log lines in the bundle, and their bytes.
const LOG_LINES: usize = 500;
const LOG_BYTES: usize = 192 * 1024;

/// The agent's version and build, as the bundle and `/admin` show it.
pub fn build() -> String {
    format!(
        "{}-{} ({})",
        std::env::consts::ARCH,
        std::env::consts::OS,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    )
}

/// Every section, in order.
pub async fn sections(ctx: &OpsContext) -> Vec<Section> {
    vec![
        Section {
            title: "agent",
            body: agent(ctx),
            max: 4 * 1024,
        },
        Section {
            title: "devices",
            body: devices(ctx),
            max: 128 * 1024,
        },
        Section {
            title: "events",
            body: events(ctx),
            max: 48 * 1024,
        },
        Section {
            title: "store",
            body: store(ctx),
            max: 8 * 1024,
        },
        Section {
            title: "steering history",
            body: steering(ctx).await,
            max: 192 * 1024,
        },
        Section {
            title: "metrics",
            body: ctx.metrics.as_ref().map_or_else(
                || "metrics are turned off (http.metrics = false)\n".into(),
                |r| r.render(),
            ),
            max: 384 * 1024,
        },
        Section {
            title: "log",
            body: log(),
            max: LOG_BYTES + 16 * 1024,
        },
    ]
}

/// The event list, newest first: time, kind, what it concerns, detail.
fn events(ctx: &OpsContext) -> String {
    let Some(log) = &ctx.events else {
        return "the event list is not running\n".into();
    };
    let events = log.newest_first();
    if events.is_empty() {
        return "no events since start\n".into();
    }
    let mut out = String::new();
    for e in events {
        let _ = writeln!(
            out,
            "{}  {}  {}  {}",
            format_utc(e.at_ms),
            e.kind.wire_name(),
            e.subject,
            e.detail
        );
    }
    out
}

fn agent(ctx: &OpsContext) -> String {
    let c = &ctx.config;
    format!(
        "version: {}\nbuild: {}\ngateway_id: {}\nconfig_sha256: {}\nwritten_at: {}\nsites: {}\nbuses: {}\ndevices: {}\nmqtt: {}\n",
        env!("CARGO_PKG_VERSION"),
        build(),
        c.gateway_id,
        c.text_sha256,
        format_utc(now_ms()),
        c.sites.len(),
        c.buses.len(),
        c.devices.len(),
        if c.mqtt.is_some() { "configured" } else { "not configured" },
    ) + &https(ctx)
}

/// The HTTPS certificate in service: its fingerprint and key pin (public).
fn https(ctx: &OpsContext) -> String {
    match &ctx.https {
        None => "https: not served\n".to_string(),
        Some(certs) => {
            let pair = certs.current();
            format!(
                "https_fingerprint_sha256: {}\nhttps_pubkey_pin: {}\n",
                pair.fingerprint,
                pair.pin.as_deref().unwrap_or("-")
            )
        }
    }
}

fn devices(ctx: &OpsContext) -> String {
    let mut out =
        String::from("reference\tsite\tbus\tunit\ttype\tonline\tlast_seen\tmodel\tlast_error\n");
    for d in ctx.live.devices().iter() {
        let s = ctx.live.snapshot(d.id);
        let model = [s.info.manufacturer.as_deref(), s.info.model.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            d.reference,
            d.site,
            d.bus,
            d.unit_id,
            d.device_type.as_str(),
            if !s.attempted {
                "not polled yet"
            } else if s.online {
                "yes"
            } else {
                "no"
            },
            s.last_seen.map_or_else(|| "never".into(), format_utc),
            if model.is_empty() { "-" } else { &model },
            s.last_error.as_deref().unwrap_or("-"),
        );
    }
    out
}

fn store(ctx: &OpsContext) -> String {
    let s = &ctx.store;
    let size = |p: &std::path::Path| {
        std::fs::metadata(p).map_or_else(|e| e.to_string(), |m| format!("{} bytes", m.len()))
    };
    let wal = {
        let mut os = s.path().as_os_str().to_owned();
        os.push("-wal");
        std::path::PathBuf::from(os)
    };
    format!(
        "path: {}\nopen: {}\nfile: {}\nwal: {}\ncommits failing: {}\nsamples waiting in memory: {}\ndamage found: {}\n",
        s.path().display(),
        s.is_open(),
        size(s.path()),
        size(&wal),
        s.stats().problem().unwrap_or_else(|| "no".into()),
        s.stats().buffered(),
        s.stats().damage_found().unwrap_or_else(|| "no".into()),
    )
}

async fn steering(ctx: &OpsContext) -> String {
    let mut out = String::new();
    for site in &ctx.config.sites {
        let _ = writeln!(out, "site {}:", site.reference);
        match ctx
            .steering
            .history(&site.reference, HISTORY_PER_SITE)
            .await
        {
            Ok(events) if events.is_empty() => out.push_str("  (no records)\n"),
            Ok(events) => {
                for e in events {
                    let _ = writeln!(out, "  {} {:?}", format_utc(e.at_ms), e.kind);
                }
            }
            Err(e) => {
                let _ = writeln!(out, "  cannot read the history: {e}");
            }
        }
    }
    out
}

fn log() -> String {
    let tail = crate::logging::ring().tail(LOG_LINES, Level::DEBUG, LOG_BYTES);
    let mut out = String::new();
    if tail.truncated || tail.forgotten > 0 {
        let _ = writeln!(
            out,
            "(the newest {} lines; older ones are not in this bundle)",
            tail.lines.len()
        );
    }
    for l in tail.lines {
        let _ = writeln!(
            out,
            "{} {:5} {}: {}",
            format_utc(l.ts_ms),
            level_name(l.level),
            l.target,
            l.text
        );
    }
    out
}
