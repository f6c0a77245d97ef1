//! The simulated sites of the scale mode, and the agent's config for them.
//!
//! - `small`: the mix of the default mode scaled (half inverters, 40 %
//!   batteries, 10 % meters), each device on a TCP port of its own at unit
//!   id 1, spread over one site per meter.
//! - `commercial`: mostly inverters (69 %), batteries (15 %) and meters,
//!   behind gateways of [`UNITS_PER_GATEWAY`] unit ids each (one TCP port per
//!   gateway, as RS-485-to-TCP gateways are). A solar park of up to 200
//!   inverters of 25 kW, 20 batteries and its grid meter, behind an export
//!   limit of a fifth of its inverters' rating (1 MW at 200) with a load of
//!   a twenty-fifth (200 kW): at the bench's late morning it makes far more
//!   than it may export, so the limit binds and the grid loop holds it;
//!   commercial sites of about 26 inverters of 10 kW, their batteries and a
//!   grid meter each, with loads of 15 to 47 % of their rating, an export
//!   limit of 70 % of it (binding on the sites with the smaller loads) and an
//!   import limit of 2.5 times the load; the meters left over are sub-meters
//!   on a site of their own (grid loop off: its meters are no grid meters).
//!   The bench steers the first commercial site (the park when there is
//!   none), so the park's writes are the grid loop's alone.
//!
//! `small` sites have limits far away (100 MW) and a load of 5 kW. The grid
//! loop is on where a site has a grid meter; steering is open to anyone
//! (`auth = "none"`). Each site is a simulated site of its own
//! (`[simulator.sites.<ref>]`: its load; its meter balances only its
//! devices), noisy unless the bench runs `--calm`.

use std::path::Path;

use toml::Value;

use crate::steering_support::{kw, table, TestSite};

/// Unit ids behind one gateway (one TCP port) in the `commercial` layout.
pub const UNITS_PER_GATEWAY: usize = 40;
/// Inverters of the park, at most.
const PARK_INVERTERS: usize = 200;
const PARK_BATTERIES: usize = 20;
/// Inverters of a commercial site, about.
const COMMERCIAL_INVERTERS: usize = 26;
/// Ratings of the park's inverters and of every other inverter and battery.
const PARK_INVERTER_W: f64 = 25_000.0;
const RATED_W: f64 = 10_000.0;
/// Limits far away.
const FAR_W: f64 = 100e6;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Layout {
    Small,
    Commercial,
}

impl Layout {
    pub fn parse(s: &str) -> Layout {
        match s {
            "small" => Layout::Small,
            "commercial" => Layout::Commercial,
            other => panic!("unknown layout {other:?} (small, commercial)"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Layout::Small => "small",
            Layout::Commercial => "commercial",
        }
    }
}

/// One device: its kind (`inverter`, `battery`, `meter`), its site (index),
/// its bus and unit id, its rating (W; 0 for meters).
#[derive(Clone, Debug)]
pub struct Dev {
    pub reference: String,
    pub kind: &'static str,
    pub site: usize,
    pub bus: String,
    pub unit: u8,
    pub rated_w: f64,
}

/// A site: whether its grid loop runs, its limits and its simulated load (W).
#[derive(Clone, Debug)]
pub struct SiteDef {
    pub reference: String,
    pub grid_loop: bool,
    pub max_import_w: f64,
    pub max_export_w: f64,
    pub base_load_w: f64,
    /// The solar park of the commercial layout.
    pub park: bool,
}

/// Everything a layout is made of.
#[derive(Clone, Debug)]
pub struct Plan {
    pub sites: Vec<SiteDef>,
    pub buses: Vec<String>,
    pub devices: Vec<Dev>,
}

impl Plan {
    pub fn new(layout: Layout, n: usize) -> Plan {
        match layout {
            Layout::Small => small(n),
            Layout::Commercial => commercial(n),
        }
    }

    /// The site the bench steers: the first that is not the park and has
    /// inverters, else the first.
    pub fn steered_site(&self) -> usize {
        (0..self.sites.len())
            .find(|&s| {
                !self.sites[s].park
                    && self
                        .devices
                        .iter()
                        .any(|d| d.site == s && d.kind == "inverter")
            })
            .unwrap_or(0)
    }

    /// The inverters of the steered site: (bus, unit id).
    pub fn steered_inverters(&self) -> Vec<(String, u8)> {
        let site = self.steered_site();
        self.devices
            .iter()
            .filter(|d| d.site == site && d.kind == "inverter")
            .map(|d| (d.bus.clone(), d.unit))
            .collect()
    }

