//! `sitegate run`: the agent on a real site until SIGINT or SIGTERM; SIGHUP
//! reads the HTTPS certificate and key again (a pair that cannot be used
//! keeps the one in service), re-reads the config file and applies what can
//! change while running (API tokens, auth mode, rate limit, log level). Tells systemd when it is ready,
//! reloading and stopping, and feeds its watchdog. A `restart` operation
//! stops it like SIGTERM and exits 75, which the unit restarts; so does a
//! `config.put` that wrote a new config, and the rollback of one. Before the
//! config is loaded, a change on trial is counted, and rolled back at once
//! when its config does not load (`ops::pending::before_start`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sitegate::agent::{start_failures, systemd, Agent};
use sitegate::config::Config;
use sitegate::logging::LogHandle;
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::{complain, load_config};

pub fn run(file: &Path) -> ExitCode {
    // A config change on trial: a new config that does not load, or that
    // the agent keeps failing to start on, is rolled back before loading.
    let trial = sitegate::ops::pending::before_start(file);
    for line in &trial {
        complain(line);
    }
    let config = match load_config(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let log = match sitegate::logging::init(&config.logging) {
        Ok(h) => h,
        Err(e) => {
            complain(&e);
            return ExitCode::from(super::EXIT_CONFIG);
        }
    };
    for line in trial {
        tracing::warn!(file = %file.display(), "{line}");
    }
    let reload = Reload {
        file: file.to_path_buf(),
        log,
    };
    block_on(serve(config, Some(reload), |_| {}))
}

/// Runs a future on a fresh multi-threaded runtime.
pub fn block_on<F: std::future::Future<Output = ExitCode>>(f: F) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r.block_on(f),
        Err(e) => {
            complain(&format!("cannot start the async runtime: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// What SIGHUP re-reads: the config file, and the log level it sets.
pub struct Reload {
    pub file: PathBuf,
    pub log: LogHandle,
}

/// Runs the agent until SIGINT or SIGTERM, reloading on SIGHUP (when there is a
/// file to reload: the demo's config is built in), then shuts it down (store
/// flushed, MQTT session closed). `started` runs once the agent listens.
pub async fn serve(
    config: Config,
    reload: Option<Reload>,
    started: impl FnOnce(&Agent),
) -> ExitCode {
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            complain(&format!("cannot listen for signals: {e}"));
            return ExitCode::FAILURE;
        }
    };
    // What check-config would say and the agent survives: said once at start.
    for w in config.warnings() {
        tracing::warn!(problem = %w, "config warning");
    }
    for p in &config.file_problems {
        tracing::warn!(problem = %p, "config file problem");
    }
    let failures = start_failures::count_file();
    let agent = match Agent::start(config).await {
        Ok(a) => a,
        Err(e) => {
            let code = e.exit_code();
            tracing::error!(error = %e, exit_code = code, "agent did not start");
            if code == 1 {
                if let Some(file) = &failures {
                    wait_before_exit(&mut signals, start_failures::record(file), &e).await;
                }
            }
            return ExitCode::from(code);
        }
    };
    started(&agent);
    if let Some(file) = &failures {
        start_failures::clear(file);
    }
    systemd::ready(&status_line(&agent));
    agent.spawn_watchdog();
    let cancel = agent.cancellation();
    let restart = agent.restart_requested();
    let mut code = ExitCode::SUCCESS;
    loop {
        tokio::select! {
            _ = signals.int.recv() => { tracing::info!("SIGINT: shutting down"); break }
            _ = signals.term.recv() => { tracing::info!("SIGTERM: shutting down"); break }
            () = cancel.cancelled() => break,
            () = restart.cancelled() => {
                tracing::info!(exit_code = sitegate::ops::EXIT_RESTART, "restart operation: shutting down for systemd to start the agent again");
                code = ExitCode::from(sitegate::ops::EXIT_RESTART);
                break
            }
            _ = signals.hup.recv() => {
                systemd::reloading();
                apply_reload(&agent, reload.as_ref()).await;
                systemd::ready(&status_line(&agent));
            }
        }
    }
    systemd::stopping();
    agent.shutdown().await;
    code
}

/// After the `n`th failed start in a row: waits as `start_failures` says
/// (a stop request ends the wait), saying so to systemd and in the log.
/// Waits for SIGINT or SIGTERM: what a process without an agent (`sitegate
/// demo --devices-only`) runs until.
pub async fn until_stopped() -> ExitCode {
    let mut signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            complain(&format!("cannot listen for signals: {e}"));
            return ExitCode::FAILURE;
        }
    };
    tokio::select! {
        _ = signals.int.recv() => tracing::info!("SIGINT: shutting down"),
        _ = signals.term.recv() => tracing::info!("SIGTERM: shutting down"),
    }
    ExitCode::SUCCESS
}

