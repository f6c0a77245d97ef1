//! What the scale mode counts at the simulator and in the agent's database
//! for its Modbus and audit figures: write requests and registers per device
//! (`SimDeviceHandle::write_count`), requests every server answered, polls
//! (`sitegate_bus_polls_total` of `/metrics`, every bus and result), the steering audit's pages
//! (`dbstat`), and the figures of a run between two counts.

use std::path::Path;
use tokio::time::Instant;

use sitegate::sim::SimSite;

use super::layout::Plan;
use super::procfs::audit_bytes;

/// What the simulator and the agent counted at one moment: write requests
/// and registers written per device (plan order), requests answered, polls
/// (`/metrics`), the audit's bytes, the scrape's size.
pub struct Counts {
    pub writes: Vec<(u64, u64)>,
    pub requests: u64,
    pub polls: u64,
    pub audit: u64,
    pub scrape: usize,
    pub at: Instant,
}

impl Counts {
    /// Counts now; `metrics` is a `/metrics` scrape of the agent.
    pub fn now(plan: &Plan, sim: &SimSite, db: &Path, metrics: String) -> Counts {
        let polls = metrics
            .lines()
            .filter(|l| l.starts_with("sitegate_bus_polls_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64;
        Counts {
            writes: plan
                .devices
                .iter()
                .map(|d| sim.device(&d.bus, d.unit).unwrap().write_count())
                .collect(),
            requests: plan
                .buses
                .iter()
                .map(|b| sim.request_count(b).unwrap())
                .sum(),
            polls,
            audit: audit_bytes(db),
            scrape: metrics.len(),
            at: Instant::now(),
        }
    }
}

/// The run's Modbus and audit figures (see the module's comment).
pub struct Modbus {
    /// Writes per device per hour off the steered site: mean, the most.
    pub writes_h: (f64, f64),
    /// The device off the steered site with the most writes: its
    /// reference, kind and site.
    pub most_writes: Option<String>,
    /// Off the steered site and the park, per kind of device that was
    /// written: the kind, writes per device per hour (mean, the most).
    pub by_kind: Vec<(&'static str, f64, f64)>,
    /// The park's inverters: writes per inverter per hour (mean, the most)
    /// and registers written per inverter per hour (mean).
    pub park_h: Option<(f64, f64, f64)>,
    /// The park is the steered site (the layout has no other with
    /// inverters): its writes include the bench's POSTs.
    pub park_steered: bool,
    pub requests_per_poll: f64,
    pub reads_per_poll: f64,
    pub audit_b_h: f64,
    pub scrape_bytes: usize,
}

/// The run's Modbus and audit figures between two counts.
pub fn modbus_figures(plan: &Plan, a: &Counts, b: &Counts) -> Modbus {
    let hours = b.at.duration_since(a.at).as_secs_f64() / 3600.0;
    let steered = plan.steered_site();
    let per_h = |i: usize| {
        (
            (b.writes[i].0 - a.writes[i].0) as f64 / hours,
            (b.writes[i].1 - a.writes[i].1) as f64 / hours,
        )
    };
    let off: Vec<f64> = (0..plan.devices.len())
        .filter(|&i| plan.devices[i].site != steered)
        .map(|i| per_h(i).0)
        .collect();
    let park: Vec<(f64, f64)> = (0..plan.devices.len())
        .filter(|&i| plan.sites[plan.devices[i].site].park && plan.devices[i].kind == "inverter")
        .map(per_h)
        .collect();
    let most_writes = (0..plan.devices.len())
        .filter(|&i| plan.devices[i].site != steered)
        .max_by(|&x, &y| per_h(x).0.total_cmp(&per_h(y).0))
        .map(|i| {
            let d = &plan.devices[i];
            format!(
                "{} ({}, {})",
                d.reference, d.kind, plan.sites[d.site].reference
            )
        });
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let most = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let writes: u64 = (0..plan.devices.len())
        .map(|i| b.writes[i].0 - a.writes[i].0)
        .sum();
    let polls = b.polls.saturating_sub(a.polls).max(1) as f64;
    let requests = b.requests.saturating_sub(a.requests);
    let mut by_kind = Vec::new();
    for kind in ["inverter", "battery"] {
        let w: Vec<f64> = (0..plan.devices.len())
            .filter(|&i| {
                let d = &plan.devices[i];
                d.site != steered && !plan.sites[d.site].park && d.kind == kind
            })
            .map(|i| per_h(i).0)
            .collect();
        if w.iter().any(|&x| x > 0.0) {
            by_kind.push((kind, mean(&w), most(&w)));
        }
    }
    let park_w: Vec<f64> = park.iter().map(|p| p.0).collect();
    let park_r: Vec<f64> = park.iter().map(|p| p.1).collect();
    Modbus {
        writes_h: (mean(&off), most(&off)),
        most_writes,
        by_kind,
        park_h: (!park.is_empty()).then(|| (mean(&park_w), most(&park_w), mean(&park_r))),
        park_steered: plan.sites[steered].park,
        requests_per_poll: requests as f64 / polls,
        reads_per_poll: requests.saturating_sub(writes) as f64 / polls,
        audit_b_h: b.audit.saturating_sub(a.audit) as f64 / hours,
        scrape_bytes: b.scrape,
    }
}
