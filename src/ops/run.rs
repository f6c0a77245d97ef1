//! One operation's run, as a task on the agent's tracker: `running`, the
//! work, then `succeeded` or `failed`, each state written to the audit
//! history and told to the subscribers. A `restart` asks the process to exit
//! once its success is written.
//!
//! A `config.put` that wrote a new config stays `running` and asks for the
//! restart; its trial after the restart ends it (`config_trial.rs`).
//!
//! It must not hold the service's lock across an await.

use std::sync::Arc;

use super::bundle;
use super::ended::{Done, Failed};
use super::operation::{OpRequest, OpState, Operation, Outcome};
use super::{audit, config_ops, config_trial, gather, Ops, RESTART_DELAY};
use crate::model::time::now_ms;

pub async fn run(ops: Ops, op: Arc<Operation>, request: OpRequest) {
    let running = Arc::new(Operation {
        state: OpState::Running,
        ..(*op).clone()
    });
    let ctx = &ops.inner.ctx;
    if let Err(e) = audit::write(&ctx.store, &running).await {
        tracing::warn!(operation = %op.id, error = %e, "operation state not recorded");
    }
    ops.changed(running.clone());
    let result = tokio::select! {
        r = work(&ops, &running, &request) => r,
        () = ops.inner.cancel.cancelled() => Err("interrupted: the agent stops".to_string().into()),
    };
    let mut done = (*running).clone();
    let mut on_trial = false;
    let mut live_trial = None;
    match result {
        Ok(Done::Finished(outcome)) => {
            done.finished_ms = Some(now_ms());
            done.state = OpState::Succeeded;
            done.summary = Some(outcome.summary());
            done.outcome = Some(outcome);
        }
        Ok(Done::OnTrial(outcome)) => {
            on_trial = true;
            done.summary = Some(outcome.summary());
            done.outcome = Some(outcome);
        }
        Ok(Done::Live(outcome, marker)) => {
            live_trial = Some(marker);
            done.summary = Some(outcome.summary());
            done.outcome = Some(outcome);
        }
        Err(Failed { error, outcome }) => {
            done.finished_ms = Some(now_ms());
            done.state = OpState::Failed;
            done.error = Some(error);
            done.summary = outcome.as_ref().map(Outcome::summary);
            done.outcome = outcome;
        }
    }
    let recorded = audit::write(&ctx.store, &done).await;
    if let Err(e) = &recorded {
        tracing::warn!(operation = %op.id, error = %e, "operation state not recorded");
    }
    tracing::info!(
        operation = %done.id,
        kind = done.kind.as_str(),
        state = done.state.as_str(),
        error = done.error.as_deref(),
        "operation ended"
    );
    let restart = on_trial || matches!(done.outcome, Some(Outcome::Restart { .. }));
    ops.changed(Arc::new(done));
    if let Some(marker) = live_trial {
        config_trial::trial_live(ops.clone(), marker).await;
        return;
    }
    if restart {
        if recorded.is_err() {
            // Without the record a repeated id would restart again.
            tracing::error!(operation = %op.id, "restart not recorded in the audit history: restarting anyway");
        }
        tokio::time::sleep(RESTART_DELAY).await;
        tracing::warn!(operation = %op.id, kind = op.kind.as_str(), "restart operation: the agent stops and exits for systemd to start it again");
        ops.inner.restart.cancel();
    }
}

async fn work(ops: &Ops, op: &Operation, request: &OpRequest) -> Result<Done, Failed> {
    let ctx = &ops.inner.ctx;
    let outcome = match request {
        OpRequest::Logs {
            lines,
            level,
            max_bytes,
        } => Ok(Outcome::Logs(
            crate::logging::ring().tail(*lines, *level, *max_bytes),
        )),
        OpRequest::Bundle => {
            // The config it runs now (a change applied live included).
            let ctx = super::OpsContext {
                config: ops.running(),
                ..ctx.clone()
            };
            let text = bundle::assemble(gather::sections(&ctx).await);
            let sha256 = crate::config::text_sha256(&text);
            let outcome = Outcome::Bundle {
                bytes: text.len(),
                sha256: sha256.clone(),
                chunks: bundle::chunks(&text).len(),
            };
            ops.table()
                .keep_bundle(op.id.clone(), Arc::new(text), sha256);
            Ok(outcome)
        }
        OpRequest::Restart => Ok(Outcome::Restart {
            exit_at_ms: now_ms() + RESTART_DELAY.as_millis() as i64,
        }),
        OpRequest::Scan { .. } => super::scan::run(&ctx.config, request).await,
        OpRequest::ConfigGet => return config_ops::get(ops).await.map(Done::Finished),
        OpRequest::ConfigHistory { limit } => {
            return config_ops::history(ops, *limit).await.map(Done::Finished)
        }
        OpRequest::ConfigPut {
            change,
            allow_less_safe,
        } => return config_ops::put(ops, op, change, *allow_less_safe).await,
        OpRequest::GridEvents { since_ms, until_ms } => {
            grid_events(&ctx.store, *since_ms, *until_ms).await
        }
    };
    outcome.map(Done::Finished).map_err(Failed::from)
}

/// `gridEvents.export`: the evidence log between two times, as CSV.
async fn grid_events(
    store: &crate::store::StoreHandle,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
) -> Result<Outcome, String> {
    let until = until_ms.unwrap_or_else(now_ms);
    let since = since_ms.unwrap_or(until - super::operation::GRID_EVENTS_BACK_MS);
    let mut events = store
        .read(move |conn: &rusqlite::Connection| {
            crate::grid_events::store::between(conn, since, until)
        })
        .await
        .map_err(|e| format!("the evidence log cannot be read: {e}"))?;
    let truncated = events.len() > super::operation::GRID_EVENTS_MAX;
    events.truncate(super::operation::GRID_EVENTS_MAX);
    Ok(Outcome::GridEvents {
        csv: crate::grid_events::csv::render(&events),
        events: events.len(),
        truncated,
    })
}
