use super::*;

const GOOD: &str = r#"
gateway_id = "ctrl-0001"

[http]
listen = ["127.0.0.1:8080"]
https_listen = ["0.0.0.0:8443"]
tls = "self-signed"
auth = "tokens"
[[http.tokens]]
name = "technician"
sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
scopes = ["read", "steer"]

[storage]
path = "/tmp/x.db"

[[sites]]
reference = "ste_home"
name = "Home"
max_import = "25 kW"
max_export = { value = 10, unit = "kW" }
ess_fulfilment = "soc_balance"

[[buses]]
name = "lan"
tcp = "192.168.1.50:502"

[[buses]]
name = "rs485"
rtu = { path = "/dev/ttyUSB0", baud = 19200, parity = "even", dataBits = 8 }

[[devices]]
name = "Roof PV"
type = "inverter"
site = "ste_home"
bus = "lan"
unit_id = 1

[[devices]]
reference = "dvc_bat1"
name = "Battery"
type = "battery"
site = "ste_home"
bus = "rs485"
unit_id = 2
capacity = "10 kWh"
soc_min = 10
soc_max = 95
"#;

fn problems(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => Vec::new(),
        Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
    }
}

fn has(problems: &[String], needle: &str) -> bool {
    problems.iter().any(|p| p.contains(needle))
}

#[test]
fn a_good_config_resolves() {
    let c = parse(GOOD).unwrap();
    assert_eq!(c.gateway_id, "ctrl-0001");
    assert_eq!(c.http.tokens[0].scopes, vec![Scope::Read, Scope::Steer]);
    assert_eq!(c.sites[0].max_import.unwrap().watts(), 25_000.0);
    assert_eq!(c.sites[0].max_export.unwrap().watts(), 10_000.0);
    assert_eq!(c.sites[0].ess_fulfilment, EssFulfilment::SocBalance);
    assert_eq!(c.devices[0].reference, "dvc_home_roof_pv");
    assert_eq!(c.devices[0].profile, ProfileRef::Sunspec);
    assert_eq!(c.devices[1].capacity_wh, Some(10_000.0));
    assert_eq!(
        c.buses[0].transport,
        Transport::Tcp {
            host: "192.168.1.50".into(),
            port: 502
        }
    );
    match &c.buses[1].transport {
        Transport::Rtu(r) => {
            assert_eq!(r.baud, 19200);
            assert_eq!(r.parity, Parity::Even);
            assert_eq!(r.stop_bits, 1);
        }
        other => panic!("expected rtu, got {other:?}"),
    }
}

#[test]
fn every_problem_is_reported_at_once_with_its_path() {
    let bad = GOOD
        .replace("unit_id = 2", "unit_id = 2\ncolour = \"red\"\nshape = 3")
        .replace("bus = \"lan\"", "bus = \"wan\"")
        .replace("tcp = \"192.168.1.50:502\"", "tcp = \"192.168.1.50:99999\"")
        .replace(
            "gateway_id = \"ctrl-0001\"",
            "gateway_id = \"ctrl/0001\"\nfoo = 1",
        );
    let p = problems(&bad);
    assert!(has(&p, "devices[1].colour: unknown key"), "{p:#?}");
    assert!(has(&p, "devices[1].shape: unknown key"), "{p:#?}");
    assert!(has(&p, "devices[0].bus: unknown bus \"wan\""), "{p:#?}");
    assert!(has(&p, "buses[0].tcp: \"192.168.1.50:99999\""), "{p:#?}");
    assert!(has(&p, "gateway_id: \"ctrl/0001\""), "{p:#?}");
    assert!(has(&p, "foo: unknown key"), "{p:#?}");
}

#[test]
fn the_outbox_fits_in_the_store() {
    let mqtt = "\n[mqtt]\nurl = \"mqtt://127.0.0.1\"\n";
    assert_eq!(problems(&format!("{GOOD}{mqtt}")), Vec::<String>::new());
    let small = GOOD.replace(
        "path = \"/tmp/x.db\"",
        "path = \"/tmp/x.db\"\nmax_size_mb = 256",
    );
    let p = problems(&format!("{small}{mqtt}"));
    assert!(
        has(
            &p,
            "mqtt.outbox_max_mb: 256 must be below storage.max_size_mb (256)"
        ),
        "{p:#?}"
    );
}

