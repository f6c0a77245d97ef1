//! `sitegate check-config FILE` through the binary: a file with many problems
//! exits 78 (EX_CONFIG) and names every problem with its TOML path; the shipped
//! example configs exit 0.

use std::path::Path;
use std::process::Output;

use crate::common::process::{check_config, sitegate, succeeded};

/// One problem of each kind the issue lists, and a device on a bus whose own
/// entry is broken (it must not be reported as "unknown" on top).
const BAD: &str = r#"
colour = "blue"

[http]
listen = ["0.0.0.0:8080"]
auth = "none"

[storage]
path = "/tmp/sitegate-check.db"
retention_interval_s = 0

[[sites]]
reference = "ste_home"
name = "Home"
max_import = "25 parsecs"
max_export = "-5 kW"

[[buses]]
name = "lan"
tcp = "192.168.1.50:99999"

[[buses]]
name = "rs485"
rtu = { path = "/dev/ttyUSB0", baud = 9600, parity = "none" }

[[devices]]
reference = "dvc_pv"
name = "Roof PV"
type = "inverter"
site = "ste_home"
bus = "lan"
unit_id = 1
colour = "red"

[[devices]]
reference = "dvc_pv"
name = "Carport PV"
type = "inverter"
site = "ste_away"
bus = "rs485"
unit_id = 0

[[devices]]
reference = "dvc_meter"
name = "Meter"
type = "meter"
site = "ste_home"
bus = "wifi"
unit_id = 2
"#;

#[test]
fn every_problem_is_reported_with_its_path_and_exit_78() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, BAD).unwrap();
    let out = check_config(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout when the file is bad"
    );

    let expected = [
        ("colour", "unknown key"),
        (
            "http.listen[0]",
            "auth = \"none\" is only allowed when every listener is on loopback",
        ),
        ("storage.retention_interval_s", "must be 1 to 3600, found 0"),
        ("sites[0].max_import", "unknown power unit \"parsecs\""),
        // Beside a bad value, the entry's other values are still checked.
        ("sites[0].max_export", "must not be negative, found -5000 W"),
        (
            "buses[0].tcp",
            "\"192.168.1.50:99999\" is not a Modbus TCP address",
        ),
        ("devices[0].colour", "unknown key"),
        (
            "devices[1].reference",
            "duplicate device reference \"dvc_pv\"",
        ),
        ("devices[1].site", "unknown site \"ste_away\""),
        ("devices[1].unit_id", "0 is not a device address (1 to 247)"),
        ("devices[2].bus", "unknown bus \"wifi\""),
    ];
    let problems: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("  - "))
        .collect();
    for (path, message) in expected {
        let line = format!("{path}: {message}");
        assert!(
            problems.iter().any(|p| p.starts_with(&line)),
            "missing {line:?} in:\n{stderr}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{stderr}");
    // Each entry's problems name it by reference and the line of its header.
    let header = |name: &str, nth: usize| {
        BAD.lines()
            .enumerate()
            .filter(|(_, l)| l.starts_with(name))
            .nth(nth)
            .map(|(n, _)| n + 1)
            .expect("a header")
    };
    for (path, entry) in [
        (
            "sites[0].max_export",
            format!("(site \"ste_home\", line {})", header("[[sites]]", 0)),
        ),
        (
            "devices[1].unit_id",
            format!("(device \"dvc_pv\", line {})", header("[[devices]]", 1)),
        ),
        (
            "buses[0].tcp",
            format!("(bus \"lan\", line {})", header("[[buses]]", 0)),
        ),
    ] {
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(path) && p.ends_with(&entry)),
            "no {path} ending {entry:?} in:\n{stderr}"
        );
    }
    assert!(
        stderr.starts_with(&format!(
            "{}: {} problems in the config",
            file.display(),
            expected.len()
        )),
        "{stderr}"
    );
}

