//! Reads of registers the agent does not poll, and writes, forwarded to the
//! device for the devices whose config allows it
//! (`modbus_server_forward_reads`, `modbus_server_forward_writes`; a write
//! to a register steering writes is refused before it gets here,
//! `dispatch.rs`). Every forwarded write is logged: client, device,
//! register, values, outcome.
//!
//! A forwarded read waits for its bus to be idle (behind every due poll and
//! every control command: `BusHandle::read_when_idle`), at most one per
//! client address at a time and four per bus; past either bound it is
//! answered 06 (server busy) at once. Its answer serves the same read again
//! for `forward_cache_ms`. Never writes; never holds a lock across an await.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use tokio_modbus::ExceptionCode;

use super::frame::Exception;
use super::peer::{Host, Peer};
use crate::config::DeviceConfig;
use crate::modbus::bus::IdleReadError;
use crate::modbus::{BusHandle, ModbusError};
use crate::model::DeviceId;
use crate::register::plan::{Span, Table};

/// Cached answers per device at most; the oldest goes first.
const CACHE_ENTRIES: usize = 64;
/// Forwarded reads in flight per client address at most.
const PER_CLIENT: usize = 1;
/// The longest a forwarded read may wait and take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

/// How forwarded reads and writes ended, for `/metrics`.
#[derive(Debug, Default)]
pub struct ForwardStats {
    /// `[answered by the device, from the cache, refused busy, failed]`.
    counts: [AtomicU64; 4],
    /// Writes: `[taken by the device, refused as steered, busy, failed]`.
    writes: [AtomicU64; 4],
}