#[test]
fn bad_values_name_field_and_value() {
    let p = problems(&GOOD.replace("unit_id = 1", "unit_id = \"one\""));
    assert!(
        has(&p, "devices[0].unit_id: invalid type: string \"one\""),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace("unit_id = 1", "unit_id = 248"));
    assert!(
        has(&p, "devices[0].unit_id: 248 is not a device address"),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace("type = \"inverter\"", "type = \"heatpump\""));
    assert!(
        has(&p, "devices[0].type: unknown variant `heatpump`"),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace("max_import = \"25 kW\"", "max_import = \"25 kw\""));
    assert!(
        has(&p, "sites[0].max_import: unknown power unit \"kw\""),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace(
        "path = \"/tmp/x.db\"",
        "path = \"/tmp/x.db\"\ncompact_interval_s = 0",
    ));
    assert!(
        has(&p, "storage.compact_interval_s: must be 1 to 3600, found 0"),
        "{p:#?}"
    );
    for bad in [0, 3601] {
        let p = problems(&GOOD.replace(
            "path = \"/tmp/x.db\"",
            &format!("path = \"/tmp/x.db\"\nretention_interval_s = {bad}"),
        ));
        assert!(
            has(
                &p,
                &format!("storage.retention_interval_s: must be 1 to 3600, found {bad}")
            ),
            "{p:#?}"
        );
    }
    let p = problems(&GOOD.replace("soc_min = 10", "soc_min = 99"));
    assert!(
        has(
            &p,
            "devices[1].soc_min: soc_min (99) must be below soc_max (95)"
        ),
        "{p:#?}"
    );
}

#[test]
fn cross_references_are_checked() {
    let p = problems(&GOOD.replace(
        "site = \"ste_home\"\nbus = \"rs485\"",
        "site = \"ste_away\"\nbus = \"rs485\"",
    ));
    assert!(
        has(&p, "devices[1].site: unknown site \"ste_away\""),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace(
        "reference = \"dvc_bat1\"",
        "reference = \"dvc_home_roof_pv\"",
    ));
    assert!(
        has(&p, "devices[1].reference: duplicate device reference"),
        "{p:#?}"
    );
    let p = problems(
        &GOOD
            .replace("unit_id = 2", "unit_id = 1")
            .replace("bus = \"rs485\"", "bus = \"lan\""),
    );
    assert!(has(&p, "unit id 1 is used twice on bus \"lan\""), "{p:#?}");
    let p = problems(&GOOD.replace("name = \"rs485\"", "name = \"lan\""));
    assert!(
        has(&p, "buses[1].name: duplicate bus name \"lan\""),
        "{p:#?}"
    );
}

#[test]
fn a_reference_to_a_broken_entry_is_not_also_unknown() {
    // The bus and the site have problems of their own; the devices on them
    // must not add "unknown bus" / "unknown site" on top.
    let p = problems(
        &GOOD
            .replace("tcp = \"192.168.1.50:502\"", "tcp = \"192.168.1.50:99999\"")
            .replace("max_import = \"25 kW\"", "max_import = \"25 parsecs\""),
    );
    assert!(has(&p, "buses[0].tcp: "), "{p:#?}");
    assert!(has(&p, "sites[0].max_import: unknown power unit"), "{p:#?}");
    assert!(!has(&p, "unknown bus"), "{p:#?}");
    assert!(!has(&p, "unknown site"), "{p:#?}");
    assert_eq!(p.len(), 2, "{p:#?}");
    // Serde's message alone: the path is not repeated after it.
    assert!(p.iter().all(|m| !m.contains("in `")), "{p:#?}");
}

#[test]
fn auth_none_needs_loopback_listeners() {
    let p = problems(&GOOD.replace("auth = \"tokens\"", "auth = \"none\""));
    assert!(
        has(&p, "http.https_listen[0]: auth = \"none\" is only allowed"),
        "{p:#?}"
    );
    let p = problems(
        &GOOD
            .replace("auth = \"tokens\"", "auth = \"none\"")
            .replace("127.0.0.1:8080", "0.0.0.0:8080"),
    );
    assert!(
        has(&p, "http.listen[0]: auth = \"none\" is only allowed"),
        "{p:#?}"
    );
    let ok = GOOD
        .replace("auth = \"tokens\"", "auth = \"none\"")
        .replace("0.0.0.0:8443", "127.0.0.1:8443");
    assert!(problems(&ok).is_empty());
}

