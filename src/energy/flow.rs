//! The five energy flows of a site, and what each device type gives them:
//! which of its counters, and which sign of its `activePower` (the sign
//! conventions of `docs/devices.md`).
//!
//! Plain data and lookups; it must not read anything or compute energy.

use crate::model::{DeviceType, Property};

/// One flow of the site's energy balance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flow {
    /// PV production (inverters).
    Produced,
    /// Drawn from the grid (meters).
    Imported,
    /// Fed into the grid (meters).
    Exported,
    /// Into storage (batteries).
    Charged,
    /// Out of storage (batteries).
    Discharged,
}

impl Flow {
    /// Every flow, in the order the answer lists them.
    pub const ALL: [Flow; 5] = [
        Flow::Produced,
        Flow::Imported,
        Flow::Exported,
        Flow::Charged,
        Flow::Discharged,
    ];

    /// The flow's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            Flow::Produced => "produced",
            Flow::Imported => "imported",
            Flow::Exported => "exported",
            Flow::Charged => "charged",
            Flow::Discharged => "discharged",
        }
    }

    /// Its place in [`Flow::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Where one device's share of a flow comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The device's own energy counter (deltas of `totalEnergy*`).
    Counter,
    /// Its `activePower`, integrated over time.
    IntegratedPower,
}

impl Source {
    pub const fn name(self) -> &'static str {
        match self {
            Source::Counter => "counter",
            Source::IntegratedPower => "integratedPower",
        }
    }
}

/// Which sign of `activePower` a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sign {
    Positive,
    Negative,
}

/// One flow a device type gives: the flow, its counter, its power sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowOf {
    pub flow: Flow,
    pub counter: Property,
    pub sign: Sign,
}

const INVERTER: &[FlowOf] = &[FlowOf {
    flow: Flow::Produced,
    counter: Property::TotalEnergyProduced,
    sign: Sign::Positive,
}];
const BATTERY: &[FlowOf] = &[
    FlowOf {
        flow: Flow::Discharged,
        counter: Property::TotalEnergyProduced,
        sign: Sign::Positive,
    },
    FlowOf {
        flow: Flow::Charged,
        counter: Property::TotalEnergyConsumed,
        sign: Sign::Negative,
    },
];
const METER: &[FlowOf] = &[
    FlowOf {
        flow: Flow::Imported,
        counter: Property::TotalEnergyConsumed,
        sign: Sign::Positive,
    },
    FlowOf {
        flow: Flow::Exported,
        counter: Property::TotalEnergyProduced,
        sign: Sign::Negative,
    },
];

/// The flows a device of type `t` gives. Every meter of a site counts as its
/// grid meter (as the site's grid power does in the Modbus server's site
/// device); an inverter's negative power (its own draw at night) is no flow.
pub const fn flows_of(t: DeviceType) -> &'static [FlowOf] {
    match t {
        DeviceType::Inverter => INVERTER,
        DeviceType::Battery => BATTERY,
        DeviceType::Meter => METER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_follow_the_sign_conventions() {
        let of = |t| {
            flows_of(t)
                .iter()
                .map(|f| (f.flow.name(), f.counter.name(), f.sign))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            of(DeviceType::Inverter),
            [("produced", "totalEnergyProduced", Sign::Positive)]
        );
        assert_eq!(
            of(DeviceType::Battery),
            [
                ("discharged", "totalEnergyProduced", Sign::Positive),
                ("charged", "totalEnergyConsumed", Sign::Negative)
            ]
        );
        assert_eq!(
            of(DeviceType::Meter),
            [
                ("imported", "totalEnergyConsumed", Sign::Positive),
                ("exported", "totalEnergyProduced", Sign::Negative)
            ]
        );
        for (i, f) in Flow::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
        }
    }
}
