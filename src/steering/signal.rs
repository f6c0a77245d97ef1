//! A site's combined signal: one timeline per component, how requests and
//! deletions change it, and what holds at a given time.
//!
//! Pure data over explicit times; persistence and locking belong to the service.

use super::request::SteeringRequest;
use super::timeline::{Entry, Timeline};
use super::value::{Component, ComponentValue, CurtailmentValue, EssSetting, GridLimit};

/// One stored timeline entry, as persisted and restored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredEntry {
    pub component: Component,
    pub entry: Entry<ComponentValue>,
}

/// The four component timelines of one site.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteSignal {
    timelines: [Timeline<ComponentValue>; 4],
}

/// What holds at one instant; `None` is the component's fallback.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Active {
    pub ess: Option<Entry<EssSetting>>,
    pub curtailment: Option<Entry<CurtailmentValue>>,
    pub maximize_grid_import: Option<Entry<bool>>,
    pub grid_limit: Option<Entry<GridLimit>>,
}

fn index(c: Component) -> usize {
    match c {
        Component::Ess => 0,
        Component::Curtailment => 1,
        Component::MaximizeGridImport => 2,
        Component::GridLimit => 3,
    }
}

fn typed<T>(
    e: &Entry<ComponentValue>,
    f: impl Fn(&ComponentValue) -> Option<T>,
) -> Option<Entry<T>> {
    Some(Entry {
        from: e.from,
        until: e.until,
        value: f(&e.value)?,
        request_id: e.request_id.clone(),
    })
}

impl SiteSignal {
    pub fn timeline(&self, c: Component) -> &Timeline<ComponentValue> {
        &self.timelines[index(c)]
    }

    /// Sets every component the request carries from its effective start on
    /// (rule 2: the others keep their setting). Returns the changed components.
    pub fn apply(
        &mut self,
        req: &SteeringRequest,
        request_id: &str,
        now_ms: i64,
    ) -> Vec<Component> {
        let from = req.effective_from(now_ms);
        let values = [
            req.ess.clone().map(ComponentValue::Ess),
            req.curtailment.clone().map(ComponentValue::Curtailment),
            req.maximize_grid_import
                .map(ComponentValue::MaximizeGridImport),
            req.grid_limit.clone().map(ComponentValue::GridLimit),
        ];
        let mut changed = Vec::new();
        for value in values.into_iter().flatten() {
            let c = value.component();
            self.timelines[index(c)].insert(Entry {
                from,
                until: req.valid_until,
                value,
                request_id: request_id.to_string(),
            });
            changed.push(c);
        }
        changed
    }

    /// Ends one component (or all) at `now_ms`, scheduled entries included: the
    /// fallback holds from then on.
    pub fn end(&mut self, component: Option<Component>, now_ms: i64) -> Vec<Component> {
        let which: Vec<Component> = component.map_or(Component::ALL.to_vec(), |c| vec![c]);
        for c in &which {
            self.timelines[index(*c)].clear_from(now_ms);
        }
        which
    }

    pub fn active(&self, t: i64) -> Active {
        let at = |c| self.timelines[index(c)].at(t);
        Active {
            ess: at(Component::Ess).and_then(|e| {
                typed(e, |v| match v {
                    ComponentValue::Ess(s) => Some(s.clone()),
                    _ => None,
                })
            }),
            curtailment: at(Component::Curtailment).and_then(|e| {
                typed(e, |v| match v {
                    ComponentValue::Curtailment(s) => Some(s.clone()),
                    _ => None,
                })
            }),
            maximize_grid_import: at(Component::MaximizeGridImport).and_then(|e| {
                typed(e, |v| match v {
                    ComponentValue::MaximizeGridImport(b) => Some(*b),
                    _ => None,
                })
            }),
            grid_limit: at(Component::GridLimit).and_then(|e| {
                typed(e, |v| match v {
                    ComponentValue::GridLimit(g) => Some(g.clone()),
                    _ => None,
                })
            }),
        }
    }

    /// Entries that start after `t`, by start time.
    pub fn scheduled(&self, t: i64) -> Vec<StoredEntry> {
        let mut out: Vec<StoredEntry> = Component::ALL
            .into_iter()
            .flat_map(|c| {
                self.timelines[index(c)].after(t).map(move |e| StoredEntry {
                    component: c,
                    entry: e.clone(),
                })
            })
            .collect();
        out.sort_by_key(|s| (s.entry.from, s.component));
        out
    }

