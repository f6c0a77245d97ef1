//! The EEBus node: sitegate as the Controllable System a German
//! distribution operator's control box limits over LPC (§14a EnWG) and LPP
//! (EEG §9), through the `eebus` crate's SHIP and SPINE stack and its
//! LPC/LPP state machine (`docs/grid-operator.md`). What the use cases hold
//! reaches steering as the limits of source `eebus`
//! (`../shared/spec/grid-operators.md`): the consumption limit over the
//! controllable consumers, the production limit as a limit on the export,
//! and the connection's contractual maxima beside them.
//!
//! Pure core: `policy` (what a use case holds, with sitegate's protective
//! failsafe and the resumed state); §14a's floor is `config::pmin`'s. I/O at the
//! edges: `identity` keeps the node's key, `listener` screens the
//! connections, `store` the use cases' state, `monitoring` fills MGCP's
//! measurements from the meters, `node` builds the SPINE device, `task`
//! runs the hub.
//!
//! Nothing here commands a device: steering holds the limits.

pub mod announce;
pub mod identity;
pub mod listener;
pub mod monitoring;
pub mod node;
pub mod policy;
pub mod store;
pub mod task;

use std::sync::Arc;

use eebus::usecases::limitation::{ControllableSystem, LimitWrite};
use tokio_util::task::TaskTracker;

use crate::config::{Config, EebusConfig};
use crate::steering::limits::LimitSource;
use crate::steering::sources::{Kind, OperatorSet, SourceLimit, CONTRACT_REFERENCE};
use crate::steering::SteeringService;
use policy::{Held, Kept};

/// What the task follows of one use case between events.
pub struct Tracked {
    /// What the store kept, until the machine leaves `init`.
    resumed: Option<Kept>,
    /// The end of the active limit, wall ms, noted when it was accepted.
    until_ms: Option<i64>,
    last: Option<(Held, i64)>,
}

impl Tracked {
    pub fn new(resumed: Option<Kept>) -> Tracked {
        Tracked {
            resumed,
            until_ms: None,
            last: None,
        }
    }

    /// A write the use case accepted at `now_ms`: a fresh limit, so what
    /// was resumed is over.
    pub fn accepted(&mut self, w: &LimitWrite, now_ms: i64) {
        self.until_ms = w.duration.map(|d| now_ms + d.as_millis() as i64);
        self.resumed = None;
    }

    /// What holds now (wall `now_ms`, the box silent for `silent_ms` on the
    /// monotonic clock), since when, and whether it changed.
    pub fn update(
        &mut self,
        system: &ControllableSystem,
        now_ms: i64,
        silent_ms: i64,
    ) -> (Held, i64, bool) {
        if system.state() != eebus::usecases::limitation::LimitationState::Init {
            // The protective failsafe keeps the resumed start; a limit does not.
            if self.resumed.as_ref().is_some_and(|k| !k.failsafe) {
                self.resumed = None;
            }
        }
        let h = policy::held(
            system,
            now_ms,
            silent_ms,
            self.until_ms,
            self.resumed.as_ref(),
        );
        let since = policy::since(
            self.last.as_ref().map(|(h, s)| (h, *s)),
            &h,
            now_ms,
            self.resumed.as_ref(),
        );
        let changed = self
            .last
            .as_ref()
            .is_none_or(|(p, s)| *p != h || *s != since);
        if !h.failsafe {
            self.resumed = None;
        }
        self.last = Some((h.clone(), since));
        (h, since, changed)
    }
}

/// The limits of source `eebus`: LPC's value over the controllable
/// consumers, LPP's on the export, and the contractual maxima.
pub fn limits_of(c: &EebusConfig, helds: &[(Held, i64)]) -> OperatorSet {
    let mut limits = Vec::new();
    for ((h, since), (kind, name)) in helds
        .iter()
        .zip([(Kind::Consumption, "lpc"), (Kind::Export, "lpp")])
    {
        if let Some(w) = h.value_w {
            limits.push(SourceLimit {
                source: LimitSource::Eebus,
                kind,
                value: w,
                until_ms: h.until_ms,
                failsafe: h.failsafe,
                since_ms: *since,
                reference: Some(format!("{name}: {}", h.state)),
            });
        }
    }
    for (kind, w) in [
        (Kind::Import, c.contractual_max_consumption_w),
        (Kind::Export, c.contractual_max_production_w),
    ] {
        limits.push(SourceLimit {
            source: LimitSource::Eebus,
            kind,
            value: w,
            until_ms: None,
            failsafe: false,
            since_ms: 0,
            reference: Some(CONTRACT_REFERENCE.into()),
        });
    }
    OperatorSet { limits }
}

/// Starts the node of `[eebus]`, if any and its site is steered.
pub fn start(
    config: &Config,
    steering: &SteeringService,
    store: store::EebusStore,
    tracker: &TaskTracker,
    cancel: &tokio_util::sync::CancellationToken,
) {
    let Some(c) = &config.eebus else { return };
    let Ok(site) = steering.site(&c.site) else {
        tracing::warn!(site = %c.site, "[eebus] names a site steering does not run: no node");
        return;
    };
    tracker.spawn(task::run(
        task::Parts {
            config: c.clone(),
            site: Arc::clone(site),
            live: Arc::clone(steering.live()),
            history: steering.audit_queue(),
            store,
            state_dir: crate::https::state_dir(config),
        },
        cancel.child_token(),
    ));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn config() -> EebusConfig {
        EebusConfig {
            site: "home".into(),
            listen: "127.0.0.1:0".parse().expect("addr"),
            trusted_ski: [0x55; 20],
            box_address: None,
            brand: "sitegate".into(),
            model: "test".into(),
            serial: "gw1".into(),
            contractual_max_consumption_w: 30_000.0,
            contractual_max_production_w: 25_000.0,
            failsafe_consumption_w: 4_200.0,
            failsafe_production_w: 10_000.0,
            failsafe_duration_s: 7_200,
            controllable_consumers: 1,
            mdns: false,
        }
    }

    #[test]
    fn the_use_cases_and_the_contract_become_limits() {
        let held = |w: Option<f64>, failsafe: bool| Held {
            state: if failsafe {
                "failsafe state"
            } else {
                "limited"
            },
            value_w: w,
            failsafe,
            protective: false,
            until_ms: None,
        };
        let set = limits_of(
            &config(),
            &[(held(Some(4_200.0), true), 5), (held(None, false), 7)],
        );
        let c = set.tightest(Kind::Consumption).expect("lpc");
        assert_eq!((c.value, c.failsafe, c.since_ms), (4_200.0, true, 5));
        assert_eq!(c.reference.as_deref(), Some("lpc: failsafe state"));
        // LPP unlimited: the contract bounds the export.
        assert_eq!(set.value(Kind::Export), Some(25_000.0));
        assert_eq!(set.value(Kind::Import), Some(30_000.0));
        let set = limits_of(
            &config(),
            &[(held(None, false), 0), (held(Some(0.0), false), 0)],
        );
        assert_eq!(set.value(Kind::Export), Some(0.0));
    }
}