    /// `(inverters, batteries, meters)`.
    pub fn counts(&self) -> (usize, usize, usize) {
        let count = |k| self.devices.iter().filter(|d| d.kind == k).count();
        (count("inverter"), count("battery"), count("meter"))
    }
}

/// (inverters, batteries, meters) of `n` devices in the given shares.
fn split(n: usize, inverters: f64, batteries: f64) -> (usize, usize, usize) {
    let inv = ((n as f64 * inverters).round() as usize).min(n);
    let bat = ((n as f64 * batteries).round() as usize).min(n - inv);
    (inv, bat, n - inv - bat)
}

fn small(n: usize) -> Plan {
    let (inv, bat, met) = split(n, 0.5, 0.4);
    let met = met.max(1);
    let sites = (0..met)
        .map(|s| SiteDef {
            reference: format!("ste_{s}"),
            grid_loop: true,
            max_import_w: FAR_W,
            max_export_w: FAR_W,
            base_load_w: 5_000.0,
            park: false,
        })
        .collect();
    let mut devices = Vec::new();
    let mut buses = Vec::new();
    for (kind, count) in [("inverter", inv), ("battery", bat), ("meter", met)] {
        for i in 0..count {
            let bus = format!("{kind}{i}");
            devices.push(Dev {
                reference: format!("dvc_{bus}"),
                kind,
                site: devices.len() % met,
                bus: bus.clone(),
                unit: 1,
                rated_w: if kind == "meter" { 0.0 } else { RATED_W },
            });
            buses.push(bus);
        }
    }
    // Meters go to their own sites (meter i: site i), so each site has one.
    for d in devices.iter_mut().filter(|d| d.kind == "meter") {
        d.site = d.bus[5..].parse().unwrap();
    }
    Plan {
        sites,
        buses,
        devices,
    }
}

fn commercial(n: usize) -> Plan {
    let (mut inv, mut bat, mut met) = split(n, 0.694, 0.153);
    // (site, kind) in the order the gateways take them.
    let mut order: Vec<(usize, &'static str)> = Vec::new();
    let mut sites: Vec<SiteDef> = Vec::new();
    let mut add_site = |order: &mut Vec<_>, i: usize, b: usize, m: usize| {
        let s = sites.len();
        let park = s == 0;
        let rated = i as f64 * if park { PARK_INVERTER_W } else { RATED_W };
        // Meters alone are sub-meters, not a grid connection.
        let grid_loop = m > 0 && i + b > 0;
        let (max_import_w, max_export_w, base_load_w) = if !grid_loop {
            (FAR_W, FAR_W, 50_000.0)
        } else if park {
            (0.4 * rated, 0.2 * rated, rated / 25.0)
        } else {
            let load = rated * (0.15 + 0.08 * (s % 5) as f64);
            (2.5 * load, 0.7 * rated, load)
        };
        sites.push(SiteDef {
            reference: format!("ste_{s}"),
            grid_loop,
            max_import_w,
            max_export_w,
            base_load_w,
            park,
        });
        order.extend(std::iter::repeat_n((s, "inverter"), i));
        order.extend(std::iter::repeat_n((s, "battery"), b));
        order.extend(std::iter::repeat_n((s, "meter"), m));
    };
    // The park.
    let (pi, pb, pm) = (inv.min(PARK_INVERTERS), bat.min(PARK_BATTERIES), met.min(1));
    add_site(&mut order, pi, pb, pm);
    (inv, bat, met) = (inv - pi, bat - pb, met - pm);
    // Commercial sites share the rest of the inverters and batteries.
    let count = inv.div_ceil(COMMERCIAL_INVERTERS).max(usize::from(bat > 0));
    for c in 0..count {
        let share = |total: usize| total / count + usize::from(c < total % count);
        let m = met.min(1);
        add_site(&mut order, share(inv), share(bat), m);
        met -= m;
    }
    // Sub-meters.
    if met > 0 {
        add_site(&mut order, 0, 0, met);
    }
    let devices: Vec<Dev> = order
        .into_iter()
        .enumerate()
        .map(|(i, (site, kind))| Dev {
            reference: format!("dvc_{i:04}"),
            kind,
            site,
            bus: format!("gw{}", i / UNITS_PER_GATEWAY),
            unit: (i % UNITS_PER_GATEWAY + 1) as u8,
            rated_w: match kind {
                "meter" => 0.0,
                "inverter" if site == 0 => PARK_INVERTER_W,
                _ => RATED_W,
            },
        })
        .collect();
    let buses = (0..n.div_ceil(UNITS_PER_GATEWAY))
        .map(|g| format!("gw{g}"))
        .collect();
    Plan {
        sites,
        buses,
        devices,
    }
}

/// The agent's config as a [`TestSite`]: the API on `http_port` (no auth,
/// no rate limit), the store in `dir` under a size bound of `max_size_mb`
/// (far away by default, so a day of history stays), each bus on loopback
/// (pointed at the simulator with [`TestSite::pointed_at`]); the
/// `[simulator]` section with each site's load, noisy unless `calm`.
pub fn test_site(
    plan: &Plan,
    dir: &Path,
    http_port: u16,
    calm: bool,
    max_size_mb: u64,
) -> TestSite {
    let first = &plan.sites[0].reference;
    let mut site = TestSite::bare(first, first)
        .gateway_id("footprint")
        .http_key(
            "listen",
            Value::Array(vec![format!("127.0.0.1:{http_port}").into()]),
        )
        .http_key("rate_limit", table([("requests_per_s", 0.into())]))
        .storage_path(&dir.join("sitegate.db"))
        .section_key(&["storage"], "max_size_mb", max_size_mb as i64)
        .section_key(&["logging"], "level", "warn")
        .poll_interval_ms(1000)
        .simulator(&[], "noisy", !calm);
    for s in &plan.sites {
        site = site
            .site(&s.reference, &s.reference)
            .site_key("max_import", kw(s.max_import_w / 1000.0))
            .site_key("max_export", kw(s.max_export_w / 1000.0))
            .site_key("grid_loop", table([("enabled", s.grid_loop.into())]))
            .base_load_kw(s.base_load_w / 1000.0);
    }
    for d in &plan.devices {
        let (bus, reference, rated) = (&d.bus, &d.reference, d.rated_w / 1000.0);
        site = site.site(&plan.sites[d.site].reference, "");
        site = match d.kind {
            "inverter" => site.inverter(bus, reference, rated),
            "battery" => site.battery(bus, reference, rated, 20.0),
            _ => site.meter(bus, reference),
        }
        .unit_id(d.unit);
    }
    for b in &plan.buses {
        site = site.bus(b);
    }
    site
}