    /// The first instant after `t` at which any component may change.
    pub fn next_change_after(&self, t: i64) -> Option<i64> {
        self.timelines
            .iter()
            .filter_map(|tl| tl.next_change_after(t))
            .min()
    }

    /// Drops what ended at or before `t`. Returns true when anything went.
    pub fn prune(&mut self, t: i64) -> bool {
        let mut any = false;
        for tl in &mut self.timelines {
            any |= tl.prune(t);
        }
        any
    }

    /// The entries of some components, for persisting them.
    pub fn entries_of(&self, components: &[Component]) -> Vec<StoredEntry> {
        components
            .iter()
            .flat_map(|&c| {
                self.timelines[index(c)]
                    .entries()
                    .iter()
                    .map(move |e| StoredEntry {
                        component: c,
                        entry: e.clone(),
                    })
            })
            .collect()
    }

    /// Rebuilds a signal from stored entries, dropping those that ended by `now_ms`.
    pub fn restore(entries: Vec<StoredEntry>, now_ms: i64) -> SiteSignal {
        let mut s = SiteSignal::default();
        let mut sorted = entries;
        sorted.sort_by_key(|e| e.entry.from);
        for e in sorted {
            if e.entry.value.component() == e.component {
                s.timelines[index(e.component)].insert(e.entry);
            }
        }
        s.prune(now_ms);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PowerValue;

    fn ess(w: f64, until: i64) -> SteeringRequest {
        SteeringRequest {
            ess: Some(EssSetting::Power(PowerValue::watts(w))),
            curtailment: None,
            maximize_grid_import: None,
            grid_limit: None,
            valid_from: None,
            valid_until: until,
        }
    }

    #[test]
    fn worked_scenario() {
        let mut s = SiteSignal::default();
        let step1 = SteeringRequest {
            curtailment: Some(CurtailmentValue::Power(PowerValue::watts(300_000.0))),
            maximize_grid_import: Some(false),
            ..ess(100_000.0, 1000)
        };
        assert_eq!(s.apply(&step1, "req_1", 0).len(), 3);
        assert_eq!(
            s.apply(&ess(300_000.0, 1000), "req_2", 10),
            [Component::Ess]
        );
        let a = s.active(20);
        assert_eq!(a.ess.as_ref().map(|e| e.value.watts()), Some(300_000.0));
        assert_eq!(a.ess.as_ref().map(|e| e.request_id.as_str()), Some("req_2"));
        assert_eq!(
            a.curtailment.as_ref().map(|e| e.request_id.as_str()),
            Some("req_1")
        );
        assert_eq!(a.maximize_grid_import.map(|e| e.value), Some(false));
        assert_eq!(s.active(1000), Active::default());
        assert_eq!(s.next_change_after(20), Some(1000));
    }

    #[test]
    fn scheduled_and_end() {
        let mut s = SiteSignal::default();
        s.apply(&ess(1.0, 500), "a", 0);
        let later = SteeringRequest {
            valid_from: Some(200),
            ..ess(2.0, 900)
        };
        s.apply(&later, "b", 0);
        assert_eq!(s.active(100).ess.map(|e| e.value.watts()), Some(1.0));
        assert_eq!(s.scheduled(100).len(), 1);
        assert_eq!(s.active(300).ess.map(|e| e.value.watts()), Some(2.0));
        s.end(Some(Component::Ess), 100);
        assert_eq!(s.active(100), Active::default());
        assert!(s.scheduled(0).is_empty());
    }

    #[test]
    fn restore_drops_expired() {
        let mut s = SiteSignal::default();
        s.apply(&ess(1.0, 500), "a", 0);
        s.apply(
            &SteeringRequest {
                valid_from: Some(600),
                ..ess(2.0, 900)
            },
            "b",
            0,
        );
        let rows = s.entries_of(&Component::ALL);
        let r = SiteSignal::restore(rows, 550);
        assert_eq!(r.timeline(Component::Ess).entries().len(), 1);
        assert_eq!(
            r.active(700).ess.map(|e| e.request_id),
            Some("b".to_string())
        );
    }
}
