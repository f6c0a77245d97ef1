//! A grid operator's local signals: the digital inputs of a Modbus I/O module
//! (a ripple-control receiver or control box wired to it) read on the module's
//! bus, each value mapped to import and export limits that win over every
//! partner signal (`docs/steering.md`: a grid operator's limits come first).
//!
//! `run` is the reading task, one per signal (the mapping is `operator.rs`'s).
//! It writes what it read into the site's runtime and wakes the control loop;
//! it never commands a device.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::operator::{failsafe_of, limits_of};
use super::runtime::SiteRuntime;
use crate::config::GridSignalConfig;
use crate::modbus::bus::{Op, OpOutput};
use crate::modbus::BusHandle;
use crate::model::time::now_ms;

/// Reads signal `index` of `site` every poll interval until `cancel`.
pub async fn run(
    site: Arc<SiteRuntime>,
    index: usize,
    cfg: GridSignalConfig,
    bus: BusHandle,
    rated_production_w: f64,
    cancel: CancellationToken,
) {
    // Validated with the config: a signal without a block never reaches here.
    let Some(block) = cfg.block() else { return };
    let every = Duration::from_millis(cfg.poll_interval_ms);
    let reference = site.config.reference.clone();
    let failsafe = failsafe_of(&cfg.levels, cfg.lost_value, rated_production_w);
    // Before the first read, the failsafe: never no limit.
    site.update_signal(index, |s| {
        s.limits = failsafe;
        s.failsafe = true;
    });
    site.wake.notify_one();
    loop {
        let read = bus
            .transact(cfg.unit_id, vec![Op::Read(block.span())])
            .await;
        let value = match read {
            Ok(out) => match out.first() {
                Some(OpOutput::Words(w)) => block.value(w).ok_or_else(|| {
                    format!(
                        "the module answered {} words, not {}",
                        w.len(),
                        block.span().len
                    )
                }),
                _ => Err("the module gave no answer to the read".to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        let changed = site.update_signal(index, |s| {
            let before = s.clone();
            match &value {
                Ok(v) => {
                    if !s.online && s.error.is_some() {
                        tracing::info!(site = %reference, signal = %cfg.name, "grid signal readable again");
                    }
                    s.value = Some(*v);
                    s.online = true;
                    s.failsafe = false;
                    s.error = None;
                    s.limits = limits_of(&cfg.levels, *v, rated_production_w);
                    if !cfg.levels.iter().any(|l| l.value == *v) {
                        tracing::warn!(site = %reference, signal = %cfg.name, value = v, "grid signal value has no level: the tightest limits apply");
                    }
                }
                Err(e) => {
                    if s.online || s.error.is_none() {
                        tracing::warn!(site = %reference, signal = %cfg.name, error = %e, "grid signal cannot be read");
                    }
                    s.online = false;
                    s.error = Some(e.clone());
                    s.limits = failsafe;
                    s.failsafe = true;
                }
            }
            if s.limits != before.limits {
                tracing::info!(
                    site = %reference,
                    signal = %cfg.name,
                    value = ?s.value,
                    max_import_w = ?s.limits.max_import_w,
                    max_export_w = ?s.limits.max_export_w,
                    max_consumption_w = ?s.limits.max_consumption_w,
                    failsafe = s.failsafe,
                    at_ms = now_ms(),
                    "grid operator limits changed"
                );
            }
            *s != before
        });
        if changed == Some(true) {
            site.wake.notify_one();
            site.changed.notify_one();
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
}
