//! The server's listeners and their bounds: the clients allowed (`allow`),
//! connections at most over every listener and per client address. A client
//! past a bound is accepted and closed at once (counted), so the kernel's
//! backlog never fills with it; no task is started for it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn;
use super::dispatch::Context;
use super::stats::Refusal;

/// Binds every address; the first that cannot be bound fails, with its
/// address.
pub async fn bind(addrs: &[SocketAddr]) -> Result<Vec<TcpListener>, (SocketAddr, std::io::Error)> {
    let mut out = Vec::with_capacity(addrs.len());
    for a in addrs {
        out.push(TcpListener::bind(a).await.map_err(|e| (*a, e))?);
    }
    Ok(out)
}

/// Open connections, in all and per client address.
#[derive(Default)]
struct Open {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

/// A connection's place in [`Open`], given back when dropped.
struct Slot {
    open: Arc<Mutex<Open>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut o = lock(&self.open);
        o.total = o.total.saturating_sub(1);
        if let Some(n) = o.by_ip.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                o.by_ip.remove(&self.ip);
            }
        }
    }
}

fn lock(m: &Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    // Plain counters: a poisoned lock still holds whole numbers.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Accepts on every listener until `cancel`; returns the bound addresses.
pub fn serve(
    listeners: Vec<TcpListener>,
    ctx: Arc<Context>,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) -> std::io::Result<Vec<SocketAddr>> {
    let open = Arc::new(Mutex::new(Open::default()));
    let mut addrs = Vec::with_capacity(listeners.len());
    for listener in listeners {
        let addr = listener.local_addr()?;
        addrs.push(addr);
        tracing::info!(%addr, units = ctx.config.units.len(), "Modbus server listening");
        tracker.spawn(accept(
            listener,
            ctx.clone(),
            open.clone(),
            tracker.clone(),
            cancel.clone(),
        ));
    }
    Ok(addrs)
}

async fn accept(
    listener: TcpListener,
    ctx: Arc<Context>,
    open: Arc<Mutex<Open>>,
    tracker: TaskTracker,
    cancel: CancellationToken,
) {
    loop {
        let (stream, peer) = tokio::select! {
            () = cancel.cancelled() => return,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait a little, go on.
                    tracing::warn!(error = %e, "Modbus server: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let refusal = admit(&ctx, &open, peer.ip());
        let slot = match refusal {
            Err(why) => {
                ctx.stats.refused(why);
                tracing::debug!(client = %peer, refusal = ?why, "Modbus server: connection refused");
                drop(stream);
                continue;
            }
            Ok(slot) => slot,
        };
        ctx.stats.opened();
        let (ctx, cancel) = (ctx.clone(), cancel.clone());
        tracker.spawn(async move {
            let closed = conn::serve(stream, peer, ctx.clone(), cancel).await;
            drop(slot);
            ctx.stats.closed(closed);
        });
    }
}

/// A place for a client at `ip`, or why it gets none.
fn admit(ctx: &Context, open: &Arc<Mutex<Open>>, ip: IpAddr) -> Result<Slot, Refusal> {
    if !ctx.config.allows(ip) {
        return Err(Refusal::Address);
    }
    let mut o = lock(open);
    if o.total >= ctx.config.max_connections {
        return Err(Refusal::Full);
    }
    let mine = o.by_ip.get(&ip).copied().unwrap_or(0);
    if mine >= ctx.config.max_connections_per_client {
        return Err(Refusal::PerClient);
    }
    o.total += 1;
    *o.by_ip.entry(ip).or_insert(0) += 1;
    Ok(Slot {
        open: open.clone(),
        ip,
    })
}
