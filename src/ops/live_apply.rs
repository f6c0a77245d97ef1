//! Applies a config change live (`config::live_change` decided it can):
//! reloads what SIGHUP reloads, gives each site whose grid limits changed
//! its new limits (its control loop holds them from its next tick), and
//! adds the new devices, each first to the store (so its samples are
//! kept), then to the latest values and the listings, then to its bus task,
//! which polls it from then on.
//!
//! It must not decide whether a change can apply live, nor write files: a
//! failure here is answered by the caller with the last good config and a
//! restart.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::live_change::SiteLimits;
use crate::config::{Config, DeviceConfig};
use crate::modbus::BusHandle;
use crate::steering::request::ConfiguredLimits;
use crate::steering::{SteeringError, SteeringService};
use crate::store::StoreHandle;
use crate::telemetry::Telemetry;

/// Reloads the API's tokens, auth mode and rate limit from a config.
pub type Reload = Arc<dyn Fn(&Config) + Send + Sync>;

/// What a live change reaches in the running agent.
#[derive(Clone)]
pub struct LiveParts {
    pub telemetry: Telemetry,
    pub buses: HashMap<String, BusHandle>,
    pub reload: Reload,
}

/// What a change applied live changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Sites whose configured grid limits change.
    pub limits: Vec<SiteLimits>,
    /// Devices appended to the running ones.
    pub added: Vec<DeviceConfig>,
}

/// Why a live change did not apply whole.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("the store did not take device {reference}: {source}")]
    Store {
        reference: String,
        source: crate::store::StoreError,
    },
    #[error("device {reference} cannot be added: {source}")]
    Live {
        reference: String,
        source: crate::telemetry::AddError,
    },
    #[error("the grid limits of site {site} did not change: {source}")]
    Limits { site: String, source: SteeringError },
    #[error("bus {bus} of device {reference} does not run")]
    NoBus { reference: String, bus: String },
    #[error("the bus task did not take device {reference}: {source}")]
    Bus {
        reference: String,
        source: crate::modbus::ModbusError,
    },
}

/// Applies `new`: its sites' new grid limits, and `plan.added` appended to
/// the running devices.
pub async fn apply(
    parts: &LiveParts,
    store: &StoreHandle,
    steering: &SteeringService,
    new: &Config,
    plan: &Plan,
) -> Result<(), LiveError> {
    (parts.reload)(new);
    for l in &plan.limits {
        steering
            .set_grid_limits(&l.site, ConfiguredLimits::of(l.max_import, l.max_export))
            .map_err(|source| LiveError::Limits {
                site: l.site.clone(),
                source,
            })?;
    }
    for d in &plan.added {
        let reference = d.reference.clone();
        let bus = parts.buses.get(&d.bus).ok_or_else(|| LiveError::NoBus {
            reference: reference.clone(),
            bus: d.bus.clone(),
        })?;
        store
            .add_device(d.id, reference.clone())
            .await
            .map_err(|source| LiveError::Store {
                reference: reference.clone(),
                source,
            })?;
        parts
            .telemetry
            .add_device(d.clone())
            .map_err(|source| LiveError::Live {
                reference: reference.clone(),
                source,
            })?;
        bus.add_device(d.clone())
            .await
            .map_err(|source| LiveError::Bus { reference, source })?;
        tracing::info!(device = %d.reference, bus = %d.bus, site = %d.site, "device added live");
    }
    Ok(())
}
