//! The property vocabulary: names, units, kinds (listed for API users in the
//! `PropertyName` schema of `src/api/openapi.json`).
//!
//! The set is closed: a device offers a subset of it, never a name outside it.

use std::fmt;
use std::str::FromStr;

/// Measurement unit of a property, spelled as on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    Watt,
    VoltAmpereReactive,
    Percent,
    WattHour,
    Hertz,
    Volt,
    Ampere,
    DegreeCelsius,
    /// A dimensionless code, such as an operating state.
    None,
}

impl Unit {
    pub const fn as_str(self) -> &'static str {
        match self {
            Unit::Watt => "W",
            Unit::VoltAmpereReactive => "var",
            Unit::Percent => "%",
            Unit::WattHour => "Wh",
            Unit::Hertz => "Hz",
            Unit::Volt => "V",
            Unit::Ampere => "A",
            Unit::DegreeCelsius => "°C",
            Unit::None => "",
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Unit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How values of a property combine over time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// An instantaneous reading: averaged over a bucket by default.
    Gauge,
    /// A monotonically growing total: the last value of a bucket by default.
    Counter,
}

macro_rules! properties {
    ($($variant:ident => $name:literal, $unit:ident, $kind:ident;)*) => {
        /// One entry of the property vocabulary.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Property {
            $($variant,)*
        }

        impl Property {
            /// Every property, in vocabulary order.
            pub const ALL: &'static [Property] = &[$(Property::$variant,)*];

            /// The camelCase name used on the wire and in config.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Property::$variant => $name,)*
                }
            }

            pub const fn unit(self) -> Unit {
                match self {
                    $(Property::$variant => Unit::$unit,)*
                }
            }

            pub const fn kind(self) -> Kind {
                match self {
                    $(Property::$variant => Kind::$kind,)*
                }
            }
        }

        impl FromStr for Property {
            type Err = UnknownProperty;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok(Property::$variant),)*
                    _ => Err(UnknownProperty(s.to_string())),
                }
            }
        }
    };
}

properties! {
    ActivePower => "activePower", Watt, Gauge;
    ReactivePower => "reactivePower", VoltAmpereReactive, Gauge;
    Soc => "soc", Percent, Gauge;
    StateOfHealth => "stateOfHealth", Percent, Gauge;
    TotalEnergyProduced => "totalEnergyProduced", WattHour, Counter;
    TotalEnergyConsumed => "totalEnergyConsumed", WattHour, Counter;
    MaxChargePower => "maxChargePower", Watt, Gauge;
    MaxDischargePower => "maxDischargePower", Watt, Gauge;
    ActivePowerLimit => "activePowerLimit", Percent, Gauge;
    Frequency => "frequency", Hertz, Gauge;
    VoltageL1 => "voltageL1", Volt, Gauge;
    VoltageL2 => "voltageL2", Volt, Gauge;
    VoltageL3 => "voltageL3", Volt, Gauge;
    CurrentL1 => "currentL1", Ampere, Gauge;
    CurrentL2 => "currentL2", Ampere, Gauge;
    CurrentL3 => "currentL3", Ampere, Gauge;
    Temperature => "temperature", DegreeCelsius, Gauge;
    OperatingState => "operatingState", None, Gauge;
}

impl Property {
    /// Number of properties in the vocabulary; sizes per-device arrays.
    pub const COUNT: usize = Property::ALL.len();

    /// Position in [`Property::ALL`], stable for the life of the process.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// True for the power properties whose sign `invert_power` flips.
    pub const fn is_signed_power(self) -> bool {
        matches!(self, Property::ActivePower | Property::ReactivePower)
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Property {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Property {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A name outside the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown property {0:?}")]
pub struct UnknownProperty(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_index_matches_position() {
        for (i, p) in Property::ALL.iter().enumerate() {
            assert_eq!(p.name().parse::<Property>(), Ok(*p));
            assert_eq!(p.index(), i);
        }
        assert_eq!(Property::COUNT, 18);
    }

    #[test]
    fn counters_are_the_energy_totals() {
        let counters: Vec<_> = Property::ALL
            .iter()
            .filter(|p| p.kind() == Kind::Counter)
            .map(|p| p.name())
            .collect();
        assert_eq!(counters, ["totalEnergyProduced", "totalEnergyConsumed"]);
    }

    #[test]
    fn unknown_names_are_refused() {
        assert!("ActivePower".parse::<Property>().is_err());
        assert!("".parse::<Property>().is_err());
    }
}
