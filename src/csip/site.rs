//! The site as the CSIP-AUS client reports it: one DER made of every
//! inverter and battery of the site (CACTUS's MUL procedures read one
//! EndDevice with one DER), its ratings, what it measures now, and the
//! connection point's meter. Read from the live state into plain data
//! (`snapshot`); from there, pure: the DER resources (`capability`,
//! `settings`, `status`) and the quantities each mirror reports.

use crate::csip::resource::der::{connect, der_type, modes, Capability, Settings, Status};
use crate::csip::resource::mirror::{Quantity, Sample};
use crate::model::Property;
use crate::steering::inputs::SiteDevices;
use crate::telemetry::Live;

/// What one mirror measures now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    pub w: Option<f64>,
    pub var: Option<f64>,
    pub v: [Option<f64>; 3],
    pub hz: Option<f64>,
}

/// The site's DER and meter, now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteSnapshot {
    pub pv_rated_w: f64,
    pub battery_rated_w: f64,
    pub max_charge_w: f64,
    pub max_discharge_w: f64,
    pub capacity_wh: Option<f64>,
    pub inverters: usize,
    pub batteries: usize,
    pub online: usize,
    /// The site's meter (+ import).
    pub meter: Measured,
    /// The DER, + production and discharge.
    pub der: Measured,
    /// Capacity-weighted state of charge, %.
    pub soc_pct: Option<f64>,
    /// Energy the batteries hold, Wh.
    pub stored_wh: Option<f64>,
}

impl SiteSnapshot {
    /// The DER's `setMaxW`: its inverters' and batteries' ratings.
    pub fn set_max_w(&self) -> f64 {
        self.pv_rated_w + self.battery_rated_w
    }

    pub fn has_storage(&self) -> bool {
        self.batteries > 0
    }
}

fn sum(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.fold(None, |acc, v| match (acc, v) {
        (None, v) => v,
        (Some(a), Some(b)) => Some(a + b),
        (a, None) => a,
    })
}

/// The site's snapshot from the live state.
pub fn snapshot(live: &Live, devices: &SiteDevices) -> SiteSnapshot {
    let read = |id, p: Property| {
        live.inspect(id, |s| {
            s.online
                .then(|| s.reading(p).map(|r| r.value).filter(|v| v.is_finite()))
                .flatten()
        })
    };
    let measured = |ids: &[crate::model::DeviceId]| Measured {
        w: sum(ids.iter().map(|id| read(*id, Property::ActivePower))),
        var: sum(ids.iter().map(|id| read(*id, Property::ReactivePower))),
        v: [
            Property::VoltageL1,
            Property::VoltageL2,
            Property::VoltageL3,
        ]
        .map(|p| ids.iter().find_map(|id| read(*id, p))),
        hz: ids.iter().find_map(|id| read(*id, Property::Frequency)),
    };
    let der_ids: Vec<_> = devices
        .inverters
        .iter()
        .chain(&devices.batteries)
        .copied()
        .collect();
    let mut s = SiteSnapshot {
        inverters: devices.inverters.len(),
        batteries: devices.batteries.len(),
        meter: measured(&devices.meters),
        der: measured(&der_ids),
        ..SiteSnapshot::default()
    };
    for id in &devices.inverters {
        let cfg = live.config(*id);
        let info = live.inspect(*id, |d| d.info.rated_power_w);
        s.pv_rated_w += cfg.rated_power_w.or(info).unwrap_or(0.0);
    }
    let (mut soc_wh, mut cap_wh) = (0.0, 0.0);
    for id in &devices.batteries {
        let cfg = live.config(*id);
        let view = live.inspect(*id, |d| crate::steering::inputs::battery_view(&cfg, d));
        s.battery_rated_w += view.rated_w;
        s.max_charge_w += cfg.max_charge_power_w.unwrap_or(view.rated_w);
        s.max_discharge_w += cfg.max_discharge_power_w.unwrap_or(view.rated_w);
        if let (Some(c), Some(soc)) = (view.capacity_wh, read(*id, Property::Soc)) {
            cap_wh += c;
            soc_wh += c * soc / 100.0;
        }
        s.capacity_wh = match (s.capacity_wh, view.capacity_wh) {
            (a, None) => a,
            (None, b) => b,
            (Some(a), Some(b)) => Some(a + b),
        };
    }
    if cap_wh > 0.0 {
        s.soc_pct = Some(100.0 * soc_wh / cap_wh);
        s.stored_wh = Some(soc_wh);
    }
    s.online = der_ids
        .iter()
        .filter(|id| live.inspect(**id, |d| d.online))
        .count();
    s
}

/// DERCapability: what the DER can do.
pub fn capability(s: &SiteSnapshot, storage_extension: bool) -> Capability {
    let storage = s.has_storage();
    let mut m = modes::CONNECT | modes::ENERGIZE | modes::MAX_LIM_W;
    if storage {
        m |= modes::CHARGE | modes::DISCHARGE;
    }
    Capability {
        modes_supported: m,
        doe_modes_supported: modes::DOE_ALL,
        vpp_modes_supported: (storage && storage_extension).then_some(modes::VPP_STORAGE_TARGET),
        der_type: der_type(s.inverters > 0, storage),
        max_w: s.set_max_w(),
        // The devices report no apparent-power rating: their active one.
        max_va: Some(s.set_max_w()),
        max_charge_w: storage.then_some(s.max_charge_w),
        max_discharge_w: storage.then_some(s.max_discharge_w),
        max_wh: s.capacity_wh.filter(|_| storage),
    }
}

