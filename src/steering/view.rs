//! JSON views of sites and of a site's steering state (`api.md`, "Sites and
//! steering"). Read-only renderings; nothing here changes state.

use serde_json::{json, Value};

use super::control::SiteRuntime;
use super::decide::GridStatus;
use super::grid_signal::SignalStatus;
use super::limits::Limit;
use super::signal::SiteSignal;
use super::timeline::Entry;
use crate::config::Power;
use crate::telemetry::Live;

fn power(p: Option<Power>) -> Value {
    match p {
        Some(p) => json!({"value": p.watts(), "unit": "W"}),
        None => Value::Null,
    }
}

/// `GET /sites/{s}`.
pub fn site_json(site: &SiteRuntime, live: &Live) -> Value {
    let c = &site.config;
    let devices: Vec<&str> = live
        .devices()
        .iter()
        .filter(|d| d.site == c.reference)
        .map(|d| d.reference.as_str())
        .collect();
    let rated = site
        .inputs(crate::model::time::now_ms(), live)
        .rules
        .rated_production_w;
    json!({
        "siteReference": c.reference,
        "name": c.name,
        "devices": devices,
        "gridConnection": {"maxImport": power(c.max_import), "maxExport": power(c.max_export)},
        "ratedProductionPower": {"value": rated, "unit": "W"},
        "fulfilment": {
            "ess": c.ess_fulfilment.wire_name(),
            "curtailment": c.curtailment_fulfilment.wire_name(),
        },
        "essFallback": match c.ess_fallback {
            crate::config::EssFallback::Auto => "auto",
            crate::config::EssFallback::Idle => "idle",
        },
        "controlIntervalMs": c.control_interval_ms,
        "revertTimeoutS": c.revert_timeout_s,
    })
}

fn entry_json<T>(e: &Entry<T>, key: &str, value: Value) -> Value {
    let mut v = json!({
        "validFrom": e.from,
        "validUntil": e.until,
        "requestId": e.request_id,
    });
    v[key] = value;
    v
}

/// `GET /sites/{s}/steering`: the combined signal at `now`, what is scheduled,
/// what the devices were told, and where a limit changed a target.
pub fn state_json(site: &SiteRuntime, signal: &SiteSignal, now: i64) -> Value {
    let a = signal.active(now);
    let status = site.status();
    let scheduled: Vec<Value> = signal
        .scheduled(now)
        .iter()
        .map(|s| {
            let mut v = entry_json(&s.entry, "setting", s.entry.value.to_json());
            v["component"] = json!(s.component.wire_name());
            if let crate::steering::ComponentValue::MaximizeGridImport(b) = s.entry.value {
                v.as_object_mut().map(|o| o.remove("setting"));
                v["value"] = json!(b);
            }
            v
        })
        .collect();
    let mut ess = a
        .ess
        .as_ref()
        .map(|e| entry_json(e, "setting", e.value.to_json()));
    if let (Some(v), Some(e)) = (ess.as_mut(), a.ess.as_ref()) {
        if status.reached.contains(&e.request_id) {
            v["untilSocReached"] = json!(true);
        }
    }
    let reports = site.reports();
    json!({
        "siteReference": site.config.reference,
        "energyStorageSetting": ess,
        "productionCurtailment": a.curtailment.as_ref().map(|e| entry_json(e, "setting", e.value.to_json())),
        "maximizeGridImport": a.maximize_grid_import.as_ref().map(|e| entry_json(e, "value", json!(e.value))),
        "gridLimit": a.grid_limit.as_ref().map(|e| entry_json(e, "setting", e.value.to_json())),
        "scheduled": scheduled,
        "devices": reports.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
        "limits": status.notes.iter().map(|n| json!({
            "component": n.component.wire_name(),
            "requested": watts(n.requested_w),
            "applied": watts(n.applied_w),
            "reason": n.reason,
            "devices": n.devices.iter().filter_map(|i| reports.get(*i)).map(|r| r.device.as_str()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "gridLoop": grid_json(&status.grid, &site.signal_statuses()),
        "evaluatedAt": status.evaluated_at_ms,
    })
}

/// `{"value", "unit": "W"}` rounded to the watt, or `null` (released).
fn watts(w: Option<f64>) -> Value {
    w.map_or(Value::Null, |w| json!({"value": w.round(), "unit": "W"}))
}

/// The grid loop's mode and the limits in force, with where each came from.
fn grid_json(g: &GridStatus, signals: &[SignalStatus]) -> Value {
    let limit = |l: Option<Limit>| match l {
        Some(l) => json!({"value": l.w.round(), "unit": "W", "source": l.source.wire_name()}),
        None => Value::Null,
    };
    json!({
        "mode": g.mode.wire_name(),
        "maxImport": limit(g.limits.import),
        "maxExport": limit(g.limits.export),
        "signals": signals.iter().map(|s| json!({
            "name": s.name,
            "inputs": s.value,
            "online": s.online,
            "error": s.error,
        })).collect::<Vec<_>>(),
    })
}
