//! The usual starting points of a [`TestSite`]: [`TestSite::new`] (the
//! steering tests' site), [`TestSite::bare`] (the agent's own defaults),
//! [`TestSite::small`] (the small site of `common::site`), and the seed's
//! and the demo's sites. Builder methods live in the parent module.

use toml::{Table, Value};

use super::TestSite;
use crate::steering_support::{NOON, READ, SITE, STEER};

impl TestSite {
    /// The site [`SITE`] with no devices: grid limits far away (10 MW each
    /// way), proportional fulfilment, fallback `auto`, the site controlled
    /// every `control_interval_ms` and devices reverting after
    /// `revert_timeout_s`; the [`STEER`] and [`READ`] tokens; simulated time
    /// from [`NOON`] at real speed.
    pub fn new(control_interval_ms: u64, revert_timeout_s: u16) -> TestSite {
        let mut rig = TestSite::bare(SITE, "E2E farm")
            .gateway_id("e2e")
            .token("operator", STEER, &["read", "steer"])
            .token("viewer", READ, &["read"])
            .bus_key("timeout_ms", 500);
        for (k, v) in [
            ("max_import", "10 MW"),
            ("max_export", "10 MW"),
            ("ess_fulfilment", "proportional"),
            ("curtailment_fulfilment", "proportional"),
            ("ess_fallback", "auto"),
        ] {
            rig = rig.site_key(k, v);
        }
        rig.control_interval_ms(control_interval_ms)
            .revert_timeout_s(revert_timeout_s)
    }

    /// The site `reference` named `name` with no other key: the agent's
    /// defaults (no grid limits, controlled every second, devices reverting
    /// after 60 s); `[http]` on loopback without auth and no tokens, no
    /// gateway id (the agent derives one), the agent's bus timeout; devices
    /// polled every 200 ms; simulated time from [`NOON`] at real speed. For
    /// a test that wrote its config with only the keys it needs.
    pub fn bare(reference: &str, name: &str) -> TestSite {
        let mut http = Table::new();
        http.insert("listen".into(), Value::Array(vec!["127.0.0.1:0".into()]));
        http.insert("auth".into(), "none".into());
        TestSite {
            gateway_id: None,
            http,
            tokens: Vec::new(),
            sites: Vec::new(),
            current: 0,
            bus_keys: Table::new(),
            own_bus_keys: Vec::new(),
            poll_interval_ms: 200,
            devices: Vec::new(),
            buses: Vec::new(),
            sections: Table::new(),
            raw: String::new(),
            time_factor: 1.0,
            start_ms: NOON,
            tweaks: Vec::new(),
        }
        .site(reference, name)
    }

    /// The small site of the `common::site` tests: gateway `test`, its
    /// tokens ([`TestSite::common_tokens`]), backoff 100 to 400 ms, the site
    /// `ste_test` (30 kW import, 20 kW export), a 10 kW inverter `dvc_pv`
    /// on `pv`, a 5 kW / 10 kWh battery `dvc_bat` (SoC 10-90 %) on `bat`
    /// and a meter `dvc_grid` on `grid`, polled every 200 ms, 300 ms bus
    /// timeouts.
    pub fn small() -> TestSite {
        TestSite::bare("ste_test", "Test site")
            .gateway_id("test")
            .common_tokens()
            .polling(100, 400)
            .grid_limits(30.0, 20.0)
            .bus_key("timeout_ms", 300)
            .inverter("pv", "dvc_pv", 10.0)
            .name("PV")
            .battery("bat", "dvc_bat", 5.0, 10.0)
            .name("Battery")
            .soc(10, 90)
            .meter("grid", "dvc_grid")
            .name("Grid")
    }

    /// [`TestSite::small`] with each device under a unit id of its own on
    /// the Modbus server: the PV inverter 1, the battery 2, the grid meter 3
    /// (all three are unit 1 on their buses).
    pub fn small_own_units() -> TestSite {
        TestSite::small()
            .key_of("dvc_bat", "modbus_server_unit_id", 2)
            .key_of("dvc_grid", "modbus_server_unit_id", 3)
    }

    /// The seed's worked scenario scaled to be feasible: two 200 kW batteries
    /// (400 kWh, SoC 5-95 %), two 200 kW inverters, a meter; 400 kW rated
    /// production.
    pub fn e2e(control_interval_ms: u64, revert_timeout_s: u16) -> TestSite {
        TestSite::new(control_interval_ms, revert_timeout_s)
            .rated_production_kw(400.0)
            .battery("bat-a", "dvc_bat_a", 200.0, 400.0)
            .soc(5, 95)
            .battery("bat-b", "dvc_bat_b", 200.0, 400.0)
            .soc(5, 95)
            .inverter("pv-a", "dvc_pv_a", 200.0)
            .inverter("pv-b", "dvc_pv_b", 200.0)
            .meter("grid", "dvc_grid")
    }

    /// The demo's site: PV 30 + 20 kW, batteries 20 + 10 kW, a meter; 60 kW
    /// import, 40 kW export; every device polled and the site controlled
    /// every `interval_ms`.
    pub fn demo(interval_ms: u64) -> TestSite {
        TestSite::new(interval_ms, 30)
            .poll_interval_ms(interval_ms)
            .grid_limits(60.0, 40.0)
            .inverter("pv-east", "dvc_pv_east", 30.0)
            .inverter("pv-west", "dvc_pv_west", 20.0)
            .battery("bat-a", "dvc_bat_a", 20.0, 40.0)
            .soc(5, 95)
            .battery("bat-b", "dvc_bat_b", 10.0, 20.0)
            .soc(10, 90)
            .meter("grid", "dvc_grid")
    }
}