/// DERSettings: the limits in force, with the ramp the utility set.
pub fn settings(
    s: &SiteSnapshot,
    set_grad_w: u16,
    storage_extension: bool,
    now_s: i64,
) -> Settings {
    let c = capability(s, storage_extension);
    Settings {
        modes_enabled: c.modes_supported,
        doe_modes_enabled: c.doe_modes_supported,
        vpp_modes_enabled: c.vpp_modes_supported,
        set_grad_w,
        max_w: c.max_w,
        max_va: c.max_va,
        max_charge_w: c.max_charge_w,
        max_discharge_w: c.max_discharge_w,
        max_wh: c.max_wh,
        updated_s: now_s,
    }
}

/// What the utility's controls do to the DER now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// A disconnect holds: the DER is held at 0 W (sitegate has no
    /// contactor of its own; it reports the DER disconnected meanwhile).
    pub disconnected: bool,
    /// A de-energize holds: the DER does not operate.
    pub deenergized: bool,
}

/// DERStatus: connected, available and operating while any of the DER's
/// devices answers and no control holds it off.
pub fn status(s: &SiteSnapshot, held: Held, now_s: i64) -> Status {
    let any = s.online > 0;
    let mut bits = 0;
    if any {
        bits |= connect::AVAILABLE;
        if !held.disconnected {
            bits |= connect::CONNECTED;
        }
        if !held.disconnected && !held.deenergized {
            bits |= connect::OPERATING;
        }
    }
    let operating = bits & connect::OPERATING != 0;
    Status {
        gen_connect: bits,
        operational_mode: if operating { 2 } else { 1 },
        soc_pct: s.soc_pct,
        storage_mode: s.has_storage().then(|| match s.der.w {
            Some(w) if w < -1.0 => 0,
            Some(w) if w > 1.0 => 1,
            _ => 2,
        }),
        stor_connect: s
            .has_storage()
            .then_some(bits & (connect::CONNECTED | connect::AVAILABLE | connect::OPERATING)),
        reading_s: now_s,
    }
}

/// The quantities a mirror reports now: the meter's for the site, the
/// DER's (and its stored energy) for the DER.
pub fn samples(m: &Measured, stored_wh: Option<f64>) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut push = |q: Quantity, v: Option<f64>| {
        if let Some(value) = v {
            out.push(Sample { quantity: q, value });
        }
    };
    push(Quantity::ActivePower, m.w);
    push(Quantity::ReactivePower, m.var);
    for (i, v) in m.v.iter().enumerate() {
        push(Quantity::Voltage(i as u8 + 1), *v);
    }
    push(Quantity::Frequency, m.hz);
    push(Quantity::StoredEnergy, stored_wh);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> SiteSnapshot {
        SiteSnapshot {
            pv_rated_w: 10_000.0,
            battery_rated_w: 5_000.0,
            max_charge_w: 5_000.0,
            max_discharge_w: 5_000.0,
            capacity_wh: Some(10_000.0),
            inverters: 1,
            batteries: 1,
            online: 2,
            der: Measured {
                w: Some(-2_000.0),
                ..Measured::default()
            },
            soc_pct: Some(40.0),
            stored_wh: Some(4_000.0),
            ..SiteSnapshot::default()
        }
    }

    #[test]
    fn the_der_is_connected_and_operating_unless_a_control_holds_it_off() {
        let s = site();
        let st = status(&s, Held::default(), 1);
        assert_eq!(st.gen_connect, 0b111);
        assert_eq!((st.operational_mode, st.storage_mode), (2, Some(0)));
        let off = status(
            &s,
            Held {
                disconnected: true,
                deenergized: false,
            },
            1,
        );
        assert_eq!(off.gen_connect, connect::AVAILABLE);
        assert_eq!(off.operational_mode, 1);
        let dark = status(
            &s,
            Held {
                disconnected: false,
                deenergized: true,
            },
            1,
        );
        assert_eq!(dark.gen_connect, connect::AVAILABLE | connect::CONNECTED);
        let none = status(&SiteSnapshot { online: 0, ..s }, Held::default(), 1);
        assert_eq!((none.gen_connect, none.operational_mode), (0, 1));
    }

    #[test]
    fn ratings_add_up_over_the_devices_and_storage_modes_follow_the_batteries() {
        let c = capability(&site(), true);
        assert_eq!(c.max_w, 15_000.0);
        assert_eq!(c.der_type, 83);
        assert_eq!(c.vpp_modes_supported, Some(modes::VPP_STORAGE_TARGET));
        assert_ne!(c.modes_supported & modes::CHARGE, 0);
        let pv = SiteSnapshot {
            batteries: 0,
            battery_rated_w: 0.0,
            ..site()
        };
        let c = capability(&pv, true);
        assert_eq!(
            (c.der_type, c.vpp_modes_supported, c.max_wh),
            (4, None, None)
        );
        assert_eq!(settings(&site(), 27, false, 5).set_grad_w, 27);
    }
}
