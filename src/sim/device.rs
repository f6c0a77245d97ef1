//! One simulated device: its register map and its kind's state behind one
//! `std::sync::Mutex`, the Modbus read/write path and the counts of requests
//! (the public handle is `handle.rs`).
//!
//! The lock is only ever held for short, synchronous sections (one request or one
//! physics step); never across an `.await`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::time::Instant;

use tokio_modbus::ExceptionCode;

use super::battery::Battery;
pub use super::build::Build;
use super::inverter::Inverter;
use super::meter::Meter;
use super::profile::ProfileDevice;
use super::{SimDeviceSpec, SimDeviceState, SimKind, StorageControl};
use crate::modbus::sunspec::layout::map::RegisterMap;
use crate::model::Property;
use crate::register::plan::{Span, Table};

/// Behaviour by device kind.
pub enum Kind {
    Inverter(Inverter),
    Battery(Battery),
    Meter(Meter),
    Profile(ProfileDevice),
    /// Values fixed at build time.
    Fixed,
    /// A digital input module: the inputs as bits (input 1 in bit 0).
    Inputs {
        bits: u16,
        count: u8,
    },
}

pub struct Device {
    pub map: RegisterMap,
    pub kind: Kind,
    pub refuse_writes: bool,
    /// Read requests answered (with data or an exception).
    pub reads: u64,
    /// Write requests answered (accepted or refused) and the registers they
    /// carried.
    pub writes: (u64, u64),
    /// Registers the device does not implement: a read that touches one is
    /// answered with "illegal data address", as some devices do for optional
    /// points inside a SunSpec block.
    pub refused: Vec<Span>,
    /// `(address, word)` pairs a write may not set: answered "illegal data
    /// value", as a device does for a value it reports but does not take.
    pub refused_words: Vec<(u16, u16)>,
}

/// A device shared between its server's connections, the physics task and handles.
pub type DeviceCell = Arc<Mutex<Device>>;

