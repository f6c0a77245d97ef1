//! The `sitegate` command line: parses arguments, loads config, starts logging,
//! runs the library, and maps failures to exit codes (78 bad config, 64 bad
//! usage, 1 for what a restart may cure). A database written by a newer
//! version is set aside for a temporary store, not an exit.

#![warn(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// Edge gateway agent for energy sites.
#[derive(Parser, Debug)]
#[command(name = "sitegate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the agent with a config file.
    Run {
        #[arg(long, short, default_value = "/etc/sitegate/sitegate.toml")]
        config: PathBuf,
    },
    /// Run a simulated site and the agent on it (loopback, no auth).
    Demo(cli::demo::DemoArgs),
    /// Check a config file and report every problem with its path.
    CheckConfig { file: PathBuf },
    /// Find SunSpec devices on a Modbus TCP address or serial line and print
    /// config blocks for them.
    Scan(cli::scan::ScanArgs),
    /// Write the running agent's support bundle to a file (asks its local
    /// API; needs a token with the admin scope unless auth = "none").
    Diag(cli::diag::DiagArgs),
    /// One screen of the running agent: readiness, devices online, each
    /// site's grid loop, limits and steering, the uplink, the store, the
    /// clock (asks its API; a read token unless auth = "none").
    Status(cli::status::StatusArgs),
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// The HTTPS certificate.
    Tls {
        #[command(subcommand)]
        command: TlsCommand,
    },
    /// The CSIP-AUS (IEEE 2030.5) client.
    Csip {
        #[command(subcommand)]
        command: CsipCommand,
    },
    /// The evidence log: every grid operator's limit the site held, with
    /// what the meter saw meanwhile.
    GridEvents {
        #[arg(long, short, default_value = "/etc/sitegate/sitegate.toml")]
        config: PathBuf,
        /// From: a date (2026-11-01, UTC) or an RFC 3339 time.
        #[arg(long)]
        since: String,
        /// Until (default: now).
        #[arg(long)]
        until: Option<String>,
        /// CSV, one line an event, for the operator.
        #[arg(long)]
        csv: bool,
    },
    /// The EEBus node (LPC, LPP) a grid operator's control box limits.
    Eebus {
        #[command(subcommand)]
        command: EebusCommand,
    },
}

#[derive(Subcommand, Debug)]
enum EebusCommand {
    /// Print the node's SHIP ID, SKI and installation QR payload for
    /// pairing with the control box (its key is made first when there is
    /// none yet).
    Id {
        #[arg(long, short, default_value = "/etc/sitegate/sitegate.toml")]
        config: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum CsipCommand {
    /// Print each [csip_aus] table's device identity (lFDI and sFDI, from
    /// its certificate) for registration with the utility.
    Id {
        #[arg(long, short, default_value = "/etc/sitegate/sitegate.toml")]
        config: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum TlsCommand {
    /// Print the SHA-256 fingerprint of the certificate the agent serves
    /// (a self-signed one is made first when there is none yet).
    Fingerprint {
        #[arg(long, short, default_value = "/etc/sitegate/sitegate.toml")]
        config: PathBuf,
        /// Print the public key's pin instead (`sha256//...`, what
        /// `curl --pinnedpubkey` takes; it survives a renewal).
        #[arg(long)]
        pin: bool,
    },
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Make a new token: prints it once, and the config block holding its hash.
    New {
        #[arg(long)]
        name: String,
        /// Comma-separated: read, steer, admin.
        #[arg(long, default_value = "read")]
        scopes: String,
    },
    /// List the tokens a config holds: name, scopes, the start of the hash.
    List {
        #[arg(long, short, default_value = "/etc/sitegate/sitegate.toml")]
        config: PathBuf,
    },
}

/// EX_USAGE from sysexits.h.
const EXIT_USAGE: u8 = 64;
/// EX_CONFIG from sysexits.h.
const EXIT_CONFIG: u8 = sitegate::agent::EXIT_CONFIG;

fn main() -> ExitCode {
    sitegate::memory::tune();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::CheckConfig { file } => cli::check_config(&file),
        Command::Token {
            command: TokenCommand::New { name, scopes },
        } => cli::token_new(&name, &scopes),
        Command::Token {
            command: TokenCommand::List { config },
        } => cli::tokens::token_list(&config),
        Command::Run { config } => cli::run::run(&config),
        Command::Demo(args) => cli::demo::demo(args),
        Command::Scan(args) => cli::scan::scan(args),
        Command::Diag(args) => cli::diag::diag(args),
        Command::Status(args) => cli::status::status(args),
        Command::Tls {
            command: TlsCommand::Fingerprint { config, pin },
        } => cli::tls_fingerprint(&config, pin),
        Command::Csip {
            command: CsipCommand::Id { config },
        } => cli::csip_id(&config),
        Command::Eebus {
            command: EebusCommand::Id { config },
        } => cli::eebus_id(&config),
        Command::GridEvents {
            config,
            since,
            until,
            csv,
        } => cli::grid_events::run(&config, &since, until.as_deref(), csv),
    }
}
