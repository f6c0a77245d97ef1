//! systemd's service notifications (`sd_notify`): ready, reloading, stopping,
//! status lines and watchdog pings. Without `NOTIFY_SOCKET` (not started by
//! systemd with `Type=notify`) every call is a no-op.

use std::time::Duration;

use sd_notify::NotifyState;

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}

/// The agent serves: config read, store open, listeners bound.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A reload (SIGHUP) starts; call [`ready`] when it is done.
pub fn reloading() {
    let mut states = vec![NotifyState::Reloading];
    // systemd matches a reload by this timestamp (Type=notify-reload needs it).
    if let Ok(t) = NotifyState::monotonic_usec_now() {
        states.push(t);
    }
    send(&states);
}

/// A status line (`systemctl status` shows it) without a change of state.
pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

pub fn watchdog_ping() {
    send(&[NotifyState::Watchdog]);
}

/// The watchdog period systemd expects pings within (`WatchdogSec=`), when
/// it set one for this process.
pub fn watchdog_period() -> Option<Duration> {
    let mut usec = 0;
    sd_notify::watchdog_enabled(false, &mut usec).then(|| Duration::from_micros(usec))
}
