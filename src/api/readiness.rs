//! Readiness: named checks that subsystems register and `/readyz` evaluates.
//!
//! A subsystem either registers a probe closure or takes a [`ReadyFlag`] and sets
//! it once it is up (the store: "open"). A check registered as degraded leaves
//! the agent ready (it still holds the grid limits and answers) but is listed
//! with its reason: the store's commits failing, changes waiting for the disk. Probes run on every `/readyz` request,
//! so they must be cheap and must not block (no I/O, no waiting on locks held
//! across I/O). This file must not know which subsystems exist.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

type Probe = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The set of readiness checks. Cheap to clone; clones share the checks.
#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<RwLock<Vec<(String, Probe)>>>,
    degraded: Arc<RwLock<Vec<(String, Probe)>>>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let checks = self.checks.read().unwrap_or_else(|e| e.into_inner());
        f.debug_list()
            .entries(checks.iter().map(|(name, _)| name))
            .finish()
    }
}

impl Readiness {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a check: `Ok(())` when ready, else `Err(reason)`.
    pub fn register(
        &self,
        name: impl Into<String>,
        probe: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        self.checks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((name.into(), Arc::new(probe)));
    }

    /// Adds a check that is unready, saying `reason`, until the returned flag is
    /// set.
    pub fn flag(&self, name: impl Into<String>, reason: impl Into<String>) -> ReadyFlag {
        let flag = ReadyFlag::default();
        let probe_flag = flag.clone();
        let reason = reason.into();
        self.register(name, move || {
            if probe_flag.is_ready() {
                Ok(())
            } else {
                Err(reason.clone())
            }
        });
        flag
    }

    /// Adds a check whose failure degrades the agent without making it
    /// unready.
    pub fn register_degraded(
        &self,
        name: impl Into<String>,
        probe: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        self.degraded
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((name.into(), Arc::new(probe)));
    }

    /// Every failing check as `"<name>: <reason>"`, in registration order; empty
    /// when ready.
    pub fn unmet(&self) -> Vec<String> {
        failing(&self.checks)
    }

    /// Every failing degraded check, as [`Readiness::unmet`].
    pub fn degraded(&self) -> Vec<String> {
        failing(&self.degraded)
    }
}

fn failing(checks: &RwLock<Vec<(String, Probe)>>) -> Vec<String> {
    // Clone the probes out so none runs under the lock.
    let checks = checks.read().unwrap_or_else(|e| e.into_inner()).clone();
    checks
        .iter()
        .filter_map(|(name, probe)| probe().err().map(|reason| format!("{name}: {reason}")))
        .collect()
}

/// A readiness switch owned by one subsystem. Cloneable; clones share the state.
#[derive(Clone, Debug, Default)]
pub struct ReadyFlag(Arc<AtomicBool>);

impl ReadyFlag {
    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_failing_checks_until_they_pass() {
        let r = Readiness::new();
        assert!(r.unmet().is_empty());
        let store = r.flag("store", "not open yet");
        r.register("always", || Ok(()));
        assert_eq!(r.unmet(), ["store: not open yet"]);
        store.set_ready(true);
        assert!(r.clone().unmet().is_empty());
        store.set_ready(false);
        assert_eq!(r.unmet().len(), 1);
        store.set_ready(true);
        r.register_degraded("disk", || Err("full".into()));
        assert!(r.unmet().is_empty());
        assert_eq!(r.degraded(), ["disk: full"]);
    }
}
