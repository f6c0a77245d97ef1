//! `sitegate scan` through the binary against the simulator, on Modbus TCP and
//! on an RTU line over a pseudo-terminal pair: it finds every simulated SunSpec
//! device, says what it is, and prints config blocks that `check-config` takes.

use std::process::{Command, Output};

use sitegate::sim::{
    SimDeviceSpec, SimKind, SimRtuLine, SimServerSpec, SimSite, SimSiteSpec, Variant,
};
use tokio_serial::SerialPort;

fn device(unit_id: u8, kind: SimKind) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind,
        serial: format!("SN-{unit_id}"),
        refuse_writes: false,
        sunspec_base: 40000,
        response: sitegate::sim::SimResponse::IDEAL,
    }
}

/// Runs the binary off the async runtime (the simulator answers on it).
async fn sitegate(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_sitegate"))
            .args(&args)
            .output()
            .expect("run sitegate")
    })
    .await
    .unwrap()
}

/// Stdout of a successful run.
fn success(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Completes what scan printed into a config (an HTTP section and the site)
/// and runs `check-config` on it; returns its summary line.
async fn check_completed(scanned: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scanned.toml");
    let config = format!(
        "[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n\n\
         [[sites]]\nreference = \"ste_home\"\nname = \"Home\"\n\n{scanned}"
    );
    std::fs::write(&file, config).unwrap();
    success(&sitegate(&["check-config", file.to_str().unwrap()]).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_finds_the_simulated_devices_and_prints_a_valid_config() {
    let spec = SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "lan".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: vec![
                device(1, SimKind::Inverter { rated_w: 6000.0 }),
                device(
                    2,
                    SimKind::Battery {
                        rated_w: 5000.0,
                        capacity_wh: 10_000.0,
                        initial_soc: 50.0,
                        soc_min: 5.0,
                        soc_max: 95.0,
                    },
                ),
                device(3, SimKind::Meter),
            ],
        }],
        time_factor: 1.0,
        start: None,
        base_load_w: 500.0,
        ..SimSiteSpec::default()
    };
    let sim = SimSite::start(spec).await.unwrap();
    let addr = sim.addr("lan").unwrap().to_string();
    let stdout = success(
        &sitegate(&[
            "scan",
            "--tcp",
            &addr,
            "--units",
            "1-4",
            "--timeout-ms",
            "300",
            "--site",
            "ste_home",
        ])
        .await,
    );
    for want in [
        "# unit 1 (map at 40000): sitegate SIM-INV-6 (serial SN-1",
        "inverter, SunSpec models 1, 103, 120, 121, 123",
        "# unit 2 (map at 40000): sitegate SIM-BAT-10 (serial SN-2",
        "battery, SunSpec models 1, 701, 120, 124, 802",
        "meter, SunSpec models 1, 203",
        &format!("tcp = \"{addr}\""),
        "type = \"battery\"",
        "unit_id = 3",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("unit 4"), "{stdout}");
    let check = check_completed(&stdout).await;
    assert!(check.contains("1 bus, 3 devices"), "{check}");
    sim.shutdown().await;
}

/// Two SunSpec devices share the line with a third that answers without a
/// SunSpec map (its map is one register off); the other unit ids are silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_on_a_serial_line_prints_a_valid_config() {
    let (master, slave) = tokio_serial::SerialStream::pair().expect("pty pair");
    let path = slave.name().expect("pty slave path");
    let off_by_one = SimDeviceSpec {
        sunspec_base: 40001,
        response: sitegate::sim::SimResponse::IDEAL,
        ..device(
            4,
            SimKind::Fixed {
                variant: Variant::Meter201,
                rated_w: 1.0,
            },
        )
    };
    let line = SimRtuLine::start(
        master,
        &[
            device(2, SimKind::Meter),
            device(5, SimKind::Inverter { rated_w: 3000.0 }),
            off_by_one,
        ],
    );
    let out = sitegate(&[
        "scan",
        "--rtu",
        &path,
        "--baud",
        "19200",
        "--parity",
        "even",
        "--units",
        "1-6",
        // Generous: an answer must not miss it on a loaded machine; the
        // silent units 1, 3 and 6 cost one timeout each.
        "--timeout-ms",
        "1000",
        "--site",
        "ste_home",
        "--bus-name",
        "rs485",
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = success(&out);
    for want in [
        "# unit 2 (map at 40000): sitegate SIM-MTR-3P (serial SN-2",
        "meter, SunSpec models 1, 203",
        "# unit 5 (map at 40000): sitegate SIM-INV-3 (serial SN-5",
        "inverter, SunSpec models 1, 103, 120, 121, 123",
        &format!(
            "rtu = {{ path = \"{path}\", baud = 19200, parity = \"even\", data_bits = 8, stop_bits = 1 }}"
        ),
        "name = \"rs485\"",
        "bus = \"rs485\"",
        "unit_id = 2",
        "unit_id = 5",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("unit_id = 4"), "{stdout}");
    assert!(
        stderr.contains("unit 4: answers, but no SunSpec marker \"SunS\" at 40000, 0 or 50000"),
        "{stderr}"
    );
    assert!(
        stderr.contains("unit 3: no answer within 1000 ms"),
        "{stderr}"
    );
    let check = check_completed(&stdout).await;
    assert!(check.contains("1 bus, 2 devices"), "{check}");
    line.stop().await;
    drop(slave);
}

/// Two scans of two lines, pasted into one config, pass `check-config`:
/// each bus is named after what was scanned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_scans_pasted_into_one_config_pass_check_config() {
    let server = |name: &str, kind| SimServerSpec {
        name: name.into(),
        listen: "127.0.0.1:0".parse().unwrap(),
        devices: vec![device(1, kind)],
    };
    let spec = SimSiteSpec {
        servers: vec![
            server("a", SimKind::Inverter { rated_w: 6000.0 }),
            server("b", SimKind::Meter),
        ],
        time_factor: 1.0,
        start: None,
        base_load_w: 500.0,
        ..SimSiteSpec::default()
    };
    let sim = SimSite::start(spec).await.unwrap();
    let mut pasted = String::new();
    for line in ["a", "b"] {
        let addr = sim.addr(line).unwrap();
        let out = success(
            &sitegate(&[
                "scan",
                "--tcp",
                &addr.to_string(),
                "--units",
                "1",
                "--site",
                "ste_home",
            ])
            .await,
        );
        let name = format!("name = \"tcp-127-0-0-1-{}\"", addr.port());
        assert!(out.contains(&name), "missing {name:?} in:\n{out}");
        pasted.push_str(&out);
        pasted.push('\n');
    }
    let check = check_completed(&pasted).await;
    assert!(check.contains("2 buses, 2 devices"), "{check}");
    sim.shutdown().await;
}
