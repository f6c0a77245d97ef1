//! The quick starts run as a reader runs them: every ```sh block of
//! `docs/quickstart-partner.md` and `docs/quickstart-installer.md`, in
//! order, in one bash in an empty folder, with the built `sitegate` first on
//! PATH. The guides start the demo themselves on the ports their first block
//! names (`PORT`, `MQTT_PORT`, `AGENT_PORT`, `AGENT_HTTPS_PORT`, each
//! `${VAR:-default}`); the test sets them to free ports, so the guides run
//! beside anything else.
//!
//! The script stops at the first command that fails (`set -e -o pipefail`),
//! and the test fails with that block's text, its line in the guide, its
//! output and its exit code. Each guide runs in a process group of its own,
//! which the test ends when the guide is done, so a failing guide leaves no
//! demo behind. A guide may hold only ```sh and ```text blocks: a block of
//! another language would be neither run nor said to be skipped.
//!
//! The partner guide's MQTT section needs mosquitto and its clients: without
//! them it is skipped with a notice (the rest still runs), unless
//! `SITEGATE_REQUIRE_MOSQUITTO=1`.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::common::{installed, required};

/// The longest a guide may take (each runs in about 10 to 20 s).
const TIMEOUT: Duration = Duration::from_secs(240);

/// One ```sh block: the `## ` heading it is under, its first line's number
/// in the file (1-based, the fence's) and its text.
#[derive(Debug)]
struct Block {
    heading: String,
    line: usize,
    text: String,
}

/// The ```sh blocks of `markdown`, in order; panics on a fence of another
/// language than `sh` or `text`, or one left open.
fn sh_blocks(file: &str, markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut heading = String::new();
    let mut open: Option<(String, usize, String)> = None;
    for (n, line) in markdown.lines().enumerate() {
        if let Some((lang, start, text)) = &mut open {
            if line.trim_end() == "```" {
                if lang == "sh" {
                    blocks.push(Block {
                        heading: heading.clone(),
                        line: *start,
                        text: std::mem::take(text),
                    });
                }
                open = None;
            } else {
                text.push_str(line);
                text.push('\n');
            }
            continue;
        }
        if let Some(h) = line.strip_prefix("## ") {
            heading = h.to_string();
        } else if let Some(lang) = line.strip_prefix("```") {
            let lang = lang.trim();
            assert!(
                lang == "sh" || lang == "text",
                "{file}:{}: a ```{lang} block: the guide's blocks are ```sh (run) or ```text (not run)",
                n + 1
            );
            open = Some((lang.to_string(), n + 1, String::new()));
        }
    }
    assert!(open.is_none(), "{file}: a block is not closed");
    blocks
}

/// Runs `blocks` of `file` in one bash in a fresh folder with `env`; panics
/// with the failing block, its output and its exit code.
fn run(file: &str, blocks: &[Block], env: &[(&str, String)]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join(".quickstart");
    std::fs::create_dir(&state).expect("state dir");
    // Each block's output goes to a file of its own; the EXIT trap keeps the
    // status of the command that ended the script.
    let mut script = String::from(
        "set -e -o pipefail\ntrap 'echo $? > .quickstart/rc' EXIT\n\
         __block() { echo \"$1\" > .quickstart/at; exec > \".quickstart/out.$1\" 2>&1; }\n",
    );
    for (i, b) in blocks.iter().enumerate() {
        script.push_str(&format!("__block {i}\n{}", b.text));
    }
    script.push_str("echo done > .quickstart/at\n");
    std::fs::write(state.join("script.sh"), &script).expect("write the script");

    let bin = Path::new(env!("CARGO_BIN_EXE_sitegate"))
        .parent()
        .expect("the binary's folder")
        .to_path_buf();
    let path = format!(
        "{}:/usr/sbin:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let log = std::fs::File::create(state.join("bash.log")).expect("log file");
    let mut child = Command::new("bash")
        .arg(".quickstart/script.sh")
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .env_remove("SITEGATE_TOKEN")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("bash runs");
    let group = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for bash") {
            break Some(status);
        }
        if started.elapsed() > TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Whatever the guide left running (a demo after a failed block).
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();

    let read = |name: &str| std::fs::read_to_string(state.join(name)).unwrap_or_default();
    let at = read("at");
    if status.is_some_and(|s| s.success()) && at.trim() == "done" {
        #[allow(clippy::print_stderr, reason = "say how long the guide took")]
        {
            eprintln!(
                "{file}: {} blocks ran in {:.1} s",
                blocks.len(),
                started.elapsed().as_secs_f64()
            );
        }
        return;
    }
    let kept = dir.keep();
    let why = match status {
        None => format!("did not end within {TIMEOUT:?}"),
        Some(s) => match read("rc").trim().parse::<i32>() {
            Ok(c) => format!("exit code {c}"),
            Err(_) => s.to_string(),
        },
    };
    let Ok(i) = at.trim().parse::<usize>() else {
        panic!(
            "{file}: the script failed before its first block ({why}): {}",
            read("bash.log")
        );
    };
    let b = &blocks[i];
    panic!(
        "{file}:{}: block {} of {} (under \"{}\") failed: {why}\n--- the block\n{}--- its output\n{}--- (the folder is kept: {})",
        b.line,
        i + 1,
        blocks.len(),
        b.heading,
        b.text,
        read(&format!("out.{i}")),
        kept.display()
    );
}

