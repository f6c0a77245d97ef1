//! Which grid-operator events are open and what the meter saw meanwhile:
//! each limit in force of a grid operator's source (`modbus`, a relay
//! signal, `eebus`, `csip`) is an event from when it began to hold to when
//! it stopped or changed, with the most the site imported and exported
//! during it (`../shared/spec/grid-operators.md`, "Evidence").
//!
//! Pure: limits, a meter reading and a time in, opened and closed events
//! out. No clock, no I/O.

use crate::steering::sources::SourceLimit;

/// One event of one source.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The store's row id, once kept.
    pub id: Option<i64>,
    pub site: String,
    /// `modbus`, `gridSignal`, `eebus`, `csip`.
    pub source: String,
    /// `maxImport`, `maxExport`, `maxConsumption`, `maxGeneration`, ...
    pub kind: String,
    /// The operator's reference: an mRID, a use case and state, a signal's
    /// name.
    pub reference: String,
    pub limit_w: f64,
    pub failsafe: bool,
    pub start_ms: i64,
    pub end_ms: Option<i64>,
    /// The most the meter read imported and exported meanwhile, W (≥ 0);
    /// `None` while it read nothing.
    pub max_import_w: Option<f64>,
    pub max_export_w: Option<f64>,
}

impl Event {
    fn key(&self) -> (&str, &str, &str) {
        (&self.source, &self.kind, &self.reference)
    }

    /// `l` is this event's limit, still at its value and failsafe.
    fn holds(&self, l: &SourceLimit) -> bool {
        self.key() == key_of(l) && self.limit_w == l.value && self.failsafe == l.failsafe
    }
}

/// What names the event a limit belongs to.
fn key_of(l: &SourceLimit) -> (&str, &str, &str) {
    (
        l.source.wire_name(),
        l.kind.wire_name(),
        l.reference.as_deref().unwrap_or(""),
    )
}

/// What changed in one step.
#[derive(Debug, Default, PartialEq)]
pub struct Step {
    /// Events that began now.
    pub opened: Vec<Event>,
    /// Events that ended now (with `end_ms`).
    pub closed: Vec<Event>,
}

/// The open events of one site.
#[derive(Debug, Default)]
pub struct Tracker {
    site: String,
    open: Vec<Event>,
}

impl Tracker {
    /// `open`: events the store still had open (the agent stopped during
    /// them); they go on if their limit still holds at the first step.
    pub fn new(site: &str, open: Vec<Event>) -> Tracker {
        Tracker {
            site: site.to_string(),
            open,
        }
    }

    pub fn open(&self) -> &[Event] {
        &self.open
    }

    /// `limits` hold at `now_ms`, and the meter reads `grid_w` (+ import).
    pub fn step(&mut self, now_ms: i64, limits: &[SourceLimit], grid_w: Option<f64>) -> Step {
        let mut step = Step::default();
        let mut still = Vec::new();
        for e in std::mem::take(&mut self.open) {
            let holds = limits.iter().any(|l| e.holds(l));
            if holds {
                still.push(e);
            } else {
                step.closed.push(Event {
                    end_ms: Some(now_ms),
                    ..e
                });
            }
        }
        for l in limits {
            let known = still.iter().any(|e| e.key() == key_of(l));
            if !known && l.value.is_finite() {
                let (source, kind, reference) = key_of(l);
                let e = Event {
                    id: None,
                    site: self.site.clone(),
                    source: source.to_string(),
                    kind: kind.to_string(),
                    reference: reference.to_string(),
                    limit_w: l.value,
                    failsafe: l.failsafe,
                    start_ms: now_ms,
                    end_ms: None,
                    max_import_w: None,
                    max_export_w: None,
                };
                step.opened.push(e.clone());
                still.push(e);
            }
        }
        if let Some(g) = grid_w.filter(|g| g.is_finite()) {
            for e in &mut still {
                if g >= 0.0 {
                    e.max_import_w = Some(e.max_import_w.map_or(g, |m| m.max(g)));
                } else {
                    e.max_export_w = Some(e.max_export_w.map_or(-g, |m| m.max(-g)));
                }
            }
        }
        self.open = still;
        step
    }

    /// Notes the store's id of an event `step` opened.
    pub fn kept(&mut self, e: &Event, id: i64) {
        if let Some(o) = self
            .open
            .iter_mut()
            .find(|o| o.id.is_none() && o.key() == e.key() && o.start_ms == e.start_ms)
        {
            o.id = Some(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steering::limits::LimitSource;
    use crate::steering::sources::Kind;

    fn limit(kind: Kind, value: f64, failsafe: bool) -> SourceLimit {
        SourceLimit {
            source: LimitSource::Eebus,
            kind,
            value,
            until_ms: None,
            failsafe,
            since_ms: 0,
            reference: Some("lpc: limited".into()),
        }
    }

    #[test]
    fn an_event_runs_while_its_limit_holds_with_the_meters_extremes() {
        let mut t = Tracker::new("home", vec![]);
        let s = t.step(
            1_000,
            &[limit(Kind::Consumption, 4_200.0, false)],
            Some(3_000.0),
        );
        assert_eq!(s.opened.len(), 1);
        t.step(
            2_000,
            &[limit(Kind::Consumption, 4_200.0, false)],
            Some(6_500.0),
        );
        t.step(
            3_000,
            &[limit(Kind::Consumption, 4_200.0, false)],
            Some(-1_200.0),
        );
        // The value changes: the event ends, another begins.
        let s = t.step(
            4_000,
            &[limit(Kind::Consumption, 6_000.0, false)],
            Some(100.0),
        );
        let e = &s.closed[0];
        assert_eq!(
            (e.start_ms, e.end_ms, e.limit_w),
            (1_000, Some(4_000), 4_200.0)
        );
        assert_eq!(
            (e.max_import_w, e.max_export_w),
            (Some(6_500.0), Some(1_200.0))
        );
        assert_eq!(s.opened[0].limit_w, 6_000.0);
        // Entering failsafe at the same value is an event of its own.
        let s = t.step(5_000, &[limit(Kind::Consumption, 6_000.0, true)], None);
        assert_eq!((s.closed.len(), s.opened.len()), (1, 1));
        assert!(s.opened[0].failsafe);
        // Gone: closed.
        let s = t.step(6_000, &[], None);
        assert_eq!(s.closed[0].end_ms, Some(6_000));
        assert!(t.open().is_empty());
    }

    #[test]
    fn an_event_open_before_a_restart_goes_on_if_it_still_holds() {
        let mut t = Tracker::new("home", vec![]);
        t.step(1_000, &[limit(Kind::Export, 0.0, false)], Some(-10.0));
        let open = t.open().to_vec();
        let mut again = Tracker::new("home", open);
        let s = again.step(9_000, &[limit(Kind::Export, 0.0, false)], None);
        assert_eq!(s, Step::default());
        assert_eq!(again.open()[0].start_ms, 1_000);
    }
}
