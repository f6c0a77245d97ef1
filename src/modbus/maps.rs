//! The discovered map of every device, shared read-only with steering (which
//! needs to know where a device's controls are).

use std::sync::{Arc, RwLock};

use super::device::DeviceMap;
use crate::model::DeviceId;

/// One slot per device; `None` until discovered. A device added at run
/// time gets its slot when its map is first set.
#[derive(Debug)]
pub struct DeviceMaps {
    slots: RwLock<Vec<Option<Arc<DeviceMap>>>>,
}

impl DeviceMaps {
    pub fn new(devices: usize) -> Self {
        Self {
            slots: RwLock::new(vec![None; devices]),
        }
    }

    pub fn get(&self, id: DeviceId) -> Option<Arc<DeviceMap>> {
        // A poisoned lock still holds whole Arcs: keep using them.
        self.slots
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id.index())?
            .clone()
    }

    pub fn set(&self, id: DeviceId, map: Option<Arc<DeviceMap>>) {
        let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
        if slots.len() <= id.index() {
            slots.resize(id.index() + 1, None);
        }
        slots[id.index()] = map;
    }
}
