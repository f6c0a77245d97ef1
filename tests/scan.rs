//! `sitegate scan` against the simulator: it finds every simulated SunSpec
//! device, says what it is, and prints config blocks that `check-config` takes.

use std::process::Command;

use sitegate::sim::{SimDeviceSpec, SimKind, SimServerSpec, SimSite, SimSiteSpec};

fn device(unit_id: u8, kind: SimKind) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind,
        serial: format!("SN-{unit_id}"),
        refuse_writes: false,
        sunspec_base: 40000,
    }
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
    };
    let sim = SimSite::start(spec).await.unwrap();
    let addr = sim.addr("lan").unwrap();
    let bin = env!("CARGO_BIN_EXE_sitegate");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(bin)
            .args(["scan", "--tcp", &addr.to_string(), "--units", "1-4"])
            .args(["--timeout-ms", "300", "--site", "ste_home"])
            .output()
            .expect("run sitegate scan")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
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

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scanned.toml");
    let config = format!(
        "[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n\n[[sites]]\nreference = \"ste_home\"\nname = \"Home\"\n\n{stdout}"
    );
    std::fs::write(&file, config).unwrap();
    let check = Command::new(bin)
        .args(["check-config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains("1 bus, 3 devices"));
    sim.shutdown().await;
}
