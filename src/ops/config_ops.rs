//! The configuration operations' work: `config.get` (the running config,
//! secrets replaced), `config.history`, and `config.put` (checked like
//! `check-config`, refused when it lowers safety without the flag, written
//! atomically with the last good one kept and a change marker, then a
//! restart or a live apply). The trial of the change once the agent runs on
//! it is `config_trial.rs` (`docs/operations.md`, "Changing the
//! configuration").
//!
//! File I/O runs on blocking threads. It must not know JSON or topics, and
//! never writes the config path but through `config_file`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::change::{ChangeResult, ConfigChange, ConfigRecord, ConfigView, Refusal};
use super::config_trial::roll_back;
use super::ended::{Done, Failed};
use super::file_task::blocking;
use super::operation::{Operation, Outcome};
use super::pending::{self, Marker, Phase};
use super::{config_file, config_history, live_apply, safety, Ops};
use crate::config::live_change::{self, Apply};
use crate::config::{Config, ConfigError, DeviceConfig};
use crate::model::time::now_ms;

fn config_path(config: &Config) -> Result<PathBuf, String> {
    config.file.clone().ok_or_else(|| {
        "the agent runs on a config given in memory (the demo): there is no config file".to_string()
    })
}

/// The running config's file text, refused when the file on disk is no
/// longer what the agent started on.
fn running_text(path: &Path, running_sha256: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    let sha = crate::config::text_sha256(&text);
    if sha != running_sha256 {
        return Err(format!(
            "the config file {} changed on disk since the agent started (sha256 {sha}, running {running_sha256}): restart the agent or put the config again",
            path.display()
        ));
    }
    Ok(text)
}

/// `config.get`.
pub async fn get(ops: &Ops) -> Result<Outcome, Failed> {
    let ctx = &ops.inner.ctx;
    let config = ops.running();
    let path = config_path(&config)?;
    let sha = config.text_sha256.clone();
    let file = path.display().to_string();
    let text = blocking(move || running_text(&path, &sha)).await??;
    let mut table: toml::Table = text
        .parse()
        .map_err(|e| format!("the running config is not TOML any more: {e}"))?;
    let redacted = crate::config::redact::redact(&mut table);
    let toml = toml::to_string(&table).map_err(|e| format!("cannot render the config: {e}"))?;
    let version = config_history::version(&ctx.store)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Outcome::Config(ConfigView {
        sha256: config.text_sha256.clone(),
        version,
        file: Some(file),
        toml,
        redacted,
    }))
}

/// `config.history`.
pub async fn history(ops: &Ops, limit: usize) -> Result<Outcome, Failed> {
    config_history::newest(&ops.inner.ctx.store, limit)
        .await
        .map(Outcome::ConfigHistory)
        .map_err(|e| e.to_string().into())
}

fn record(
    op: &Operation,
    old: &str,
    new: &str,
    result: ChangeResult,
    reason: Option<String>,
) -> ConfigRecord {
    ConfigRecord {
        op_id: op.id.as_str().to_string(),
        at_ms: now_ms(),
        transport: op.source.transport.clone(),
        caller: op.source.caller.clone(),
        old_sha256: old.to_string(),
        new_sha256: new.to_string(),
        result,
        reason,
        version: None,
        live: false,
    }
}

/// What `config.put` found before writing anything.
struct Checked {
    current: String,
    new_text: String,
    new: Config,
}

