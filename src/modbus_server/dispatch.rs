//! What a request gets: a device's registers from its last poll (inside a
//! SunSpec device's models, every register: `models.rs`), a site's from
//! its map, or an exception. Reads only what the registers' owners
//! published; never waits on a bus (but for a forwarded request, which
//! waits for an idle one), a lock held across an await, or the disk. Each
//! write to a device that forwards writes is one record of its site's
//! steering history, whatever its result.

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use super::forward::{self, Forwarders};
use super::frame::{self, Exception, ReadTable, Request};
use super::models;
use super::peer::Peer;
use super::site::Sites;
use super::stats::ServerStats;
use crate::config::{ModbusServerConfig, Served};
use crate::metrics::{Collect, Encoder, Kind};
use crate::modbus::control::{footprint, Recipe};
use crate::modbus::sunspec::ModelBlock;
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

/// The server's counters and its forwarders' for `/metrics`.
impl Collect for Context {
    fn collect(&self, out: &mut Encoder) {
        self.stats.collect(out);
        let mut forwarded = out.family(
            "sitegate_modbus_server_forwarded_reads_total",
            Kind::Counter,
            "Reads of registers the agent does not poll, forwarded to the device, by result (device: answered by it; cached; busy: past a bound, answered 06; failed).",
        );
        for (result, n) in self.forward.stats.snapshot() {
            forwarded.sample(&[("result", result)], n as f64);
        }
        let mut writes = out.family(
            "sitegate_modbus_server_forwarded_writes_total",
            Kind::Counter,
            "Writes passed on to a device, by result (device: taken by it; steered: refused, steering writes the register; busy; failed).",
        );
        for (result, n) in self.forward.stats.writes() {
            writes.sample(&[("result", result)], n as f64);
        }
    }
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
            // A device that forwards reads has its unread registers read
            // from it; one that does not answers them inside its models.
            let inside = !ctx.forward.forwards(*id);
            let words = match device_read(ctx, *id, table, addr, count, inside) {
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
    inside: bool,
) -> Result<Vec<u16>, Exception> {
    let (online, interval) = (
        ctx.live.inspect(id, |s| s.online),
        ctx.live.config(id).poll_interval_ms,
    );
    let max_age = Duration::from_millis(interval) * ctx.config.stale_after_polls;
    let image = ctx.maps.image(id);
    let image = fresh(image.as_deref(), online, max_age, Instant::now())?;
    if let Some(words) = image.get(forward::table(table), addr, count) {
        return Ok(words.to_vec());
    }
    // Only a read the poll does not hold looks at the map.
    let map = inside.then(|| ctx.maps.get(id)).flatten();
    let chain = map.as_ref().map_or(&[][..], |m| &m.chain[..]);
    mirror(image, chain, table, addr, count)
}

/// A device's last poll while it is fresh; 0x0B when the device is
/// offline, never polled, or its poll older than `max_age`.
pub fn fresh(
    image: Option<&PollImage>,
    online: bool,
    max_age: Duration,
    now: Instant,
) -> Result<&PollImage, Exception> {
    image
        .filter(|i| online && now.saturating_duration_since(i.taken) <= max_age)
        .ok_or(Exception::GatewayTargetFailed)
}

/// A read of a device's mirror: its last poll's words, and for holding
/// registers inside the models of `chain` (a SunSpec device's; empty for
/// none) every other register's "not implemented" word (`models.rs`); 02
/// for a register outside them the poll does not read.
pub fn mirror(
    image: &PollImage,
    chain: &[ModelBlock],
    table: ReadTable,
    addr: u16,
    count: u16,
) -> Result<Vec<u16>, Exception> {
    if let Some(words) = image.get(forward::table(table), addr, count) {
        return Ok(words.to_vec());
    }
    if table != ReadTable::Holding {
        return Err(Exception::IllegalDataAddress);
    }
    models::read(image, chain, addr, count).ok_or(Exception::IllegalDataAddress)
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
        let read = |addr, count| mirror(&p, &[], ReadTable::Holding, addr, count);
        assert_eq!(read(100, 3), Ok(vec![1, 2, 3]));
        assert_eq!(read(101, 3), Err(Exception::IllegalDataAddress));
        assert!(fresh(Some(&p), true, age, t0).is_ok());
        assert_eq!(
            fresh(Some(&p), false, age, t0).err(),
            Some(Exception::GatewayTargetFailed)
        );
        assert_eq!(
            fresh(Some(&p), true, age, t0 + Duration::from_secs(4)).err(),
            Some(Exception::GatewayTargetFailed)
        );
        assert_eq!(
            mirror(&p, &[], ReadTable::Input, 100, 1),
            Err(Exception::IllegalDataAddress)
        );
        assert_eq!(
            fresh(None, true, age, t0).err(),
            Some(Exception::GatewayTargetFailed)
        );
    }

    #[test]
    fn inside_a_model_every_register_answers_outside_none() {
        let chain = [ModelBlock {
            id: 123,
            addr: 40002,
            len: 24,
        }];
        let mut img = Image::new();
        img.insert(Span::new(Table::Holding, 40007, 1), vec![10000]);
        let p = PollImage::build(&img, &Image::new(), &chain, Instant::now(), 0);
        let read =
            |chain: &[ModelBlock], addr, count| mirror(&p, chain, ReadTable::Holding, addr, count);
        assert_eq!(
            read(&chain, 40006, 3),
            Ok(vec![0xFFFF, 10000, 0xFFFF]),
            "Conn, WMaxLimPct as polled, WMaxLimPct_WinTms"
        );
        // The last two registers of the model: sunssf.
        assert_eq!(read(&chain, 40026, 2), Ok(vec![0x8000, 0x8000]));
        // Without the chain (a device that forwards its reads), or as input
        // registers, or past the end marker: 02.
        assert_eq!(read(&[], 40006, 3), Err(Exception::IllegalDataAddress));
        assert_eq!(
            mirror(&p, &chain, ReadTable::Input, 40006, 1),
            Err(Exception::IllegalDataAddress)
        );
        assert_eq!(read(&chain, 40028, 3), Err(Exception::IllegalDataAddress));
    }
}
