//! Subcommand bodies for the binary. Each returns the process exit code.

pub mod agent_api;
pub mod demo;
pub mod diag;
pub mod grid_events;
pub mod run;
pub mod scan;
pub mod status;
pub mod tokens;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use sitegate::api::{new_token, token_config_snippet};
use sitegate::config::{Config, ConfigError, Scope};

use super::{EXIT_CONFIG, EXIT_USAGE};

/// Writes a line to stdout; a closed stdout is not worth a panic.
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}

/// Writes a line to stderr.
pub fn complain(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// Every problem in the file (TLS files too) with its path, exit 78 when any;
/// warnings (a default gateway id cloned controllers would share) do not fail.
pub fn check_config(file: &Path) -> ExitCode {
    match Config::load(file) {
        Ok(c) => {
            for w in c.warnings() {
                complain(&format!("{}: warning: {w}", file.display()));
            }
            if !c.file_problems.is_empty() {
                let e = ConfigError {
                    problems: c.file_problems.clone(),
                };
                complain(&format!("{}: {e}", file.display()));
                return ExitCode::from(EXIT_CONFIG);
            }
            say(&format!(
                "{}: ok ({} site{}, {} bus{}, {} device{})",
                file.display(),
                c.sites.len(),
                plural(c.sites.len()),
                c.buses.len(),
                if c.buses.len() == 1 { "" } else { "es" },
                c.devices.len(),
                plural(c.devices.len()),
            ));
            ExitCode::SUCCESS
        }
        Err(e) => {
            complain(&format!("{}: {e}", file.display()));
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

pub fn token_new(name: &str, scopes: &str) -> ExitCode {
    if name.trim().is_empty() {
        complain("--name: must not be empty");
        return ExitCode::from(EXIT_USAGE);
    }
    let mut parsed = Vec::new();
    for s in scopes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match s.parse::<Scope>() {
            Ok(scope) if !parsed.contains(&scope) => parsed.push(scope),
            Ok(_) => {}
            Err(e) => {
                complain(&format!("--scopes: {e}"));
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    if parsed.is_empty() {
        complain("--scopes: name at least one of read, steer, admin");
        return ExitCode::from(EXIT_USAGE);
    }
    let token = match new_token() {
        Ok(t) => t,
        Err(e) => {
            complain(&format!("cannot get random bytes from the OS: {e}"));
            return ExitCode::FAILURE;
        }
    };
    complain("The token (shown once; give it to its user):");
    say(&token.plaintext);
    complain("\nAdd this to the config file (only the hash is stored):");
    say(&token_config_snippet(name, &parsed, &token));
    ExitCode::SUCCESS
}

/// `sitegate tls fingerprint`: the SHA-256 fingerprint of the certificate
/// the config names (or its public key's pin), on stdout; a self-signed one
/// is made (or issued again when due) in the state directory first, as the
/// agent would at its start.
pub fn tls_fingerprint(file: &Path, pin: bool) -> ExitCode {
    let config = match load_config(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match sitegate::https::load_for(&config) {
        None => {
            complain(&format!(
                "{}: http.tls is not set: the agent serves no HTTPS",
                file.display()
            ));
            ExitCode::from(EXIT_CONFIG)
        }
        Some(Err(e)) => {
            complain(&format!("{}: {e}", file.display()));
            ExitCode::from(EXIT_CONFIG)
        }
        Some(Ok((pair, _))) => {
            if pin {
                say(pair.pin.as_deref().unwrap_or_default());
            } else {
                say(&pair.fingerprint);
            }
            ExitCode::SUCCESS
        }
    }
}

/// `sitegate csip id`: each `[csip_aus]` table's site, lFDI and sFDI, read
/// from its certificate as the client reads it.
pub fn csip_id(file: &Path) -> ExitCode {
    let config = match load_config(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if config.csip.is_empty() {
        complain(&format!(
            "{}: no [csip_aus] table (or none enabled): no CSIP-AUS client",
            file.display()
        ));
        return ExitCode::from(EXIT_CONFIG);
    }
    let count = config.csip.len();
    let mut code = ExitCode::SUCCESS;
    for (i, c) in config.csip.iter().enumerate() {
        match sitegate::config::csip_files::load(c, i, count) {
            Ok(m) => say(&format!(
                "site {}\n  lFDI {}\n  sFDI {}\n  NMI  {}\n  server https://{}:{}{}",
                c.site,
                m.identity.lfdi,
                m.identity.sfdi,
                c.nmi,
                c.server.host,
                c.server.port,
                c.server.path
            )),
            Err(problems) => {
                for p in problems {
                    complain(&format!("{}: {p}", file.display()));
                }
                code = ExitCode::from(EXIT_CONFIG);
            }
        }
    }
    code
}

/// `sitegate eebus id`: the node's SHIP ID, SKI and QR payload, from the
/// key in the state directory (made there first, as the agent would).
pub fn eebus_id(file: &Path) -> ExitCode {
    let config = match load_config(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let Some(c) = &config.eebus else {
        complain(&format!(
            "{}: no [eebus] table (or it is not enabled): no EEBus node",
            file.display()
        ));
        return ExitCode::from(EXIT_CONFIG);
    };
    let dir = sitegate::https::state_dir(&config);
    match sitegate::eebus::identity::load_or_make(&dir, c) {
        Ok(id) => {
            say(&format!(
                "site {}\n{}",
                c.site,
                sitegate::eebus::identity::describe(c, &id)
            ));
            ExitCode::SUCCESS
        }
        Err(e) => {
            complain(&format!("{}: {e}", file.display()));
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// Loads config or reports it like `check-config` does.
pub fn load_config(file: &Path) -> Result<Config, ExitCode> {
    Config::load(file).map_err(|e| {
        complain(&format!("{}: {e}", file.display()));
        ExitCode::from(EXIT_CONFIG)
    })
}
