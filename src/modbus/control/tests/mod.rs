//! Write recipes: SunSpec 123 and 124 here; model 704, the Fronius GEN24's
//! 124, the profile recipes and the choice of recipe in the sibling files.

use ::sunspec::models::model123::Model123 as M123;
use ::sunspec::models::model124::Model124 as M124;

use super::*;
use crate::modbus::sunspec::ModelBlock;
use crate::register::plan::{Image, Span, Table};

mod choice;
mod der704;
mod gen24;
mod profile;
mod profile_writes;
mod release_words;

const B124: ModelBlock = ModelBlock {
    id: 124,
    addr: 40100,
    len: 24,
};
const B123: ModelBlock = ModelBlock {
    id: 123,
    addr: 40200,
    len: 24,
};

/// The 124 block's data words: WChaMax 20000 × 10^1 W, InOutWRte_SF −2.
fn words124() -> Vec<u16> {
    let mut w = vec![0u16; 24];
    w[M124::W_CHA_MAX.offset as usize] = 20_000;
    w[M124::W_CHA_MAX_SF.offset as usize] = 1;
    w[M124::IN_OUT_W_RTE_SF.offset as usize] = (-2i16) as u16;
    w
}

/// A block's data words as the calibration image.
fn img(b: &ModelBlock, words: &[u16]) -> Image {
    Image::holding(b.point(0), words)
}

fn at(b: &ModelBlock, offset: u16) -> u16 {
    b.point(offset)
}

#[test]
fn storage_discharge_is_a_window_written_mode_last() {
    let c = Recipe::Storage124(Storage124 { block: B124 });
    let p = c
        .plan(Command::EssPower(150_000.0), 30, &img(&B124, &words124()))
        .unwrap();
    let out = at(&B124, M124::OUT_W_RTE.offset);
    assert_eq!(
        p.writes,
        [
            RegWrite {
                addr: at(&B124, M124::IN_OUT_W_RTE_RVRT_TMS.offset),
                values: vec![30]
            },
            RegWrite {
                addr: out,
                values: vec![7500, (-7500i16) as u16]
            },
            RegWrite {
                addr: at(&B124, M124::STOR_CTL_MOD.offset),
                values: vec![3]
            },
        ]
    );
    let charge = c
        .plan(Command::EssPower(-50_000.0), 30, &img(&B124, &words124()))
        .unwrap();
    assert_eq!(charge.writes[1].values, [(-2500i16) as u16, 2500]);
    let idle = c
        .plan(Command::EssPower(0.0), 30, &img(&B124, &words124()))
        .unwrap();
    assert_eq!(idle.writes[1].values, [0, 0]);
    // Beyond WChaMax the window stays at 100 %.
    let big = c
        .plan(Command::EssPower(900_000.0), 30, &img(&B124, &words124()))
        .unwrap();
    assert_eq!(big.writes[1].values, [10_000, (-10_000i16) as u16]);
}

#[test]
fn storage_release_and_missing_reference() {
    let c = Recipe::Storage124(Storage124 { block: B124 });
    let p = c
        .plan(Command::EssRelease, 30, &img(&B124, &words124()))
        .unwrap();
    assert_eq!(p.writes[0].values, [0]);
    assert_eq!(p.writes[1].values, [10_000, 10_000]);
    let mut w = words124();
    w[M124::W_CHA_MAX.offset as usize] = 0xFFFF;
    assert!(matches!(
        c.plan(Command::EssPower(1.0), 30, &img(&B124, &w)),
        Err(WriteError::Missing { .. })
    ));
    // Nothing read at all: no reference either.
    assert!(matches!(
        c.plan(Command::EssPower(1.0), 30, &Image::new()),
        Err(WriteError::Missing { .. })
    ));
    assert!(matches!(
        c.plan(Command::ProductionRelease, 30, &img(&B124, &w)),
        Err(WriteError::WrongCommand(_))
    ));
}

