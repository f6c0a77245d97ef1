//! `sitegate diag`: the support bundle of the running agent written to a
//! file on site. It asks the agent named by the config over its local HTTP
//! API (`POST /admin/operations` with `kind = "bundle"`, then the bundle's
//! chunks), so the file is the same bundle the operations channel sends,
//! with the agent's live state (devices, metrics, log lines). The agent must
//! run: the file's live sections exist only in it.
//!
//! A token with the `admin` scope comes from `--token` or `SITEGATE_TOKEN`
//! (none is needed with `auth = "none"`); which agent, and how it is asked,
//! is `agent_api`'s.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use super::agent_api::{block_on, call, problem, AgentArgs, Target};
use super::{complain, say};

#[derive(clap::Args, Debug)]
pub struct DiagArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// Where to write the bundle (`-`: stdout); by default
    /// `sitegate-bundle-<gateway id>-<time>.txt` here.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

/// How long the bundle may take to be made.
const WAIT: Duration = Duration::from_secs(60);

pub fn diag(args: DiagArgs) -> ExitCode {
    let (addr, label) = match args.agent.resolve() {
        Ok(t) => t,
        Err(code) => return code,
    };
    let token = args.agent.token();
    let id = format!("diag-{}", sitegate::model::time::now_ms());
    let text = match block_on(fetch(&addr, token.as_deref(), &id)) {
        Ok(text) => text,
        Err(e) => {
            complain(&format!("sitegate diag: the agent at {addr}: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let out = args.output.unwrap_or_else(|| {
        let stamp =
            sitegate::model::time::format_utc(sitegate::model::time::now_ms()).replace(':', "");
        PathBuf::from(format!("sitegate-bundle-{label}-{stamp}.txt"))
    });
    if out.as_os_str() == "-" {
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
        return ExitCode::SUCCESS;
    }
    match std::fs::write(&out, &text) {
        Ok(()) => {
            say(&format!(
                "{}: {} bytes (operation {id})",
                out.display(),
                text.len()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => {
            complain(&format!("cannot write {}: {e}", out.display()));
            ExitCode::FAILURE
        }
    }
}

/// Starts the bundle operation, waits for it, and joins its chunks.
async fn fetch(addr: &Target, token: Option<&str>, id: &str) -> Result<String, String> {
    let body = json!({"id": id, "kind": "bundle"}).to_string();
    let (status, mut op) = call(addr, token, "POST", "/admin/operations", Some(&body)).await?;
    if !(200..300).contains(&status) {
        return Err(format!(
            "POST /admin/operations answered {status}: {}",
            problem(&op)
        ));
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while op["state"] != "succeeded" {
        if op["state"] == "failed" {
            return Err(format!("the bundle failed: {}", op["error"]));
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the bundle was not made within {} s",
                WAIT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        op = call(addr, token, "GET", &format!("/admin/operations/{id}"), None)
            .await?
            .1;
    }
    let chunks = op["result"]["chunks"].as_u64().unwrap_or(0);
    let mut text = String::new();
    for n in 0..chunks {
        let (status, c) = call(
            addr,
            token,
            "GET",
            &format!("/admin/operations/{id}/bundle?chunk={n}"),
            None,
        )
        .await?;
        if status != 200 {
            return Err(format!("chunk {n} answered {status}: {}", problem(&c)));
        }
        text.push_str(c["data"].as_str().unwrap_or_default());
    }
    let want = op["result"]["sha256"].as_str().unwrap_or_default();
    if sitegate::config::text_sha256(&text) != want {
        return Err(format!(
            "the chunks do not add up to the bundle (sha256 {want})"
        ));
    }
    Ok(text)
}
