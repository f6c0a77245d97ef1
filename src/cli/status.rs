//! `sitegate status`: one screen of the running agent, as a technician
//! checks it: readiness and what degrades it, the devices online, each
//! site's grid loop, limits and steering, the uplink, the store and the
//! clock. It asks the agent's API (`/readyz`, `/metrics`, `/sites`, each
//! site's steering state) with `agent_api`'s target and token (a `read`
//! token where the agent asks for one).
//!
//! Reading and rendering only; `render` is pure.

use std::process::ExitCode;

use serde_json::Value;

use super::agent_api::{block_on, call, call_raw, AgentArgs, Target};
use super::{complain, say};

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    agent: AgentArgs,
}

/// What the agent answered.
pub struct Answers {
    pub at: String,
    /// `/readyz`: its status code and body.
    pub ready: (u16, Value),
    /// `/metrics`, when it answered 200.
    pub metrics: Option<String>,
    /// Each site's reference and steering state.
    pub sites: Vec<(String, Value)>,
}

/// The samples of metric `name` whose labels contain `label` (`""`: all).
fn samples<'a>(text: &'a str, name: &str, label: &str) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let rest = series.strip_prefix(name)?;
            (rest.is_empty() || rest.starts_with('{'))
                .then_some(())
                .filter(|()| rest.contains(label))?;
            Some((rest, value.parse().ok()?))
        })
        .collect()
}

fn one(text: &str, name: &str) -> Option<f64> {
    samples(text, name, "").first().map(|(_, v)| *v)
}

/// The value of `label="…"` in a series' label set.
fn label<'a>(series: &'a str, key: &str) -> Option<&'a str> {
    let start = series.find(&format!("{key}=\""))? + key.len() + 2;
    let len = series[start..].find('"')?;
    Some(&series[start..start + len])
}

/// From when the store holds each resolution, and what the size cap
/// deleted; `None` before retention measured it.
fn history(m: &str) -> Option<String> {
    let from: Vec<String> = samples(m, "sitegate_store_oldest_timestamp_seconds", "")
        .iter()
        .filter_map(|(series, t)| {
            let at = sitegate::model::time::format_utc((t * 1000.0) as i64);
            Some(format!("{} from {at}", label(series, "resolution")?))
        })
        .collect();
    if from.is_empty() {
        return None;
    }
    let capped: f64 = samples(m, "sitegate_store_deleted_rows_total", "reason=\"cap\"")
        .iter()
        .map(|(_, v)| v)
        .sum();
    let cap = if capped > 0.0 {
        format!("; {capped} rows deleted to stay under storage.max_size_mb")
    } else {
        String::new()
    };
    Some(format!("         history: {}{cap}", from.join(", ")))
}

fn watts(v: &Value) -> String {
    match v["value"].as_f64() {
        Some(w) => format!("{w} W ({})", v["source"].as_str().unwrap_or("?")),
        None => "none".into(),
    }
}

/// The screen, a line each.
pub fn render(a: &Answers) -> Vec<String> {
    let mut out = Vec::new();
    let (code, ready) = &a.ready;
    let state = ready["status"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("not ready ({code})"));
    out.push(format!("agent    {}: {state}", a.at));
    for why in ready["degraded"]
        .as_array()
        .into_iter()
        .chain(ready["reasons"].as_array())
        .flatten()
    {
        out.push(format!("         {}", why.as_str().unwrap_or_default()));
    }
    match &a.metrics {
        Some(m) => out.extend(metrics_lines(m)),
        None => out.push(
            "metrics  off (http.metrics = false): devices, uplink, store and clock not shown"
                .into(),
        ),
    }
    for (site, st) in &a.sites {
        out.extend(site_lines(site, st));
    }
    out
}

/// The lines read from `/metrics`: devices online, the uplink, the store,
/// its history and the clock.
fn metrics_lines(m: &str) -> Vec<String> {
    let mut out = Vec::new();
    let online = samples(m, "sitegate_device_online", "");
    let up = online.iter().filter(|(_, v)| *v == 1.0).count();
    out.push(format!("devices  {up} of {} online", online.len()));
    let down: Vec<&str> = online
        .iter()
        .filter(|(_, v)| *v != 1.0)
        .filter_map(|(s, _)| label(s, "device"))
        .collect();
    if !down.is_empty() {
        out.push(format!("         offline: {}", down.join(", ")));
    }
    let uplink = match (
        one(m, "sitegate_mqtt_set_up"),
        one(m, "sitegate_mqtt_connected"),
    ) {
        (None, None) => "not configured".to_string(),
        (_, Some(1.0)) => "connected".to_string(),
        (Some(0.0), _) => "not set up (see /readyz)".to_string(),
        _ => "not connected (telemetry waits in the outbox)".to_string(),
    };
    let outbox = one(m, "sitegate_outbox_rows")
        .map(|r| format!(", {r} messages in the outbox"))
        .unwrap_or_default();
    out.push(format!("uplink   {uplink}{outbox}"));
    let committed = samples(m, "sitegate_store_samples_total", "committed");
    let dropped = samples(m, "sitegate_store_samples_total", "dropped");
    let file: f64 = samples(m, "sitegate_store_file_bytes", "")
        .iter()
        .map(|(_, v)| v)
        .sum();
    let failing = one(m, "sitegate_store_failing") == Some(1.0);
    out.push(format!(
        "store    {} samples committed, {} dropped; {:.1} MB on disk{}",
        committed.first().map_or(0.0, |s| s.1),
        dropped.first().map_or(0.0, |s| s.1),
        file / 1e6,
        if failing { "; commits FAILING" } else { "" }
    ));
    out.extend(history(m));
    let clock = match one(m, "sitegate_clock_synchronised") {
        Some(1.0) => "synchronised",
        Some(0.0) => "NOT synchronised",
        _ => "synchronisation not known",
    };
    out.push(format!("clock    {clock}"));
    out
}

