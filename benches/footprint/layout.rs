//! The simulated sites of the scale mode, and the agent's config for them.
//!
//! - `small`: the mix of the default mode scaled (half inverters, 40 %
//!   batteries, 10 % meters), each device on a TCP port of its own at unit
//!   id 1, spread over one site per meter.
//! - `commercial`: mostly inverters (69 %), batteries (15 %) and meters,
//!   behind gateways of [`UNITS_PER_GATEWAY`] unit ids each (one TCP port per
//!   gateway, as RS-485-to-TCP gateways are). A solar park of up to 200
//!   inverters, 20 batteries and its grid meter; commercial sites of about 26
//!   inverters, their batteries and a grid meter each; the meters left over
//!   are sub-meters on a site of their own (grid loop off: its meters are no
//!   grid meters).
//!
//! Every site has limits far away (100 MW) and the grid loop on where it has a
//! grid meter; steering is open to anyone (`auth = "none"`). The first site is
//! the one the bench steers.

use std::fmt::Write as _;
use std::path::Path;

/// Unit ids behind one gateway (one TCP port) in the `commercial` layout.
pub const UNITS_PER_GATEWAY: usize = 40;
/// Inverters of the park, at most.
const PARK_INVERTERS: usize = 200;
const PARK_BATTERIES: usize = 20;
/// Inverters of a commercial site, about.
const COMMERCIAL_INVERTERS: usize = 26;

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
/// its bus and unit id.
#[derive(Clone, Debug)]
pub struct Dev {
    pub reference: String,
    pub kind: &'static str,
    pub site: usize,
    pub bus: String,
    pub unit: u8,
}

/// A site: whether its grid loop runs.
#[derive(Clone, Debug)]
pub struct SiteDef {
    pub reference: String,
    pub grid_loop: bool,
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

    /// The inverters of the steered (first) site: (bus, unit id).
    pub fn steered_inverters(&self) -> Vec<(String, u8)> {
        self.devices
            .iter()
            .filter(|d| d.site == 0 && d.kind == "inverter")
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
    let mut sites = Vec::new();
    let mut add_site = |order: &mut Vec<_>, i: usize, b: usize, m: usize| {
        let s = sites.len();
        sites.push(SiteDef {
            reference: format!("ste_{s}"),
            // Meters alone are sub-meters, not a grid connection.
            grid_loop: m > 0 && i + b > 0,
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

/// The agent's config: the API on `http_port` (no auth, no rate limit), the
/// store in `dir` (size bound far away, so a day of history stays), each bus
/// on the port `port(bus)` gives (0 before the simulator runs).
pub fn config_text(plan: &Plan, dir: &Path, http_port: u16, port: &dyn Fn(&str) -> u16) -> String {
    let mut t = format!(
        "gateway_id = \"footprint\"\n[http]\nlisten = [\"127.0.0.1:{http_port}\"]\nauth = \"none\"\nrate_limit = {{ requests_per_s = 0 }}\n[storage]\npath = {:?}\nmax_size_mb = 65536\n[logging]\nlevel = \"warn\"\n",
        dir.join("sitegate.db").display().to_string()
    );
    for s in &plan.sites {
        writeln!(
            t,
            "[[sites]]\nreference = \"{}\"\nname = \"{}\"\nmax_import = \"100 MW\"\nmax_export = \"100 MW\"\ngrid_loop = {{ enabled = {} }}",
            s.reference, s.reference, s.grid_loop
        )
        .unwrap();
    }
    for b in &plan.buses {
        writeln!(
            t,
            "[[buses]]\nname = \"{b}\"\ntcp = \"127.0.0.1:{}\"",
            port(b)
        )
        .unwrap();
    }
    for d in &plan.devices {
        let extra = match d.kind {
            "inverter" => "rated_power = \"10 kW\"\n",
            "battery" => "rated_power = \"10 kW\"\ncapacity = \"20 kWh\"\n",
            _ => "",
        };
        writeln!(
            t,
            "[[devices]]\nreference = \"{}\"\nname = \"{}\"\ntype = \"{}\"\nsite = \"{}\"\nbus = \"{}\"\nunit_id = {}\npoll_interval_ms = 1000\n{extra}",
            d.reference, d.reference, d.kind, plan.sites[d.site].reference, d.bus, d.unit
        )
        .unwrap();
    }
    t
}
