//! A site's control loop: the task that re-evaluates the combined signal at
//! once on every change and then every control interval (and exactly at the
//! next start or end of an entry), and hands each device's desired setpoint to
//! its actuator through the site's runtime.
//!
//! The loop decides through the pure `decide`; it never writes to a device itself.

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use super::decide::Decision;
use super::hold::LoopMode;
use super::runtime::{lock, SiteRuntime};
use crate::liveness::BEAT_EVERY;
use crate::model::time::now_ms;
use crate::telemetry::Live;

/// Logs the grid loop's transitions that an operator must hear about.
/// One line per change of the grid loop's mode. Before the meter has
/// answered once (`meter_seen`), its absence is a wait, not a loss.
fn log_mode_change(site: &str, before: LoopMode, d: &Decision, meter_seen: bool) {
    let now = d.grid.mode;
    if now == before {
        return;
    }
    let why = d
        .notes
        .iter()
        .map(|n| n.reason.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    match now {
        LoopMode::MeterLost if !meter_seen => {
            tracing::info!(%site, reason = %why, "waiting for the grid meter's first reading: safe state until then (production within maxExport as if there were no load, no storage discharge)");
        }
        _ if before == LoopMode::MeterLost && !meter_seen => {
            tracing::info!(%site, mode = now.wire_name(), "grid meter read: the grid loop starts");
        }
        LoopMode::MeterLost => {
            tracing::warn!(%site, reason = %why, "grid meter lost: safe state (production and discharge within maxExport as if there were no load, charging within maxImport)");
        }
        _ if before == LoopMode::MeterLost => {
            tracing::info!(%site, mode = now.wire_name(), "grid meter back: the grid loop resumes");
        }
        LoopMode::HoldingExport | LoopMode::HoldingImport => {
            tracing::info!(%site, mode = now.wire_name(), reason = %why, "grid loop holds a limit");
        }
        _ => tracing::debug!(%site, mode = now.wire_name(), "grid loop free"),
    }
}

/// The control loop of one site. Runs until `cancel`.
pub async fn run(site: Arc<SiteRuntime>, live: Arc<Live>, cancel: CancellationToken) {
    let interval = site.config.control_interval_ms as i64;
    loop {
        let woke = Instant::now();
        site.heartbeat.beat();
        let now = now_ms();
        let (signal, revision) = {
            let mut s = site.signal.lock().await;
            s.prune(now);
            (s.clone(), site.committed_count())
        };
        let d = site.evaluate(&signal, now, &live);
        site.publish(&d);
        site.keep_loop_state(d.loop_state.clone());
        {
            let mut st = lock(&site.status);
            log_mode_change(&site.config.reference, st.grid.mode, &d, st.meter_seen);
            if d.grid.mode == LoopMode::MeterLost {
                if st.meter_seen && st.grid.mode != LoopMode::MeterLost {
                    st.meter_lost_total += 1;
                }
            } else if d.grid.mode != LoopMode::Off {
                st.meter_seen = true;
            }
            st.grid = d.grid;
            if let Some(r) = &d.reached {
                tracing::info!(site = %site.config.reference, request = %r, "untilSoc target reached: storage idle for the rest of the request");
                st.reached.insert(r.clone());
            }
            let active_ess = signal.active(now).ess.map(|e| e.request_id);
            st.reached.retain(|r| Some(r) == active_ess.as_ref());
            st.notes = d.notes;
            st.evaluated_at_ms = Some(now);
        }
        site.mark_evaluated(revision);
        site.changed.notify_one();
        site.ticks.took.observe_duration(woke.elapsed());
        let next = signal
            .next_change_after(now)
            .map_or(now + interval, |t| t.min(now + interval));
        let sleep = Duration::from_millis((next - now_ms()).max(1) as u64).min(BEAT_EVERY);
        let planned = Instant::now() + sleep;
        tokio::select! {
            () = cancel.cancelled() => break,
            () = site.wake.notified() => {}
            () = tokio::time::sleep(sleep) => {
                site.ticks.late.observe_duration(Instant::now().saturating_duration_since(planned));
            }
        }
    }
}