#[test]
fn inverter_limit_in_percent_of_wmax_then_enable() {
    let c = Recipe::Limit(SunspecLimit {
        block: B123,
        wmax_w: 200_000.0,
    });
    let mut w = vec![0u16; 24];
    w[M123::W_MAX_LIM_PCT_SF.offset as usize] = (-1i16) as u16;
    let p = c
        .plan(Command::ProductionLimit(150_000.0), 60, &img(&B123, &w))
        .unwrap();
    let addrs: Vec<(u16, Vec<u16>)> = p
        .writes
        .iter()
        .map(|x| (x.addr, x.values.clone()))
        .collect();
    assert_eq!(
        addrs,
        [
            (at(&B123, M123::W_MAX_LIM_PCT.offset), vec![750]),
            (at(&B123, M123::W_MAX_LIM_PCT_RVRT_TMS.offset), vec![60]),
            (at(&B123, M123::W_MAX_LIM_ENA.offset), vec![1]),
        ]
    );
    let r = c
        .plan(Command::ProductionRelease, 60, &img(&B123, &w))
        .unwrap();
    assert_eq!(
        r.writes,
        [RegWrite {
            addr: at(&B123, M123::W_MAX_LIM_ENA.offset),
            values: vec![0]
        }]
    );
}

/// What the read-back of `plan` shows of `block` (a model's data words from
/// `b.point(0)`): exactly its read-back spans.
fn read_back(plan: &WritePlan, b: &ModelBlock, block: &[u16]) -> Image {
    let mut i = Image::new();
    for s in &plan.read_back {
        let from = (s.addr - b.point(0)) as usize;
        i.insert(*s, block[from..from + s.len as usize].to_vec());
    }
    i
}

#[test]
fn verify_compares_the_read_back() {
    let c = Recipe::Storage124(Storage124 { block: B124 });
    let plan = c
        .plan(Command::EssPower(150_000.0), 30, &img(&B124, &words124()))
        .unwrap();
    // The read-back, as the device would show it after the writes.
    let mut block = words124();
    for (addr, word) in &plan.expect {
        block[(addr - B124.point(0)) as usize] = *word;
    }
    assert_eq!(verify(&plan, &read_back(&plan, &B124, &block)), Ok(()));
    block[M124::STOR_CTL_MOD.offset as usize] = 0;
    let e = verify(&plan, &read_back(&plan, &B124, &block))
        .unwrap_err()
        .to_string();
    assert!(e.contains("shows 0 instead of 3"), "{e}");
}

#[test]
fn a_write_is_read_back_as_one_range_never_the_whole_block() {
    // The read-back is the registers written and what lies between them, in
    // one request; point by point (adjacent ones together) for a device that
    // refuses the range. Never the whole block, which a device may refuse in
    // part (model 123's power factor, 124's ramp times), and never the
    // calibration registers, which are static points.
    let c = Recipe::Storage124(Storage124 { block: B124 });
    let at = |o: u16| B124.point(o);
    let one = |o: u16| Span::new(Table::Holding, at(o), 1);
    assert_eq!(
        c.calibration(),
        [
            one(M124::W_CHA_MAX.offset),
            one(M124::W_CHA_MAX_SF.offset),
            one(M124::IN_OUT_W_RTE_SF.offset)
        ]
    );
    let p = c
        .plan(Command::EssPower(150_000.0), 30, &img(&B124, &words124()))
        .unwrap();
    let first = M124::STOR_CTL_MOD.offset;
    let last = M124::IN_OUT_W_RTE_RVRT_TMS.offset;
    assert_eq!(
        p.read_back,
        [Span::new(Table::Holding, at(first), last - first + 1)]
    );
    assert_eq!(
        p.read_back_by_point(),
        [
            one(M124::STOR_CTL_MOD.offset),
            Span::new(Table::Holding, at(M124::OUT_W_RTE.offset), 2),
            one(M124::IN_OUT_W_RTE_RVRT_TMS.offset),
        ]
    );

    // Model 123: WMaxLimPct, its revert time and WMaxLim_Ena (40187..40191
    // on an inverter laid out as the official definitions have it).
    let c = Recipe::Limit(SunspecLimit {
        block: B123,
        wmax_w: 200_000.0,
    });
    assert_eq!(
        c.calibration(),
        [Span::new(
            Table::Holding,
            B123.point(M123::W_MAX_LIM_PCT_SF.offset),
            1
        )]
    );
    let p = c
        .plan(Command::ProductionLimit(100_000.0), 60, &Image::new())
        .unwrap();
    let pct = B123.point(M123::W_MAX_LIM_PCT.offset);
    let ena = B123.point(M123::W_MAX_LIM_ENA.offset);
    assert_eq!(p.writes.len(), 3);
    assert_eq!(p.read_back, [Span::new(Table::Holding, pct, ena - pct + 1)]);
    assert_eq!(p.read_back_by_point().len(), 3);
    let r = c
        .plan(Command::ProductionRelease, 60, &Image::new())
        .unwrap();
    assert_eq!(r.read_back, [Span::new(Table::Holding, ena, 1)]);
    assert_eq!(r.read_back_by_point(), r.read_back);
}
