//! What a request gets: a device's registers from its last poll, a site's
//! from its map, or an exception. Reads only what the registers' owners
//! published; never waits on a bus (but for a forwarded request, which
//! waits for an idle one), a lock held across an await, or the disk. Each
//! write to a device that forwards writes is one record of its site's
//! steering history, whatever its result.

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use super::forward::{self, Forwarders};
use super::frame::{self, Exception, ReadTable, Request};
use super::peer::Peer;
use super::site::Sites;
use super::stats::ServerStats;
use crate::config::{ModbusServerConfig, Served};
use crate::modbus::control::{footprint, Recipe};
use crate::modbus::{DeviceMaps, PollImage};
use crate::model::time::now_ms;
use crate::model::DeviceId;
use crate::register::plan::{Span, Table};
use crate::steering::audit::{AuditEvent, AuditKind, ForwardResult};
use crate::steering::SteeringService;
use crate::telemetry::Live;

/// Everything a connection answers from.
pub struct Context {
    pub config: ModbusServerConfig,
    pub live: Arc<Live>,
    pub maps: Arc<DeviceMaps>,
    pub sites: Sites,
    pub forward: Forwarders,
    pub stats: Arc<ServerStats>,
    /// Where forwarded writes are recorded (the device's site's history).
    pub steering: SteeringService,
}

/// The PDU answering `pdu` for `unit`, counted by its result.
pub async fn answer(ctx: &Context, unit: u8, pdu: &[u8], peer: &Peer) -> Vec<u8> {
    let function = pdu.first().copied().unwrap_or(0);
    let result = respond(ctx, unit, function, pdu, peer).await;
    ctx.stats
        .answered(result.as_ref().map(|_| ()).map_err(|e| *e));
    result.unwrap_or_else(|e| frame::exception(function, e))
}

async fn respond(
    ctx: &Context,
    unit: u8,
    function: u8,
    pdu: &[u8],
    peer: &Peer,
) -> Result<Vec<u8>, Exception> {
    // An unknown unit id is a target that is not there, whatever it asks.
    let served = ctx
        .config
        .unit(unit)
        .ok_or(Exception::GatewayTargetFailed)?;
    let request = frame::request(pdu)?;
    match (served, request) {
        (Served::Device(id), Request::Read { table, addr, count }) => {
            let words = match device_read(ctx, *id, table, addr, count) {
                Err(Exception::IllegalDataAddress) if ctx.forward.forwards(*id) => {
                    let span = Span::new(forward::table(table), addr, count);
                    ctx.forward.read(*id, span, peer.host()).await?
                }
                other => other?,
            };
            Ok(frame::read_answer(function, &words))
        }
        (Served::Device(id), Request::Write { addr, values }) => {
            if !ctx.forward.forwards_writes(*id) {
                return Err(Exception::IllegalFunction);
            }
            let (how, result) = forward_write(ctx, *id, addr, &values, peer).await;
            record_write(ctx, *id, peer, addr, &values, how, result);
            result?;
            Ok(frame::write_answer(function, addr, &values))
        }
        (Served::Site(_), Request::Read { table, addr, count }) => {
            if table != ReadTable::Holding {
                return Err(Exception::IllegalFunction);
            }
            let site = ctx.sites.get(unit).ok_or(Exception::GatewayTargetFailed)?;
            let words = site.read(addr, count)?;
            Ok(frame::read_answer(function, &words))
        }
        (Served::Site(_), Request::Write { addr, values }) => {
            let site = ctx.sites.get(unit).ok_or(Exception::GatewayTargetFailed)?;
            site.write(addr, &values, peer, &ctx.stats)?;
            Ok(frame::write_answer(function, addr, &values))
        }
    }
}

/// A write passed on to device `id`, unless steering may write a register
/// of it (02 before the bus); how it ended.
async fn forward_write(
    ctx: &Context,
    id: DeviceId,
    addr: u16,
    values: &[u16],
    peer: &Peer,
) -> (ForwardResult, Result<(), Exception>) {
    let span = Span::new(Table::Holding, addr, values.len() as u16);
    let steered = match steered(ctx, id) {
        Ok(spans) => spans.iter().any(|s| overlap(*s, span)),
        Err(e) => return (ForwardResult::Failed, Err(e)),
    };
    if steered {
        ctx.forward.stats.steered_write();
        tracing::info!(client = %peer, device = %ctx.live.config(id).reference, register = addr, values = ?values, "Modbus server: write refused, steering writes that register");
        return (ForwardResult::Steered, Err(Exception::IllegalDataAddress));
    }
    let result = ctx.forward.write(id, addr, values, peer).await;
    let how = match result {
        Ok(()) => ForwardResult::Ok,
        Err(Exception::ServerBusy) => ForwardResult::Busy,
        Err(_) => ForwardResult::Failed,
    };
    (how, result)
}

