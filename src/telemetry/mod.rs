//! Where polled samples go: the in-memory latest values and device status that the
//! API reads, and the bounded hand-off to the store.
//!
//! Owns no I/O. Bus tasks call [`Telemetry::record`] and hand the batch to
//! [`Telemetry::downstream`] themselves, waiting for its room
//! ([`Telemetry::publish`] does both); readers take short read locks on one
//! device at a time.

mod collect;
mod live;

pub use live::{
    AddError, DeviceInfo, DeviceRef, DeviceSnapshot, Live, Reading, FUTURE_TOLERANCE_MS,
};

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::model::{DeviceId, Property, Sample};

/// The hand-off from pollers to whatever persists samples. Bounded: when the
/// consumer falls behind by `capacity` batches, publishers wait (backpressure),
/// so no sample is dropped on the way to the store.
pub type SampleTx = mpsc::Sender<Vec<Sample>>;

/// Cheap, cloneable handle shared by bus tasks, the API and the uplink.
#[derive(Clone)]
pub struct Telemetry {
    live: Arc<Live>,
    downstream: Option<SampleTx>,
    catalog: Arc<watch::Sender<u64>>,
}

impl Telemetry {
    /// `downstream` receives every published batch, in publish order per device.
    pub fn new(live: Arc<Live>, downstream: Option<SampleTx>) -> Self {
        let (catalog, _) = watch::channel(0);
        Self {
            live,
            downstream,
            catalog: Arc::new(catalog),
        }
    }

    pub fn live(&self) -> &Arc<Live> {
        &self.live
    }

    /// Records a poll's samples as the latest values, marks the device online, and
    /// hands the batch on. Waits only when the downstream queue is full.
    pub async fn publish(&self, device: DeviceId, samples: Vec<Sample>) {
        if samples.is_empty() {
            return;
        }
        self.record(device, &samples);
        if let Some(tx) = &self.downstream {
            // A closed receiver means the store is shutting down; the latest
            // values above are still served.
            let _ = tx.send(samples).await;
        }
    }

    /// The first half of [`Telemetry::publish`]: records a poll's samples as
    /// the latest values and marks the device online, without handing them on.
    /// For a caller that waits for [`Telemetry::downstream`]'s room itself.
    pub fn record(&self, device: DeviceId, samples: &[Sample]) {
        if self.live.record(device, samples) {
            self.catalog.send_modify(|v| *v += 1);
        }
    }

    /// The bounded hand-off to the store, if there is one.
    pub fn downstream(&self) -> Option<&SampleTx> {
        self.downstream.as_ref()
    }

    /// Sets what a device offers (after discovery); bumps the catalog version when
    /// it changed, so listings can be republished.
    pub fn set_catalog(&self, device: DeviceId, properties: Vec<Property>, info: DeviceInfo) {
        if self.live.set_catalog(device, properties, info) {
            self.catalog.send_modify(|v| *v += 1);
        }
    }

    /// A poll failed: the device is offline until the next success.
    pub fn mark_failed(&self, device: DeviceId, error: String) {
        if self.live.mark_failed(device, error) {
            self.catalog.send_modify(|v| *v += 1);
        }
    }

    /// Marks the device online after a successful poll that yielded no samples.
    pub fn mark_online(&self, device: DeviceId, ts_ms: i64) {
        if self.live.mark_online(device, ts_ms) {
            self.catalog.send_modify(|v| *v += 1);
        }
    }

    /// Adds a device at run time (a config change applied live): known to
    /// the latest values and the listings from now on, offline until its
    /// first poll.
    pub fn add_device(&self, device: crate::config::DeviceConfig) -> Result<DeviceId, AddError> {
        let id = self.live.add(device)?;
        self.catalog.send_modify(|v| *v += 1);
        Ok(id)
    }

    /// Changes whenever a device's offered properties or online state change.
    pub fn catalog_changes(&self) -> watch::Receiver<u64> {
        self.catalog.subscribe()
    }
}