async fn wait_before_exit(signals: &mut Signals, n: u32, e: &sitegate::agent::StartError) {
    let wait = start_failures::wait_after(n);
    if wait.is_zero() {
        return;
    }
    let secs = wait.as_secs();
    tracing::warn!(
        failures = n,
        wait_s = secs,
        "start failed {n} times in a row: waiting before exit, so restarts come less often"
    );
    systemd::status(&format!(
        "start failed ({e}); {n} in a row, exiting in {secs} s"
    ));
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        _ = signals.int.recv() => {}
        _ = signals.term.recv() => {}
    }
}

struct Signals {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Signals {
    /// Installed before the agent starts, so an early signal is not lost to the
    /// default action.
    fn new() -> std::io::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }
}

fn status_line(agent: &Agent) -> String {
    let c = agent.config();
    let list = |addrs: &[std::net::SocketAddr]| {
        addrs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = format!(
        "serving {} devices on {} buses; API on {}",
        c.devices.len(),
        c.buses.len(),
        list(agent.http_addrs())
    );
    if !agent.https_addrs().is_empty() {
        line += &format!("; HTTPS on {}", list(agent.https_addrs()));
    }
    line
}

/// Re-reads the config file (on a blocking thread: file reads and profile
/// loading stay off the runtime); a file with problems changes nothing.
async fn apply_reload(agent: &Agent, reload: Option<&Reload>) {
    match agent.reload_certificate().await {
        Ok(Some(pair)) => tracing::info!(
            fingerprint_sha256 = %pair.fingerprint,
            pubkey_pin = pair.pin.as_deref().unwrap_or("-"),
            "SIGHUP: HTTPS certificate and key read again"
        ),
        Ok(None) => {}
        Err(e) => {
            tracing::error!(error = %e, "SIGHUP: the HTTPS certificate cannot be used; the one in service stays")
        }
    }
    let Some(Reload { file, log }) = reload else {
        tracing::info!("SIGHUP: the demo's config is built in; nothing to reload");
        return;
    };
    let path = file.clone();
    let loaded = tokio::task::spawn_blocking(move || Config::load(&path))
        .await
        .unwrap_or_else(|e| {
            Err(sitegate::config::ConfigError::single(
                "",
                format!("reading the config failed: {e}"),
            ))
        });
    let new = match loaded {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(file = %file.display(), error = %e, "SIGHUP: the config has problems; keeping the running one");
            return;
        }
    };
    if let Err(e) = log.set_level(&new.logging.level) {
        tracing::error!(error = %e, "SIGHUP: log level not changed");
    }
    let pending = agent.reload(&new);
    tracing::info!(
        file = %file.display(),
        tokens = new.http.tokens.len(),
        level = %new.logging.level,
        "SIGHUP: reloaded API tokens, auth mode, rate limit and log level"
    );
    if !pending.is_empty() {
        tracing::warn!(
            sections = %pending.join(", "),
            "SIGHUP: these changes take effect only after a restart"
        );
    }
}
