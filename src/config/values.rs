//! Value types of the config file that validate while they parse.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::model::PowerUnit;

/// A power in config: `"25 kW"` or `{ value = 25, unit = "kW" }`. Held in W.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Power(pub f64);

impl Power {
    pub const fn watts(self) -> f64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Power {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor {
            what: "a power such as \"25 kW\" or { value = 25, unit = \"kW\" }",
            make: |v, u| power_watts(v, u).map(Power),
        })
    }
}

fn power_watts(value: f64, unit: &str) -> Result<f64, String> {
    unit.parse::<PowerUnit>()
        .map(|u| value * u.factor())
        .map_err(|e| e.to_string())
}

/// A power or a share of the site's rated production: `"30 kW"`, `"60 %"`,
/// `{ value = 60, unit = "%" }`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PowerShare {
    Watts(f64),
    /// 0 to 100 % of the site's rated production power.
    Percent(f64),
}

impl PowerShare {
    pub fn watts(self, rated_production_w: f64) -> f64 {
        match self {
            PowerShare::Watts(w) => w,
            PowerShare::Percent(p) => rated_production_w * p / 100.0,
        }
    }
}

impl<'de> Deserialize<'de> for PowerShare {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor {
            what: "a power such as \"30 kW\" or a share of the rated production such as \"60 %\"",
            make: |v, u| {
                if u == "%" {
                    if (0.0..=100.0).contains(&v) {
                        Ok(PowerShare::Percent(v))
                    } else {
                        Err(format!("{v} % is not a share from 0 to 100 %"))
                    }
                } else {
                    power_watts(v, u)
                        .map(PowerShare::Watts)
                        .map_err(|e| format!("{e} (or % of the rated production)"))
                }
            },
        })
    }
}

/// An energy in config: `"10 kWh"` or `{ value = 10, unit = "kWh" }`. Held in Wh.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Energy(pub f64);

impl Energy {
    pub const fn watt_hours(self) -> f64 {
        self.0
    }
}

fn energy_factor(unit: &str) -> Result<f64, String> {
    match unit {
        "Wh" => Ok(1.0),
        "kWh" => Ok(1_000.0),
        "MWh" => Ok(1_000_000.0),
        other => Err(format!(
            "unknown energy unit {other:?} (expected Wh, kWh or MWh)"
        )),
    }
}

impl<'de> Deserialize<'de> for Energy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor {
            what: "an energy such as \"10 kWh\" or { value = 10, unit = \"kWh\" }",
            make: |v, u| energy_factor(u).map(|f| Energy(v * f)),
        })
    }
}

/// Reads a number with a unit, from a string or a `{value, unit}` table, and
/// makes the value of it.
struct QuantityVisitor<T> {
    what: &'static str,
    make: fn(f64, &str) -> Result<T, String>,
}

impl<T> QuantityVisitor<T> {
    fn finish<E: de::Error>(&self, value: f64, unit: &str) -> Result<T, E> {
        if !value.is_finite() {
            return Err(E::custom(format!("{value} is not a finite number")));
        }
        (self.make)(value, unit).map_err(E::custom)
    }
}

impl<'de, T> Visitor<'de> for QuantityVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.what)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        let t = s.trim();
        let split = t
            .find(|c: char| c.is_ascii_alphabetic() || c == '%')
            .ok_or_else(|| E::custom(format!("{s:?} has no unit; expected {}", self.what)))?;
        let (number, unit) = t.split_at(split);
        let value: f64 = number.trim().parse().map_err(|_| {
            E::custom(format!(
                "{s:?} does not start with a number; expected {}",
                self.what
            ))
        })?;
        self.finish(value, unit.trim())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut value: Option<f64> = None;
        let mut unit: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "value" => value = Some(map.next_value()?),
                "unit" => unit = Some(map.next_value()?),
                other => {
                    return Err(de::Error::unknown_field(other, &["value", "unit"]));
                }
            }
        }
        let value = value.ok_or_else(|| de::Error::missing_field("value"))?;
        let unit = unit.ok_or_else(|| de::Error::missing_field("unit"))?;
        self.finish(value, &unit)
    }
}

/// Whether the HTTP API asks for bearer tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    #[default]
    Tokens,
    /// Allowed only when every listener is on loopback.
    None,
}

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Device data, time series, site and steering state.
    Read,
    /// Every steering change.
    Steer,
    /// The operations channel and `/admin/...`: diagnostics, restarts, bus
    /// scans. Implies neither `read` nor `steer` (a token names each scope
    /// it needs), and neither implies it.
    Admin,
}

impl Scope {
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Steer => "steer",
            Scope::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read" => Ok(Scope::Read),
            "steer" => Ok(Scope::Steer),
            "admin" => Ok(Scope::Admin),
            other => Err(format!(
                "unknown scope {other:?} (expected read, steer or admin)"
            )),
        }
    }
}

/// Serial parity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Parity {
    #[default]
    None,
    Even,
    Odd,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    struct T {
        p: Power,
        e: Option<Energy>,
    }

    #[test]
    fn power_from_string_or_table() {
        let t: T = toml::from_str("p = \"25 kW\"").unwrap();
        assert_eq!(t.p.watts(), 25_000.0);
        let t: T = toml::from_str("p = { value = 2.5, unit = \"MW\" }\ne = \"10 kWh\"").unwrap();
        assert_eq!(t.p.watts(), 2_500_000.0);
        assert_eq!(t.e.unwrap().watt_hours(), 10_000.0);
    }

    #[test]
    fn bad_powers_name_the_problem() {
        let e = toml::from_str::<T>("p = \"25 kw\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown power unit \"kw\""), "{e}");
        let e = toml::from_str::<T>("p = 25").unwrap_err().to_string();
        assert!(e.contains("a power such as"), "{e}");
        let e = toml::from_str::<T>("p = { value = 1 }")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `unit`"), "{e}");
    }
}
