//! Modbus requests to simulated devices: the tokio-modbus `Service` one TCP
//! server runs per connection, dispatching by unit id.
//!
//! Functions 3 and 4 read the same registers, 6 and 16 write; everything else is
//! IllegalFunction. An unknown unit id answers GatewayTargetDevice (0x0B) rather
//! than staying silent, so a client never waits for a timeout. Every write is
//! reported on the write-event channel, accepted or not. No sockets here.

use std::collections::BTreeMap;
use std::future::{ready, Ready};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::broadcast;
use tokio_modbus::{ExceptionCode, Request, Response, SlaveRequest};

use super::device::{lock, DeviceCell};
use super::WriteEvent;
use crate::modbus::plan::Table;

/// What all connections of one server share.
pub struct ServerShared {
    pub name: String,
    pub devices: BTreeMap<u8, DeviceCell>,
    pub events: broadcast::Sender<WriteEvent>,
}

impl ServerShared {
    /// Answers one request.
    pub fn handle(&self, req: SlaveRequest<'_>) -> Result<Response, ExceptionCode> {
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
            Request::WriteSingleRegister(addr, value) => {
                self.write(unit, device, addr, &[value])?;
                Ok(Response::WriteSingleRegister(addr, value))
            }
            Request::WriteMultipleRegisters(addr, values) => {
                self.write(unit, device, addr, &values)?;
                let count =
                    u16::try_from(values.len()).map_err(|_| ExceptionCode::IllegalDataValue)?;
                Ok(Response::WriteMultipleRegisters(addr, count))
            }
            _ => Err(ExceptionCode::IllegalFunction),
        }
    }

    fn write(
        &self,
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
    type Future = Ready<Result<Response, ExceptionCode>>;

    fn call(&self, req: Self::Request) -> Self::Future {
        ready(self.shared.handle(req))
    }
}
