//! The site as one SunSpec device: the register map the server answers for a
//! site's unit id (`docs/modbus-server.md`, "The site device").
//!
//! At 40000: the marker, then Common (1), an aggregate inverter (103: the
//! sum of production), its nameplate (120: the rated production), immediate
//! controls (123: the production limit in force), the grid meter (203), a
//! storage aggregate (802: power, SoC weighted by capacity), the steering
//! state in vendor model [`VENDOR_ID`], and the end marker. Laid out with the
//! SunSpec layouts the simulator uses too (`modbus::sunspec::layout`), so
//! each model is laid out once in the crate.
//!
//! Pure: facts in, registers out. It reads no device and no clock.

use sunspec::models::model103::Model103;
use sunspec::models::model123::Model123;
use sunspec::models::model203::Model203;
use sunspec::models::model802::Model802;

use crate::register::codec::ValueType::{I16, U16, U32};
use sunspec::{Group, Point, Value};

use crate::modbus::sunspec::layout::{
    self as layouts, BatteryRating, Block, MapBuilder, RegisterMap,
};

/// Where the map starts.
pub const BASE: u16 = 40000;
/// The vendor model with the steering state.
pub const VENDOR_ID: u16 = 64001;
/// Its length (`L`).
pub const VENDOR_LEN: u16 = 16;
/// A 32-bit point with nothing to say.
pub const NONE_U32: u32 = u32::MAX;

/// The vendor model's points, as offsets from its data start.
pub mod vendor {
    /// Layout version (1).
    pub const VERSION: u16 = 0;
    /// Active components: bit 0 ess, 1 curtailment, 2 maximizeGridImport,
    /// 3 gridLimit, 4 a SCADA limit over this server.
    pub const ACTIVE: u16 = 1;
    /// The earliest `validUntil` of the active entries, Unix s (u32; 0 none).
    pub const VALID_UNTIL: u16 = 2;
    /// The grid loop's mode: 0 off, 1 free, 2 holdingExport, 3
    /// holdingImport, 4 meterLost.
    pub const LOOP_MODE: u16 = 4;
    /// The import limit in force, W (u32; 0xFFFFFFFF none).
    pub const MAX_IMPORT: u16 = 5;
    /// Its source: 0 none, 1 config, 2 gridLimit, 3 gridSignal, 4 modbus,
    /// 5 csip.
    pub const MAX_IMPORT_SRC: u16 = 7;
    pub const MAX_EXPORT: u16 = 8;
    pub const MAX_EXPORT_SRC: u16 = 10;
    /// The SCADA's export limit, W (u32, writable; 0xFFFFFFFF none).
    pub const SCADA_EXPORT: u16 = 11;
    /// Seconds the SCADA's limit holds without another write (0: none held).
    pub const SCADA_LEFT_S: u16 = 13;
}

/// What the site map shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteFacts {
    pub reference: String,
    pub unit_id: u8,
    /// The 100 % of `WMaxLimPct`.
    pub rated_production_w: f64,
    /// Sum of the inverters' production, W.
    pub production_w: Option<f64>,
    pub produced_wh: Option<f64>,
    /// The production limit the inverters report, % of the rated sum.
    pub production_limit_pct: Option<f64>,
    /// Sum of the grid meters, W (+ import).
    pub grid_w: Option<f64>,
    /// Sum of the batteries, W (+ discharging).
    pub storage_w: Option<f64>,
    /// SoC weighted by capacity, %.
    pub soc: Option<f64>,
    pub capacity_wh: f64,
    pub storage_rated_w: f64,
    pub steering: SteeringFacts,
}

/// The vendor model's values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SteeringFacts {
    pub active: u16,
    pub valid_until_s: Option<u32>,
    pub loop_mode: u16,
    pub max_import: Option<(f64, u16)>,
    pub max_export: Option<(f64, u16)>,
    pub scada_export_w: Option<f64>,
    pub scada_left_s: u16,
}

/// Where the writable points are, for the server's write handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Writable {
    /// Model 123 `WMaxLimPct` and its scale factor.
    pub w_max_lim_pct: u16,
    pub w_max_lim_pct_sf: i32,
    pub w_max_lim_ena: u16,
    /// The vendor model's `SCADA_EXPORT` (2 registers).
    pub scada_export: u16,
}

/// Registers of the site map, with where its writable points are.
pub struct SiteMap {
    pub map: RegisterMap,
    pub writable: Writable,
    /// The 100 % of `WMaxLimPct` when the map was built, W.
    pub rated_production_w: f64,
}

