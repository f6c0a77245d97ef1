//! A simulated non-SunSpec device built from a register-map profile: every
//! point's registers hold a plausible value encoded the way the profile says it
//! is decoded (scale, unit, word order, sign flag, negation), the
//! identification register (`[identify]`) holds what `scan` looks for, and
//! every control register accepts writes and starts as the profile's release
//! leaves it (the device in its own control). A family's device is its first
//! variant unless the profile given is already one member's; the registers
//! that tell the variant hold what that member shows. Tests can also lay a documented
//! register image over it word for word ([`ProfileDevice::poke`]).
//!
//! Registers the profile does not name answer "illegal data address" unless
//! `readable_gaps` is set (then holes between named registers read 0, as on
//! devices whose whole map is readable). Holding and input registers are two
//! separate tables. No physics: values change only through [`ProfileDevice::set`],
//! writes, and the device's own timer: a storage control with `on_timeout`
//! sets those words itself once its revert time (the `revert_timeout`
//! register's value, or `after_s`) has passed without a write, in real time
//! like the SunSpec devices' timers. Power limits a release frees start at
//! [`SIM_RATED_W`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::time::Instant;

use tokio_modbus::ExceptionCode;

use super::common::RevertTimer;
use crate::modbus::control::{ess_release_writes, release_writes, RegWrite};
use crate::modbus::sunspec::layout::map::{MAX_READ, MAX_WRITE};
use crate::model::Property;
use crate::profile::{EssSetpoint, Profile};
use crate::register::codec;
use crate::register::plan::Table;
use crate::register::point::{PointSpec, Scale};

/// The scale factor a `scale_factor` register holds in the simulation.
const SIM_SF: i16 = -1;

/// The rated power of a simulated profile battery: what its free power limits
/// hold as delivered.
pub const SIM_RATED_W: f64 = 5000.0;

pub struct ProfileDevice {
    profile: Arc<Profile>,
    holding: BTreeMap<u16, u16>,
    input: BTreeMap<u16, u16>,
    /// Empty: profiles read registers only (their points refuse discrete inputs).
    discrete: BTreeMap<u16, u16>,
    writable: BTreeSet<u16>,
    readable_gaps: bool,
    values: BTreeMap<Property, f64>,
    /// The device's own timer for `on_timeout`.
    revert: RevertTimer,
    /// Seconds the device's own timer takes instead of the profile's (an
    /// installer's menu setting, or a test that cannot wait a minute).
    own_timeout_s: Option<f64>,
}

/// What the simulated device shows before anyone sets a value.
pub fn default_value(p: Property) -> f64 {
    use Property as P;
    match p {
        P::ActivePower => 1500.0,
        P::ReactivePower => 0.0,
        P::Soc => 55.5,
        P::StateOfHealth => 98.0,
        P::TotalEnergyProduced => 1_234_500.0,
        P::TotalEnergyConsumed => 1_345_600.0,
        P::MaxChargePower | P::MaxDischargePower => 5000.0,
        P::ActivePowerLimit => 100.0,
        P::Frequency => 50.0,
        P::VoltageL1 | P::VoltageL2 | P::VoltageL3 => 230.0,
        P::CurrentL1 | P::CurrentL2 | P::CurrentL3 => 6.5,
        P::Temperature => 24.5,
        P::OperatingState => 2.0,
    }
}

impl ProfileDevice {
    pub fn build(profile: Arc<Profile>, readable_gaps: bool) -> ProfileDevice {
        let profile = match profile.variants.first() {
            Some(first) => match profile.with_variant(&first.name) {
                Ok(member) => Arc::new(member),
                Err(e) => {
                    tracing::warn!(error = %e, "simulated profile family without a usable member");
                    profile
                }
            },
            None => profile,
        };
        let mut d = ProfileDevice {
            profile,
            holding: BTreeMap::new(),
            input: BTreeMap::new(),
            discrete: BTreeMap::new(),
            writable: BTreeSet::new(),
            readable_gaps,
            values: BTreeMap::new(),
            revert: RevertTimer::default(),
            own_timeout_s: None,
        };
        for w in control_registers(&d.profile) {
            for (i, _) in w.values.iter().enumerate() {
                let addr = w.addr.wrapping_add(i as u16);
                d.writable.insert(addr);
                d.holding.entry(addr).or_insert(0);
            }
        }
        // As delivered: in its own control, as the profile's release leaves it.
        let controls = &d.profile.controls;
        let mut release: Vec<RegWrite> = Vec::new();
        if let Some(e) = &controls.ess_power {
            match ess_release_writes(e, Some(SIM_RATED_W)) {
                Ok(w) => release.extend(w),
                Err(e) => tracing::warn!(error = %e, "simulated profile release"),
            }
        }
        if let Some(l) = &controls.production_limit {
            release.extend(release_writes(&l.release));
        }
        for f in release {
            for (i, w) in f.values.iter().enumerate() {
                d.holding.insert(f.addr.wrapping_add(i as u16), *w);
            }
        }
        if let Some(id) = d.profile.identify.clone() {
            let span = id.span();
            for (i, w) in id.example().into_iter().enumerate() {
                d.table(span.table)
                    .insert(span.addr.wrapping_add(i as u16), w);
            }
        }
        let told = d.profile.variant.iter().flat_map(|v| v.when.clone());
        for c in told.collect::<Vec<_>>() {
            let span = c.span();
            for (i, w) in c.example_words().into_iter().enumerate() {
                d.table(span.table)
                    .insert(span.addr.wrapping_add(i as u16), w);
            }
        }
        let props: BTreeSet<Property> = d.profile.points.iter().map(|p| p.property).collect();
        for p in props {
            d.set(p, default_value(p));
        }
        d
    }

