//! A SunSpec inverter laid out as the official model definitions lay one out,
//! like the devices of a real farm: models 1 (L = 66), 103 or 113, 120, 121
//! and 123, one after the other from 40000, then the end marker. The
//! simulator serves it word for word through its register-map device (holes
//! readable, the image poked over it), whose profile makes model 123's limit
//! registers writable; no physics: a test pokes what the device shows.

use std::sync::Arc;

use ::sunspec::models::{
    model1::Model1 as M1, model103::Model103 as M103, model113::Model113 as M113,
    model120::Model120 as M120, model121::Model121 as M121, model123::Model123 as M123,
};
use ::sunspec::{Group, Point, Value};
use sitegate::modbus::sunspec::ModelBlock;
use sitegate::profile::{self, Profile};
use sitegate::register::plan::Table;
use sitegate::sim::{SimDeviceHandle, SimKind};

/// The measurement model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Measurements {
    /// 103: integer with scale factors.
    Int,
    /// 113: float32.
    Float,
}

/// The image and where its models are.
pub struct FarmInverter {
    pub blocks: Vec<ModelBlock>,
    /// Registers from 40000 ("SunS") to the end marker.
    pub words: Vec<u16>,
}

pub const BASE: u16 = 40000;
/// `WMax` (121) and `WRtg` (120), W.
pub const RATED_W: u16 = 25_000;

impl FarmInverter {
    /// Producing 12 kW at 230.5 V and 50 Hz, limit 100 % and off.
    pub fn new(m: Measurements) -> FarmInverter {
        let meas = match m {
            Measurements::Int => (103, 50),
            Measurements::Float => (113, 60),
        };
        let mut blocks = Vec::new();
        let mut addr = BASE + 2;
        for (id, len) in [(1, 66), meas, (120, 26), (121, 30), (123, 24)] {
            blocks.push(ModelBlock { id, addr, len });
            addr += 2 + len;
        }
        let end = usize::from(addr - BASE);
        let mut f = FarmInverter {
            blocks,
            words: vec![0; end + 2],
        };
        f.words[..2].copy_from_slice(&[0x5375, 0x6E53]);
        f.words[end] = 0xFFFF;
        for b in f.blocks.clone() {
            let at = usize::from(b.addr - BASE);
            f.words[at] = b.id;
            f.words[at + 1] = b.len;
        }
        f.text(1, &M1::MN, "Farm");
        f.text(1, &M1::MD, "FARM-INV-25");
        f.text(1, &M1::SN, "F0001");
        f.set(1, &M1::DA, &[1]);
        match m {
            Measurements::Int => {
                f.set(103, &M103::A_SF, &[(-2i16) as u16]);
                for p in [&M103::APH_A, &M103::APH_B, &M103::APH_C] {
                    f.set(103, p, &[1735]);
                }
                f.set(103, &M103::V_SF, &[(-1i16) as u16]);
                for p in [&M103::PH_VPH_A, &M103::PH_VPH_B, &M103::PH_VPH_C] {
                    f.set(103, p, &[2305]);
                }
                f.set(103, &M103::W, &[12_000]);
                f.set(103, &M103::HZ, &[5000]);
                f.set(103, &M103::HZ_SF, &[(-2i16) as u16]);
                f.set(103, &M103::WH, &[0, 54_321]);
                f.set(103, &M103::TMP_CAB, &[355]);
                f.set(103, &M103::TMP_SF, &[(-1i16) as u16]);
                f.set(103, &M103::ST, &[4]);
            }
            Measurements::Float => {
                let float = |v: f32| {
                    let b = v.to_bits();
                    [(b >> 16) as u16, b as u16]
                };
                for p in [&M113::APH_A, &M113::APH_B, &M113::APH_C] {
                    f.set(113, p, &float(17.35));
                }
                for p in [&M113::PH_VPH_A, &M113::PH_VPH_B, &M113::PH_VPH_C] {
                    f.set(113, p, &float(230.5));
                }
                f.set(113, &M113::W, &float(12_000.0));
                f.set(113, &M113::HZ, &float(50.0));
                f.set(113, &M113::WH, &float(54_321.0));
                f.set(113, &M113::TMP_CAB, &float(35.5));
                f.set(113, &M113::ST, &[4]);
            }
        }
        f.set(120, &M120::DER_TYP, &[4]);
        f.set(120, &M120::W_RTG, &[RATED_W]);
        f.set(120, &M120::WH_RTG, &[0xFFFF]);
        f.set(120, &M120::WH_RTG_SF, &[0x8000]);
        f.set(121, &M121::W_MAX, &[RATED_W]);
        f.set(123, &M123::CONN, &[1]);
        f.set(123, &M123::W_MAX_LIM_PCT, &[10_000]);
        f.set(123, &M123::W_MAX_LIM_PCT_SF, &[(-2i16) as u16]);
        f
    }