/// The forwarded write's record in its device's site's history (queued,
/// never waited for).
fn record_write(
    ctx: &Context,
    id: DeviceId,
    peer: &Peer,
    addr: u16,
    values: &[u16],
    result: ForwardResult,
    answer: Result<(), Exception>,
) {
    let device = ctx.live.config(id);
    ctx.steering.note(AuditEvent {
        site: device.site.clone(),
        at_ms: now_ms(),
        kind: AuditKind::ForwardedWrite {
            client: peer.to_string(),
            device: device.reference.clone(),
            register: addr,
            values: values.to_vec(),
            result,
            exception: answer.err().map(|e| e as u8),
        },
    });
}

/// The registers steering may write on the device: every control model
/// block whole (SunSpec 123, 124, 704, headers included) and its write
/// recipe's footprint (profiles' enable and release words too). 0x0B before
/// the device is discovered.
fn steered(ctx: &Context, id: DeviceId) -> Result<Vec<Span>, Exception> {
    let map = ctx.maps.get(id).ok_or(Exception::GatewayTargetFailed)?;
    let cfg = ctx.live.config(id);
    let mut spans: Vec<Span> = map
        .chain
        .iter()
        .filter(|b| matches!(b.id, 123 | 124 | 704))
        .map(|b| Span::new(Table::Holding, b.addr, b.len.saturating_add(2)))
        .collect();
    if let Ok(recipe) = Recipe::for_device(cfg.device_type, cfg.rated_power_w, &map) {
        // Any revert time: it decides only whether the timer registers are
        // written, and a nonzero one writes them.
        spans.extend(footprint(&recipe, 60, &map.kept_statics().image));
    }
    Ok(spans)
}

fn overlap(a: Span, b: Span) -> bool {
    a.table == b.table && u32::from(a.addr) < b.end() && u32::from(b.addr) < a.end()
}

fn device_read(
    ctx: &Context,
    id: DeviceId,
    table: ReadTable,
    addr: u16,
    count: u16,
) -> Result<Vec<u16>, Exception> {
    let (online, interval) = (
        ctx.live.inspect(id, |s| s.online),
        ctx.live.config(id).poll_interval_ms,
    );
    let max_age = Duration::from_millis(interval) * ctx.config.stale_after_polls;
    let image = ctx.maps.image(id);
    mirror(
        image.as_deref(),
        online,
        max_age,
        Instant::now(),
        table,
        addr,
        count,
    )
}

/// A read of a device's mirror: its last poll's words; 0x0B when the device
/// is offline, never polled, or its poll older than `max_age`; 02 for a
/// register the poll does not read.
pub fn mirror(
    image: Option<&PollImage>,
    online: bool,
    max_age: Duration,
    now: Instant,
    table: ReadTable,
    addr: u16,
    count: u16,
) -> Result<Vec<u16>, Exception> {
    let image = image
        .filter(|i| online && now.saturating_duration_since(i.taken) <= max_age)
        .ok_or(Exception::GatewayTargetFailed)?;
    image
        .get(forward::table(table), addr, count)
        .map(<[u16]>::to_vec)
        .ok_or(Exception::IllegalDataAddress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::register::plan::Image;

    #[test]
    fn mirror_reads_answer_what_the_poll_read_while_it_is_fresh() {
        let mut img = Image::new();
        img.insert(Span::new(Table::Holding, 100, 3), vec![1, 2, 3]);
        let t0 = Instant::now();
        let p = PollImage::build(&img, &Image::new(), &[], t0, 0);
        let age = Duration::from_secs(3);
        let read = |online, now, addr, count| {
            mirror(Some(&p), online, age, now, ReadTable::Holding, addr, count)
        };
        assert_eq!(read(true, t0, 100, 3), Ok(vec![1, 2, 3]));
        assert_eq!(read(true, t0, 101, 3), Err(Exception::IllegalDataAddress));
        assert_eq!(read(false, t0, 100, 1), Err(Exception::GatewayTargetFailed));
        assert_eq!(
            read(true, t0 + Duration::from_secs(4), 100, 1),
            Err(Exception::GatewayTargetFailed)
        );
        assert_eq!(
            mirror(Some(&p), true, age, t0, ReadTable::Input, 100, 1),
            Err(Exception::IllegalDataAddress)
        );
        assert_eq!(
            mirror(None, true, age, t0, ReadTable::Holding, 100, 1),
            Err(Exception::GatewayTargetFailed)
        );
    }
}
