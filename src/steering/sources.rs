//! Limits a grid operator's utility server sets for the site, in the shape
//! `../shared/spec/grid-operators.md` gives every source: per kind a value,
//! its validity, whether it is a failsafe, since when, and the operator's
//! reference. The CSIP-AUS client fills a set for its site; the control
//! loop reads the tightest of each kind.
//!
//! Plain data and pure reads; no clock, no I/O.

use super::limits::LimitSource;

/// What a limit bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The import at the connection point, W.
    Import,
    /// The export at the connection point, W.
    Export,
    /// The DER's production (the inverters' and the batteries' discharge),
    /// W.
    Generation,
    /// The DER's consumption (the batteries' charge), W.
    Load,
    /// What the controllable consumers (§14a EnWG: here the batteries)
    /// may draw from the grid, beside the household's own import, W.
    Consumption,
    /// A storage power the operator asks for, W, + discharge.
    StorageTarget,
    /// 0: the DER is to be disconnected.
    Connect,
    /// 0: the DER is to stop operating.
    Energize,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Import,
        Kind::Export,
        Kind::Generation,
        Kind::Load,
        Kind::Consumption,
        Kind::StorageTarget,
        Kind::Connect,
        Kind::Energize,
    ];

    pub fn wire_name(self) -> &'static str {
        match self {
            Kind::Import => "maxImport",
            Kind::Export => "maxExport",
            Kind::Generation => "maxGeneration",
            Kind::Load => "maxLoad",
            Kind::Consumption => "maxConsumption",
            Kind::StorageTarget => "storageTarget",
            Kind::Connect => "connect",
            Kind::Energize => "energize",
        }
    }

    /// Whether a lower value is the tighter one (not so for a target).
    fn lower_is_tighter(self) -> bool {
        !matches!(self, Kind::StorageTarget)
    }
}

/// The reference of a connection's contractual maximum: a bound that holds
/// always, not an operator's event.
pub const CONTRACT_REFERENCE: &str = "contractual maximum";

/// One limit of one source.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceLimit {
    pub source: LimitSource,
    pub kind: Kind,
    /// W; for `Connect` and `Energize` 1 (on) or 0 (off).
    pub value: f64,
    /// When it ends, if the source said (ms).
    pub until_ms: Option<i64>,
    /// The source's fallback holds (the server is gone, its schedule ran out).
    pub failsafe: bool,
    /// Since when it holds (ms).
    pub since_ms: i64,
    /// The operator's reference: the mRID of a CSIP-AUS control, the
    /// use case and state of an EEBus limit.
    pub reference: Option<String>,
}

/// Every limit the grid operators' servers set now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorSet {
    pub limits: Vec<SourceLimit>,
}

impl OperatorSet {
    /// The tightest limit of `kind`; for a storage target, the first set.
    pub fn tightest(&self, kind: Kind) -> Option<&SourceLimit> {
        self.limits
            .iter()
            .filter(|l| l.kind == kind && l.value.is_finite())
            .reduce(|a, b| {
                if kind.lower_is_tighter() && b.value < a.value {
                    b
                } else {
                    a
                }
            })
    }

    pub fn value(&self, kind: Kind) -> Option<f64> {
        self.tightest(kind).map(|l| l.value)
    }

    /// The limit that takes the DER off (disconnect or de-energize), if any.
    pub fn der_off(&self) -> Option<&SourceLimit> {
        [Kind::Connect, Kind::Energize]
            .into_iter()
            .filter_map(|k| self.tightest(k))
            .find(|l| l.value < 0.5)
    }

    /// `maxGeneration 3000 W (csip)`.
    pub fn describe(l: &SourceLimit) -> String {
        match l.kind {
            Kind::Connect | Kind::Energize => format!(
                "{} {} ({})",
                l.kind.wire_name(),
                l.value >= 0.5,
                l.source.wire_name()
            ),
            _ => format!(
                "{} {} W ({})",
                l.kind.wire_name(),
                l.value.round(),
                l.source.wire_name()
            ),
        }
    }
}

/// A grid operator's server whose limits a site holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// The utility server over IEEE 2030.5 (CSIP-AUS).
    Csip = 0,
    /// The control box over EEBus (LPC, LPP).
    Eebus = 1,
}

/// How a grid operator's source is doing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceStatus {
    /// CSIP-AUS: `following`, `discovering`, `unreachable`, `pinRefused`,
    /// `noCertificate`. EEBus: `waiting`, `connected`, `noCertificate`.
    pub state: String,
    /// The server the source speaks to.
    pub server: String,
    /// The device's identity there (the lFDI; the SKI over EEBus).
    pub identity: String,
    /// Wall time of the server's last answer, ms.
    pub last_contact_ms: Option<i64>,
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(kind: Kind, value: f64) -> SourceLimit {
        SourceLimit {
            source: LimitSource::Csip,
            kind,
            value,
            until_ms: None,
            failsafe: false,
            since_ms: 0,
            reference: None,
        }
    }

    #[test]
    fn the_tightest_of_each_kind_and_the_der_off() {
        let set = OperatorSet {
            limits: vec![
                limit(Kind::Export, 5e3),
                limit(Kind::Export, 1e3),
                limit(Kind::Generation, 4e3),
                limit(Kind::Connect, 1.0),
            ],
        };
        assert_eq!(set.value(Kind::Export), Some(1e3));
        assert_eq!(set.value(Kind::Import), None);
        assert!(set.der_off().is_none());
        assert_eq!(
            SourceLimit::describe_of(&set, Kind::Generation),
            "maxGeneration 4000 W (csip)"
        );
        let off = OperatorSet {
            limits: vec![limit(Kind::Energize, 0.0)],
        };
        assert_eq!(off.der_off().map(|l| l.kind), Some(Kind::Energize));
    }

    impl SourceLimit {
        fn describe_of(set: &OperatorSet, k: Kind) -> String {
            OperatorSet::describe(set.tightest(k).unwrap())
        }
    }
}