    /// The value a property shows (in the vocabulary's unit and sign).
    pub fn value(&self, p: Property) -> Option<f64> {
        self.values.get(&p).copied()
    }

    /// Shows `value` for `property` in every point that maps it.
    pub fn set(&mut self, property: Property, value: f64) {
        self.values.insert(property, value);
        let points: Vec<PointSpec> = self
            .profile
            .points
            .iter()
            .filter(|p| p.property == property)
            .copied()
            .collect();
        for p in points {
            self.encode(&p, value);
        }
    }

    fn table(&mut self, t: Table) -> &mut BTreeMap<u16, u16> {
        match t {
            Table::Holding => &mut self.holding,
            Table::Input => &mut self.input,
            Table::DiscreteInput => &mut self.discrete,
        }
    }

    /// The raw number that shows `v` through the point's scale.
    fn scaled_raw(&mut self, p: &PointSpec, v: f64) -> f64 {
        match p.scale {
            Scale::One => v,
            Scale::Factor(f) => v / f,
            Scale::SunspecSf(addr) => {
                self.holding.insert(addr, SIM_SF as u16);
                codec::unapply_sf(v, i32::from(SIM_SF))
            }
        }
    }

    fn encode(&mut self, p: &PointSpec, value: f64) {
        let mut v = if p.negate { -value } else { value };
        if let Some(of) = p.sign_of {
            // The other register shows the sign (−1 or +1), the point a magnitude.
            let word = if v < 0.0 { (-1i16) as u16 } else { 1 };
            self.table(of.table).insert(of.addr, word);
        }
        if let Some(flag) = p.sign {
            let reg = self.table(flag.table).entry(flag.addr).or_insert(0);
            if v < 0.0 {
                *reg |= flag.mask;
            } else {
                *reg &= !flag.mask;
            }
        }
        if p.sign.is_some() || p.sign_of.is_some() {
            v = v.abs();
        }
        if let Some(m) = p.minus {
            // Two magnitudes: the point holds what is positive, the other
            // register what is negative.
            let other = self.scaled_raw(p, (-v).max(0.0));
            v = v.max(0.0);
            if let Ok(words) = codec::encode(other, p.ty, p.order) {
                let table = self.table(m.table);
                for (i, w) in words.into_iter().enumerate() {
                    table.insert(m.addr.wrapping_add(i as u16), w);
                }
            }
        }
        let raw = self.scaled_raw(p, v);
        match codec::encode(raw, p.ty, p.order) {
            Ok(words) => {
                let table = self.table(p.table);
                for (i, w) in words.into_iter().enumerate() {
                    table.insert(p.addr.wrapping_add(i as u16), w);
                }
            }
            Err(e) => {
                tracing::warn!(addr = p.addr, error = %e, "simulated profile value does not fit")
            }
        }
    }

    /// Lays raw words into a table from `addr` on (a register image taken
    /// from a vendor document), creating the registers where needed. The
    /// values shown through [`ProfileDevice::value`] are then stale.
    pub fn poke(&mut self, t: Table, addr: u16, words: &[u16]) {
        let table = self.table(t);
        for (i, w) in words.iter().enumerate() {
            table.insert(addr.wrapping_add(i as u16), *w);
        }
    }

    /// Holding registers from `addr` on, up to `count` or the first one the
    /// device does not have.
    pub fn peek_holding(&self, addr: u16, count: u16) -> Vec<u16> {
        (0..count)
            .map_while(|i| self.holding.get(&addr.checked_add(i)?).copied())
            .collect()
    }