fn guide(name: &str) -> (String, Vec<Block>) {
    let file = format!("docs/{name}");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&file))
        .expect("the guide is there");
    let blocks = sh_blocks(&file, &text);
    assert!(blocks.len() >= 5, "{file}: only {} sh blocks", blocks.len());
    (file, blocks)
}

#[test]
fn the_partner_quick_start_runs_on_the_demo() {
    let (file, mut blocks) = guide("quickstart-partner.md");
    let clients = [
        "mosquitto",
        "mosquitto_sub",
        "mosquitto_pub",
        "mosquitto_rr",
    ];
    let missing: Vec<&str> = clients
        .into_iter()
        .filter(|c| installed(c).is_none())
        .collect();
    if !missing.is_empty() {
        assert!(
            !required("MOSQUITTO"),
            "SITEGATE_REQUIRE_MOSQUITTO=1 but {} not installed",
            missing.join(", ")
        );
        #[allow(clippy::print_stderr, reason = "a test run should say what it skipped")]
        {
            eprintln!(
                "{}: not installed: the partner quick start's MQTT section is skipped",
                missing.join(", ")
            );
        }
        blocks.retain(|b| !b.heading.contains("MQTT"));
    }
    assert!(
        blocks.iter().any(|b| b.text.contains("sitegate demo")),
        "{file} starts no demo"
    );
    run(
        &file,
        &blocks,
        &[
            ("PORT", crate::common::free_port().port().to_string()),
            ("MQTT_PORT", crate::common::free_port().port().to_string()),
        ],
    );
}

#[test]
fn the_installer_quick_start_runs_on_the_demo() {
    let (file, blocks) = guide("quickstart-installer.md");
    run(
        &file,
        &blocks,
        &[
            ("PORT", crate::common::free_port().port().to_string()),
            ("AGENT_PORT", crate::common::free_port().port().to_string()),
            (
                "AGENT_HTTPS_PORT",
                crate::common::free_port().port().to_string(),
            ),
        ],
    );
}

#[test]
fn blocks_are_read_in_order_under_their_headings() {
    let md = "# T\n\n## One\n\n```sh\necho a\n```\n\n```text\na\n```\n\n## Two\n```sh\necho b\necho c\n```\n";
    let b = sh_blocks("t.md", md);
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].heading.as_str(), b[0].line, b[0].text.as_str()),
        ("One", 5, "echo a\n")
    );
    assert_eq!(
        (b[1].heading.as_str(), b[1].line, b[1].text.as_str()),
        ("Two", 14, "echo b\necho c\n")
    );
}

#[test]
#[should_panic(expected = "a ```bash block")]
fn a_block_of_another_language_is_refused() {
    sh_blocks("t.md", "```bash\nls\n```\n");
}
