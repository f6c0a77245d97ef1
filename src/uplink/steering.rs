//! The hook through which the steering service hands its per-site state to the
//! uplink, which publishes it retained on `{root}/sites/{site}/steering`.
//!
//! Latest value wins: while offline only the newest state per site is kept, and
//! every site's state is published again after a reconnect. This file must not
//! build steering bodies: it renders the typed state with the API's own
//! rendering, so it carries what `GET /sites/{s}/steering` returns.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;

use crate::steering::SiteState;

/// The newest steering state of each site.
pub type SteeringStates = BTreeMap<String, Arc<Value>>;

/// Cheap, cloneable. Works with or without a running uplink.
#[derive(Clone)]
pub struct SteeringFeed {
    tx: Arc<watch::Sender<SteeringStates>>,
}

impl Default for SteeringFeed {
    fn default() -> Self {
        Self {
            tx: Arc::new(watch::channel(SteeringStates::new()).0),
        }
    }
}

impl SteeringFeed {
    pub fn new() -> Self {
        Self::default()
    }

    /// Call on every change of a site's steering state; it is published as
    /// the body of `GET /sites/{site}/steering`. Never blocks.
    pub fn publish_steering_state(&self, site: &str, state: &SiteState) {
        let body = crate::api::render_steering_state(state);
        self.tx.send_modify(|states| {
            states.insert(site.to_string(), Arc::new(body));
        });
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<SteeringStates> {
        self.tx.subscribe()
    }
}