/// The site's map for `facts`.
pub fn build(f: &SiteFacts) -> SiteMap {
    let mut b = RegisterMap::sunspec(BASE);
    let mut serial = f.reference.clone();
    serial.truncate(32);
    layouts::common_as(&mut b, "sitegate", "site", &serial, f.unit_id);

    production(&mut b, f);
    let c = controls(&mut b, f);
    grid_meter(&mut b, f);
    storage(&mut b, f);

    let vendor_at = b.models().last().map_or(BASE, |e| e.addr + 2 + e.len);
    b.raw_model(VENDOR_ID, VENDOR_LEN);
    let data = vendor_at + 2;
    let writable = writable(c, data, &b);
    let mut map = b.finish();
    write_vendor(&mut map, data, &f.steering);
    SiteMap {
        map,
        writable,
        rated_production_w: f.rated_production_w,
    }
}

/// Model 103 from the inverters' sum (what it cannot say absent), and its
/// nameplate (120) from the rated production.
fn production(b: &mut MapBuilder, f: &SiteFacts) {
    let rated = f.rated_production_w.max(1.0);
    let inv = layouts::inverter_measurement(b, rated, false);
    for p in [
        &Model103::A,
        &Model103::APH_A,
        &Model103::APH_B,
        &Model103::APH_C,
        &Model103::PH_VPH_A,
        &Model103::PH_VPH_B,
        &Model103::PH_VPH_C,
        &Model103::HZ,
    ] {
        absent(b, inv, p, U16_NONE);
    }
    b.unimpl(inv, &Model103::V_AR);
    absent(b, inv, &Model103::TMP_CAB, I16_NONE);
    match f.production_w {
        Some(w) => b.set_scaled(inv, &Model103::W, I16, w, &Model103::W_SF),
        None => absent(b, inv, &Model103::W, I16_NONE),
    }
    match f.produced_wh {
        Some(wh) => b.set_scaled(inv, &Model103::WH, U32, wh, &Model103::WH_SF),
        None => absent(b, inv, &Model103::WH, 0),
    }
    // 4: MPPT (producing), 2: sleeping.
    let producing = f.production_w.is_some_and(|w| w > 0.0);
    b.set(inv, &Model103::ST, U16, if producing { 4.0 } else { 2.0 });
    layouts::nameplate(b, rated, None);
}

/// Model 123 with the production limit in force, as % of the rated sum.
fn controls(b: &mut MapBuilder, f: &SiteFacts) -> Block<Model123> {
    let c = layouts::inverter_controls(b);
    let pct = f.production_limit_pct.unwrap_or(100.0).clamp(0.0, 100.0);
    b.set_scaled(
        c,
        &Model123::W_MAX_LIM_PCT,
        U16,
        pct,
        &Model123::W_MAX_LIM_PCT_SF,
    );
    b.set(
        c,
        &Model123::W_MAX_LIM_ENA,
        U16,
        if pct < 100.0 { 1.0 } else { 0.0 },
    );
    c
}

/// Where the server takes writes: model 123's limit (`c`) and the vendor
/// model's SCADA limit (its data at `data`).
fn writable(c: Block<Model123>, data: u16, m: &RegisterMap) -> Writable {
    Writable {
        w_max_lim_pct: c.addr(&Model123::W_MAX_LIM_PCT),
        w_max_lim_pct_sf: m.get(c, &Model123::W_MAX_LIM_PCT_SF, I16) as i32,
        w_max_lim_ena: c.addr(&Model123::W_MAX_LIM_ENA),
        scada_export: data + vendor::SCADA_EXPORT,
    }
}

/// Model 203 with the grid meters' sum, scaled for twice the site's
/// largest rating; every other point absent or not implemented.
fn grid_meter(b: &mut MapBuilder, f: &SiteFacts) {
    let grid_max = f.rated_production_w.max(f.storage_rated_w).max(1000.0) * 2.0;
    let m = layouts::meter_measurement(b, grid_max, false);
    for p in [
        &Model203::A,
        &Model203::PH_V,
        &Model203::HZ,
        &Model203::W,
        &Model203::APH_A,
        &Model203::APH_B,
        &Model203::APH_C,
        &Model203::PH_VPH_A,
        &Model203::PH_VPH_B,
        &Model203::PH_VPH_C,
        &Model203::PPV,
        &Model203::PH_VPH_AB,
        &Model203::PH_VPH_BC,
        &Model203::PH_VPH_CA,
    ] {
        absent(b, m, p, I16_NONE);
    }
    for p in [
        &Model203::WPH_A,
        &Model203::WPH_B,
        &Model203::WPH_C,
        &Model203::VAR,
        &Model203::VA_RPH_A,
        &Model203::VA_RPH_B,
        &Model203::VA_RPH_C,
    ] {
        b.unimpl(m, p);
    }
    for p in [&Model203::TOT_WH_EXP, &Model203::TOT_WH_IMP] {
        absent(b, m, p, 0);
    }
    if let Some(w) = f.grid_w {
        b.set_scaled(m, &Model203::W, I16, w, &Model203::W_SF);
    }
}

