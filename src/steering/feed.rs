//! Following each site's steering state for whoever publishes it (the MQTT
//! uplink's retained `{root}/sites/{s}/steering`): the state of
//! `GET /sites/{s}/steering`, once at start and again on every change.
//!
//! A change is anything the state shows except `evaluatedAt` alone: a committed
//! request or DELETE, an entry starting or ending, a limit note, a device's
//! setpoint or write state. `SiteRuntime::changed` is notified by the control
//! loop after each evaluation (a committed change wakes it), by the grid
//! signals and by the actuators; this task compares the typed states (a view
//! holds exactly what is shown, so equal states render equally). A state is
//! published only once the control loop has evaluated every committed change,
//! so a published entry never comes with the limits in force before it. It
//! must not know who receives the states, nor how they are rendered.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::runtime::SiteRuntime;
use super::view::SiteState;
use super::SteeringService;

/// Receives `(site reference, state)`; must not block.
pub type Publish = Arc<dyn Fn(&str, &SiteState) + Send + Sync>;

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
    let mut last: Option<SiteState> = None;
    loop {
        match service.evaluated_state(&reference).await {
            // A committed change the control loop has not evaluated yet: its
            // evaluation notifies again.
            Ok(None) => {}
            Ok(Some(state)) => {
                let seen = state.without_clock();
                if last.as_ref() != Some(&seen) {
                    publish(&reference, &state);
                    last = Some(seen);
                }
            }
            Err(e) => tracing::warn!(site = %reference, error = %e, "steering state not read"),
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = site.changed.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steering::decide::GridStatus;
    use crate::steering::report::State;
    use crate::steering::signal::Active;
    use crate::steering::view::{DeviceState, GridLoopState};

    fn state(evaluated_at: i64, setpoint_w: Option<f64>) -> SiteState {
        SiteState {
            site: "ste_s".into(),
            active: Active::default(),
            until_soc_reached: false,
            scheduled: Vec::new(),
            devices: vec![DeviceState {
                device: "dvc_b".into(),
                component: None,
                setpoint_w,
                state: State::Pending,
                written_at_ms: None,
                confirmed: false,
                error: None,
            }],
            limits: Vec::new(),
            grid_loop: GridLoopState {
                grid: GridStatus::default(),
                signals: Vec::new(),
                sources: Vec::new(),
                csip: None,
                eebus: None,
            },
            evaluated_at_ms: Some(evaluated_at),
            durable: true,
        }
    }

    #[test]
    fn the_evaluation_clock_alone_is_no_change() {
        let (a, b, c) = (state(1, None), state(2, None), state(2, Some(5.0)));
        assert_ne!(a, b);
        assert_eq!(a.without_clock(), b.without_clock());
        assert_ne!(b.without_clock(), c.without_clock());
    }
}
