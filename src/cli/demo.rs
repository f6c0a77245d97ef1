//! `sitegate demo`: the simulated site of `config/demo.toml` and the agent on it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use sitegate::config::{parse, Config, MqttConfig};
use sitegate::sim::{SimSite, SimSiteSpec};

use super::{complain, say};

/// The demo site, built into the binary so the demo runs from anywhere.
const DEMO_CONFIG: &str = include_str!("../../config/demo.toml");

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Where the API listens (loopback only: the demo has no auth); port 0 picks
    /// a free port, printed on stdout once the demo runs.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Directory for the demo's database.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Also join an MQTT broker, e.g. mqtt://127.0.0.1:1883 (see docs/mqtt.md).
    #[arg(long, value_name = "URL")]
    mqtt: Option<String>,
    /// The gateway id in the MQTT topics (`sitegate/{ID}/...`; default "demo"):
    /// give each demo on one broker its own.
    #[arg(long, value_name = "ID")]
    gateway_id: Option<String>,
    /// How much faster than real time the simulated site runs.
    #[arg(long, default_value_t = 60.0)]
    speed: f64,
    /// Noisy mode: every measured point moves every second, the load walks on
    /// its own, a fifth of the inverters and meters speak the float models
    /// (docs/devices.md, "Noisy mode").
    #[arg(long)]
    noisy: bool,
    /// The seed of noisy mode's draws (the same seed, the same noise).
    #[arg(long, requires = "noisy")]
    seed: Option<u64>,
    /// Also write a `sitegate run` config for the same simulated devices to
    /// this file (its API on 127.0.0.1:8081), to try the path to a site.
    #[arg(long, value_name = "FILE")]
    print_config: Option<PathBuf>,
    /// Only the simulated devices, without the demo's own agent: for a
    /// `sitegate run` of your own to be the site's one controller (the
    /// installer's quick start). `--listen` and `--mqtt` are then unused.
    #[arg(long, conflicts_with = "mqtt")]
    devices_only: bool,
}

pub fn demo(args: DemoArgs) -> ExitCode {
    let (mut config, data) = match configure(&args) {
        Ok(configured) => configured,
        Err(code) => return code,
    };
    if let Err(e) = sitegate::logging::init(&config.logging) {
        complain(&e);
        return ExitCode::FAILURE;
    }
    super::run::block_on(async move {
        let mut spec = SimSiteSpec::from_config(&config, args.speed);
        spec.start = Some(morning_today());
        let sim = match SimSite::start(spec).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "the simulated site did not start");
                return ExitCode::FAILURE;
            }
        };
        sim.point_config_at_servers(&mut config);
        let wall_ms = sitegate::model::time::now_ms();
        config.simulator.clock = Some(sitegate::model::time::SimulatedClock {
            at_ms: sim.now_ms(),
            wall_ms,
            speed: args.speed,
        });
        if let Some(file) = &args.print_config {
            match std::fs::write(file, run_config(&config)) {
                Ok(()) => say(&format!(
                    "sitegate demo: a config for these devices is in {} (sitegate run --config {})",
                    file.display(),
                    file.display()
                )),
                Err(e) => {
                    tracing::error!(file = %file.display(), error = %e, "--print-config: cannot write the file");
                    sim.shutdown().await;
                    return ExitCode::FAILURE;
                }
            }
        }
        tracing::info!(speed = args.speed, data = %data.display(), "simulated site running");
        // One plain line on stdout says where the demo is (the log says it too,
        // among many): with `--listen 127.0.0.1:0` it is the only way to know.
        // And where each simulated device answers, for `sitegate scan`.
        for line in device_lines(&config) {
            say(&line);
        }
        let code = if args.devices_only {
            say("sitegate demo: the simulated devices only, no agent (Ctrl-C stops them)");
            super::run::until_stopped().await
        } else {
            super::run::serve(config, None, |agent| {
                for addr in agent.http_addrs() {
                    say(&format!("sitegate demo: http://{addr}/ (Ctrl-C stops it)"));
                }
            })
            .await
        };
        sim.shutdown().await;
        code
    })
}

