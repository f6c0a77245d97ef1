//! `sitegate demo`: the simulated site of `config/demo.toml` and the agent on it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use sitegate::config::{parse, MqttConfig};

use super::complain;

/// The demo site, built into the binary so the demo runs from anywhere.
const DEMO_CONFIG: &str = include_str!("../../config/demo.toml");

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Where the API listens (loopback only: the demo has no auth).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Directory for the demo's database.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Also join an MQTT broker, e.g. mqtt://127.0.0.1:1883 (see docs/mqtt.md).
    #[arg(long, value_name = "URL")]
    mqtt: Option<String>,
    /// How much faster than real time the simulated site runs.
    #[arg(long, default_value_t = 60.0)]
    speed: f64,
}

pub fn demo(args: DemoArgs) -> ExitCode {
    let mut config = match parse(DEMO_CONFIG) {
        Ok(c) => c,
        Err(e) => {
            complain(&format!("built-in demo config: {e}"));
            return ExitCode::FAILURE;
        }
    };
    if !args.listen.ip().is_loopback() {
        complain(&format!(
            "--listen {}: the demo has no authentication, so it only listens on loopback (127.0.0.1 or ::1)",
            args.listen
        ));
        return ExitCode::from(super::EXIT_USAGE);
    }
    config.http.listen = vec![args.listen];
    let data = args
        .data
        .unwrap_or_else(|| std::env::temp_dir().join("sitegate-demo"));
    config.storage.path = data.join("sitegate-demo.db");
    if let Some(url) = args.mqtt {
        let mqtt = MqttConfig {
            url,
            ..MqttConfig::default()
        };
        if let Err(e) = mqtt.broker() {
            complain(&format!("--mqtt: {e}"));
            return ExitCode::from(super::EXIT_USAGE);
        }
        config.mqtt = Some(mqtt);
    }
    let _ = args.speed;
    super::run::run_agent(config)
}
