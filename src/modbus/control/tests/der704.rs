//! Model 704: the production limit and the storage power setpoint.

use ::sunspec::models::model704::Model704 as M704;

use super::*;

const B704: ModelBlock = ModelBlock {
    id: 704,
    addr: 40300,
    len: 65,
};

fn at704(offset: u16) -> u16 {
    B704.point(offset)
}

/// The 704 block's data words: `WMaxLimPct_SF` −1, `WSet_SF` 1.
fn words704() -> Vec<u16> {
    let mut w = vec![0u16; 65];
    w[M704::W_MAX_LIM_PCT_SF.offset as usize] = (-1i16) as u16;
    w[M704::W_SET_SF.offset as usize] = 1;
    w
}

fn pairs(p: &WritePlan) -> Vec<(u16, Vec<u16>)> {
    p.writes
        .iter()
        .map(|x| (x.addr, x.values.clone()))
        .collect()
}

#[test]
fn der_limit_in_percent_of_wmax_then_timer_then_enable() {
    let c = Recipe::Limit(SunspecLimit {
        block: B704,
        wmax_w: 10_000.0,
    });
    let p = c
        .plan(
            Command::ProductionLimit(2_500.0),
            60,
            &img(&B704, &words704()),
        )
        .unwrap();
    let ena = at704(M704::W_MAX_LIM_PCT_ENA.offset);
    let tms = at704(M704::W_MAX_LIM_PCT_RVRT_TMS.offset);
    assert_eq!(
        pairs(&p),
        [
            (at704(M704::W_MAX_LIM_PCT.offset), vec![250]),
            (tms, vec![0, 60]),
            (ena, vec![1]),
        ]
    );
    // The written registers and what lies between them, as one range;
    // never the whole block, nor WMaxLimPct_SF (a static point).
    let pct = at704(M704::W_MAX_LIM_PCT.offset);
    let (from, to) = (pct.min(tms).min(ena), pct.max(tms + 1).max(ena));
    assert_eq!(
        p.read_back,
        [Span::new(Table::Holding, from, to - from + 1)]
    );
    let by_point = p.read_back_by_point();
    assert!(by_point.iter().all(|s| s.len <= 2), "{by_point:?}");
    assert!(p.expect.contains(&(tms + 1, 60)));
    // Above WMax the limit stays at 100 %.
    let big = c
        .plan(
            Command::ProductionLimit(50_000.0),
            60,
            &img(&B704, &words704()),
        )
        .unwrap();
    assert_eq!(big.writes[0].values, [1000]);
    let r = c
        .plan(Command::ProductionRelease, 60, &img(&B704, &words704()))
        .unwrap();
    assert_eq!(pairs(&r), [(ena, vec![0])]);
    assert!(matches!(
        c.plan(Command::EssPower(1.0), 60, &img(&B704, &words704())),
        Err(WriteError::WrongCommand(_))
    ));
}

#[test]
fn der_storage_power_in_watts_signed_then_timer_then_enable() {
    let c = Recipe::Storage704(Storage704 { block: B704 });
    let mode = at704(M704::W_SET_MOD.offset);
    let ena = at704(M704::W_SET_ENA.offset);
    let tms = at704(M704::W_SET_RVRT_TMS.offset);
    // WSet_SF 1: 12 kW discharge is 1200.
    let p = c
        .plan(Command::EssPower(12_000.0), 30, &img(&B704, &words704()))
        .unwrap();
    assert_eq!(
        pairs(&p),
        [(mode, vec![1, 0, 1200]), (tms, vec![0, 30]), (ena, vec![1])]
    );
    // Charging is negative (two's complement int32).
    let charge = c
        .plan(Command::EssPower(-5_000.0), 30, &img(&B704, &words704()))
        .unwrap();
    assert_eq!(charge.writes[0].values, [1, 0xFFFF, (-500i16) as u16]);
    let mut block = words704();
    for (addr, word) in &charge.expect {
        block[(addr - B704.point(0)) as usize] = *word;
    }
    assert_eq!(verify(&charge, &read_back(&charge, &B704, &block)), Ok(()));
    let r = c
        .plan(Command::EssRelease, 30, &img(&B704, &words704()))
        .unwrap();
    assert_eq!(pairs(&r), [(ena, vec![0])]);
}

#[test]
fn der_block_too_short_is_reported() {
    let short = ModelBlock {
        id: 704,
        addr: 40300,
        len: 14,
    };
    let c = Recipe::Limit(SunspecLimit {
        block: short,
        wmax_w: 10_000.0,
    });
    assert!(matches!(
        c.plan(Command::ProductionLimit(1.0), 60, &Image::new()),
        Err(WriteError::Missing { .. })
    ));
}
