//! The grid limits in force at a site: the tightest of the configured limits, an
//! active `gridLimit` entry (it may only tighten them), a grid operator's local
//! signal (it wins over every partner signal) and a SCADA's limit written over
//! the Modbus server (it, too, only tightens). Each limit says where it came from,
//! so the steering state can tell which limit changed a device and why.
//!
//! Pure: plain values in, plain values out.

use crate::steering::value::GridLimit;

/// Where a limit comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitSource {
    /// The site's `max_import` / `max_export`.
    Config,
    /// An active `gridLimit` entry.
    GridLimit,
    /// A grid operator's signal on the site's digital inputs.
    GridSignal,
    /// A SCADA's limit written over the Modbus server.
    Modbus,
    /// A distribution network operator's control over IEEE 2030.5
    /// (CSIP-AUS).
    Csip,
    /// A distribution operator's control box over EEBus (LPC, LPP).
    Eebus,
}

impl LimitSource {
    pub const fn wire_name(self) -> &'static str {
        match self {
            LimitSource::Config => "config",
            LimitSource::GridLimit => "gridLimit",
            LimitSource::GridSignal => "gridSignal",
            LimitSource::Modbus => "modbus",
            LimitSource::Csip => "csip",
            LimitSource::Eebus => "eebus",
        }
    }
}

/// Which limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Import,
    Export,
}

impl Direction {
    pub const fn wire_name(self) -> &'static str {
        match self {
            Direction::Import => "maxImport",
            Direction::Export => "maxExport",
        }
    }
}

/// One limit in force, W.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    pub w: f64,
    pub direction: Direction,
    pub source: LimitSource,
}

impl Limit {
    /// `maxExport 40000 W (config)`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} W ({})",
            self.direction.wire_name(),
            self.w.round(),
            self.source.wire_name()
        )
    }
}

/// The limits in force; `None` is no limit in that direction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GridLimits {
    pub import: Option<Limit>,
    pub export: Option<Limit>,
}

/// Limits a grid operator's signal sets now, W.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OperatorLimits {
    pub max_import_w: Option<f64>,
    pub max_export_w: Option<f64>,
    /// What the controllable consumers may draw (§14a EnWG), beside the
    /// household's own import.
    pub max_consumption_w: Option<f64>,
}

/// The tightest import and export a grid operator's server sets (CSIP-AUS,
/// EEBus), each with the source that set it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerLimits {
    pub import: Option<(f64, LimitSource)>,
    pub export: Option<(f64, LimitSource)>,
}