impl ForwardStats {
    fn count(&self, i: usize) {
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a write refused because steering writes the register.
    pub fn steered_write(&self) {
        self.writes[1].fetch_add(1, Ordering::Relaxed);
    }

    /// `(result, count)` for each write result.
    pub fn writes(&self) -> [(&'static str, u64); 4] {
        let n = |i: usize| self.writes[i].load(Ordering::Relaxed);
        [
            ("device", n(0)),
            ("steered", n(1)),
            ("busy", n(2)),
            ("failed", n(3)),
        ]
    }

    /// `(result, count)` for each result.
    pub fn snapshot(&self) -> [(&'static str, u64); 4] {
        let n = |i: usize| self.counts[i].load(Ordering::Relaxed);
        [
            ("device", n(0)),
            ("cached", n(1)),
            ("busy", n(2)),
            ("failed", n(3)),
        ]
    }
}

/// Answers by the read they answer, with when they came.
type Cache = HashMap<Span, (Instant, Arc<[u16]>)>;

struct Forwarder {
    bus: BusHandle,
    unit: u8,
    reference: String,
    reads: bool,
    writes: bool,
    cache: Mutex<Cache>,
}

/// The devices whose unpolled registers are read for clients.
pub struct Forwarders {
    by_device: HashMap<DeviceId, Forwarder>,
    in_flight: Mutex<HashMap<Host, usize>>,
    ttl: Duration,
    pub stats: ForwardStats,
}

impl Forwarders {
    pub fn new(
        devices: &[DeviceConfig],
        buses: &HashMap<String, BusHandle>,
        cache_ms: u64,
    ) -> Forwarders {
        let by_device = devices
            .iter()
            .filter(|d| d.modbus_server_forward_reads || d.modbus_server_forward_writes)
            .filter_map(|d| {
                let bus = buses.get(&d.bus)?.clone();
                Some((
                    d.id,
                    Forwarder {
                        bus,
                        unit: d.unit_id,
                        reference: d.reference.clone(),
                        reads: d.modbus_server_forward_reads,
                        writes: d.modbus_server_forward_writes,
                        cache: Mutex::new(HashMap::new()),
                    },
                ))
            })
            .collect();
        Forwarders {
            by_device,
            in_flight: Mutex::new(HashMap::new()),
            ttl: Duration::from_millis(cache_ms),
            stats: ForwardStats::default(),
        }
    }

    /// Whether `id`'s unpolled registers are forwarded.
    pub fn forwards(&self, id: DeviceId) -> bool {
        self.by_device.get(&id).is_some_and(|f| f.reads)
    }

    /// Whether writes to `id` are forwarded (but to what steering writes).
    pub fn forwards_writes(&self, id: DeviceId) -> bool {
        self.by_device.get(&id).is_some_and(|f| f.writes)
    }

    /// Writes `values` from `addr` of device `id` when its bus is idle; one
    /// at a time per client address. Logged whatever the outcome; the
    /// device's cached answers are dropped.
    pub async fn write(
        &self,
        id: DeviceId,
        addr: u16,
        values: &[u16],
        client: &Peer,
    ) -> Result<(), Exception> {
        let f = self
            .by_device
            .get(&id)
            .filter(|f| f.writes)
            .ok_or(Exception::IllegalFunction)?;
        let Some(_turn) = Turn::take(&self.in_flight, client.host()) else {
            self.writes_count(2);
            return Err(Exception::ServerBusy);
        };
        let write = f.bus.write_when_idle(f.unit, addr, values.to_vec());
        let result = match tokio::time::timeout(FORWARD_TIMEOUT, write).await {
            Err(_) => Err(Exception::GatewayTargetFailed),
            Ok(Ok(())) => Ok(()),
            Ok(Err(IdleReadError::Busy)) => Err(Exception::ServerBusy),
            Ok(Err(IdleReadError::Failed(e))) => Err(exception_of(&e)),
        };
        lock(&f.cache).clear();
        self.writes_count(match result {
            Ok(()) => 0,
            Err(Exception::ServerBusy) => 2,
            Err(_) => 3,
        });
        tracing::info!(
            client = %client,
            device = %f.reference,
            register = addr,
            values = ?values,
            result = ?result,
            "Modbus server: write forwarded to the device"
        );
        result
    }

    fn writes_count(&self, i: usize) {
        self.stats.writes[i].fetch_add(1, Ordering::Relaxed);
    }

    /// `span` of device `id` as the device answers it now (or answered it
    /// within the cache time).
    pub async fn read(
        &self,
        id: DeviceId,
        span: Span,
        client: Host,
    ) -> Result<Vec<u16>, Exception> {
        let f = self
            .by_device
            .get(&id)
            .ok_or(Exception::IllegalDataAddress)?;
        let now = Instant::now();
        if let Some((at, words)) = lock(&f.cache).get(&span) {
            if now.saturating_duration_since(*at) < self.ttl {
                self.stats.count(1);
                return Ok(words.to_vec());
            }
        }
        let Some(_turn) = Turn::take(&self.in_flight, client) else {
            self.stats.count(2);
            return Err(Exception::ServerBusy);
        };
        let read = tokio::time::timeout(FORWARD_TIMEOUT, f.bus.read_when_idle(f.unit, span)).await;
        let result = match read {
            Err(_) => Err(Exception::GatewayTargetFailed),
            Ok(Ok(words)) if words.len() == usize::from(span.len) => Ok(words),
            Ok(Ok(_)) => Err(Exception::GatewayTargetFailed),
            Ok(Err(IdleReadError::Busy)) => Err(Exception::ServerBusy),
            Ok(Err(IdleReadError::Failed(e))) => Err(exception_of(&e)),
        };
        match &result {
            Ok(words) => {
                self.stats.count(0);
                if !self.ttl.is_zero() {
                    let mut cache = lock(&f.cache);
                    if cache.len() >= CACHE_ENTRIES {
                        let oldest = cache.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| *k);
                        if let Some(k) = oldest {
                            cache.remove(&k);
                        }
                    }
                    cache.insert(span, (Instant::now(), words.as_slice().into()));
                }
            }
            Err(Exception::ServerBusy) => self.stats.count(2),
            Err(_) => self.stats.count(3),
        }
        result
    }
}

/// The device's own exception passed on; no answer at all is 0x0B.
fn exception_of(e: &ModbusError) -> Exception {
    match e {
        ModbusError::Exception(ExceptionCode::IllegalFunction) => Exception::IllegalFunction,
        ModbusError::Exception(ExceptionCode::IllegalDataAddress) => Exception::IllegalDataAddress,
        ModbusError::Exception(ExceptionCode::IllegalDataValue) => Exception::IllegalDataValue,
        ModbusError::Exception(ExceptionCode::ServerDeviceBusy) => Exception::ServerBusy,
        _ => Exception::GatewayTargetFailed,
    }
}

/// A client's place among the forwarded reads in flight, given back when
/// dropped.
struct Turn<'a> {
    in_flight: &'a Mutex<HashMap<Host, usize>>,
    client: Host,
}

impl<'a> Turn<'a> {
    fn take(in_flight: &'a Mutex<HashMap<Host, usize>>, client: Host) -> Option<Turn<'a>> {
        let mut m = lock(in_flight);
        let n = m.entry(client.clone()).or_insert(0);
        if *n >= PER_CLIENT {
            return None;
        }
        *n += 1;
        Some(Turn { in_flight, client })
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut m = lock(self.in_flight);
        if let Some(n) = m.get_mut(&self.client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.client);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain maps of whole values: a poisoned lock still holds them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The table of a read request.
pub fn table(t: super::frame::ReadTable) -> Table {
    match t {
        super::frame::ReadTable::Holding => Table::Holding,
        super::frame::ReadTable::Input => Table::Input,
    }
}
