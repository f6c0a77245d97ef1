//! The grid loop's spread of its own cap against the plant model: cases
//! where the room an inverter keeps above its production, or a limit kept
//! above it, was counted as production the site did not have.

use super::*;

/// A band (zero export, 2.25 kW import) narrower than the room the loop's
/// spread keeps on an inverter producing below its share (1.5 kW on the
/// 30 kW inverter, 1 kW on the 20 kW one), with the batteries charging the
/// sun away. Spread by `dynamic`, the cap gave the shaded east inverter its
/// room (and more) out of what the west one produced: the loop counted that
/// room as production, so it let the storage charge for production that was
/// not there, and the site imported 2.45 kW steadily. Each inverter gets what
/// it produces first, the room after.
#[test]
fn a_narrow_band_gives_each_inverter_its_production_before_room() {
    let mut p = Plant::noon(0.0, 5.0);
    p.sun_w = vec![3_109.77, 13_235.13];
    p.auto_w = vec![0.0, 0.0];
    let mut r = rules(ExportOrder::StorageFirst);
    r.max_export_w = Some(0.0);
    r.max_import_w = Some(2_246.82);
    let mut run = Run::new(p);
    let g = run.ticks(&r, &Active::default(), 10);
    for (tick, g) in g.iter().enumerate().skip(3) {
        assert!(-g <= 1.0, "tick {tick}: export {} W over 0: {g:?}", -g);
        assert!(
            *g <= 2_246.82 + 1.0,
            "tick {tick}: import {g} W over 2246.82"
        );
    }
}

/// A storage discharging on its own, taken over and handed back, with a
/// shaded east inverter whose limit stays (within its band) above what it
/// produces. Settled, a lower cap was taken from the west inverter, below
/// what it produced, while east kept its limit: the worst (each at the
/// larger of production and limit) did not fall with the cap, the largest
/// cap that fitted was a quarter of the sun, and the site imported 14.3 kW
/// over a 10.7 kW limit. A lower cap comes off limits above production first.
#[test]
fn a_lower_cap_comes_off_a_limit_above_production_first() {
    let mut p = Plant::noon(27_846.27, 45.5);
    p.sun_w = vec![627.29, 18_763.54];
    p.auto_w = vec![5_857.68, 2_928.84];
    let mut r = rules(ExportOrder::CurtailFirst);
    r.max_export_w = Some(600.6);
    r.max_import_w = Some(10_728.56);
    let mut run = Run::new(p);
    let g = run.ticks(&r, &Active::default(), 10);
    for (tick, g) in g.iter().enumerate().skip(3) {
        assert!(-g <= 600.6 + 1.0, "tick {tick}: export {} W over 600.6", -g);
        assert!(
            *g <= 10_728.56 + 1.0,
            "tick {tick}: import {g} W over 10728.56"
        );
    }
}
