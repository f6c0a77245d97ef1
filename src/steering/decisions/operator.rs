//! A grid operator's signals as plain data: what each signal says now, the
//! limits a value of its inputs sets, and the tightest of several signals
//! (`docs/steering.md`, "Grid-operator signals").
//!
//! Pure: no I/O, no clock. The reading task (`grid_signal.rs`) and the site's
//! runtime use these.

use super::limits::OperatorLimits;
use crate::config::GridSignalLevel;

/// What one signal says now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SignalStatus {
    pub name: String,
    /// The inputs last read, input 1 in bit 0.
    pub value: Option<u16>,
    /// The last read succeeded.
    pub online: bool,
    /// The limits the signal sets now.
    pub limits: OperatorLimits,
    /// The failsafe holds: the module cannot be read, or was not yet.
    pub failsafe: bool,
    pub error: Option<String>,
}

/// The limits of the level for `value`. A value no level lists is taken as the
/// tightest level of each direction (a grid operator's signal is obeyed, not
/// guessed).
pub fn limits_of(
    levels: &[GridSignalLevel],
    value: u16,
    rated_production_w: f64,
) -> OperatorLimits {
    let w = |l: &GridSignalLevel| OperatorLimits {
        max_import_w: l.max_import.map(|p| p.watts(rated_production_w)),
        max_export_w: l.max_export.map(|p| p.watts(rated_production_w)),
        max_consumption_w: l.max_consumption.map(|p| p.watts()),
    };
    if let Some(l) = levels.iter().find(|l| l.value == value) {
        return w(l);
    }
    let all: Vec<OperatorLimits> = levels.iter().map(w).collect();
    let min = |f: fn(&OperatorLimits) -> Option<f64>| all.iter().filter_map(f).reduce(f64::min);
    OperatorLimits {
        max_import_w: min(|l| l.max_import_w),
        max_export_w: min(|l| l.max_export_w),
        max_consumption_w: min(|l| l.max_consumption_w),
    }
}

/// What holds while the module cannot be read (or before its first read):
/// `lost_value`'s level, else the tightest of every level. Never no limit.
pub fn failsafe_of(
    levels: &[GridSignalLevel],
    lost_value: Option<u16>,
    rated_production_w: f64,
) -> OperatorLimits {
    match lost_value {
        Some(v) => limits_of(levels, v, rated_production_w),
        None => {
            // No level has this value (u16 has more values than levels):
            // `limits_of` takes it as the tightest of each direction.
            let unused = (0..=u16::MAX)
                .find(|v| levels.iter().all(|l| l.value != *v))
                .unwrap_or(u16::MAX);
            limits_of(levels, unused, rated_production_w)
        }
    }
}

/// The tightest of several signals, per direction.
pub fn combine(statuses: &[SignalStatus]) -> OperatorLimits {
    let min = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    statuses
        .iter()
        .fold(OperatorLimits::default(), |acc, s| OperatorLimits {
            max_import_w: min(acc.max_import_w, s.limits.max_import_w),
            max_export_w: min(acc.max_export_w, s.limits.max_export_w),
            max_consumption_w: min(acc.max_consumption_w, s.limits.max_consumption_w),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PowerShare;

    fn level(value: u16, export_pct: f64) -> GridSignalLevel {
        GridSignalLevel {
            value,
            max_import: None,
            max_export: Some(PowerShare::Percent(export_pct)),
            max_consumption: None,
        }
    }

    #[test]
    fn levels_map_values_and_unknown_values_are_the_tightest() {
        let levels = [
            level(0, 100.0),
            level(1, 60.0),
            level(2, 30.0),
            level(4, 0.0),
        ];
        assert_eq!(limits_of(&levels, 1, 50_000.0).max_export_w, Some(30_000.0));
        assert_eq!(limits_of(&levels, 4, 50_000.0).max_export_w, Some(0.0));
        assert_eq!(limits_of(&levels, 3, 50_000.0).max_export_w, Some(0.0));
        assert_eq!(limits_of(&levels, 0, 50_000.0).max_import_w, None);
        let kw = GridSignalLevel {
            value: 1,
            max_import: Some(PowerShare::Watts(4_200.0)),
            max_export: None,
            max_consumption: None,
        };
        assert_eq!(limits_of(&[kw], 1, 0.0).max_import_w, Some(4_200.0));
    }

    #[test]
    fn an_unreadable_module_is_the_failsafe_never_no_limit() {
        let mut levels = vec![
            level(0, 100.0),
            level(1, 60.0),
            level(2, 30.0),
            level(4, 0.0),
        ];
        // Without lost_value: the tightest of every level.
        assert_eq!(failsafe_of(&levels, None, 50_000.0).max_export_w, Some(0.0));
        // With it: its level.
        assert_eq!(
            failsafe_of(&levels, Some(1), 50_000.0).max_export_w,
            Some(30_000.0)
        );
        // §14a dimming on a contact: the consumption limit is the failsafe's too.
        levels.push(GridSignalLevel {
            value: 8,
            max_import: None,
            max_export: None,
            max_consumption: Some(crate::config::Power(4_200.0)),
        });
        let f = failsafe_of(&levels, None, 50_000.0);
        assert_eq!(
            (f.max_export_w, f.max_consumption_w),
            (Some(0.0), Some(4_200.0))
        );
    }

    #[test]
    fn several_signals_combine_to_the_tightest() {
        let s = |i: Option<f64>, x: Option<f64>| SignalStatus {
            limits: OperatorLimits {
                max_import_w: i,
                max_export_w: x,
                max_consumption_w: None,
            },
            ..SignalStatus::default()
        };
        let c = combine(&[s(None, Some(30_000.0)), s(Some(4_200.0), Some(10_000.0))]);
        assert_eq!(c.max_import_w, Some(4_200.0));
        assert_eq!(c.max_export_w, Some(10_000.0));
        assert_eq!(combine(&[]), OperatorLimits::default());
    }
}
