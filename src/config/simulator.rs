//! The `[simulator]` section: how the simulated devices of `sitegate demo` and
//! the tests respond, whether they are noisy, and each simulated site's load
//! (`docs/devices.md`, "The simulator"). A real site's agent never reads it:
//! only the simulator does.
//!
//! Plain data and its checks; it knows nothing of the simulator itself.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::problem::Problem;
use super::values::Power;
use crate::model::DeviceType;

/// How one simulated device, or every device of a kind, responds; a key left
/// out is taken from the kind's table, then is ideal (at once, of the moment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct SimResponseConfig {
    /// Inverters and batteries: the time constant of the first-order lag
    /// toward a new setpoint, s.
    pub lag_s: Option<f64>,
    /// Inverters and batteries: the most the output moves in a second, % of
    /// the rating.
    pub ramp_percent_per_s: Option<f64>,
    /// Meters: how often the registers are refreshed, ms.
    pub refresh_ms: Option<u64>,
    /// Meters: a refresh shows the power of this many ms before.
    pub report_lag_ms: Option<u64>,
}

impl SimResponseConfig {
    /// `self`, with what it leaves out taken from `under`.
    fn over(self, under: SimResponseConfig) -> SimResponseConfig {
        SimResponseConfig {
            lag_s: self.lag_s.or(under.lag_s),
            ramp_percent_per_s: self.ramp_percent_per_s.or(under.ramp_percent_per_s),
            refresh_ms: self.refresh_ms.or(under.refresh_ms),
            report_lag_ms: self.report_lag_ms.or(under.report_lag_ms),
        }
    }
}

/// `[simulator.sites.<site_reference>]`: one simulated site.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct SimSiteConfig {
    /// The site's base load before the daily profile (default 600 W).
    pub base_load: Option<Power>,
}

/// `[simulator]`: noisy mode, a table per device kind, one per device
/// reference and one per site reference.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SimulatorConfig {
    /// Noisy mode (`docs/devices.md`, "Noisy mode"); default calm.
    #[serde(default)]
    pub noisy: bool,
    /// The seed of noisy mode's draws (default: a fixed one, so runs repeat).
    pub seed: Option<u64>,
    /// By site reference.
    #[serde(default)]
    pub sites: BTreeMap<String, SimSiteConfig>,
    #[serde(default)]
    pub inverter: SimResponseConfig,
    #[serde(default)]
    pub battery: SimResponseConfig,
    #[serde(default)]
    pub meter: SimResponseConfig,
    /// By device reference, over its kind's table.
    #[serde(default)]
    pub devices: BTreeMap<String, SimResponseConfig>,
    /// Not a config key: the running simulation's clock, which `sitegate
    /// demo` sets so that the API can show the simulated time.
    #[serde(skip)]
    pub clock: Option<crate::model::time::SimulatedClock>,
}

impl SimulatorConfig {
    /// How the simulated device `reference` of type `kind` responds.
    pub fn response(&self, reference: &str, kind: DeviceType) -> SimResponseConfig {
        let of_kind = match kind {
            DeviceType::Inverter => self.inverter,
            DeviceType::Battery => self.battery,
            DeviceType::Meter => self.meter,
        };
        self.devices
            .get(reference)
            .copied()
            .unwrap_or_default()
            .over(of_kind)
    }

    /// Every value in range, every device table naming a configured device,
    /// every site table a configured site.
    pub(super) fn check(
        &self,
        references: &[(&str, DeviceType)],
        sites: &[&str],
        problems: &mut Vec<Problem>,
    ) {
        for (reference, site) in &self.sites {
            let path = format!("simulator.sites.{reference}");
            if !sites.contains(&reference.as_str()) {
                problems.push(Problem::new(
                    path.clone(),
                    format!("unknown site {reference:?} (no [[sites]] entry has that reference)"),
                ));
            }
            if let Some(Power(w)) = site.base_load {
                if !(w.is_finite() && (0.0..=1e9).contains(&w)) {
                    problems.push(Problem::new(
                        format!("{path}.base_load"),
                        format!("must be 0 W to 1 GW, found {w} W"),
                    ));
                }
            }
        }
        let tables = [
            ("simulator.inverter".to_string(), self.inverter),
            ("simulator.battery".to_string(), self.battery),
            ("simulator.meter".to_string(), self.meter),
        ];
        let devices = self
            .devices
            .iter()
            .map(|(r, c)| (format!("simulator.devices.{r}"), *c));
        for (path, c) in tables.into_iter().chain(devices) {
            check_values(&path, &c, problems);
        }
        for reference in self.devices.keys() {
            if !references.iter().any(|(r, _)| r == reference) {
                problems.push(Problem::new(
                    format!("simulator.devices.{reference}"),
                    format!(
                        "unknown device {reference:?} (no [[devices]] entry has that reference)"
                    ),
                ));
            }
        }
    }
}

fn check_values(path: &str, c: &SimResponseConfig, problems: &mut Vec<Problem>) {
    if let Some(v) = c.lag_s {
        if !(v.is_finite() && (0.0..=60.0).contains(&v)) {
            problems.push(Problem::new(
                format!("{path}.lag_s"),
                format!("must be 0 to 60 seconds, found {v}"),
            ));
        }
    }
    if let Some(v) = c.ramp_percent_per_s {
        if !(v.is_finite() && v > 0.0 && v <= 1000.0) {
            problems.push(Problem::new(
                format!("{path}.ramp_percent_per_s"),
                format!("must be above 0 and at most 1000, found {v}"),
            ));
        }
    }
    for (key, v) in [
        ("refresh_ms", c.refresh_ms),
        ("report_lag_ms", c.report_lag_ms),
    ] {
        if let Some(v) = v {
            if v > 60_000 {
                problems.push(Problem::new(
                    format!("{path}.{key}"),
                    format!("must be 0 to 60000, found {v}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_table_goes_over_its_kinds_table() {
        let mut s = SimulatorConfig {
            inverter: SimResponseConfig {
                lag_s: Some(3.0),
                ramp_percent_per_s: Some(10.0),
                ..SimResponseConfig::default()
            },
            ..SimulatorConfig::default()
        };
        s.devices.insert(
            "dvc_pv".into(),
            SimResponseConfig {
                lag_s: Some(8.0),
                ..SimResponseConfig::default()
            },
        );
        let r = s.response("dvc_pv", DeviceType::Inverter);
        assert_eq!((r.lag_s, r.ramp_percent_per_s), (Some(8.0), Some(10.0)));
        let r = s.response("dvc_other", DeviceType::Inverter);
        assert_eq!(r.lag_s, Some(3.0));
        assert_eq!(
            s.response("dvc_grid", DeviceType::Meter),
            SimResponseConfig::default()
        );
        let mut problems = Vec::new();
        s.check(&[("dvc_other", DeviceType::Inverter)], &[], &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "simulator.devices.dvc_pv");
    }
}
