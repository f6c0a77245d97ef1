//! Profile variants on real sockets: each Deye hybrid member reads its own
//! registers and scales from a register image laid out by hand from the
//! sources the profile cites (raw words, not encoded by the profile); a
//! device whose member cannot be told is not read and says why; `sitegate
//! scan` tells the members apart and prints blocks `check-config` accepts.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::steering_support::*;
use sitegate::model::Property;
use sitegate::profile::{parse, Profile, BUILTIN};
use sitegate::register::plan::Table;
use sitegate::sim::{SimDeviceSpec, SimKind, SimServerSpec, SimSite, SimSiteSpec};

use Property as P;
use Table::Holding as H;

fn u32_lo(v: u32) -> Vec<u16> {
    vec![v as u16, (v >> 16) as u16]
}

/// One Deye device: what config says, the raw image, what the agent shows.
struct Case {
    /// `variant = ...` in the device's config, if any.
    named: Option<&'static str>,
    words: Vec<(u16, Vec<u16>)>,
    expect: Vec<(Property, f64)>,
}

/// A Deye hybrid battery alone on the bus `deye`, its member `variant` if
/// named.
fn deye(variant: Option<&str>) -> TestSite {
    let site = TestSite::new(300, 30)
        .device("deye", "dvc_deye", Kind::Battery)
        .profile("deye-hybrid");
    match variant {
        Some(v) => site.key("variant", v),
        None => site,
    }
}