#[test]
fn the_shipped_configs_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, summary) in [
        ("config/sitegate.toml", "ok (1 site, 2 buses, 3 devices)"),
        ("config/demo.toml", "ok (1 site, 5 buses, 5 devices)"),
    ] {
        let out = check_config(&root.join(file));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{file}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(summary), "{file}: {stdout}");
    }
    // The annotated example's tokens are placeholders: said, not failed.
    let out = check_config(&root.join("config/sitegate.toml"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: http.tokens[0].sha256: token \"technician\" has a placeholder hash (00000000…)"),
        "{stderr}"
    );
}

/// Without `gateway_id` the id is the host name (the contract's default), and
/// check-config says that clones share it; `gateway_id_from = "machine-id"`
/// derives one from the machine id where the machine has one.
#[test]
fn the_default_gateway_id_is_the_host_name_and_warned_about() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("site.toml");
    let write = |head: &str| {
        std::fs::write(
            &file,
            format!("{head}\n[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n"),
        )
        .expect("write config")
    };
    let said = |o: &Output| {
        String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    write("");
    let out = check_config(&file);
    let text = said(&out);
    assert!(
        text.contains(&format!("the host name {:?} is used", host.trim())),
        "{text}"
    );
    assert!(text.contains("cloned from one image"), "{text}");

    write("gateway_id_from = \"machine-id\"");
    let out = check_config(&file);
    let text = said(&out);
    let has_machine_id = std::fs::read_to_string("/etc/machine-id")
        .is_ok_and(|m| m.trim().len() == 32 && m.trim().bytes().any(|b| b != b'0'));
    assert_eq!(!text.contains("gateway_id"), has_machine_id, "{text}");

    write("gateway_id_from = \"mac\"");
    let out = check_config(&file);
    assert_eq!(out.status.code(), Some(78));
    assert!(
        said(&out).contains("gateway_id_from: \"mac\" is not a source"),
        "{}",
        said(&out)
    );
}

/// A size bound too small for the configured retention at this site's rate
/// is a warning naming what it will hold (exit 0); a large enough bound says
/// nothing.
#[test]
fn a_size_bound_too_small_for_the_retention_says_what_it_holds() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("site.toml");
    let write = |max_size_mb: u64| {
        let mut t = format!(
            "gateway_id = \"sized\"\n[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n[storage]\npath = \"/tmp/sized.db\"\nmax_size_mb = {max_size_mb}\n[[sites]]\nreference = \"ste_a\"\nname = \"A\"\n[[buses]]\nname = \"gw\"\ntcp = \"192.0.2.10:502\"\n"
        );
        for unit in 1..=40 {
            t += &format!(
                "[[devices]]\nreference = \"dvc_{unit}\"\nname = \"d{unit}\"\ntype = \"inverter\"\nsite = \"ste_a\"\nbus = \"gw\"\nunit_id = {unit}\npoll_interval_ms = 1000\n"
            );
        }
        std::fs::write(&file, t).expect("write config");
    };
    let said = |o: &Output| {
        String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
    };
    write(2048);
    let out = check_config(&file);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("warning: storage.max_size_mb: 2048 MB holds about"),
        "{text}"
    );
    assert!(text.contains("(configured: 35 days)"), "{text}");
    write(1 << 20);
    let out = check_config(&file);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("max_size_mb"), "{text}");
}