/// A site's lines: its grid loop and limits, its devices counted by
/// component and state, and each limit source in force.
fn site_lines(site: &str, st: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let g = &st["gridLoop"];
    out.push(format!(
        "site     {site}: grid loop {}; max import {}, max export {}",
        g["mode"].as_str().unwrap_or("?"),
        watts(&g["maxImport"]),
        watts(&g["maxExport"])
    ));
    let mut states: Vec<(String, usize)> = Vec::new();
    for d in st["devices"].as_array().into_iter().flatten() {
        let key = format!(
            "{} {}",
            d["component"].as_str().unwrap_or("?"),
            d["state"].as_str().unwrap_or("?")
        );
        match states.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => states.push((key, 1)),
        }
    }
    if !states.is_empty() {
        let list: Vec<String> = states.iter().map(|(k, n)| format!("{n} {k}")).collect();
        out.push(format!("         devices: {}", list.join(", ")));
    }
    for s in g["sources"].as_array().into_iter().flatten() {
        out.push(format!(
            "         limit {} {} {} W{}",
            s["source"].as_str().unwrap_or("?"),
            s["kind"].as_str().unwrap_or("?"),
            s["value"]["value"].as_f64().unwrap_or(f64::NAN),
            if s["failsafe"] == true {
                " (failsafe)"
            } else {
                ""
            }
        ));
    }
    out
}

async fn ask(target: Target, token: Option<String>) -> Result<Answers, String> {
    let token = token.as_deref();
    let ready = call(&target, token, "GET", "/readyz", None).await?;
    let (code, body) = call_raw(&target, token, "GET", "/metrics", None).await?;
    let metrics = (code == 200).then(|| String::from_utf8_lossy(&body).into_owned());
    let (code, list) = call(&target, token, "GET", "/sites", None).await?;
    if code != 200 {
        return Err(format!(
            "GET /sites answered {code}: {}",
            super::agent_api::problem(&list)
        ));
    }
    let mut sites = Vec::new();
    for s in list.as_array().into_iter().flatten() {
        let Some(site) = s["siteReference"].as_str().or(s["reference"].as_str()) else {
            continue;
        };
        let (code, st) = call(
            &target,
            token,
            "GET",
            &format!("/sites/{site}/steering"),
            None,
        )
        .await?;
        if code == 200 {
            sites.push((site.to_string(), st));
        }
    }
    Ok(Answers {
        at: target.to_string(),
        ready,
        metrics,
        sites,
    })
}

pub fn status(args: StatusArgs) -> ExitCode {
    let (target, _) = match args.agent.resolve() {
        Ok(t) => t,
        Err(code) => return code,
    };
    match block_on(ask(target, args.agent.token())) {
        Ok(a) => {
            for line in render(&a) {
                say(&line);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            complain(&format!("sitegate status: {e}"));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_line_names_each_resolution_and_the_caps_deletes() {
        let m = "# HELP x\n\
            sitegate_store_oldest_timestamp_seconds{resolution=\"raw\"} 1717286400\n\
            sitegate_store_oldest_timestamp_seconds{resolution=\"hour\"} 1717200000\n\
            sitegate_store_deleted_rows_total{reason=\"age\",resolution=\"raw\"} 7\n\
            sitegate_store_deleted_rows_total{reason=\"cap\",resolution=\"raw\"} 300\n\
            sitegate_store_deleted_rows_total{reason=\"cap\",resolution=\"minute\"} 20\n";
        assert_eq!(
            history(m).as_deref(),
            Some(
                "         history: raw from 2024-06-02T00:00:00Z, hour from 2024-06-01T00:00:00Z; \
                 320 rows deleted to stay under storage.max_size_mb"
            )
        );
        assert_eq!(history("sitegate_store_failing 0\n"), None);
    }
}
