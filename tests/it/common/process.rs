//! The agent as a separate process (`sitegate run` with a config file in a temp
//! dir) on a simulated site that runs in the test process: for tests that
//! signal the agent (SIGHUP, SIGTERM) or kill it the hard way.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use sitegate::config::{parse, Config, Transport};
use sitegate::sim::{SimSite, SimSiteSpec};

use super::site::SUMMER_MORNING_MS;

/// Runs the `sitegate` binary with `args` to its end (a command such as
/// `diag`, `status` or `check-config`, not `run`).
pub fn sitegate<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .args(args)
        .output()
        .expect("the sitegate binary runs")
}

/// `sitegate check-config FILE`: its exit code and what it printed.
pub fn check_config(file: &std::path::Path) -> Output {
    sitegate([std::ffi::OsStr::new("check-config"), file.as_os_str()])
}

/// What a command printed, after checking it succeeded (else its output).
pub fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A running `sitegate run`; killed (SIGKILL) when dropped.
pub struct AgentProcess {
    child: Child,
    pub dir: tempfile::TempDir,
}

/// The simulator for every loopback bus of `config_text`.
pub async fn start_sim(config_text: &str) -> SimSite {
    let config = parse(config_text).expect("test config is valid");
    let mut spec = SimSiteSpec::from_config(&config, 60.0);
    spec.start = Some(SUMMER_MORNING_MS);
    SimSite::start(spec).await.expect("simulator starts")
}

/// A temp dir holding `sitegate.toml`: `config_text` with its buses pointed at
/// `sim`, and a `[storage]` section with the database in the dir followed by
/// `storage_extra` (more `[storage]` keys, then any other sections).
pub struct ConfigDir {
    pub dir: tempfile::TempDir,
    pub file: PathBuf,
}

impl ConfigDir {
    pub fn write(config_text: &str, sim: &SimSite, storage_extra: &str) -> ConfigDir {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = parse(config_text).expect("test config is valid");
        let mut text = config_text.to_string();
        for bus in &config.buses {
            if let Some(addr) = sim.addr(&bus.name) {
                text = text.replacen(
                    &format!("name = \"{}\"\ntcp = \"127.0.0.1:0\"", bus.name),
                    &format!("name = \"{}\"\ntcp = \"{addr}\"", bus.name),
                    1,
                );
            }
        }
        text += &format!(
            "\n[storage]\npath = \"{}\"\n{storage_extra}\n",
            dir.path().join("sitegate.db").display()
        );
        let file = dir.path().join("sitegate.toml");
        std::fs::write(&file, text).expect("write the config");
        ConfigDir { dir, file }
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("sitegate.db")
    }
}

impl AgentProcess {
    /// Writes `config_text` (see [`ConfigDir::write`]) and runs the agent
    /// binary on it.
    pub fn spawn(config_text: &str, sim: &SimSite) -> AgentProcess {
        let config = ConfigDir::write(config_text, sim, "");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sitegate"));
        cmd.arg("run").arg("--config").arg(&config.file);
        Self::run(config, cmd)
    }

    /// Runs `cmd` (which starts the agent on `config.file`) with its log going
    /// to `agent.log` in the config's dir.
    pub fn run(config: ConfigDir, mut cmd: Command) -> AgentProcess {
        let log = std::fs::File::create(config.dir.path().join("agent.log")).expect("log file");
        let child = cmd
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the agent binary starts");
        AgentProcess {
            child,
            dir: config.dir,
        }
    }

    /// Waits until the agent at `base` answers `/readyz` with 200: every
    /// device polled once, so a steering request meets devices already
    /// contacted (their first-contact reads done) rather than waiting for
    /// the first poll on a loaded machine.
    pub async fn ready(base: &str) {
        let client = super::http_client().build().expect("http client");
        super::wait_for("the agent process ready", Duration::from_secs(15), || {
            let get = client.get(format!("{base}/readyz")).send();
            async move { get.await.ok().filter(|r| r.status() == 200).map(|_| ()) }
        })
        .await;
    }

    /// The agent binary on `text`, a config with `listen = ["127.0.0.1:0"]`,
    /// TCP buses on `127.0.0.1:0` and the database `unused.db` (the steering
    /// tests' configs): its buses pointed at the ports `config`'s buses hold
    /// (the simulator's, or a proxy's in front of it), a free HTTP port, the
    /// database and the log in its own folder. Returns it and the API's base
    /// URL once `/healthz` answers.
    pub async fn spawn_on(text: &str, config: &Config) -> (AgentProcess, String) {
        let http = super::free_port();
        let mut text = text.replace(
            "listen = [\"127.0.0.1:0\"]",
            &format!("listen = [\"{http}\"]"),
        );
        for bus in &config.buses {
            let Transport::Tcp { port, .. } = &bus.transport else {
                unreachable!("test buses are TCP")
            };
            text = text.replace(
                &format!("name = \"{}\"\ntcp = \"127.0.0.1:0\"", bus.name),
                &format!("name = \"{}\"\ntcp = \"127.0.0.1:{port}\"", bus.name),
            );
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("sitegate.toml");
        let db = dir.path().join("sitegate.db").display().to_string();
        std::fs::write(&file, text.replace("unused.db", &db)).expect("write the config");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sitegate"));
        cmd.arg("run").arg("--config").arg(&file);
        let agent = Self::run(ConfigDir { dir, file }, cmd);
        let base = format!("http://{http}");
        let client = super::http_client().build().expect("http client");
        super::wait_for("the agent process serves", Duration::from_secs(15), || {
            let get = client.get(format!("{base}/healthz")).send();
            async move { get.await.ok().filter(|r| r.status() == 200).map(|_| ()) }
        })
        .await;
        (agent, base)
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("agent.log")
    }

    /// What the agent logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits i32"));
        kill(pid, signal).unwrap_or_else(|e| panic!("send {signal} to the agent: {e}"));
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the process has not exited.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().expect("poll the agent").is_none()
    }

    /// Waits for the process to end on its own (after a signal); one that
    /// does not end within `within` fails with the tail of its log, so that
    /// the step it hangs in shows.
    pub async fn exited(&mut self, within: Duration) -> ExitStatus {
        let until = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the agent") {
                return status;
            }
            if tokio::time::Instant::now() >= until {
                let log = self.log();
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                panic!("the agent did not exit within {within:?}; the end of its log:\n{tail}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL: no shutdown, no DISCONNECT; waits until the process is gone.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL");
        let status = self.child.wait().expect("reap the agent");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(9),
            "the agent ended before the kill: {status}"
        );
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
