//! The discovered map of every device, shared read-only with steering (which
//! needs to know where a device's controls are), and the registers of each
//! device's last poll (`image.rs`), shared with the Modbus server. Each
//! device's bus task is the only writer of its slots.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use super::device::DeviceMap;
use super::image::PollImage;
use crate::model::DeviceId;

/// One slot per device; `None` until discovered. A device added at run
/// time gets its slot when its map is first set.
#[derive(Debug)]
pub struct DeviceMaps {
    slots: RwLock<Vec<Option<Arc<DeviceMap>>>>,
    images: RwLock<Vec<Option<Arc<PollImage>>>>,
    /// Someone reads the images (the Modbus server): the bus tasks build
    /// them only then.
    keep_images: AtomicBool,
}

impl DeviceMaps {
    pub fn new(devices: usize) -> Self {
        Self {
            slots: RwLock::new(vec![None; devices]),
            images: RwLock::new(vec![None; devices]),
            keep_images: AtomicBool::new(false),
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

    /// Has the bus tasks publish each poll's registers from now on.
    pub fn keep_images(&self) {
        self.keep_images.store(true, Ordering::Relaxed);
    }

    /// Whether each poll's registers are wanted.
    pub fn keeps_images(&self) -> bool {
        self.keep_images.load(Ordering::Relaxed)
    }

    /// The registers of the device's last successful poll; `None` before
    /// one, and after its map was forgotten.
    pub fn image(&self, id: DeviceId) -> Option<Arc<PollImage>> {
        self.images
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id.index())?
            .clone()
    }

    pub fn set_image(&self, id: DeviceId, image: Option<Arc<PollImage>>) {
        let mut slots = self.images.write().unwrap_or_else(|e| e.into_inner());
        if slots.len() <= id.index() {
            slots.resize(id.index() + 1, None);
        }
        slots[id.index()] = image;
    }
}
