//! Tests of the simulated site built from the agent's config.

use super::*;

const CFG: &str = r#"
[http]
listen = ["127.0.0.1:8080"]
auth = "none"

[[sites]]
reference = "ste_home"
name = "Home"

[[buses]]
name = "sim"
tcp = "127.0.0.1:0"

[[buses]]
name = "lan"
tcp = "192.168.1.50:502"

[[devices]]
name = "Roof PV"
type = "inverter"
site = "ste_home"
bus = "sim"
unit_id = 1
rated_power = "8 kW"

[[devices]]
reference = "dvc_bat1"
name = "Battery"
type = "battery"
site = "ste_home"
bus = "sim"
unit_id = 2
capacity = "12 kWh"
soc_min = 10

[[devices]]
name = "Grid"
type = "meter"
site = "ste_home"
bus = "sim"
unit_id = 3

[[devices]]
name = "Real PV"
type = "inverter"
site = "ste_home"
bus = "lan"
unit_id = 1
"#;

#[test]
fn loopback_buses_become_servers_with_defaults() {
    let cfg = crate::config::parse(CFG).unwrap();
    let spec = SimSiteSpec::from_config(&cfg, 60.0);
    assert_eq!(spec.time_factor, 60.0);
    assert_eq!(spec.servers.len(), 1, "the LAN bus is not simulated");
    let s = &spec.servers[0];
    assert_eq!(s.name, "sim");
    assert_eq!(s.listen, "127.0.0.1:0".parse().unwrap());
    assert_eq!(s.devices.len(), 3);
    assert_eq!(s.devices[0].kind, SimKind::Inverter { rated_w: 8000.0 });
    assert_eq!(
        s.devices[1].kind,
        SimKind::Battery {
            rated_w: DEFAULT_RATED_W,
            capacity_wh: 12_000.0,
            initial_soc: 50.0,
            soc_min: 10.0,
            soc_max: DEFAULT_SOC_MAX,
        }
    );
    assert_eq!(s.devices[1].serial, "SIM-DVC_BAT1");
    assert_eq!(s.devices[2].kind, SimKind::Meter);
    assert_eq!(s.devices[2].unit_id, 3);
    assert_ne!(s.devices[0].serial, s.devices[2].serial);
}

#[test]
fn the_simulator_section_sets_each_devices_response() {
    let text = format!(
        "{CFG}\n[simulator]\ninverter = {{ lag_s = 3, ramp_percent_per_s = 10 }}\n\
         meter = {{ refresh_ms = 1000, report_lag_ms = 500 }}\n\
         [simulator.devices.dvc_bat1]\nlag_s = 8\n"
    );
    let cfg = crate::config::parse(&text).unwrap();
    let spec = SimSiteSpec::from_config(&cfg, 1.0);
    let r: Vec<SimResponse> = spec.servers[0].devices.iter().map(|d| d.response).collect();
    assert_eq!((r[0].lag_s, r[0].ramp_percent_per_s), (3.0, Some(10.0)));
    assert_eq!((r[1].lag_s, r[1].ramp_percent_per_s), (8.0, None));
    assert_eq!((r[2].refresh_ms, r[2].report_lag_ms), (1000, 500));
    // Without the section every device is ideal.
    let spec = SimSiteSpec::from_config(&crate::config::parse(CFG).unwrap(), 1.0);
    assert!(spec.servers[0]
        .devices
        .iter()
        .all(|d| d.response == SimResponse::IDEAL));
}

/// The problems of a config text, as "path: message" lines.
fn problems(text: &str) -> Vec<String> {
    match crate::config::parse(text) {
        Ok(_) => Vec::new(),
        Err(e) => e.problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn noisy_mode_and_site_loads_come_from_the_simulator_section() {
    let text = format!(
        "{CFG}\n[simulator]\nnoisy = true\nseed = 7\n\
         [simulator.sites.ste_home]\nbase_load = \"2.5 kW\"\n"
    );
    let spec = SimSiteSpec::from_config(&crate::config::parse(&text).unwrap(), 1.0);
    assert_eq!(spec.noise, Some(SimNoise::seeded(7)));
    assert_eq!(spec.noise.unwrap().float_every, 5);
    // One simulated site: the devices on the simulated bus (not the LAN's).
    let site = |unit: u8| ("sim".to_string(), unit);
    assert_eq!(
        spec.sites,
        [SimSiteGroup {
            site: "ste_home".into(),
            base_load_w: 2500.0,
            devices: vec![site(1), site(2), site(3)],
        }]
    );
    // Noisy without a seed takes the fixed one; calm without the key.
    let text = format!("{CFG}\n[simulator]\nnoisy = true\n");
    let spec = SimSiteSpec::from_config(&crate::config::parse(&text).unwrap(), 1.0);
    assert_eq!(spec.noise, Some(SimNoise::default()));
    let spec = SimSiteSpec::from_config(&crate::config::parse(CFG).unwrap(), 1.0);
    assert_eq!(spec.noise, None);
    assert_eq!(spec.sites[0].base_load_w, DEFAULT_BASE_LOAD_W);
}

#[test]
fn each_configured_site_is_a_simulated_site_of_its_own() {
    let text = CFG.replace(
        "[[buses]]\nname = \"sim\"",
        "[[sites]]\nreference = \"ste_shop\"\nname = \"Shop\"\n\n[[buses]]\nname = \"sim\"",
    ) + "\n[[devices]]\nname = \"Shop meter\"\ntype = \"meter\"\nsite = \"ste_shop\"\nbus = \"sim\"\nunit_id = 9\n\n[simulator.sites.ste_shop]\nbase_load = \"40 kW\"\n";
    let spec = SimSiteSpec::from_config(&crate::config::parse(&text).unwrap(), 1.0);
    let sites: Vec<(&str, f64, usize)> = spec
        .sites
        .iter()
        .map(|g| (g.site.as_str(), g.base_load_w, g.devices.len()))
        .collect();
    assert_eq!(
        sites,
        [
            ("ste_home", DEFAULT_BASE_LOAD_W, 3),
            ("ste_shop", 40_000.0, 1)
        ]
    );
    assert_eq!(spec.sites[1].devices, [("sim".to_string(), 9)]);
    spec.check().unwrap();
}

#[test]
fn bad_simulator_values_are_reported_with_their_path() {
    // A value that does not parse is the section's first problem (the
    // section is then left out); checks of parsed values report together.
    for (section, needle) in [
        (
            "noisy = \"yes\"",
            "simulator.noisy: invalid type: string \"yes\"",
        ),
        ("seed = -1", "simulator.seed: invalid value: integer `-1`"),
        (
            "[simulator.sites.ste_home]\nbase_load = \"lots\"",
            "simulator.sites.ste_home.base_load: ",
        ),
        (
            "[simulator.sites.ste_home]\nload = \"1 kW\"",
            "simulator.sites.ste_home.load: unknown key",
        ),
    ] {
        let p = problems(&format!("{CFG}\n[simulator]\n{section}\n"));
        assert!(
            p.iter().any(|l| l.starts_with(needle)),
            "{needle} in {p:#?}"
        );
    }
    let p = problems(&format!(
        "{CFG}\n[simulator.sites.ste_nowhere]\nbase_load = \"-5 kW\"\n"
    ));
    assert_eq!(
        p,
        [
            "simulator.sites.ste_nowhere: unknown site \"ste_nowhere\" (no [[sites]] entry has that reference)",
            "simulator.sites.ste_nowhere.base_load: must be 0 W to 1 GW, found -5000 W",
        ]
    );
}
