//! Following each site's steering state for whoever publishes it (the MQTT
//! uplink's retained `{root}/sites/{s}/steering`): the exact body of
//! `GET /sites/{s}/steering`, once at start and again on every change.
//!
//! A change is anything the body shows except `evaluatedAt` alone: a committed
//! request or DELETE, an entry starting or ending, a limit note, a device's
//! setpoint or write state. `SiteRuntime::changed` is notified by the service,
//! the control loop and the actuators; this task renders and compares. It must
//! not know who receives the states.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::control::SiteRuntime;
use super::SteeringService;

/// Receives `(site reference, state body)`; must not block.
pub type Publish = Arc<dyn Fn(&str, Value) + Send + Sync>;

/// Starts one small task per site that calls `publish` with the site's state
/// at start and on every change, until `cancel`.
pub fn follow_states(
    service: &SteeringService,
    publish: Publish,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) {
    for site in service.sites() {
        tracker.spawn(follow(
            service.clone(),
            site.clone(),
            publish.clone(),
            cancel.clone(),
        ));
    }
}

async fn follow(
    service: SteeringService,
    site: Arc<SiteRuntime>,
    publish: Publish,
    cancel: CancellationToken,
) {
    let reference = site.config.reference.clone();
    let mut last: Option<Value> = None;
    loop {
        match service.state(&reference).await {
            Ok(body) => {
                let seen = without_clock(&body);
                if last.as_ref() != Some(&seen) {
                    publish(&reference, body);
                    last = Some(seen);
                }
            }
            Err(e) => tracing::warn!(site = %reference, error = %e, "steering state not rendered"),
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = site.changed.notified() => {}
        }
    }
}

/// The body without `evaluatedAt`, which moves on every evaluation.
fn without_clock(body: &Value) -> Value {
    let mut v = body.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("evaluatedAt");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_evaluation_clock_alone_is_no_change() {
        let a = json!({"siteReference": "s", "evaluatedAt": 1, "devices": []});
        let b = json!({"siteReference": "s", "evaluatedAt": 2, "devices": []});
        let c = json!({"siteReference": "s", "evaluatedAt": 2, "devices": [1]});
        assert_eq!(without_clock(&a), without_clock(&b));
        assert_ne!(without_clock(&b), without_clock(&c));
    }
}
