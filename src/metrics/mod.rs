//! Prometheus metrics: the text encoder, an atomic histogram, and a registry of
//! collectors that the agent renders on `GET /metrics`.
//!
//! Each layer keeps its own counters as plain atomics next to the code that
//! counts (`modbus::stats`, `store::stats`, ...) and implements [`Collect`] to
//! name and describe them; this module knows no layer. Collecting only reads
//! atomics or takes short locks: it must never do I/O or block.

mod histogram;
mod process;
mod text;

use std::sync::{Arc, RwLock};

pub use histogram::{Histogram, HistogramSnapshot, LATENCY_BUCKETS};
pub use process::ProcessCollector;
pub use text::{Encoder, Kind, CONTENT_TYPE};

/// Something that reports metrics when scraped.
pub trait Collect: Send + Sync {
    fn collect(&self, out: &mut Encoder);
}

impl<F: Fn(&mut Encoder) + Send + Sync> Collect for F {
    fn collect(&self, out: &mut Encoder) {
        self(out)
    }
}

/// Every collector of one agent. Cheap to clone; collectors may be added after
/// the HTTP router exists (the MQTT uplink starts after it).
#[derive(Clone, Default)]
pub struct Registry {
    collectors: Arc<RwLock<Vec<Arc<dyn Collect>>>>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&self, collector: Arc<dyn Collect>) {
        // A poisoned lock only means a panic while pushing an Arc; the Vec is whole.
        self.collectors
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(collector);
    }

    /// The text exposition of every collector's metrics.
    pub fn render(&self) -> String {
        let collectors = self
            .collectors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut out = Encoder::new();
        for c in collectors {
            c.collect(&mut out);
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectors_added_later_are_rendered() {
        let r = Registry::new();
        r.register(Arc::new(|out: &mut Encoder| {
            out.family("a_total", Kind::Counter, "A.").sample(&[], 1.0);
        }));
        let r2 = r.clone();
        r2.register(Arc::new(|out: &mut Encoder| {
            out.family("b", Kind::Gauge, "B.").sample(&[], 2.0);
        }));
        let text = r.render();
        assert!(text.contains("a_total 1\n"), "{text}");
        assert!(text.contains("b 2\n"), "{text}");
    }
}
