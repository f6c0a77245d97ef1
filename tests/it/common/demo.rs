//! `sitegate demo` as a child process, as a newcomer runs it: the binary on a
//! free loopback port with its own data directory. [`Demo`] knows the base URL
//! the demo printed, keeps everything it wrote (the pipes are drained by
//! threads, so a chatty log never blocks it), and stops it with a signal; a
//! demo still running when its `Demo` is dropped is killed.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use reqwest::StatusCode;
use serde_json::Value;

/// How long the demo may take to start, to show values, or to exit after a
/// signal. Generous: a loaded 2-core CI machine is slow; a healthy demo needs
/// well under a second for each.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// What the demo prints on stdout before its address.
const URL_PREFIX: &str = "sitegate demo: http://";

/// A running `sitegate demo`.
pub struct Demo {
    child: Child,
    /// Where the API listens (the port the demo picked).
    pub addr: SocketAddr,
    /// `http://ADDR`, without a trailing slash.
    pub base: String,
    pub http: reqwest::Client,
    data: tempfile::TempDir,
    stdout: Output,
    stderr: Output,
}

/// Everything one pipe of the child carried so far, collected by a thread.
struct Output {
    text: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Output {
    fn collect(pipe: impl Read + Send + 'static) -> Output {
        let text = Arc::new(Mutex::new(String::new()));
        let sink = text.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut t = sink.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
            }
        });
        Output {
            text,
            reader: Some(reader),
        }
    }

    fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Waits for the pipe's end (the child exited), so nothing is missed.
    fn finish(&mut self) {
        if let Some(r) = self.reader.take() {
            r.join().expect("output reader");
        }
    }
}

/// The address in the demo's "sitegate demo: http://ADDR/ ..." line.
fn printed_addr(stdout: &str) -> Option<SocketAddr> {
    let rest = stdout.lines().find_map(|l| l.strip_prefix(URL_PREFIX))?;
    let addr = rest.split('/').next()?;
    Some(
        addr.parse().unwrap_or_else(|e| {
            panic!("the demo printed {addr:?}, not an address ({e}):\n{stdout}")
        }),
    )
}

impl Demo {
    /// Starts `sitegate demo --listen 127.0.0.1:0 --data <fresh temp dir>`
    /// followed by `args`, and waits until it prints where it listens.
    pub async fn start(args: &[&str]) -> Demo {
        let data = tempfile::tempdir().expect("temp dir");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
            .args(["demo", "--listen", "127.0.0.1:0", "--data"])
            .arg(data.path())
            .args(args)
            // The log at its default level (info), whatever the test's environment.
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sitegate demo");
        let stdout = Output::collect(child.stdout.take().expect("piped stdout"));
        let stderr = Output::collect(child.stderr.take().expect("piped stderr"));
        let addr = super::wait_for("the demo to print its address", DEADLINE, || {
            let addr = printed_addr(&stdout.text());
            if addr.is_none() {
                if let Some(status) = child.try_wait().expect("poll the demo") {
                    panic!(
                        "the demo exited ({status}) before it listened:\n{}{}",
                        stdout.text(),
                        stderr.text()
                    );
                }
            }
            std::future::ready(addr)
        })
        .await;
        Demo {
            child,
            addr,
            base: format!("http://{addr}"),
            http: super::http_client()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("http client"),
            data,
            stdout,
            stderr,
        }
    }

    /// The `--data` directory the demo was given.
    pub fn data_dir(&self) -> &Path {
        self.data.path()
    }

    /// What the demo logged (stderr) so far.
    pub fn log(&self) -> String {
        self.stderr.text()
    }

    /// What the demo printed on stdout so far.
    pub fn printed(&self) -> String {
        self.stdout.text()
    }

    /// GET `path` (the demo has no auth): the status and the JSON body
    /// (`Value::Null` when empty).
    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.log()));
        super::status_and_json(resp, &format!("GET {path}")).await
    }

    /// Sends `signal`, waits for the demo to exit and for the last of its
    /// output; returns the exit status.
    pub async fn stop(&mut self, signal: Signal) -> ExitStatus {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits i32"));
        kill(pid, signal).unwrap_or_else(|e| panic!("send {signal} to the demo: {e}"));
        let child = &mut self.child;
        let status = super::wait_for(
            &format!("the demo to exit after {signal}"),
            DEADLINE,
            || std::future::ready(child.try_wait().expect("poll the demo")),
        )
        .await;
        self.stdout.finish();
        self.stderr.finish();
        status
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