#[test]
fn tokens_on_plain_http_beyond_loopback_need_allow_plain_tokens() {
    let plain = GOOD.replace("127.0.0.1:8080", "0.0.0.0:8080");
    // Refused by check-config and config.put, survived by `run`.
    let p: Vec<String> = parse(&plain)
        .expect("loads")
        .file_problems
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        has(
            &p,
            "http.listen[0]: 0.0.0.0:8080 serves plain HTTP beyond loopback"
        ),
        "{p:#?}"
    );
    assert!(has(&p, "allow_plain_tokens = true"), "{p:#?}");
    let allowed = plain.replace(
        "auth = \"tokens\"",
        "auth = \"tokens\"\nallow_plain_tokens = true",
    );
    let c = parse(&allowed).expect("loads");
    assert!(c.file_problems.is_empty(), "{:#?}", c.file_problems);
    // HTTPS needs a certificate, and a certificate needs an address.
    let p = problems(&GOOD.replace("tls = \"self-signed\"\n", ""));
    assert!(
        has(&p, "http.tls: https_listen is set but no certificate"),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace("https_listen = [\"0.0.0.0:8443\"]\n", ""));
    assert!(has(&p, "http.https_listen: tls is set"), "{p:#?}");
    let p = problems(&GOOD.replace("tls = \"self-signed\"", "tls = \"self-made\""));
    assert!(
        has(&p, "http.tls: \"self-made\" is not a certificate source"),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace(
        "tls = \"self-signed\"",
        "tls = \"self-signed\"\ntls_names = [\"bad name\"]",
    ));
    assert!(
        has(&p, "http.tls_names[0]: \"bad name\" is not a DNS name"),
        "{p:#?}"
    );
    // HTTPS alone is enough; no listener at all is not.
    let https_only = GOOD.replace("listen = [\"127.0.0.1:8080\"]\n", "listen = []\n");
    assert!(
        problems(&https_only).is_empty(),
        "{:#?}",
        problems(&https_only)
    );
    let none = https_only
        .replace("https_listen = [\"0.0.0.0:8443\"]\n", "")
        .replace("tls = \"self-signed\"\n", "");
    assert!(has(&problems(&none), "http.listen: at least one address"));
}

#[test]
fn tokens_are_checked() {
    let p = problems(&GOOD.replace(
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "abc",
    ));
    assert!(
        has(
            &p,
            "http.tokens[0].sha256: \"abc\" is not 64 hex characters"
        ),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace("scopes = [\"read\", \"steer\"]", "scopes = [\"root\"]"));
    assert!(
        has(&p, "http.tokens[0].scopes[0]: unknown variant `root`"),
        "{p:#?}"
    );
    let p = problems(&GOOD.replace("scopes = [\"read\", \"steer\"]", "scopes = [\"admin\"]"));
    assert!(p.is_empty(), "{p:#?}");
}

#[test]
fn transports_are_checked() {
    let p = problems(&GOOD.replace("tcp = \"192.168.1.50:502\"", ""));
    assert!(has(&p, "buses[0]: missing transport"), "{p:#?}");
    let p = problems(&GOOD.replace("baud = 19200", "baud = 7"));
    assert!(
        has(&p, "buses[1].rtu.baud: 7 is not a serial speed"),
        "{p:#?}"
    );
    let c = parse(&GOOD.replace("192.168.1.50:502", "inverter.local")).unwrap();
    assert_eq!(
        c.buses[0].transport,
        Transport::Tcp {
            host: "inverter.local".into(),
            port: 502
        }
    );
}

#[test]
fn syntax_errors_are_one_problem() {
    let p = problems("[[devices]\nname = ");
    assert_eq!(p.len(), 1);
    assert!(p[0].starts_with("not valid TOML"), "{p:#?}");
}

#[test]
fn derived_references_are_stable_slugs() {
    assert_eq!(
        resolve::derive_reference("ste_home", "Roof PV"),
        "dvc_home_roof_pv"
    );
    assert_eq!(
        resolve::derive_reference("farm", "Inverter #2 (west)"),
        "dvc_farm_inverter_2_west"
    );
}

#[test]
fn shipped_configs_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let demo = Config::load(&dir.join("demo.toml")).unwrap();
    assert_eq!(demo.devices.len(), 5);
    // The example uses placeholder hashes; they are well-formed.
    let example = Config::load(&dir.join("sitegate.toml")).unwrap();
    assert_eq!(example.sites[0].ess_fulfilment, EssFulfilment::SocBalance);
}

