//! The systemd watchdog: pings at half the period systemd expects, but only
//! while every main loop's heartbeat is fresh (`liveness`). A stuck loop stops
//! the pings, and systemd restarts the agent (`Restart=on-failure`).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::systemd;
use crate::liveness::{stuck, Pulse, STALE_AFTER};

pub(super) async fn run(pulses: Vec<Pulse>, period: Duration, cancel: CancellationToken) {
    let every = (period / 2).max(Duration::from_millis(100));
    tracing::info!(
        period_ms = period.as_millis() as u64,
        loops = pulses.len(),
        "systemd watchdog on"
    );
    let mut tick = tokio::time::interval(every);
    let mut was_stuck = false;
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let stuck = stuck(&pulses, STALE_AFTER);
        if stuck.is_empty() {
            if was_stuck {
                tracing::info!("every main loop beats again; watchdog pings resume");
            }
            systemd::watchdog_ping();
        } else if !was_stuck {
            let names: Vec<String> = stuck
                .iter()
                .map(|(name, age)| format!("{name} (silent {} s)", age.as_secs()))
                .collect();
            tracing::error!(
                loops = %names.join(", "),
                "main loops stopped beating; withholding watchdog pings so systemd restarts the agent"
            );
        }
        was_stuck = !stuck.is_empty();
    }
}
