//! Device I/O through a bus handle, for the tasks that are not the bus task
//! (steering's actuators): reads as a [`RegisterReader`] (each one command,
//! run ahead of the next poll request), and a write plan with its read-back.
//!
//! A write is read back as one range request (the registers written and what
//! lies between them). A device that answers that range with "illegal data
//! address" after taking every write gets the point-by-point read-back at
//! once, and its map remembers it: from then on its writes are read back
//! point by point, as a poll's refused request stays split.
//!
//! It runs plans; it must not make them (`control` does) nor check them
//! (`control::verify`).

use super::bus::{BusHandle, Op, OpOutput};
use super::control::WritePlan;
use super::device::DeviceMap;
use super::error::ModbusError;
use super::reader::RegisterReader;
use crate::register::plan::{Image, Span};

/// Reads of one device through its bus task.
pub struct BusReader<'a> {
    pub bus: &'a BusHandle,
    pub unit: u8,
}

impl RegisterReader for BusReader<'_> {
    async fn read(&mut self, span: Span) -> Result<Vec<u16>, ModbusError> {
        let out = self.bus.transact(self.unit, vec![Op::Read(span)]).await?;
        Ok(words_of(out).pop().unwrap_or_default())
    }
}

/// Runs `plan` on device `unit` (`device` names it in the log): its writes,
/// then its read-back, in one bus transaction; returns what was read back.
pub async fn write_and_read_back(
    bus: &BusHandle,
    unit: u8,
    device: &str,
    plan: &WritePlan,
    map: &DeviceMap,
) -> Result<Image, ModbusError> {
    let by_point = plan.read_back_by_point();
    let ranged = !map.reads_back_by_point() && by_point != plan.read_back;
    let spans = if ranged { &plan.read_back } else { &by_point };
    let ops: Vec<Op> = plan
        .writes
        .iter()
        .map(|w| Op::Write {
            addr: w.addr,
            values: w.values.clone(),
        })
        .chain(spans.iter().map(|s| Op::Read(*s)))
        .collect();
    let done = bus.transact_partial(unit, ops).await?;
    match done.error {
        None => Ok(image(spans, words_of(done.out))),
        // Every write was taken; the device refused the range.
        Some(e) if ranged && e.is_illegal_address() && done.out.len() >= plan.writes.len() => {
            tracing::warn!(
                device,
                range = ?plan.read_back,
                by_point = ?by_point,
                "device refused the read-back of a write as one range (illegal data address): reading it back point by point from now on"
            );
            map.learn_read_back_by_point();
            let reads = by_point.iter().map(|s| Op::Read(*s)).collect();
            let out = bus.transact(unit, reads).await?;
            Ok(image(&by_point, words_of(out)))
        }
        Some(e) => Err(e),
    }
}

/// The words of each read of a transaction, in order.
pub fn words_of(out: Vec<OpOutput>) -> Vec<Vec<u16>> {
    out.into_iter()
        .filter_map(|o| match o {
            OpOutput::Words(w) => Some(w),
            OpOutput::Written => None,
        })
        .collect()
}

/// The reads of `spans` (in order) as an image.
fn image(spans: &[Span], reads: Vec<Vec<u16>>) -> Image {
    let mut img = Image::new();
    for (span, words) in spans.iter().zip(reads) {
        img.insert(*span, words);
    }
    img
}