/// A size bound below what the store never deletes (the staging ring and
/// the newest five minutes of raw samples with their rollups) is refused (exit 78) with the
/// least bound this site needs; that bound itself is accepted.
#[test]
fn a_size_bound_below_the_ring_and_the_newest_minutes_is_refused_with_what_it_needs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("site.toml");
    let write = |max_size_mb: u64| {
        let mut t = format!(
            "gateway_id = \"sized\"\n[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n[storage]\npath = \"/tmp/sized.db\"\nmax_size_mb = {max_size_mb}\nretention_days = 1\nminute_rollup_retention_days = 1\nrollup_retention_days = 1\n[[sites]]\nreference = \"ste_a\"\nname = \"A\"\n"
        );
        for i in 0..1000 {
            let bus = i / 200;
            if i % 200 == 0 {
                t += &format!(
                    "[[buses]]\nname = \"b{bus}\"\ntcp = \"192.0.2.10:{}\"\n",
                    502 + bus
                );
            }
            t += &format!(
                "[[devices]]\nreference = \"dvc_{i}\"\nname = \"d{i}\"\ntype = \"inverter\"\nsite = \"ste_a\"\nbus = \"b{bus}\"\nunit_id = {}\npoll_interval_ms = 1000\n",
                i % 200 + 1
            );
        }
        std::fs::write(&file, t).expect("write config");
    };
    let said = |o: &Output| {
        String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
    };
    write(8);
    let out = check_config(&file);
    let text = said(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    let least = text
        .split("storage.max_size_mb: 8 is below the ")
        .nth(1)
        .and_then(|rest| rest.split(" MB").next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no least bound in: {text}"));
    assert!(text.contains("1000 devices"), "{text}");
    assert!(text.contains("newest 5 minutes"), "{text}");
    // 27 MB: the cap `tests/it/store_cap.rs` holds at 1,000 noisy devices.
    assert_eq!(least, 27, "{text}");
    write(least);
    let out = check_config(&file);
    let text = said(&out);
    assert!(!text.contains("is below the"), "{text}");
}

/// `logging.level` takes level names and directives for sitegate's modules
/// and the crates it logs through; a bare word (a typo, `loud`) would be read
/// as a target and silence the agent: refused, naming the key and the levels.
#[test]
fn a_log_level_that_would_silence_the_agent_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("site.toml");
    let with_level = |level: &str| {
        std::fs::write(
            &file,
            format!("gateway_id = \"lv\"\n[http]\nlisten = [\"127.0.0.1:8080\"]\nauth = \"none\"\n[logging]\nlevel = {level:?}\n"),
        )
        .expect("write config");
        check_config(&file)
    };
    for good in [
        "debug",
        "sitegate::modbus=trace,info",
        "tokio_modbus=warn,sitegate=debug",
    ] {
        let out = with_level(good);
        assert!(
            out.status.success(),
            "{good}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for bad in ["loud", "sitegate=loud", "tokio=debug,info"] {
        let out = with_level(bad);
        assert_eq!(out.status.code(), Some(78), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("logging.level"), "{err}");
        assert!(
            err.contains("off, error, warn, info, debug, trace"),
            "{err}"
        );
    }
}

#[test]
fn token_list_names_each_token_its_scopes_and_a_placeholder() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("sitegate.toml");
    let real = hex::encode(sitegate::api::hash_token("sgt_listed_token"));
    let text = format!(
        "[http]\nlisten = [\"127.0.0.1:8080\"]\n\n[[http.tokens]]\nname = \"operator\"\n\
         sha256 = \"{real}\"\nscopes = [\"read\", \"steer\"]\n\n[[http.tokens]]\nname = \"cloud\"\n\
         sha256 = \"{}\"\nscopes = [\"admin\"]\n\n[storage]\npath = \"x.db\"\n",
        "0".repeat(64)
    );
    std::fs::write(&file, text).expect("write");
    let stdout = succeeded(&sitegate([
        Path::new("token"),
        Path::new("list"),
        Path::new("--config"),
        &file,
    ]));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("2 tokens in "), "{stdout}");
    assert!(lines[0].contains("auth = \"tokens\""), "{stdout}");
    assert!(
        lines[1].starts_with("operator")
            && lines[1].contains("read,steer")
            && lines[1].contains(&format!("sha256 {}…", &real[..16]))
            && !lines[1].contains("placeholder"),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with("cloud")
            && lines[2].contains("admin")
            && lines[2].contains("placeholder"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("sgt_listed_token"),
        "no token is shown: {stdout}"
    );
}