/// Starts the simulated device, lays the image, then the agent, and waits
/// for the expected values.
async fn reads(case: Case) {
    let mut config = deye(case.named).config();
    let dir = tempfile::tempdir().unwrap();
    config.storage.path = dir.path().join("sitegate.db");
    let sim = start_sim(&mut config).await;
    let dev = sim.device("deye", 1).unwrap();
    // The image is in place before the agent first asks: the member is told
    // from register 0 at first contact.
    for (addr, words) in &case.words {
        assert!(dev.poke(H, *addr, words));
    }
    let agent = sitegate::agent::Agent::start(config).await.expect("agent");
    let live = agent.live().clone();
    let id = live.find("dvc_deye").unwrap();
    eventually(
        &format!("{:?}: the documented values", case.named),
        Duration::from_secs(10),
        || async {
            case.expect.iter().all(|(p, want)| {
                live.latest(id, *p)
                    .is_some_and(|r| (r.value - want).abs() < 1e-6 * want.abs().max(1.0))
            })
        },
    )
    .await;
    agent.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deye_sg04lp3_battery_registers() {
    // Three-phase LV (register 0 = 0x0500), charging 3 kW.
    reads(Case {
        named: None,
        words: vec![
            (0, vec![0x0500]),
            (516, u32_lo(54_321)),
            (518, u32_lo(43_210)),
            (588, vec![47]),
            (590, vec![(-3000i16) as u16]),
        ],
        expect: vec![
            (P::TotalEnergyConsumed, 5_432_100.0),
            (P::TotalEnergyProduced, 4_321_000.0),
            (P::Soc, 47.0),
            (P::ActivePower, -3000.0),
        ],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deye_sg01hp3_battery_power_scale() {
    // HV, firmware before 1098: 590 counts 10 W, a 5 kW discharge is 500.
    reads(Case {
        named: Some("sg01hp3"),
        words: vec![
            (0, vec![0x0600]),
            (516, u32_lo(54_321)),
            (518, u32_lo(43_210)),
            (588, vec![81]),
            (590, vec![500]),
        ],
        expect: vec![
            (P::ActivePower, 5000.0),
            (P::TotalEnergyConsumed, 5_432_100.0),
            (P::TotalEnergyProduced, 4_321_000.0),
            (P::Soc, 81.0),
        ],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deye_sg01hp3_fw1098_counters_in_kwh() {
    // HV, firmware 1098 or later: the counters count whole kWh.
    reads(Case {
        named: Some("sg01hp3-fw1098"),
        words: vec![
            (0, vec![6]),
            (516, u32_lo(5_432)),
            (518, u32_lo(4_321)),
            (588, vec![64]),
            (590, vec![(-250i16) as u16]),
        ],
        expect: vec![
            (P::TotalEnergyConsumed, 5_432_000.0),
            (P::TotalEnergyProduced, 4_321_000.0),
            (P::ActivePower, -2500.0),
            (P::Soc, 64.0),
        ],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deye_lp1_battery_registers() {
    // Single-phase (register 0 = 3): 190/184/72/74, nothing at 586-591.
    reads(Case {
        named: None,
        words: vec![
            (0, vec![3]),
            (72, u32_lo(12_345)),
            (74, u32_lo(11_111)),
            (184, vec![66]),
            (190, vec![1200]),
            // What sits at the three-phase registers is not read.
            (590, vec![(-3000i16) as u16]),
        ],
        expect: vec![
            (P::TotalEnergyConsumed, 1_234_500.0),
            (P::TotalEnergyProduced, 1_111_100.0),
            (P::Soc, 66.0),
            (P::ActivePower, 1200.0),
        ],
    })
    .await;
}

/// An HV device whose firmware no register tells, a device type none of the
/// members has, and a device that contradicts the member its config names:
/// none is read with a guess; the device's state says what register 0 held
/// and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deye_member_not_told_is_not_read() {
    for (code, named, wants) in [
        (
            6u16,
            None,
            &[
                "holding 0 = 6 (0x0006)",
                "matches sg01hp3 (",
                "or sg01hp3-fw1098 (",
                "set `variant`",
            ][..],
        ),
        (
            2,
            None,
            &[
                "holding 0 = 2 (0x0002)",
                "matches no variant",
                "sg04lp3 (when holding 0 in",
            ][..],
        ),
        // A single-phase device configured as a three-phase one.
        (
            3,
            Some("sg04lp3"),
            &[
                "holding 0 = 3 (0x0003)",
                "the configured variant \"sg04lp3\" does not match",
            ][..],
        ),
    ] {
        let mut config = deye(named).config();
        let dir = tempfile::tempdir().unwrap();
        config.storage.path = dir.path().join("sitegate.db");
        let sim = start_sim(&mut config).await;
        assert!(sim.device("deye", 1).unwrap().poke(H, 0, &[code]));
        let agent = sitegate::agent::Agent::start(config).await.expect("agent");
        let live = agent.live().clone();
        let id = live.find("dvc_deye").unwrap();
        eventually(
            &format!("type {code}: the state says why"),
            Duration::from_secs(10),
            || async {
                live.snapshot(id)
                    .last_error
                    .is_some_and(|e| wants.iter().all(|w| e.contains(w)))
            },
        )
        .await;
        let s = live.snapshot(id);
        assert!(
            s.values.iter().all(Option::is_none),
            "nothing is read: {:?}",
            s.last_error
        );
        agent.shutdown().await;
        sim.shutdown().await;
    }
}

#[test]
fn a_variant_the_profile_lacks_is_refused_by_the_config() {
    let text = deye(Some("sg05lp3")).text();
    let e = sitegate::config::parse(&text).unwrap_err().to_string();
    assert!(
        e.contains("devices[0].variant: profile \"deye-hybrid\" has no variant \"sg05lp3\" (choices: sg04lp3"),
        "{e}"
    );
}

fn member(name: &str) -> Arc<Profile> {
    let (_, text) = BUILTIN.iter().find(|(n, _)| *n == "deye-hybrid").unwrap();
    let family = parse("deye-hybrid", "built-in", text).unwrap();
    Arc::new(family.with_variant(name).unwrap())
}

fn deye_device(unit_id: u8, variant: &str) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind: SimKind::Profile {
            profile: member(variant),
            readable_gaps: false,
        },
        serial: format!("SN-{unit_id}"),
        refuse_writes: false,
        sunspec_base: 40000,
        response: sitegate::sim::SimResponse::IDEAL,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_tells_the_deye_variants_apart() {
    let spec = SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "lan".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices: vec![
                deye_device(1, "sg04lp3"),
                deye_device(2, "sg0xlp1"),
                deye_device(3, "sg01hp3"),
            ],
        }],
        time_factor: 1.0,
        start: None,
        base_load_w: 500.0,
        ..SimSiteSpec::default()
    };
    let sim = SimSite::start(spec).await.unwrap();
    let addr = sim.addr("lan").unwrap().to_string();
    let args: Vec<String> = [
        "scan",
        "--tcp",
        &addr,
        "--units",
        "1-3",
        "--timeout-ms",
        "300",
        "--site",
        "ste_home",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_sitegate"))
                .args(&args)
                .output()
                .expect("run sitegate")
        })
    };
    let out = run(args).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for want in [
        "register holding 0 = \"5\"), battery, profile deye-hybrid, variant sg04lp3",
        "variant = \"sg04lp3\"",
        "register holding 0 = \"3\"), battery, profile deye-hybrid, variant sg0xlp1",
        "variant = \"sg0xlp1\"",
        "# variant = \"...\"   (profile \"deye-hybrid\": the device shows holding 0 = 6 (0x0006), which matches sg01hp3 (",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert!(
        stderr.contains("unit 3: no SunSpec map; recognised by profile deye-hybrid; profile"),
        "{stderr}"
    );
    // The printed blocks pass check-config (with the HV member named).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scanned.toml");
    let blocks = stdout.replace("# variant = \"...\"", "variant = \"sg01hp3\" #");
    std::fs::write(
        &file,
        format!(
            "[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n\n\
             [[sites]]\nreference = \"ste_home\"\nname = \"Home\"\n\n{blocks}"
        ),
    )
    .unwrap();
    let check = run(vec![
        "check-config".into(),
        file.to_string_lossy().to_string(),
    ])
    .await
    .unwrap();
    assert!(
        check.status.success(),
        "{}\n{}\n{blocks}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    sim.shutdown().await;
}
