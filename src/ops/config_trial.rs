//! The trial of a configuration change, once the agent runs on it (after a
//! restart, or applied live): healthy within the window and the change is
//! applied, else the last good config is restored and the agent restarts
//! on it; either way the result is recorded (`docs/operations.md`,
//! "Changing the configuration"). `config_ops.rs` writes the change.
//!
//! File I/O runs on blocking threads. It must not know JSON or topics, and
//! never writes the config path but through `config_file`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use super::change::{ChangeResult, ConfigRecord};
use super::file_task::blocking;
use super::operation::{OpState, Outcome};
use super::pending::{self, Marker, Phase};
use super::{audit, config_file, config_history, health, Ops};
use crate::config::Config;
use crate::model::time::now_ms;

/// Tells whether the uplink is connected (given only with `[mqtt]`).
pub type UplinkProbe = Arc<dyn Fn() -> bool + Send + Sync>;

/// The history's reason of a change applied live.
pub const LIVE_REASON: &str = "applied live, without a restart";

/// How often the trial looks at the agent's health.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How long a resolved change waits for the uplink before it is recorded,
/// so its state goes out on the ops channel.
const RECORD_WAIT: Duration = Duration::from_secs(10);

/// Restores the last good config and marks the change rolled back with
/// `reason`; true when both are done.
pub(super) async fn roll_back(path: &Path, marker: &Marker, reason: String) -> bool {
    let p = path.to_path_buf();
    let mut m = marker.clone();
    m.phase = Phase::RolledBack;
    m.reason = Some(reason);
    let restored = blocking(move || {
        config_file::restore_last_good(&p)?;
        pending::write(&p, &m)
    })
    .await;
    match restored {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::error!(operation = %marker.op_id, error = %e, "restoring the last good config failed: the new config keeps running");
            false
        }
        Err(e) => {
            tracing::error!(operation = %marker.op_id, error = %e, "restoring the last good config failed: the new config keeps running");
            false
        }
    }
}

/// The trial of a change applied live, after its `running` state is
/// recorded: the same health watch as after a restart.
pub async fn trial_live(ops: Ops, marker: Marker) {
    let Some(path) = ops.running().file.clone() else {
        return;
    };
    trial(&ops, &path, marker).await;
}

/// The operation id of a change on trial (the audit history keeps it
/// `running` across the restart).
pub async fn on_trial(config: &Config) -> Option<String> {
    let path = config.file.clone()?;
    match blocking(move || pending::read(&path)).await {
        Ok(Ok(Some(m))) => Some(m.op_id),
        _ => None,
    }
}

/// At start: resolves a change the marker names. A change on trial is
/// watched for its window: healthy, it is applied; not, the last good
/// config is restored and the agent restarts on it. A change resolved
/// before this start (rolled back or abandoned) is recorded.
pub async fn resolve(ops: Ops) {
    let ctx = ops.inner.ctx.clone();
    let Some(path) = ctx.config.file.clone() else {
        return;
    };
    let p = path.clone();
    let marker = match blocking(move || pending::read(&p)).await {
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => return,
        Ok(Err(e)) | Err(e) => {
            tracing::error!(error = %e, "config change marker unreadable: left in place");
            return;
        }
    };
    let connected = || ops.uplink_connected();
    match marker.phase {
        Phase::RolledBack | Phase::Abandoned => {
            let wait_uplink = async {
                while connected() == Some(false) {
                    tokio::time::sleep(WATCH_EVERY).await;
                }
            };
            let _ = tokio::time::timeout(RECORD_WAIT, wait_uplink).await;
            let result = if marker.phase == Phase::RolledBack {
                ChangeResult::RolledBack
            } else {
                ChangeResult::Abandoned
            };
            conclude(&ops, &path, &marker, result).await;
        }
        Phase::Pending => trial(&ops, &path, marker).await,
    }
}

