//! The public handle on one simulated device: what tests, the demo and the
//! benches may see and change of it (its registers, state and counters, the
//! values of a register-map device, refusals on demand). Never held across
//! an `.await`: every call locks the device for one short section.

use super::device::{lock, DeviceCell, Kind};
use super::SimDeviceState;
use crate::model::Property;
use crate::register::plan::{Span, Table};

/// A cheap handle on one simulated device, for tests and the demo.
#[derive(Clone)]
pub struct SimDeviceHandle {
    cell: DeviceCell,
}

impl std::fmt::Debug for SimDeviceHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDeviceHandle").finish_non_exhaustive()
    }
}

impl SimDeviceHandle {
    pub(crate) fn new(cell: DeviceCell) -> SimDeviceHandle {
        SimDeviceHandle { cell }
    }

    /// Raw registers `addr..addr+count`, as a client would read them (holding
    /// registers of a profile device); addresses outside the map are left out
    /// (the result is then shorter).
    pub fn registers(&self, addr: u16, count: u16) -> Vec<u16> {
        let d = lock(&self.cell);
        match &d.kind {
            Kind::Profile(p) => p.peek_holding(addr, count),
            _ => d.map.peek(addr, count),
        }
    }

    /// The device's physical state now.
    pub fn state(&self) -> SimDeviceState {
        lock(&self.cell).state()
    }

    /// Read requests the device has answered so far.
    pub fn read_count(&self) -> u64 {
        lock(&self.cell).reads
    }

    /// Write requests the device has answered so far (accepted or refused),
    /// and the registers they carried.
    pub fn write_count(&self) -> (u64, u64) {
        lock(&self.cell).writes
    }

    /// The ids of the SunSpec models in its chain, in order (empty for a
    /// register-map device or an input module).
    pub fn model_ids(&self) -> Vec<u16> {
        lock(&self.cell).map.models().iter().map(|m| m.id).collect()
    }

    /// Profile devices: shows `value` for `property` (vocabulary unit and sign).
    /// Returns false for SunSpec devices, whose values come from physics.
    pub fn set_value(&self, property: Property, value: f64) -> bool {
        match &mut lock(&self.cell).kind {
            Kind::Profile(p) => {
                p.set(property, value);
                true
            }
            _ => false,
        }
    }

    /// Digital input modules: sets the inputs (input 1 in bit 0). Returns false
    /// for other devices.
    pub fn set_inputs(&self, value: u16) -> bool {
        match &mut lock(&self.cell).kind {
            Kind::Inputs { bits, count } => {
                *bits = value & (((1u32 << *count) - 1) as u16);
                true
            }
            _ => false,
        }
    }

    /// Profile devices: lays raw words into a register table from `addr` on
    /// (a documented register image). Returns false for SunSpec devices.
    pub fn poke(&self, table: Table, addr: u16, words: &[u16]) -> bool {
        match &mut lock(&self.cell).kind {
            Kind::Profile(p) => {
                p.poke(table, addr, words);
                true
            }
            _ => false,
        }
    }

    /// Profile devices with `on_timeout`: their own timer runs out `seconds`
    /// after the last write instead of the profile's time (a fallback time
    /// an installer set in the device's menu, or a test that cannot wait a
    /// minute). Returns false for SunSpec devices.
    pub fn set_own_timeout(&self, seconds: f64) -> bool {
        match &mut lock(&self.cell).kind {
            Kind::Profile(p) => {
                p.set_own_timeout(seconds);
                true
            }
            _ => false,
        }
    }

    /// Makes every later write answer exception 4 (ServerDeviceFailure), or not.
    pub fn set_refuse_writes(&self, on: bool) {
        lock(&self.cell).refuse_writes = on;
    }

    /// Makes every later write that would set `word` at `addr` answer
    /// exception 3 ("illegal data value"), the rest of the device as before.
    pub fn refuse_word(&self, addr: u16, word: u16) {
        lock(&self.cell).refused_words.push((addr, word));
    }

    /// Makes every later read that touches `span` answer exception 2 ("illegal
    /// data address"), like a device that leaves those registers out.
    pub fn refuse_reads(&self, span: Span) {
        lock(&self.cell).refused.push(span);
    }
}
