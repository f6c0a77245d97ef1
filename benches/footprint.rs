//! Memory and CPU of the agent at steady state with 20 devices polled at 1 Hz
//! (targets: <= 20 MB RSS, <= 2 % of one core).
//!
//! `cargo bench --bench footprint` (`-- SECONDS`, default 60 s of measurement
//! after 20 s of warm-up). The simulated site runs in this process; the agent is
//! the release `sitegate` binary in a child process (`sitegate run`), so only
//! its own memory and CPU are counted: RSS from `/proc/PID/status`, CPU time from
//! `/proc/PID/stat`. The store, the bus tasks and the HTTP server all run; no
//! requests are made.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::fmt::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sitegate::config::parse;
use sitegate::sim::{SimSite, SimSiteSpec};

const INVERTERS: usize = 10;
const BATTERIES: usize = 8;
const METERS: usize = 2;

fn config_text(dir: &std::path::Path, http_port: u16) -> String {
    let mut t = format!(
        "gateway_id = \"footprint\"\n[http]\nlisten = [\"127.0.0.1:{http_port}\"]\nauth = \"none\"\n[storage]\npath = {:?}\n[logging]\nlevel = \"warn\"\n",
        dir.join("sitegate.db").display().to_string()
    );
    for s in 0..METERS {
        writeln!(t, "[[sites]]\nreference = \"ste_{s}\"\nname = \"Site {s}\"").unwrap();
    }
    let kinds = [
        ("inverter", INVERTERS),
        ("battery", BATTERIES),
        ("meter", METERS),
    ];
    let mut n = 0;
    for (kind, count) in kinds {
        for i in 0..count {
            let bus = format!("{kind}{i}");
            writeln!(t, "[[buses]]\nname = \"{bus}\"\ntcp = \"127.0.0.1:0\"").unwrap();
            writeln!(
                t,
                "[[devices]]\nreference = \"dvc_{bus}\"\nname = \"{bus}\"\ntype = \"{kind}\"\nsite = \"ste_{}\"\nbus = \"{bus}\"\nunit_id = 1\npoll_interval_ms = 1000",
                n % METERS
            )
            .unwrap();
            n += 1;
        }
    }
    t
}

/// VmRSS and VmHWM in kB.
fn memory_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// utime + stime in clock ticks (100 per second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn main() {
    let seconds: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(60);
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // A free port for the agent's API, to check at the end that it polled.
    let http_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = parse(&config_text(dir.path(), http_port)).unwrap();
    let sim = rt
        .block_on(SimSite::start(SimSiteSpec::from_config(&config, 1.0)))
        .unwrap();
    sim.point_config_at_servers(&mut config);
    // Write the config with the simulator's ports.
    let mut text = config_text(dir.path(), http_port);
    for bus in &config.buses {
        if let sitegate::config::Transport::Tcp { host, port } = &bus.transport {
            text = text.replacen(
                &format!("name = \"{}\"\ntcp = \"127.0.0.1:0\"", bus.name),
                &format!("name = \"{}\"\ntcp = \"{host}:{port}\"", bus.name),
                1,
            );
        }
    }
    let path = dir.path().join("sitegate.toml");
    std::fs::write(&path, text).unwrap();

    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_sitegate"))
        .args(["run", "--config", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    println!(
        "agent pid {pid}: {} devices at 1 Hz; 20 s warm-up, then {seconds} s measured",
        INVERTERS + BATTERIES + METERS
    );
    std::thread::sleep(Duration::from_secs(20));

    let ticks0 = cpu_ticks(pid);
    let t0 = Instant::now();
    let mut rss = Vec::new();
    while t0.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(1));
        rss.push(memory_kb(pid).0);
    }
    let cpu_s = (cpu_ticks(pid) - ticks0) as f64 / 100.0;
    let elapsed = t0.elapsed().as_secs_f64();
    let (_, hwm) = memory_kb(pid);
    let mean = rss.iter().sum::<u64>() as f64 / rss.len() as f64;
    println!(
        "RSS steady: mean {:.1} MB, max {:.1} MB (high-water mark since start {:.1} MB)",
        mean / 1024.0,
        *rss.iter().max().unwrap() as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    println!(
        "CPU: {cpu_s:.2} s in {elapsed:.1} s = {:.2} % of one core",
        cpu_s / elapsed * 100.0
    );

    // Every device must have been polled throughout: online, seen within 2 s.
    let devices: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("http://127.0.0.1:{http_port}/devices"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let now = sitegate::model::time::now_ms();
    let polled = devices
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["status"]["online"] == true
                && now - d["status"]["lastSeen"].as_i64().unwrap_or(0) < 2000
        })
        .count();
    println!(
        "devices online and polled within the last 2 s: {polled} of {}",
        devices.as_array().unwrap().len()
    );
    assert_eq!(polled, INVERTERS + BATTERIES + METERS, "{devices}");

    terminate(&mut child);
    rt.block_on(sim.shutdown());
}

/// SIGTERM through `kill(1)` (no libc dependency), then wait.
fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
