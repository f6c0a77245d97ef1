//! Modbus requests to simulated devices: the tokio-modbus `Service` one TCP
//! server runs per connection, dispatching by unit id.
//!
//! Functions 3 and 4 read the same registers, 6 and 16 write; everything else is
//! IllegalFunction. An unknown unit id answers GatewayTargetDevice (0x0B) rather
//! than staying silent, so a client never waits for a timeout. Every request
//! gets the server's next sequence number, and every write is reported on the
//! write-event channel with it, accepted or not, so tests can tell in which
//! order reads and writes arrived. Tests may also hold read requests (the
//! client then waits, as on a slow device) until released. No sockets here.

use std::collections::BTreeMap;
use std::future::{ready, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::time::Instant;

use tokio::sync::{broadcast, watch};
use tokio_modbus::{ExceptionCode, Request, Response, SlaveRequest};

use super::device::{lock, DeviceCell};
use super::WriteEvent;
use crate::register::plan::Table;

/// What all connections of one server share.
pub struct ServerShared {
    pub name: String,
    pub devices: BTreeMap<u8, DeviceCell>,
    pub events: broadcast::Sender<WriteEvent>,
    /// Requests handled so far; the next one gets this number.
    requests: AtomicU64,
    /// True while read requests are held (see [`ServerShared::hold_reads`]).
    hold: watch::Sender<bool>,
    /// Read requests waiting for the hold to end.
    held: AtomicUsize,
}

impl ServerShared {
    pub fn new(
        name: String,
        devices: BTreeMap<u8, DeviceCell>,
        events: broadcast::Sender<WriteEvent>,
    ) -> ServerShared {
        ServerShared {
            name,
            devices,
            events,
            requests: AtomicU64::new(0),
            hold: watch::Sender::new(false),
            held: AtomicUsize::new(0),
        }
    }

    /// Requests handled so far (reads, writes and refused ones alike).
    pub fn request_count(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// While `on`, read requests that reach a TCP connection wait (unanswered,
    /// not yet handled) until the hold ends; writes are answered as usual.
    pub fn hold_reads(&self, on: bool) {
        self.hold.send_replace(on);
    }

    /// Read requests waiting for the hold to end.
    pub fn held_reads(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Waits until reads are no longer held.
    async fn released(&self) {
        /// Counts one waiting request for as long as it waits (also when its
        /// connection drops it).
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let mut rx = self.hold.subscribe();
        self.held.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.held);
        // The sender lives as long as `self`: `wait_for` cannot fail here.
        let _ = rx.wait_for(|holding| !*holding).await;
    }

    /// Answers one request.
    pub fn handle(&self, req: SlaveRequest<'_>) -> Result<Response, ExceptionCode> {
        let seq = self.requests.fetch_add(1, Ordering::SeqCst);
        let unit = req.slave;
        let device = self.devices.get(&unit);
        match req.request {
            Request::ReadHoldingRegisters(addr, count) => {
                let words = lock(device.ok_or(ExceptionCode::GatewayTargetDevice)?).read(
                    Table::Holding,
                    addr,
                    count,
                )?;
                Ok(Response::ReadHoldingRegisters(words))
            }
            Request::ReadInputRegisters(addr, count) => {
                let words = lock(device.ok_or(ExceptionCode::GatewayTargetDevice)?).read(
                    Table::Input,
                    addr,
                    count,
                )?;
                Ok(Response::ReadInputRegisters(words))
            }
            Request::ReadDiscreteInputs(addr, count) => {
                let words = lock(device.ok_or(ExceptionCode::GatewayTargetDevice)?).read(
                    Table::DiscreteInput,
                    addr,
                    count,
                )?;
                Ok(Response::ReadDiscreteInputs(
                    words.into_iter().map(|w| w != 0).collect(),
                ))
            }
            Request::WriteSingleRegister(addr, value) => {
                self.write(seq, unit, device, addr, &[value])?;
                Ok(Response::WriteSingleRegister(addr, value))
            }
            Request::WriteMultipleRegisters(addr, values) => {
                self.write(seq, unit, device, addr, &values)?;
                let count =
                    u16::try_from(values.len()).map_err(|_| ExceptionCode::IllegalDataValue)?;
                Ok(Response::WriteMultipleRegisters(addr, count))
            }
            _ => Err(ExceptionCode::IllegalFunction),
        }
    }

    fn write(
        &self,
        seq: u64,
        unit: u8,
        device: Option<&DeviceCell>,
        addr: u16,
        values: &[u16],
    ) -> Result<(), ExceptionCode> {
        let at = Instant::now();
        let result = match device {
            Some(cell) => lock(cell).write(addr, values, at),
            None => Err(ExceptionCode::GatewayTargetDevice),
        };
        tracing::debug!(
            server = %self.name,
            unit,
            addr,
            count = values.len(),
            exception = ?result.as_ref().err(),
            "simulated write"
        );
        // Nobody listening is fine: the channel only feeds tests and the demo.
        let _ = self.events.send(WriteEvent {
            server: self.name.clone(),
            seq,
            unit_id: unit,
            address: addr,
            values: values.to_vec(),
            at,
            exception: result.as_ref().err().copied(),
        });
        result
    }
}

/// One connection's view of its server.
pub struct Session {
    pub shared: Arc<ServerShared>,
}

impl tokio_modbus::server::Service for Session {
    type Request = SlaveRequest<'static>;
    type Response = Response;
    type Exception = ExceptionCode;
    type Future = Pin<Box<dyn Future<Output = Result<Response, ExceptionCode>> + Send>>;

    fn call(&self, req: Self::Request) -> Self::Future {
        let is_read = matches!(
            req.request,
            Request::ReadHoldingRegisters(..)
                | Request::ReadInputRegisters(..)
                | Request::ReadDiscreteInputs(..)
        );
        if is_read && *self.shared.hold.borrow() {
            let shared = Arc::clone(&self.shared);
            return Box::pin(async move {
                shared.released().await;
                shared.handle(req)
            });
        }
        Box::pin(ready(self.shared.handle(req)))
    }
}