    pub fn block(&self, id: u16) -> ModelBlock {
        *self
            .blocks
            .iter()
            .find(|b| b.id == id)
            .expect("model in the image")
    }

    /// The address of point `p` of model `id`.
    pub fn addr<G: Group, T: Value>(&self, id: u16, p: &Point<G, T>) -> u16 {
        self.block(id).point(p.offset)
    }

    /// Sets the words of point `p` of model `id`.
    pub fn set<G: Group, T: Value>(&mut self, id: u16, p: &Point<G, T>, words: &[u16]) {
        assert_eq!(words.len(), usize::from(p.length), "point length");
        let at = usize::from(self.addr(id, p) - BASE);
        self.words[at..at + words.len()].copy_from_slice(words);
    }

    fn text<G: Group, T: Value>(&mut self, id: u16, p: &Point<G, T>, s: &str) {
        let mut bytes = s.as_bytes().to_vec();
        bytes.resize(usize::from(p.length) * 2, 0);
        let words: Vec<u16> = bytes
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        self.set(id, p, &words);
    }

    /// The simulator's device for it: a register-map device whose profile
    /// names a point at 40000 and model 123's limit, revert time and enable
    /// registers as its control (so they take writes); [`FarmInverter::lay`]
    /// then puts the image over it.
    pub fn sim_kind(&self) -> SimKind {
        let (pct, tms, ena) = (
            self.addr(123, &M123::W_MAX_LIM_PCT),
            self.addr(123, &M123::W_MAX_LIM_PCT_RVRT_TMS),
            self.addr(123, &M123::W_MAX_LIM_ENA),
        );
        let text = format!(
            r#"
manufacturer = "Farm"
model = "SunSpec image"
[[points]]
property = "operatingState"
register = {BASE}
type = "u16"
[controls.production_limit]
register = {pct}
type = "u16"
unit = "%"
revert_timeout = {{ register = {tms}, type = "u16", unit = "s" }}
enable = [{{ register = {ena}, value = 1 }}]
release = [{{ register = {ena}, value = 0 }}]
"#
        );
        let profile: Arc<Profile> =
            Arc::new(profile::parse("farm", "test", &text).expect("the farm's profile"));
        SimKind::Profile {
            profile,
            readable_gaps: true,
        }
    }

    /// Lays the whole image over the simulated device.
    pub fn lay(&self, dev: &SimDeviceHandle) {
        assert!(
            dev.poke(Table::Holding, BASE, &self.words),
            "a profile device"
        );
    }

    /// Pokes point `p` of model `id` on the device (and in this image).
    pub fn poke<G: Group, T: Value>(
        &mut self,
        dev: &SimDeviceHandle,
        id: u16,
        p: &Point<G, T>,
        words: &[u16],
    ) {
        self.set(id, p, words);
        assert!(dev.poke(Table::Holding, self.addr(id, p), words));
    }
}