/// Locks a device; a panic elsewhere while holding the lock leaves plain data
/// behind, so the poison flag is ignored.
pub fn lock(cell: &DeviceCell) -> MutexGuard<'_, Device> {
    cell.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Device {
    /// Builds a device as `build` says.
    pub fn new(spec: &SimDeviceSpec, build: Build) -> Device {
        let serial: String = spec.serial.chars().take(32).collect();
        let (map, kind) = match spec.kind {
            SimKind::Inverter { rated_w } => {
                let (map, inv) = Inverter::build(
                    (spec.sunspec_base, spec.unit_id, &serial),
                    rated_w,
                    spec.response,
                    build,
                );
                (map, Kind::Inverter(inv))
            }
            SimKind::Battery { .. } | SimKind::FroniusGen24 { .. } => {
                // Matched as a battery: `battery()` is Some for both arms.
                let Some((rating, brand)) = spec.kind.battery() else {
                    unreachable!("a battery kind has a rating")
                };
                let (map, bat) = Battery::build(
                    (spec.sunspec_base, spec.unit_id, &serial),
                    rating,
                    spec.response,
                    brand,
                    build,
                );
                (map, Kind::Battery(bat))
            }
            SimKind::Meter => {
                let (map, meter) = Meter::build(
                    (spec.sunspec_base, spec.unit_id, &serial),
                    spec.response,
                    build,
                );
                (map, Kind::Meter(meter))
            }
            SimKind::Fixed { variant, rated_w } => (
                super::variants::build(variant, spec.sunspec_base, spec.unit_id, &serial, rated_w),
                Kind::Fixed,
            ),
            SimKind::Profile {
                ref profile,
                readable_gaps,
            } => (
                RegisterMap::empty(),
                Kind::Profile(ProfileDevice::build(profile.clone(), readable_gaps)),
            ),
            SimKind::Inputs { count } => (
                RegisterMap::empty(),
                Kind::Inputs {
                    bits: 0,
                    count: count.min(16),
                },
            ),
        };
        Device {
            map,
            kind,
            refuse_writes: spec.refuse_writes,
            reads: 0,
            writes: (0, 0),
            refused: Vec::new(),
            refused_words: Vec::new(),
        }
    }

    /// A Modbus read (function 3 for holding, 4 for input registers; SunSpec
    /// devices answer both from one image).
    pub fn read(&mut self, table: Table, addr: u16, count: u16) -> Result<Vec<u16>, ExceptionCode> {
        self.reads += 1;
        let end = u32::from(addr) + u32::from(count);
        let touches =
            |s: &Span| s.table == table && u32::from(s.addr) < end && u32::from(addr) < s.end();
        if self.refused.iter().any(touches) {
            return Err(ExceptionCode::IllegalDataAddress);
        }
        match &self.kind {
            Kind::Profile(p) => p.read(table, addr, count),
            Kind::Inputs { bits, count: n } => read_inputs(*bits, *n, table, addr, count),
            _ if table == Table::DiscreteInput => Err(ExceptionCode::IllegalFunction),
            _ => self.map.read(addr, count),
        }
    }

    /// A Modbus write (function 6 or 16): refused as a whole when the device
    /// refuses writes (exception 4), when a register is unmapped or read-only
    /// (2), or when a setpoint is out of range (3); else applied at once.
    pub fn write(&mut self, addr: u16, values: &[u16], at: Instant) -> Result<(), ExceptionCode> {
        self.writes.0 += 1;
        self.writes.1 += values.len() as u64;
        if self.refuse_writes {
            return Err(ExceptionCode::ServerDeviceFailure);
        }
        let refused_word = values.iter().enumerate().any(|(i, w)| {
            let a = addr.wrapping_add(i as u16);
            self.refused_words.contains(&(a, *w))
        });
        if refused_word {
            return Err(ExceptionCode::IllegalDataValue);
        }
        if let Kind::Profile(p) = &mut self.kind {
            return p.write(addr, values, at);
        }
        if let Kind::Inputs { .. } = self.kind {
            return Err(ExceptionCode::IllegalDataAddress);
        }
        let count = u16::try_from(values.len()).map_err(|_| ExceptionCode::IllegalDataValue)?;
        self.map.check_write(addr, count)?;
        match &self.kind {
            Kind::Inverter(inv) => inv.validate(&self.map, addr, values)?,
            Kind::Battery(bat) => bat.validate(&self.map, addr, values)?,
            Kind::Meter(_) | Kind::Profile(_) | Kind::Fixed | Kind::Inputs { .. } => {}
        }
        self.map.write(addr, values)?;
        match &mut self.kind {
            Kind::Inverter(inv) => inv.on_write(addr, count, at),
            Kind::Battery(bat) => bat.on_write(addr, count, at),
            Kind::Meter(_) | Kind::Profile(_) | Kind::Fixed | Kind::Inputs { .. } => {}
        }
        Ok(())
    }

    /// Applies the revert timers of the control models (real time).
    pub fn check_revert(&mut self, now: Instant) {
        match &mut self.kind {
            Kind::Inverter(inv) => inv.check_revert(&mut self.map, now),
            Kind::Battery(bat) => bat.check_revert(&mut self.map, now),
            Kind::Profile(p) => p.check_revert(now),
            Kind::Meter(_) | Kind::Fixed | Kind::Inputs { .. } => {}
        }
    }

    pub fn state(&self) -> SimDeviceState {
        let mut s = SimDeviceState {
            ac_power_w: 0.0,
            available_w: None,
            soc: None,
            limit_pct: None,
            storage_control: None,
            energy_produced_wh: 0.0,
            energy_consumed_wh: 0.0,
        };
        match &self.kind {
            Kind::Inverter(inv) => {
                s.ac_power_w = inv.ac_power_w();
                s.available_w = Some(inv.available_w());
                s.limit_pct = inv.limit_pct(&self.map);
                s.energy_produced_wh = inv.energy_wh();
            }
            Kind::Battery(bat) => {
                s.ac_power_w = bat.ac_power_w();
                s.soc = Some(bat.soc());
                let c = bat.controls(&self.map);
                s.storage_control = (c.mode != 0).then_some(StorageControl {
                    mode: c.mode,
                    in_pct: c.in_pct,
                    out_pct: c.out_pct,
                });
                (s.energy_produced_wh, s.energy_consumed_wh) = bat.energy_wh();
            }
            Kind::Meter(meter) => {
                s.ac_power_w = meter.ac_power_w();
                (s.energy_produced_wh, s.energy_consumed_wh) = meter.energy_wh();
            }
            Kind::Fixed | Kind::Inputs { .. } => {}
            Kind::Profile(p) => {
                let v = |x| p.value(x).unwrap_or(0.0);
                s.ac_power_w = v(Property::ActivePower);
                s.soc = p.value(Property::Soc);
                s.energy_produced_wh = v(Property::TotalEnergyProduced);
                s.energy_consumed_wh = v(Property::TotalEnergyConsumed);
            }
        }
        s
    }
}

/// A digital input module's answer: discrete inputs `0..n` (function 2), or
/// all of them as one word in input or holding register 0.
fn read_inputs(
    bits: u16,
    n: u8,
    table: Table,
    addr: u16,
    count: u16,
) -> Result<Vec<u16>, ExceptionCode> {
    match table {
        Table::DiscreteInput => {
            if count == 0 || u32::from(addr) + u32::from(count) > u32::from(n) {
                return Err(ExceptionCode::IllegalDataAddress);
            }
            Ok((addr..addr + count).map(|i| bits >> i & 1).collect())
        }
        Table::Input | Table::Holding if addr == 0 && count == 1 => Ok(vec![bits]),
        Table::Input | Table::Holding => Err(ExceptionCode::IllegalDataAddress),
    }
}