/// The demo's config from the built-in one and the arguments, and the
/// folder of its database (created); the exit code when an argument is
/// refused or the folder cannot be made.
fn configure(args: &DemoArgs) -> Result<(Config, PathBuf), ExitCode> {
    let mut config = match parse(DEMO_CONFIG) {
        Ok(c) => c,
        Err(e) => {
            complain(&format!("built-in demo config: {e}"));
            return Err(ExitCode::FAILURE);
        }
    };
    if !args.listen.ip().is_loopback() {
        complain(&format!(
            "--listen {}: the demo has no authentication, so it only listens on loopback (127.0.0.1 or ::1)",
            args.listen
        ));
        return Err(ExitCode::from(super::EXIT_USAGE));
    }
    config.http.listen = vec![args.listen];
    if args.noisy {
        config.simulator.noisy = true;
        config.simulator.seed = args.seed.or(config.simulator.seed);
    }
    if let Some(id) = args.gateway_id.clone() {
        if let Err(e) = Config::check_gateway_id(&id) {
            complain(&format!("--gateway-id: {e}"));
            return Err(ExitCode::from(super::EXIT_USAGE));
        }
        config.gateway_id = id;
    }
    let data = args
        .data
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("sitegate-demo"));
    config.storage.path = data.join("sitegate-demo.db");
    if let Some(url) = args.mqtt.clone() {
        let mqtt = MqttConfig {
            url,
            ..MqttConfig::default()
        };
        if let Err(e) = mqtt.broker() {
            complain(&format!("--mqtt: {e}"));
            return Err(ExitCode::from(super::EXIT_USAGE));
        }
        config.mqtt = Some(mqtt);
    }
    if let Err(e) = std::fs::create_dir_all(&data) {
        complain(&format!("--data {}: {e}", data.display()));
        return Err(ExitCode::FAILURE);
    }
    if !(args.speed > 0.0 && args.speed <= 3600.0) {
        complain(&format!(
            "--speed {}: must be above 0 and at most 3600",
            args.speed
        ));
        return Err(ExitCode::from(super::EXIT_USAGE));
    }
    Ok((config, data))
}

/// The demo's own config, its buses pointed at the simulated devices, for
/// `sitegate run` beside the demo: its API on 127.0.0.1:8081 and its own
/// database.
fn run_config(config: &Config) -> String {
    let mut text = String::from(
        "# Written by `sitegate demo --print-config`: the demo's site with each bus\n\
         # pointed at the running demo's simulated device. Run it with\n\
         # `sitegate run --config THIS_FILE` while the demo runs, best as\n\
         # `sitegate demo --devices-only` so that this agent is the one\n\
         # controller of the devices.\n",
    );
    let mut buses = config.buses.iter();
    for line in DEMO_CONFIG.lines() {
        let out = if line.trim() == "tcp = \"127.0.0.1:0\"" {
            match buses.next().map(|b| &b.transport) {
                Some(sitegate::config::Transport::Tcp { host, port }) => {
                    format!("tcp = \"{host}:{port}\"")
                }
                _ => line.to_string(),
            }
        } else if line.starts_with("listen = [\"127.0.0.1:8080\"]") {
            "listen = [\"127.0.0.1:8081\"]".to_string()
        } else if line.starts_with("path = \"sitegate-demo.db\"") {
            "path = \"sitegate-from-demo.db\"".to_string()
        } else {
            line.to_string()
        };
        text.push_str(&out);
        text.push('\n');
    }
    text
}

/// One line per simulated device: its reference, type, bus address and
/// unit id (`sitegate scan --tcp ADDR --units N` finds it there).
fn device_lines(config: &Config) -> Vec<String> {
    config
        .devices
        .iter()
        .map(|d| {
            let at = match config
                .buses
                .iter()
                .find(|b| b.name == d.bus)
                .map(|b| &b.transport)
            {
                Some(sitegate::config::Transport::Tcp { host, port }) => {
                    format!("Modbus TCP {host}:{port}")
                }
                Some(sitegate::config::Transport::Rtu(r)) => {
                    format!("Modbus RTU {}", r.path.display())
                }
                None => format!("bus {}", d.bus),
            };
            format!(
                "sitegate demo: device {} ({}) on {at}, unit {}",
                d.reference,
                d.device_type.as_str(),
                d.unit_id
            )
        })
        .collect()
}

/// 07:00 UTC today in epoch ms: the simulated day starts with the sun rising.
fn morning_today() -> i64 {
    const DAY_MS: i64 = 86_400_000;
    let now = sitegate::model::time::now_ms();
    now - now.rem_euclid(DAY_MS) + 7 * 3_600_000
}
