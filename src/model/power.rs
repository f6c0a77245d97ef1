//! Power values with a unit (`W`, `kW`, `MW`), as used on the wire and in config.

use std::fmt;
use std::str::FromStr;

/// The power units the partner interface accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum PowerUnit {
    W,
    #[serde(rename = "kW")]
    KW,
    #[serde(rename = "MW")]
    MW,
}

impl PowerUnit {
    pub const fn factor(self) -> f64 {
        match self {
            PowerUnit::W => 1.0,
            PowerUnit::KW => 1_000.0,
            PowerUnit::MW => 1_000_000.0,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            PowerUnit::W => "W",
            PowerUnit::KW => "kW",
            PowerUnit::MW => "MW",
        }
    }
}

impl FromStr for PowerUnit {
    type Err = PowerValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "W" => Ok(PowerUnit::W),
            "kW" => Ok(PowerUnit::KW),
            "MW" => Ok(PowerUnit::MW),
            other => Err(PowerValueError::UnknownUnit(other.to_string())),
        }
    }
}

impl fmt::Display for PowerUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A finite power with its unit.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PowerValue {
    pub value: f64,
    pub unit: PowerUnit,
}

impl PowerValue {
    pub fn new(value: f64, unit: PowerUnit) -> Result<Self, PowerValueError> {
        if !value.is_finite() {
            return Err(PowerValueError::NotFinite);
        }
        Ok(Self { value, unit })
    }

    pub const fn watts(w: f64) -> Self {
        Self {
            value: w,
            unit: PowerUnit::W,
        }
    }

    pub fn as_watts(self) -> f64 {
        self.value * self.unit.factor()
    }
}

impl fmt::Display for PowerValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.value, self.unit)
    }
}

/// Why a power value was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PowerValueError {
    #[error("unknown power unit {0:?} (expected W, kW or MW)")]
    UnknownUnit(String),
    #[error("power value is not a finite number")]
    NotFinite,
    #[error("{0:?} is not a power: write a number and a unit, e.g. \"25 kW\"")]
    Malformed(String),
}

/// Parses `"25 kW"`, `"25kW"` or `"-3.5 MW"`.
impl FromStr for PowerValue {
    type Err = PowerValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let split = s
            .find(|c: char| c.is_ascii_alphabetic())
            .ok_or_else(|| PowerValueError::Malformed(s.to_string()))?;
        let (number, unit) = s.split_at(split);
        let value: f64 = number
            .trim()
            .parse()
            .map_err(|_| PowerValueError::Malformed(s.to_string()))?;
        PowerValue::new(value, unit.trim().parse()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, watts: f64) {
        let p: PowerValue = input.parse().unwrap();
        assert_eq!(p.as_watts(), watts, "{input}");
    }

    #[test]
    fn parses_strings_with_units() {
        check("25 kW", 25_000.0);
        check("25kW", 25_000.0);
        check("-3.5 MW", -3_500_000.0);
        check("800 W", 800.0);
    }

    #[test]
    fn refuses_bad_strings() {
        assert!(matches!(
            "25".parse::<PowerValue>(),
            Err(PowerValueError::Malformed(_))
        ));
        assert!(matches!(
            "25 kw".parse::<PowerValue>(),
            Err(PowerValueError::UnknownUnit(_))
        ));
        assert!(matches!(
            "abc W".parse::<PowerValue>(),
            Err(PowerValueError::Malformed(_))
        ));
        assert!("inf W".parse::<PowerValue>().is_err());
    }
}