#[test]
fn profiles_resolve_from_the_profiles_dir_or_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u16\"\nunit = \"W\"\n",
    )
    .unwrap();
    let profile_dev = |profile: &str, ty: &str| {
        format!(
            "profiles_dir = {:?}\n{GOOD}\n[[devices]]\nname = \"Hybrid\"\ntype = \"{ty}\"\nsite = \"ste_home\"\nbus = \"lan\"\nunit_id = 3\nprofile = \"{profile}\"\nrated_power = \"5 kW\"\n",
            dir.path().display().to_string()
        )
    };
    let cfg = parse(&profile_dev("huawei-luna2000", "battery")).unwrap();
    match &cfg.devices[2].profile {
        ProfileRef::Registers(p) => assert_eq!(p.manufacturer.as_deref(), Some("Huawei")),
        other => panic!("{other:?}"),
    }
    let got = problems(&profile_dev("nope", "battery"));
    assert!(
        has(&got, "devices[2].profile: profile \"nope\" not found"),
        "{got:?}"
    );
    let got = problems(&profile_dev("bad", "battery"));
    assert!(
        has(&got, "devices[2].profile: profile ") && has(&got, "bad.toml: points[0].unit: \"W\""),
        "{got:?}"
    );
    // A profile battery without a rating would be steered at 0 W: refused.
    let got =
        problems(&profile_dev("goodwe-et", "battery").replace("rated_power = \"5 kW\"\n", ""));
    assert!(
        has(
            &got,
            "devices[2].rated_power: required for a battery steered through profile \"goodwe-et\""
        ),
        "{got:?}"
    );
    let capped = profile_dev("goodwe-et", "battery")
        .replace("rated_power = \"5 kW\"", "max_discharge_power = \"4 kW\"");
    assert!(parse(&capped).is_ok());
    let got = problems(&profile_dev("sungrow-sh", "meter"));
    assert!(
        has(&got, "written for battery devices, not meter"),
        "{got:?}"
    );
}

#[test]
fn steering_keys_have_defaults_and_bounds() {
    let c = parse(GOOD).unwrap();
    assert_eq!(c.sites[0].revert_timeout_s, 60);
    assert_eq!(c.devices[0].priority, None);
    let text = GOOD.replace(
        "ess_fulfilment = \"soc_balance\"",
        "ess_fulfilment = \"priority\"\nrevert_timeout_s = 1",
    );
    let p = problems(&text);
    assert!(
        has(&p, "sites[0].revert_timeout_s: must be 2 to 65535"),
        "{p:#?}"
    );
    let text = GOOD.replace(
        "capacity = \"10 kWh\"",
        "capacity = \"10 kWh\"\npriority = 1",
    );
    assert_eq!(parse(&text).unwrap().devices[1].priority, Some(1));
}

#[test]
fn http_limits_have_defaults_and_bounds() {
    let c = parse(GOOD).expect("good config");
    assert!(c.http.metrics);
    assert_eq!(c.http.request_timeout_ms, 30_000);
    assert_eq!(c.http.rate_limit.requests_per_s, 100.0);
    assert_eq!(c.http.rate_limit.burst, 200);

    let set = |keys: &str| GOOD.replace("auth = \"tokens\"", &format!("auth = \"tokens\"\n{keys}"));
    let c = parse(&set(
        "metrics = false\nrequest_timeout_ms = 5000\nrate_limit = { requests_per_s = 0.5, burst = 2 }",
    ))
    .expect("valid limits");
    assert!(!c.http.metrics);
    assert_eq!(c.http.request_timeout_ms, 5000);
    assert_eq!(c.http.rate_limit.requests_per_s, 0.5);

    let p = problems(&set(
        "request_timeout_ms = 50\nrate_limit = { requests_per_s = -1, burst = 0, per_minute = 3 }",
    ));
    assert!(
        has(
            &p,
            "http.request_timeout_ms: must be 100 to 600000, found 50"
        ),
        "{p:?}"
    );
    assert!(
        has(&p, "http.rate_limit.requests_per_s: must be a number >= 0"),
        "{p:?}"
    );
    assert!(has(&p, "http.rate_limit.per_minute"), "{p:?}");
    let p = problems(&set("rate_limit = { requests_per_s = 5, burst = 0 }"));
    assert!(
        has(&p, "http.rate_limit.burst: must be at least 1"),
        "{p:?}"
    );
}