    /// A Modbus read of `count` registers of one table.
    pub fn read(&self, t: Table, addr: u16, count: u16) -> Result<Vec<u16>, ExceptionCode> {
        if count == 0 || count > MAX_READ {
            return Err(ExceptionCode::IllegalDataValue);
        }
        let table = match t {
            Table::Holding => &self.holding,
            Table::Input => &self.input,
            Table::DiscreteInput => &self.discrete,
        };
        let lo = table.keys().next().copied();
        let hi = table.keys().next_back().copied();
        (0..count)
            .map(|i| {
                let a = addr
                    .checked_add(i)
                    .ok_or(ExceptionCode::IllegalDataAddress)?;
                match table.get(&a) {
                    Some(w) => Ok(*w),
                    None if self.readable_gaps && lo <= Some(a) && Some(a) <= hi => Ok(0),
                    None => Err(ExceptionCode::IllegalDataAddress),
                }
            })
            .collect()
    }

    /// Makes the device's own timer (`on_timeout`) run out `seconds` after
    /// the last write, whatever its profile or revert register says.
    pub fn set_own_timeout(&mut self, seconds: f64) {
        self.own_timeout_s = Some(seconds);
    }

    /// The storage control's own timer: once its time has passed since the
    /// last accepted write, the device sets its `on_timeout` words.
    pub fn check_revert(&mut self, now: Instant) {
        let Some(e) = self.profile.controls.ess_power.clone() else {
            return;
        };
        let Some(t) = &e.on_timeout else { return };
        let seconds = match (self.own_timeout_s, e.revert_timeout, t.after_s) {
            (Some(s), _, _) => s,
            (None, Some(r), _) => {
                let words = self.peek_holding(r.addr, r.ty.words());
                codec::decode(&words, r.ty, r.order, codec::Absent::Never)
                    .map_or(0.0, |v| v * f64::from(r.seconds_per_unit))
            }
            (None, None, Some(s)) => f64::from(s),
            (None, None, None) => 0.0,
        };
        if self.revert.fire(now, seconds) {
            tracing::info!(seconds, "simulated profile device: its own timer ran out");
            for f in &t.writes {
                for (i, w) in f.values.iter().enumerate() {
                    self.holding.insert(f.addr.wrapping_add(i as u16), *w);
                }
            }
        }
    }

    /// A Modbus write: every register must be a control register.
    pub fn write(&mut self, addr: u16, values: &[u16], at: Instant) -> Result<(), ExceptionCode> {
        if values.is_empty() || values.len() > usize::from(MAX_WRITE) {
            return Err(ExceptionCode::IllegalDataValue);
        }
        let addrs: Vec<u16> = (0..values.len())
            .map(|i| addr.checked_add(i as u16))
            .collect::<Option<_>>()
            .ok_or(ExceptionCode::IllegalDataAddress)?;
        if !addrs.iter().all(|a| self.writable.contains(a)) {
            return Err(ExceptionCode::IllegalDataAddress);
        }
        for (a, v) in addrs.into_iter().zip(values) {
            self.holding.insert(a, *v);
        }
        self.revert.touch(at);
        Ok(())
    }
}

/// Every register a profile's controls may write, as writes of zeros.
fn control_registers(p: &Profile) -> Vec<RegWrite> {
    let zeros = |addr: u16, n: u16| RegWrite {
        addr,
        values: vec![0; usize::from(n)],
    };
    let mut out = Vec::new();
    if let Some(e) = &p.controls.ess_power {
        match e.setpoint {
            EssSetpoint::Signed { register, .. } | EssSetpoint::Magnitude { register } => {
                out.push(zeros(register.addr, register.ty.words()));
            }
            EssSetpoint::Split { charge, discharge } => {
                out.push(zeros(charge.addr, charge.ty.words()));
                out.push(zeros(discharge.addr, discharge.ty.words()));
            }
        }
        if let Some(d) = e.direction {
            out.push(zeros(d.addr, 1));
        }
        if let Some(l) = e.limits {
            out.push(zeros(l.charge.addr, l.charge.ty.words()));
            out.push(zeros(l.discharge.addr, l.discharge.ty.words()));
        }
        if let Some(r) = e.revert_timeout {
            out.push(zeros(r.addr, r.ty.words()));
        }
        out.extend(
            e.enable
                .iter()
                .chain(&e.release)
                .map(|f| zeros(f.addr, f.values.len() as u16)),
        );
    }
    if let Some(l) = &p.controls.production_limit {
        out.push(zeros(l.register.addr, l.register.ty.words()));
        if let Some(r) = l.revert_timeout {
            out.push(zeros(r.addr, r.ty.words()));
        }
        out.extend(
            l.enable
                .iter()
                .chain(&l.release)
                .map(|f| zeros(f.addr, f.values.len() as u16)),
        );
    }
    out
}
