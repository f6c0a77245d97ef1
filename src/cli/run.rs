//! `sitegate run`: the agent on a real site until SIGINT or SIGTERM.

use std::path::Path;
use std::process::ExitCode;

use sitegate::agent::Agent;
use sitegate::config::Config;

use super::{complain, load_config};

pub fn run(file: &Path) -> ExitCode {
    let config = match load_config(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(e) = sitegate::logging::init(&config.logging) {
        complain(&e);
        return ExitCode::from(super::EXIT_CONFIG);
    }
    run_agent(config)
}

/// Starts a runtime, runs the agent until a signal, and shuts it down.
pub fn run_agent(config: Config) -> ExitCode {
    block_on(serve(config))
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

/// Runs the agent until a signal, then shuts it down.
pub async fn serve(config: Config) -> ExitCode {
    serve_then(config, |_| {}).await
}

/// Like [`serve`], calling `started` once the agent runs and listens.
pub async fn serve_then(config: Config, started: impl FnOnce(&Agent)) -> ExitCode {
    let agent = match Agent::start(config).await {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "agent did not start");
            return ExitCode::FAILURE;
        }
    };
    started(&agent);
    wait_for_signal(agent.cancellation()).await;
    agent.shutdown().await;
    ExitCode::SUCCESS
}

/// Resolves on SIGINT, SIGTERM, or when something inside cancels the agent.
pub async fn wait_for_signal(cancel: tokio_util::sync::CancellationToken) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
        () = term => tracing::info!("SIGTERM: shutting down"),
        () = cancel.cancelled() => {}
    }
}
