//! The discovered map of every device, shared read-only with steering (which
//! needs to know where a device's controls are).

use std::sync::{Arc, RwLock};

use super::device::DeviceMap;
use crate::model::DeviceId;

/// One slot per configured device; `None` until discovered.
#[derive(Debug)]
pub struct DeviceMaps {
    slots: Vec<RwLock<Option<Arc<DeviceMap>>>>,
}

impl DeviceMaps {
    pub fn new(devices: usize) -> Self {
        Self {
            slots: (0..devices).map(|_| RwLock::new(None)).collect(),
        }
    }

    pub fn get(&self, id: DeviceId) -> Option<Arc<DeviceMap>> {
        // A poisoned lock still holds a whole Arc: keep using it.
        self.slots
            .get(id.index())?
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set(&self, id: DeviceId, map: Option<Arc<DeviceMap>>) {
        if let Some(slot) = self.slots.get(id.index()) {
            *slot.write().unwrap_or_else(|e| e.into_inner()) = map;
        }
    }
}
