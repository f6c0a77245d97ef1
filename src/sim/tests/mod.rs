//! Tests of the simulated site: register layouts, and the site over real sockets
//! with tokio-modbus's client, as the agent will see it.

mod control;
mod layout;
mod lifecycle;
mod noisy;

use std::net::SocketAddr;
use std::time::Duration;

use sunspec::{Group, Point, Value};
use tokio_modbus::client::{Context, Reader, Writer};
use tokio_modbus::{ExceptionCode, Slave};

use super::{SimDeviceSpec, SimKind, SimServerSpec, SimSite, SimSiteSpec};
use crate::register::codec::{self, Absent, ValueType, WordOrder};

/// 2024-06-27T12:00:00Z.
pub const NOON: i64 = 1_719_489_600_000;
pub const HOUR: i64 = 3_600_000;

pub const INVERTER: u8 = 1;
pub const BATTERY: u8 = 2;
pub const METER: u8 = 3;

pub fn inverter(unit_id: u8) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind: SimKind::Inverter { rated_w: 10_000.0 },
        serial: format!("INV-{unit_id}"),
        refuse_writes: false,
        sunspec_base: crate::sim::DEFAULT_SUNSPEC_BASE,
        response: crate::sim::SimResponse::IDEAL,
    }
}

pub fn battery(unit_id: u8, initial_soc: f64) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind: SimKind::Battery {
            rated_w: 5_000.0,
            capacity_wh: 10_000.0,
            initial_soc,
            soc_min: 10.0,
            soc_max: 90.0,
        },
        serial: format!("BAT-{unit_id}"),
        refuse_writes: false,
        sunspec_base: crate::sim::DEFAULT_SUNSPEC_BASE,
        response: crate::sim::SimResponse::IDEAL,
    }
}

pub fn meter(unit_id: u8) -> SimDeviceSpec {
    SimDeviceSpec {
        unit_id,
        kind: SimKind::Meter,
        serial: format!("MTR-{unit_id}"),
        refuse_writes: false,
        sunspec_base: crate::sim::DEFAULT_SUNSPEC_BASE,
        response: crate::sim::SimResponse::IDEAL,
    }
}

/// One server "sim" on an ephemeral loopback port.
pub fn site_spec(devices: Vec<SimDeviceSpec>, start: i64, time_factor: f64) -> SimSiteSpec {
    SimSiteSpec {
        servers: vec![SimServerSpec {
            name: "sim".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            devices,
        }],
        time_factor,
        start: Some(start),
        base_load_w: 600.0,
        ..SimSiteSpec::default()
    }
}

/// Inverter 1, battery 2 (SoC 50 %), meter 3.
pub async fn standard_site(start: i64, time_factor: f64) -> SimSite {
    let devices = vec![inverter(INVERTER), battery(BATTERY, 50.0), meter(METER)];
    SimSite::start(site_spec(devices, start, time_factor))
        .await
        .unwrap()
}

/// Waits for a few physics steps.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(350)).await;
}

const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// A Modbus TCP client on one unit id; transport errors and timeouts fail the test.
pub struct Peer {
    ctx: Context,
}

impl Peer {
    pub async fn connect(addr: SocketAddr, unit: u8) -> Peer {
        let ctx = tokio_modbus::client::tcp::connect_slave(addr, Slave(unit))
            .await
            .unwrap();
        Peer { ctx }
    }

    pub async fn read(&mut self, addr: u16, count: u16) -> Result<Vec<u16>, ExceptionCode> {
        let call = self.ctx.read_holding_registers(addr, count);
        tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .unwrap()
            .unwrap()
    }

    /// A read whose transport failure is the expected outcome.
    pub async fn try_read(&mut self, addr: u16, count: u16) -> tokio_modbus::Result<Vec<u16>> {
        let call = self.ctx.read_holding_registers(addr, count);
        tokio::time::timeout(CALL_TIMEOUT, call).await.unwrap()
    }

    pub async fn read_input(&mut self, addr: u16, count: u16) -> Result<Vec<u16>, ExceptionCode> {
        let call = self.ctx.read_input_registers(addr, count);
        tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .unwrap()
            .unwrap()
    }

    pub async fn write(&mut self, addr: u16, values: &[u16]) -> Result<(), ExceptionCode> {
        let call = self.ctx.write_multiple_registers(addr, values);
        tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .unwrap()
            .unwrap()
    }

    pub async fn write1(&mut self, addr: u16, value: u16) -> Result<(), ExceptionCode> {
        let call = self.ctx.write_single_register(addr, value);
        tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .unwrap()
            .unwrap()
    }

    /// Walks the SunSpec chain from 40000: (model id, address of its ID, L).
    pub async fn chain(&mut self) -> Vec<(u16, u16, u16)> {
        assert_eq!(self.read(40000, 2).await, Ok(vec![0x5375, 0x6E53]), "SunS");
        let mut models = Vec::new();
        let mut addr = 40002u16;
        loop {
            let id = self.read(addr, 1).await.unwrap()[0];
            if id == 0xFFFF {
                assert_eq!(self.read(addr + 1, 1).await, Ok(vec![0]), "end L");
                return models;
            }
            let len = self.read(addr + 1, 1).await.unwrap()[0];
            models.push((id, addr, len));
            addr += 2 + len;
            assert!(models.len() < 20, "runaway chain");
        }
    }

    /// Where a model's data starts and its data, read in chunks of 125.
    pub async fn model(&mut self, id: u16) -> (u16, Vec<u16>) {
        let (_, addr, len) = self
            .chain()
            .await
            .into_iter()
            .find(|m| m.0 == id)
            .unwrap_or_else(|| panic!("model {id} missing"));
        let data = addr + 2;
        let mut words = Vec::new();
        while words.len() < usize::from(len) {
            let at = data + words.len() as u16;
            let n = (len - words.len() as u16).min(125);
            words.extend(self.read(at, n).await.unwrap());
        }
        (data, words)
    }
}

/// A point's raw value with SunSpec "not implemented" handling.
pub fn raw<M: Group, T: Value>(data: &[u16], p: &Point<M, T>, ty: ValueType) -> Option<f64> {
    let words = &data[usize::from(p.offset)..];
    codec::decode(words, ty, WordOrder::HighFirst, Absent::SunspecNumber)
}

/// A point's value with its scale factor applied, as a client computes it.
pub fn scaled<M: Group, T: Value, S: Value>(
    data: &[u16],
    p: &Point<M, T>,
    ty: ValueType,
    sf: &Point<M, S>,
) -> Option<f64> {
    let sf = codec::decode_sf(data[usize::from(sf.offset)])?;
    Some(codec::apply_sf(raw(data, p, ty)?, sf))
}

pub fn approx(actual: f64, expected: f64, tolerance: f64) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "{actual} is not within {tolerance} of {expected}"
    );
}
