//! The agent as a separate process (`sitegate run` with a config file in a temp
//! dir) on a simulated site that runs in the test process: for tests that kill
//! the agent the hard way.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use sitegate::config::parse;
use sitegate::sim::{SimSite, SimSiteSpec};

use super::site::SUMMER_MORNING_MS;

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

impl AgentProcess {
    /// Writes `config_text` with the buses pointed at `sim` and the database in
    /// a temp dir, and runs the agent binary on it (its log goes to `agent.log`
    /// there).
    pub fn spawn(config_text: &str, sim: &SimSite) -> AgentProcess {
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
            "\n[storage]\npath = \"{}\"\n",
            dir.path().join("sitegate.db").display()
        );
        let file = dir.path().join("sitegate.toml");
        std::fs::write(&file, text).expect("write the config");
        let log = std::fs::File::create(dir.path().join("agent.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
            .arg("run")
            .arg("--config")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the agent binary starts");
        AgentProcess { child, dir }
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("agent.log")
    }

    /// What the agent logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
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