/// Model 802 for the site's batteries as one: their power and SoC.
fn storage(b: &mut MapBuilder, f: &SiteFacts) {
    let rating = BatteryRating {
        rated_w: f.storage_rated_w.max(1.0),
        capacity_wh: f.capacity_wh.max(1.0),
        initial_soc: 0.0,
        soc_min: 0.0,
        soc_max: 100.0,
    };
    let s = layouts::battery_base(b, &rating, false);
    match f.soc {
        Some(soc) => b.set_scaled(s, &Model802::SOC, U16, soc, &Model802::SOC_SF),
        None => absent(b, s, &Model802::SOC, U16_NONE),
    }
    match f.storage_w {
        Some(w) => b.set_scaled(s, &Model802::W, I16, w, &Model802::W_SF),
        None => absent(b, s, &Model802::W, I16_NONE),
    }
    absent(b, s, &Model802::V, U16_NONE);
    absent(b, s, &Model802::A, I16_NONE);
    absent(b, s, &Model802::CHA_ST, U16_NONE);
}

/// SunSpec's "not implemented" word of an `int16` and a `uint16` (an
/// accumulator's is 0).
const I16_NONE: u16 = 0x8000;
const U16_NONE: u16 = 0xFFFF;

/// A point of the model, mandatory or not, with nothing to say: every word
/// `word`.
fn absent<M: Group, T: Value>(b: &mut RegisterMap, blk: Block<M>, p: &Point<M, T>, word: u16) {
    b.set_words(blk, p, &vec![word; usize::from(p.length)]);
}

fn write_vendor(map: &mut RegisterMap, data: u16, s: &SteeringFacts) {
    let u32_words = |v: u32| [(v >> 16) as u16, v as u16];
    let watts = |w: Option<f64>| {
        w.map_or(NONE_U32, |w| {
            w.round().clamp(0.0, f64::from(u32::MAX - 1)) as u32
        })
    };
    let mut put = |offset: u16, words: &[u16]| {
        // The block was laid out just before: every offset is inside it.
        let _ = map.poke(data + offset, words);
    };
    put(vendor::VERSION, &[1]);
    put(vendor::ACTIVE, &[s.active]);
    put(
        vendor::VALID_UNTIL,
        &u32_words(s.valid_until_s.unwrap_or(0)),
    );
    put(vendor::LOOP_MODE, &[s.loop_mode]);
    put(
        vendor::MAX_IMPORT,
        &u32_words(watts(s.max_import.map(|l| l.0))),
    );
    put(vendor::MAX_IMPORT_SRC, &[s.max_import.map_or(0, |l| l.1)]);
    put(
        vendor::MAX_EXPORT,
        &u32_words(watts(s.max_export.map(|l| l.0))),
    );
    put(vendor::MAX_EXPORT_SRC, &[s.max_export.map_or(0, |l| l.1)]);
    put(vendor::SCADA_EXPORT, &u32_words(watts(s.scada_export_w)));
    put(vendor::SCADA_LEFT_S, &[s.scada_left_s]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The addresses `docs/modbus-server.md` lists.
    #[test]
    fn the_map_is_where_the_docs_say() {
        let f = SiteFacts {
            reference: "ste_home".into(),
            unit_id: 200,
            rated_production_w: 10_000.0,
            production_w: Some(4_321.0),
            grid_w: Some(-1_234.0),
            soc: Some(55.5),
            capacity_wh: 10_000.0,
            storage_rated_w: 5_000.0,
            steering: SteeringFacts {
                max_export: Some((7_000.0, 4)),
                ..SteeringFacts::default()
            },
            ..SiteFacts::default()
        };
        let m = build(&f);
        let at: Vec<(u16, u16, u16)> = m
            .map
            .models()
            .iter()
            .map(|e| (e.id, e.addr, e.len))
            .collect();
        assert_eq!(
            at,
            vec![
                (1, 40002, 66),
                (103, 40070, 50),
                (120, 40122, 26),
                (123, 40150, 24),
                (203, 40176, 105),
                (802, 40283, 62),
                (VENDOR_ID, 40347, VENDOR_LEN),
            ]
        );
        assert_eq!(m.map.read(40365, 2), Ok(vec![0xFFFF, 0]));
        assert_eq!(m.writable.w_max_lim_pct, 40150 + 2 + 3);
        assert_eq!(m.writable.w_max_lim_ena, 40150 + 2 + 7);
        assert_eq!(m.writable.scada_export, 40349 + vendor::SCADA_EXPORT);
        // W of 103 and 203 at data offset 12 and 16 with their scale factors.
        let inv = m.map.read(40072, 14).unwrap();
        assert_eq!(
            f64::from(inv[12] as i16) * 10f64.powi(i32::from(inv[13] as i16)),
            4_321.0
        );
        let met = m.map.read(40178, 21).unwrap();
        assert_eq!(
            f64::from(met[16] as i16) * 10f64.powi(i32::from(met[20] as i16)),
            -1_234.0
        );
        let v = m.map.read(40349, VENDOR_LEN).unwrap();
        assert_eq!((v[8], v[9], v[10]), (0, 7_000, 4));
        assert_eq!((v[11], v[12]), (0xFFFF, 0xFFFF));
    }
}