fn check(
    path: &Path,
    running_sha256: &str,
    change: &ConfigChange,
) -> Result<Checked, Result<Refusal, String>> {
    let current = running_text(path, running_sha256).map_err(Err)?;
    let new_text = match change {
        ConfigChange::Whole(t) => t.clone(),
        ConfigChange::Patch(entries) => {
            let mut table: toml::Table = current
                .parse()
                .map_err(|e| Err(format!("the running config is not TOML any more: {e}")))?;
            crate::config::patch::apply(&mut table, entries);
            toml::to_string(&table).map_err(|e| {
                Ok(Refusal::Invalid(vec![crate::config::Problem::new(
                    "",
                    format!("the patched config cannot be written as TOML: {e}"),
                )]))
            })?
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let new = match crate::config::parse_in(&new_text, dir) {
        Ok(c) if c.file_problems.is_empty() => c,
        Ok(c) => return Err(Ok(Refusal::Invalid(c.file_problems))),
        Err(ConfigError { problems }) => return Err(Ok(Refusal::Invalid(problems))),
    };
    Ok(Checked {
        current,
        new_text,
        new,
    })
}

/// `config.put`: refused (nothing changes), unchanged, or written and on
/// trial after a restart (or applied live, where it can be).
pub async fn put(
    ops: &Ops,
    op: &Operation,
    change: &ConfigChange,
    allow_less_safe: bool,
) -> Result<Done, Failed> {
    let _one = ops.inner.config_lock.lock().await;
    let config = ops.running();
    let path = config_path(&config)?;
    let running = config.text_sha256.clone();
    not_on_trial(&path).await?;
    let checked = checked_change(ops, op, &path, &running, change).await?;
    let new_sha = crate::config::text_sha256(&checked.new_text);
    if new_sha == running {
        return Ok(Done::Finished(Outcome::ConfigUnchanged { sha256: new_sha }));
    }
    let lowered = safety::less_safe(&config, &checked.new);
    if !lowered.is_empty() && !allow_less_safe {
        return Err(refuse(ops, op, &running, &new_sha, Refusal::LessSafe(lowered)).await);
    }
    let plan = live_plan(ops, &config, &checked.new);
    let added = plan.as_ref().map(|p| p.added.as_slice());
    let watch = devices_to_watch(ops, &checked.new, added);
    let within_s = config.ops.rollback_after_s;
    let marker = Marker {
        op_id: op.id.as_str().to_string(),
        transport: op.source.transport.clone(),
        caller: op.source.caller.clone(),
        accepted_ms: op.accepted_ms,
        old_sha256: running.clone(),
        new_sha256: new_sha.clone(),
        within_s,
        watch: watch.clone(),
        starts: 0,
        phase: Phase::Pending,
        reason: None,
        live: added.is_some(),
    };
    write_on_trial(ops, op, &path, &checked, &marker).await?;
    let allowed = if allow_less_safe { lowered } else { Vec::new() };
    let outcome = |live| Outcome::ConfigWritten {
        old_sha256: running.clone(),
        new_sha256: new_sha.clone(),
        within_s,
        watch: watch.clone(),
        allowed: allowed.clone(),
        live,
    };
    if let Some(plan) = plan {
        let mut new = checked.new;
        new.file = Some(path.clone());
        return Ok(
            if apply_live(ops, op, &path, new, &plan, marker.clone()).await {
                Done::Live(outcome(true), marker)
            } else {
                Done::OnTrial(outcome(false))
            },
        );
    }
    tracing::warn!(
        operation = %op.id,
        old_sha256 = %running,
        new_sha256 = %new_sha,
        within_s,
        watch = %watch.join(","),
        "config change written: the agent restarts on it and rolls it back unless healthy within the window"
    );
    Ok(Done::OnTrial(outcome(false)))
}

/// Refuses a change while another is on trial.
async fn not_on_trial(path: &Path) -> Result<(), Failed> {
    let p = path.to_path_buf();
    match blocking(move || pending::read(&p)).await?? {
        Some(m) => Err(format!(
            "config change {} is still on trial (phase {:?}): wait until it is resolved",
            m.op_id, m.phase
        )
        .into()),
        None => Ok(()),
    }
}

/// The change applied to the running config's text and checked like
/// `check-config`; a refusal is recorded in the history.
async fn checked_change(
    ops: &Ops,
    op: &Operation,
    path: &Path,
    running: &str,
    change: &ConfigChange,
) -> Result<Checked, Failed> {
    let (p, r, c) = (path.to_path_buf(), running.to_string(), change.clone());
    match blocking(move || check(&p, &r, &c)).await? {
        Ok(c) => Ok(c),
        Err(Err(e)) => Err(e.into()),
        Err(Ok(refusal)) => Err(refuse(ops, op, running, "", refusal).await),
    }
}

/// The devices whose health the trial watches: those of the new config
/// online now, and the ones a live change adds.
fn devices_to_watch(ops: &Ops, new: &Config, added: Option<&[DeviceConfig]>) -> Vec<String> {
    let live = &ops.inner.ctx.live;
    let mut watch: Vec<String> = live
        .devices()
        .iter()
        .filter(|d| new.device(&d.reference).is_some())
        .filter(|d| {
            live.find(&d.reference)
                .is_some_and(|id| live.snapshot(id).online)
        })
        .map(|d| d.reference.clone())
        .collect();
    watch.extend(added.into_iter().flatten().map(|d| d.reference.clone()));
    watch
}

/// Records the change as pending, then writes the marker and the new config
/// (the last good one kept); a failed write removes the marker and records
/// the change as abandoned.
async fn write_on_trial(
    ops: &Ops,
    op: &Operation,
    path: &Path,
    checked: &Checked,
    marker: &Marker,
) -> Result<(), Failed> {
    let store = &ops.inner.ctx.store;
    let (old_sha, new_sha) = (&marker.old_sha256, &marker.new_sha256);
    config_history::write(
        store,
        &ConfigRecord {
            live: marker.live,
            ..record(op, old_sha, new_sha, ChangeResult::Pending, None)
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let (p, m) = (path.to_path_buf(), marker.clone());
    let (current, new_text) = (checked.current.clone(), checked.new_text.clone());
    let written = blocking(move || {
        pending::write(&p, &m)?;
        let r = config_file::replace_keeping_last_good(&p, current.as_bytes(), new_text.as_bytes());
        if r.is_err() {
            let _ = pending::remove(&p);
        }
        r
    })
    .await?;
    let Err(e) = written else { return Ok(()) };
    let reason = format!("the new config could not be written: {e}");
    let abandoned = record(
        op,
        old_sha,
        new_sha,
        ChangeResult::Abandoned,
        Some(reason.clone()),
    );
    let _ = config_history::write(store, &abandoned).await;
    Err(reason.into())
}

/// Applies a written change to the running agent. True when it applied; when
/// it did not, the last good config is restored for the restart that follows.
async fn apply_live(
    ops: &Ops,
    op: &Operation,
    path: &Path,
    new: Config,
    plan: &live_apply::Plan,
    marker: Marker,
) -> bool {
    let ctx = &ops.inner.ctx;
    // `live_plan` gives a plan only where the parts are.
    let Some(parts) = &ctx.live_parts else {
        return false;
    };
    match live_apply::apply(parts, &ctx.store, &ctx.steering, &new, plan).await {
        Ok(()) => {
            ops.set_running(Arc::new(new));
            tracing::warn!(
                operation = %op.id,
                old_sha256 = %marker.old_sha256,
                new_sha256 = %marker.new_sha256,
                within_s = marker.within_s,
                watch = %marker.watch.join(","),
                "config change written and applied live: rolled back unless healthy within the window"
            );
            true
        }
        Err(e) => {
            let reason = format!("the change did not apply live: {e}");
            tracing::error!(operation = %op.id, reason = %reason, "restoring the last good config and restarting on it");
            roll_back(path, &marker, reason).await;
            false
        }
    }
}

/// What to change when `new` applies live to the running agent
/// (`config::live_change`); `None` when it needs a restart. The log level
/// is the process's (`sitegate run` owns the subscriber): a change of it
/// through this channel restarts.
fn live_plan(ops: &Ops, old: &Config, new: &Config) -> Option<live_apply::Plan> {
    ops.inner.ctx.live_parts.as_ref()?;
    if old.logging.level != new.logging.level {
        return None;
    }
    match live_change::decide(old, new) {
        Apply::Live { limits, added } => Some(live_apply::Plan { limits, added }),
        Apply::Restart(reasons) => {
            tracing::info!(reasons = %reasons.join("; "), "config change needs a restart");
            None
        }
    }
}

/// Puts the last good config back and marks the change rolled back (the
/// next start records it); the caller restarts.
async fn refuse(ops: &Ops, op: &Operation, old: &str, new: &str, refusal: Refusal) -> Failed {
    let error = match &refusal {
        Refusal::Invalid(problems) => format!(
            "refused: the new config has {} problem{}: {}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        ),
        Refusal::LessSafe(changes) => format!(
            "refused: this change lowers safety and needs \"allowLessSafe\": true in the request: {}",
            changes.join("; ")
        ),
    };
    let r = record(op, old, new, ChangeResult::Refused, Some(error.clone()));
    if let Err(e) = config_history::write(&ops.inner.ctx.store, &r).await {
        tracing::warn!(operation = %op.id, error = %e, "config change not recorded in the history");
    }
    Failed {
        error,
        outcome: Some(Outcome::ConfigRefused(refusal)),
    }
}