#[test]
fn a_meters_report_lag_and_the_simulator_section_are_checked() {
    let meter = "\n[[devices]]\nreference = \"dvc_grid\"\nname = \"Grid\"\ntype = \"meter\"\nsite = \"ste_home\"\nbus = \"lan\"\nunit_id = 3\n";
    let c = parse(&format!("{GOOD}{meter}")).unwrap();
    assert_eq!(c.devices[2].report_lag_ms, DEFAULT_REPORT_LAG_MS);
    assert_eq!(c.simulator, SimulatorConfig::default());
    let c = parse(&format!("{GOOD}{meter}report_lag_ms = 700\n")).unwrap();
    assert_eq!(c.devices[2].report_lag_ms, 700);

    let text = format!(
        "{}{meter}report_lag_ms = 70000\n\n[simulator]\ninverter = {{ lag_s = -1 }}\n\
         meter = {{ refresh_ms = 90000 }}\n[simulator.devices.dvc_nobody]\nramp_percent_per_s = 0\n",
        GOOD.replace("unit_id = 1\n", "unit_id = 1\nreport_lag_ms = 500\n")
    );
    let p = problems(&text);
    for needle in [
        "devices[0].report_lag_ms: applies to meters only",
        "devices[2].report_lag_ms: must be 0 to 60000, found 70000",
        "simulator.inverter.lag_s: must be 0 to 60 seconds, found -1",
        "simulator.meter.refresh_ms: must be 0 to 60000, found 90000",
        "simulator.devices.dvc_nobody.ramp_percent_per_s: must be above 0",
        "simulator.devices.dvc_nobody: unknown device \"dvc_nobody\"",
    ] {
        assert!(has(&p, needle), "{needle} in {p:#?}");
    }
    assert_eq!(p.len(), 6, "{p:#?}");
}

#[test]
fn the_wal_checkpoint_is_the_default_the_cap_or_as_configured() {
    let with = |extra: &str| {
        parse(&GOOD.replace(
            "path = \"/tmp/x.db\"",
            &format!("path = \"/tmp/x.db\"\n{extra}"),
        ))
        .expect("valid")
        .storage
        .wal_checkpoint_bytes()
    };
    assert_eq!(with(""), 96 << 20);
    // Never a WAL larger than the file may be.
    assert_eq!(with("max_size_mb = 64"), 64 << 20);
    assert_eq!(with("max_size_mb = 64\nwal_checkpoint_mb = 200"), 200 << 20);
    assert_eq!(with("wal_checkpoint_mb = 8"), 8 << 20);
    for bad in ["0", "5000"] {
        let text = GOOD.replace(
            "path = \"/tmp/x.db\"",
            &format!("path = \"/tmp/x.db\"\nwal_checkpoint_mb = {bad}"),
        );
        let p = problems(&text);
        assert!(
            has(
                &p,
                &format!("storage.wal_checkpoint_mb: must be 1 to 4096, found {bad}")
            ),
            "{p:#?}"
        );
    }
}

#[test]
fn the_outgoing_message_bound_is_checked_with_its_field_and_value() {
    let with =
        |kb: u32| format!("{GOOD}\n[mqtt]\nurl = \"mqtt://127.0.0.1\"\nmax_outgoing_kb = {kb}\n");
    assert_eq!(
        problems(&with(128)),
        Vec::<String>::new(),
        "AWS IoT Core's 128 KB"
    );
    for bad in [0, 15, 262_145] {
        let p = problems(&with(bad));
        assert!(
            has(&p, "max_outgoing_kb") && has(&p, &format!("found {bad}")),
            "{bad}: {p:?}"
        );
    }
}

#[test]
fn a_device_without_a_reference_is_named_by_its_derived_one_and_its_line() {
    // As `sitegate scan` writes it: no reference, so the one the API uses.
    let text = GOOD.replace("bus = \"lan\"\nunit_id = 1", "bus = \"lan\"\nunit_id = 0");
    let line = text
        .lines()
        .position(|l| l.starts_with("[[devices]]"))
        .map(|n| n + 1)
        .expect("a device header");
    let p = problems(&text);
    let want = format!(
        "devices[0].unit_id: 0 is not a device address (1 to 247, or 255 on TCP) (device \"dvc_home_roof_pv\", line {line})"
    );
    assert!(p.contains(&want), "{p:?}");
}