/// The tightest of the five sources, per direction. Ties keep the earlier
/// source (config, then gridLimit, then the operator's signal, then the
/// SCADA over Modbus, then the operators' servers: CSIP-AUS, EEBus).
pub fn in_force(
    max_import_w: Option<f64>,
    max_export_w: Option<f64>,
    temporary: Option<&GridLimit>,
    operator: &OperatorLimits,
    modbus: &OperatorLimits,
    servers: &ServerLimits,
) -> GridLimits {
    // Without a value the source is never shown: any will do.
    let server = |l: Option<(f64, LimitSource)>| match l {
        Some((w, source)) => (Some(w), source),
        None => (None, LimitSource::Csip),
    };
    let pick = |direction: Direction, candidates: [(Option<f64>, LimitSource); 5]| {
        candidates
            .into_iter()
            .filter_map(|(w, source)| {
                w.filter(|w| w.is_finite()).map(|w| Limit {
                    w: w.max(0.0),
                    direction,
                    source,
                })
            })
            .reduce(|a, b| if b.w < a.w { b } else { a })
    };
    let temp = |f: fn(&GridLimit) -> Option<f64>| temporary.and_then(f);
    GridLimits {
        import: pick(
            Direction::Import,
            [
                (max_import_w, LimitSource::Config),
                (
                    temp(|g| g.max_import.map(|p| p.as_watts())),
                    LimitSource::GridLimit,
                ),
                (operator.max_import_w, LimitSource::GridSignal),
                (modbus.max_import_w, LimitSource::Modbus),
                server(servers.import),
            ],
        ),
        export: pick(
            Direction::Export,
            [
                (max_export_w, LimitSource::Config),
                (
                    temp(|g| g.max_export.map(|p| p.as_watts())),
                    LimitSource::GridLimit,
                ),
                (operator.max_export_w, LimitSource::GridSignal),
                (modbus.max_export_w, LimitSource::Modbus),
                server(servers.export),
            ],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PowerValue;

    #[test]
    fn the_tightest_wins_and_says_where_from() {
        let g = GridLimit {
            max_import: None,
            max_export: Some(PowerValue::watts(10_000.0)),
        };
        let op = OperatorLimits {
            max_export_w: Some(0.0),
            ..OperatorLimits::default()
        };
        let l = in_force(
            Some(60_000.0),
            Some(40_000.0),
            Some(&g),
            &OperatorLimits::default(),
            &OperatorLimits::default(),
            &ServerLimits::default(),
        );
        assert_eq!(
            l.export.map(|l| (l.w, l.source)),
            Some((10_000.0, LimitSource::GridLimit))
        );
        assert_eq!(
            l.import.map(|l| (l.w, l.source)),
            Some((60_000.0, LimitSource::Config))
        );
        let l = in_force(
            Some(60_000.0),
            Some(40_000.0),
            Some(&g),
            &op,
            &OperatorLimits::default(),
            &ServerLimits::default(),
        );
        assert_eq!(
            l.export.map(|l| (l.w, l.source)),
            Some((0.0, LimitSource::GridSignal))
        );
        assert_eq!(l.export.unwrap().describe(), "maxExport 0 W (gridSignal)");
        let scada = OperatorLimits {
            max_export_w: Some(5_000.0),
            ..OperatorLimits::default()
        };
        let l = in_force(
            Some(60_000.0),
            Some(40_000.0),
            Some(&g),
            &OperatorLimits::default(),
            &scada,
            &ServerLimits::default(),
        );
        assert_eq!(
            l.export.map(|l| (l.w, l.source)),
            Some((5_000.0, LimitSource::Modbus))
        );
        assert_eq!(l.export.unwrap().describe(), "maxExport 5000 W (modbus)");
        // A SCADA's limit never lifts a tighter one.
        let no = OperatorLimits::default();
        let none_served = ServerLimits::default();
        let l = in_force(
            Some(60_000.0),
            Some(40_000.0),
            Some(&g),
            &op,
            &scada,
            &none_served,
        );
        assert_eq!(l.export.map(|l| l.source), Some(LimitSource::GridSignal));
        // A utility server's limit over CSIP-AUS wins where it is tightest.
        let csip = ServerLimits {
            import: Some((2_000.0, LimitSource::Csip)),
            export: Some((1_500.0, LimitSource::Csip)),
        };
        let l = in_force(Some(60_000.0), Some(40_000.0), Some(&g), &no, &scada, &csip);
        assert_eq!(
            l.export.map(|l| (l.w, l.source)),
            Some((1_500.0, LimitSource::Csip))
        );
        assert_eq!(
            l.import.map(|l| (l.w, l.source)),
            Some((2_000.0, LimitSource::Csip))
        );
        assert_eq!(l.export.unwrap().describe(), "maxExport 1500 W (csip)");
        // A control box's limit says it is the box's.
        let eebus = ServerLimits {
            import: None,
            export: Some((800.0, LimitSource::Eebus)),
        };
        let l = in_force(
            Some(60_000.0),
            Some(40_000.0),
            Some(&g),
            &no,
            &scada,
            &eebus,
        );
        assert_eq!(l.export.unwrap().describe(), "maxExport 800 W (eebus)");
        let none = in_force(
            None,
            None,
            None,
            &OperatorLimits::default(),
            &OperatorLimits::default(),
            &ServerLimits::default(),
        );
        assert_eq!(none, GridLimits::default());
    }
}
