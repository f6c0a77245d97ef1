//! From the controls in force (`schedule.rs`) to the limits steering holds
//! (`steering::sources`): each mode becomes a limit of source `csip`, with
//! the event's end and its mRID, and a rising limit follows the ramp the
//! utility set (`../shared/spec/grid-operators.md`, "Ramps"):
//!
//! - tightening is at once;
//! - raising runs over the event's `rampTms` when it has one, else at the
//!   default's `setGradW` (hundredths of a percent of `setMaxW` per second),
//!   else at once;
//! - a limit that ends rises the same way by the DER's rating before it is
//!   let go (beyond that the DER cannot move the site further);
//! - after the DER was taken off, its production comes back along the same
//!   ramp from 0 W.
//!
//! Pure: the times and the DER's rating are passed in; the ramps' state is
//! the caller's to keep between calls.

use std::collections::BTreeMap;

use super::resource::program::Mode;
use super::schedule::{InForce, Origin};
use crate::steering::limits::LimitSource;
use crate::steering::sources::{Kind, OperatorSet, SourceLimit};

/// One limit's ramp.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ramp {
    /// The value held now; `None`: no limit.
    pub current: Option<f64>,
    /// W/s while rising; `None`: not rising, or at once.
    rate: Option<f64>,
    /// Where a release rises to before the limit is let go.
    ceiling: Option<f64>,
}

/// The ramps of the limits that ramp.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ramps {
    ramps: BTreeMap<Kind, Ramp>,
    /// The DER was off at the last step.
    was_off: bool,
    /// Since when each limit holds, with the reference it held it for.
    since: BTreeMap<Kind, (Option<String>, i64)>,
}

/// What a step needs besides the controls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// Local wall time, ms.
    pub now_ms: i64,
    /// Since the last step, s.
    pub dt_s: f64,
    /// Server time minus local time, ms.
    pub offset_ms: i64,
    /// The DER's `setMaxW`, W.
    pub set_max_w: f64,
    /// The server cannot be reached: what holds is as last received.
    pub failsafe: bool,
}

fn kind_of(m: Mode) -> Option<Kind> {
    Some(match m {
        Mode::Import => Kind::Import,
        Mode::Export => Kind::Export,
        Mode::Generation => Kind::Generation,
        Mode::Load => Kind::Load,
        Mode::StorageTarget => Kind::StorageTarget,
        Mode::Connect => Kind::Connect,
        Mode::Energize => Kind::Energize,
        Mode::MaxLimPct => return None,
    })
}

fn ramped(k: Kind) -> bool {
    matches!(
        k,
        Kind::Import | Kind::Export | Kind::Generation | Kind::Load
    )
}

impl Ramp {
    /// Moves towards `target` (`None`: no limit) at `rate` W/s if it rises;
    /// a release first rises by `release_by`.
    fn step(&mut self, target: Option<f64>, rate: Option<f64>, dt_s: f64, release_by: f64) {
        let Some(c) = self.current else {
            // A limit where there was none is a tightening: at once.
            *self = Ramp {
                current: target,
                ..Ramp::default()
            };
            return;
        };
        if let Some(t) = target.filter(|t| *t <= c) {
            *self = Ramp {
                current: Some(t),
                ..Ramp::default()
            };
            return;
        }
        let goal = match target {
            Some(t) => {
                self.ceiling = None;
                t
            }
            None => *self.ceiling.get_or_insert(c + release_by.max(0.0)),
        };
        let rate = match rate {
            Some(r) if r > 0.0 => *self.rate.get_or_insert(r),
            _ => f64::INFINITY,
        };
        let next = c + rate * dt_s;
        if next >= goal {
            *self = Ramp {
                current: target,
                ..Ramp::default()
            };
        } else {
            self.current = Some(next);
        }
    }
}

/// The limits steering holds for the controls `f` in force.
pub fn to_limits(f: &InForce, ramps: &mut Ramps, s: &Step) -> OperatorSet {
    let off = [Mode::Connect, Mode::Energize]
        .iter()
        .any(|m| f.get(*m).is_some_and(|v| v < 0.5));
    let mut targets: BTreeMap<Kind, (f64, &Origin)> = BTreeMap::new();
    for (m, v) in &f.modes {
        let value = match m {
            // Production at most that share of setMaxW.
            Mode::MaxLimPct => v.value / 100.0 * s.set_max_w,
            _ => v.value,
        };
        let Some(k) = kind_of(*m).or((*m == Mode::MaxLimPct).then_some(Kind::Generation)) else {
            continue;
        };
        let value = if ramped(k) { value.max(0.0) } else { value };
        match targets.get(&k) {
            Some((cur, _)) if *cur <= value => {}
            _ => {
                targets.insert(k, (value, &v.origin));
            }
        }
    }
    let grad = f
        .set_grad_w
        .filter(|g| *g > 0)
        .map(|g| f64::from(g) / 10_000.0 * s.set_max_w);
    let mut limits = Vec::new();
    for k in Kind::ALL {
        let target = targets.get(&k);
        let mut value = target.map(|(v, _)| *v);
        if ramped(k) {
            let ramp = ramps.ramps.entry(k).or_default();
            if k == Kind::Generation && ramps.was_off && !off {
                // The DER comes back: its production rises from 0 W.
                ramp.current = Some(0.0);
            }
            let rate = match target.map(|(_, o)| *o) {
                Some(Origin::Event {
                    ramp_s: Some(r), ..
                }) if *r > 0.0 => ramp.current.zip(value).map(|(c, t)| (t - c).abs() / r),
                _ => grad,
            };
            let release_by = if matches!(k, Kind::Generation | Kind::Load) {
                s.set_max_w - ramp.current.unwrap_or(0.0)
            } else {
                s.set_max_w
            };
            ramp.step(value, rate, s.dt_s, release_by);
            value = ramp.current;
        }
        let Some(value) = value else {
            ramps.since.remove(&k);
            continue;
        };
        let origin = target.map(|(_, o)| *o);
        let reference = origin.map(|o| o.mrid().to_string());
        let since_ms = match ramps.since.get(&k) {
            Some((r, at)) if *r == reference => *at,
            _ => {
                ramps.since.insert(k, (reference.clone(), s.now_ms));
                s.now_ms
            }
        };
        limits.push(SourceLimit {
            source: LimitSource::Csip,
            kind: k,
            value,
            until_ms: match origin {
                Some(Origin::Event { until_ms, .. }) => Some(until_ms - s.offset_ms),
                _ => None,
            },
            failsafe: s.failsafe,
            since_ms,
            reference,
        });
    }
    ramps.was_off = off;
    OperatorSet { limits }
}

#[cfg(test)]
mod tests;