/// Watches a change on trial for its window: healthy, it is applied; not,
/// the last good config is restored and the agent restarts on it.
async fn trial(ops: &Ops, path: &Path, marker: Marker) {
    let ctx = &ops.inner.ctx;
    let deadline = Instant::now() + Duration::from_secs(marker.within_s);
    tracing::info!(operation = %marker.op_id, within_s = marker.within_s, live = marker.live, "config change on trial: watching the agent's health");
    let mut last;
    loop {
        last = health::verdict(
            &marker.watch,
            |d| {
                ctx.live
                    .find(d)
                    .is_some_and(|id| ctx.live.snapshot(id).online)
            },
            ops.uplink_connected(),
        );
        if last.is_ok() || Instant::now() >= deadline {
            break;
        }
        tokio::select! {
            () = ops.inner.cancel.cancelled() => return,
            () = tokio::time::sleep(WATCH_EVERY) => {}
        }
    }
    match last {
        Ok(()) => conclude(ops, path, &marker, ChangeResult::Applied).await,
        Err(why) => {
            let reason = format!("not healthy within {} s: {why}", marker.within_s);
            tracing::error!(operation = %marker.op_id, reason = %reason, "config change failed its trial: restoring the last good config");
            if roll_back(path, &marker, reason.clone()).await {
                let mut m = marker.clone();
                m.phase = Phase::RolledBack;
                m.reason = Some(reason);
                conclude(ops, path, &m, ChangeResult::RolledBack).await;
                tokio::time::sleep(super::RESTART_DELAY).await;
                tracing::warn!(operation = %m.op_id, "the agent stops and exits for systemd to start it on the last good config");
                ops.inner.restart.cancel();
            }
        }
    }
}

/// Records how a change ended (history and operation), then removes its
/// marker.
async fn conclude(ops: &Ops, path: &Path, marker: &Marker, result: ChangeResult) {
    let ctx = &ops.inner.ctx;
    let r = ConfigRecord {
        op_id: marker.op_id.clone(),
        at_ms: now_ms(),
        transport: marker.transport.clone(),
        caller: marker.caller.clone(),
        old_sha256: marker.old_sha256.clone(),
        new_sha256: marker.new_sha256.clone(),
        result,
        reason: match (result, marker.live) {
            (ChangeResult::Applied, true) => Some(LIVE_REASON.to_string()),
            _ => marker.reason.clone(),
        },
        version: None,
        live: marker.live,
    };
    let written = match config_history::write(&ctx.store, &r).await {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(operation = %marker.op_id, error = %e, "config change not recorded: the marker stays for the next start");
            return;
        }
    };
    // Recorded: the marker goes before the operation's end is told, so a
    // caller who sees it may change the config again at once.
    let p = path.to_path_buf();
    match blocking(move || pending::remove(&p)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "config change marker not removed"),
        Err(e) => tracing::error!(error = %e, "config change marker not removed"),
    }
    let outcome = match result {
        ChangeResult::Applied => Outcome::ConfigApplied {
            sha256: marker.new_sha256.clone(),
            version: written.version.unwrap_or(0),
        },
        _ => Outcome::ConfigRolledBack {
            old_sha256: marker.old_sha256.clone(),
            new_sha256: marker.new_sha256.clone(),
            reason: marker.reason.clone().unwrap_or_default(),
        },
    };
    if let Ok(id) = super::OpId::parse(&marker.op_id) {
        let op = match audit::find(&ctx.store, &id).await {
            Ok(Some(op)) => Some(op),
            _ => None,
        };
        if let Some(mut op) = op {
            op.finished_ms = Some(now_ms());
            if result == ChangeResult::Applied {
                op.state = OpState::Succeeded;
                op.error = None;
            } else {
                op.state = OpState::Failed;
                op.error = Some(format!(
                    "{}: {}",
                    result.as_str(),
                    marker.reason.clone().unwrap_or_default()
                ));
            }
            op.summary = Some(outcome.summary());
            op.outcome = Some(outcome);
            if let Err(e) = audit::write(&ctx.store, &op).await {
                tracing::warn!(operation = %op.id, error = %e, "operation state not recorded");
            }
            ops.changed(Arc::new(op));
        }
    }
    tracing::info!(operation = %marker.op_id, result = result.as_str(), reason = marker.reason.as_deref(), "config change resolved");
}
