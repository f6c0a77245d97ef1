//! Which inverters' limits move when the site's production limit moves
//! (`docs/steering.md`, "Writes only when they matter").
//!
//! The fulfilment rule gives every inverter its share of the site's limit;
//! a move of the site's limit by a few kilowatts would move each of 200
//! inverters by a few watts, each a write. Instead each inverter keeps the
//! limit it was told while that stays within a band around its share
//! ([`band_w`]), and the site's move is made by as few inverters as it takes,
//! each moved by at least its deadband ([`deadband_w`]), in turns that go
//! round the inverters as the site's limit moves.
//!
//! The limits never sum to more than the site's limit: a lower site limit is
//! written at once, by as many inverters as it takes (a limit is a safety
//! bound). They sum to less by at most about one deadband: a higher site
//! limit that no inverter's deadband covers waits.
//!
//! Pure: the limits each inverter was last told come in, the new ones go out.

use super::alloc::{allocate_cap, allocate_ess, BatteryView, InverterView};
use crate::config::{CurtailmentFulfilment, EssFulfilment};

/// The limits the inverters get from the grid loop's cap of `limit_w`
/// spread by `rule` ([`allocate_cap`]): their shares, settled against what
/// each was told.
/// The grid loop counts the inverters at these limits (`hold::pv`), the
/// decision tells them these.
pub fn production_limits(
    rule: CurtailmentFulfilment,
    inverters: &[InverterView],
    limit_w: f64,
) -> Vec<f64> {
    let slots: Vec<Slot> = inverters
        .iter()
        .zip(allocate_cap(rule, inverters, limit_w))
        .map(|(i, share_w)| Slot {
            told_w: i.limit_w,
            share_w,
            rated_w: i.rated_w,
            produced_w: i.measured_w,
        })
        .collect();
    settle(&slots)
}

/// The setpoints the batteries get from the grid loop's storage target of
/// `target_w` (+ discharge) spread by `rule` (`allocate_ess`), settled
/// against what each was `told` as the inverters' limits are: each keeps its
/// setpoint while that stays within the band around its share and within
/// what it can do now, and the target's move is made by few of them. The
/// band and the deadband are those of the battery's range (its charge and
/// discharge caps together). The safe side is kept: holding the export
/// (`export`), the setpoints never sum to more than the target (never less
/// charging); holding the import, never to less (never less discharging).
pub fn storage_setpoints(
    rule: EssFulfilment,
    batteries: &[BatteryView],
    told: &[Option<f64>],
    target_w: f64,
    export: bool,
) -> Vec<f64> {
    let shares = allocate_ess(rule, batteries, target_w).setpoints;
    // Each battery's range [−charge cap, discharge cap] as [0, range], turned
    // so that the safe side is down (as an inverter's limit).
    let frame: Vec<(f64, f64)> = batteries
        .iter()
        .map(|b| (-b.charge_cap(), b.discharge_cap()))
        .collect();
    let to = |(lo, hi): (f64, f64), w: f64| if export { w - lo } else { hi - w };
    let from = |(lo, hi): (f64, f64), x: f64| if export { x + lo } else { hi - x };
    let slots: Vec<Slot> = frame
        .iter()
        .zip(&shares)
        .enumerate()
        .map(|(k, (&f, &share))| Slot {
            told_w: told.get(k).copied().flatten().map(|t| to(f, t)),
            share_w: to(f, share),
            rated_w: (f.1 - f.0).max(0.0),
            produced_w: None,
        })
        .collect();
    settle(&slots)
        .into_iter()
        .zip(&frame)
        .map(|(x, &f)| from(f, x))
        .collect()
}

/// One inverter as settling sees it, W.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
    /// The limit it was last told; `None` while released (or never told).
    pub told_w: Option<f64>,
    /// Its share of the site's limit by the fulfilment rule.
    pub share_w: f64,
    pub rated_w: f64,
    /// What it produces now, when known: a limit above it is lowered first
    /// (the loop counts an inverter at the larger of the two, so lowering
    /// another below what it produces would not lower that count).
    pub produced_w: Option<f64>,
}

/// The smallest move of an inverter's limit worth a write: 0.5 % of its
/// rating, at least 1 W. A move below its register's resolution gives the same
/// words, which are not written either (`report::due`).
pub fn deadband_w(rated_w: f64) -> f64 {
    (0.005 * rated_w).max(1.0)
}

/// How far an inverter's limit may stay from its share: sixteen deadbands
/// (8 % of its rating), so one inverter takes up to 14 % of its rating of a
/// move of the site's limit in one write ([`reach_w`] each way). A narrower
/// band spreads each move of the site's limit over more inverters: under a
/// load that walks, each inverter of a 26-inverter site was written (changes
/// and refreshes) 113 to 121 times an hour with 12 deadbands, 108 to 119
/// with 16 (`hold/tests/quiet.rs`, before [`raise`] passed over inverters
/// below their limits; 103 to 111 since).
pub fn band_w(rated_w: f64) -> f64 {
    BAND_DEADBANDS * deadband_w(rated_w)
}

const BAND_DEADBANDS: f64 = 16.0;

/// How far from its share a limit is moved to: two deadbands inside
/// [`band_w`]. A share follows what its inverter produces (`allocate_cap`),
/// noise included (about a deadband); a limit put at the band's very edge
/// would leave it at the next reading and be written again, and the others
/// with it to keep the sum.
fn reach_w(rated_w: f64) -> f64 {
    band_w(rated_w) - 2.0 * deadband_w(rated_w)
}

/// The limits to tell: each `share_w` where an inverter is told for the first
/// time, else what it was told where that still fits, with the site's move
/// made by as few inverters as it takes. The result never sums to more than
/// the shares do, and each limit lies within `0..=rated_w` and within
/// [`band_w`] of its share.
pub fn settle(slots: &[Slot]) -> Vec<f64> {
    let shares: Vec<f64> = slots.iter().map(|s| s.share_w.max(0.0)).collect();
    if slots.iter().any(|s| s.told_w.is_none()) {
        return shares;
    }
    let mut out: Vec<f64> = slots
        .iter()
        .zip(&shares)
        .map(|(s, &share)| {
            let told = s.told_w.unwrap_or(share);
            let fits = told >= 0.0 && told <= s.rated_w.max(0.0) + 0.5;
            if fits && (told - share).abs() <= band_w(s.rated_w) {
                told
            } else {
                share
            }
        })
        .collect();
    let total: f64 = shares.iter().sum();
    let excess = out.iter().sum::<f64>() - total;
    if excess > 1e-6 {
        lower(slots, &shares, &mut out, excess);
    } else if excess < 0.0 {
        raise(slots, &shares, &mut out, -excess);
    }
    out
}

/// The inverters in turn: round from an index that moves with the site's
/// total, so that successive moves fall on different inverters.
fn in_turn(shares: &[f64]) -> impl Iterator<Item = usize> {
    let n = shares.len().max(1);
    let total: f64 = shares.iter().sum();
    let from = (total.round() as i64).rem_euclid(n as i64) as usize;
    (0..shares.len()).map(move |k| (from + k) % n)
}

/// Lowers limits by `excess` in all: first those above what their inverters
/// produce, then inverters in turn, each by at least its
/// deadband (more than needed is on the safe side) and at most to
/// [`reach_w`] below its share; where that is not enough, a second round
/// takes smaller moves too. Every limit at its share removes any excess, so
/// the reach below the share always leaves room for it.
fn lower(slots: &[Slot], shares: &[f64], out: &mut [f64], mut excess: f64) {
    // Limits above what their inverters produce first, down to that (a move
    // of less than a deadband only where it covers the rest).
    for i in in_turn(shares) {
        let Some(p) = slots[i].produced_w else {
            continue;
        };
        let floor = (shares[i] - reach_w(slots[i].rated_w)).max(p.max(0.0));
        // At least a deadband where there is room for it (more than needed
        // is on the safe side): a smaller move is a write for nothing.
        let take = excess.max(deadband_w(slots[i].rated_w)).min(out[i] - floor);
        if excess > 1e-6 && take > 0.0 && (take >= deadband_w(slots[i].rated_w) || take >= excess) {
            excess -= take;
            out[i] -= take;
        }
    }
    for round in 0..2 {
        for i in in_turn(shares) {
            if excess <= 1e-6 {
                return;
            }
            let rated = slots[i].rated_w;
            let floor = (shares[i] - reach_w(rated)).max(0.0);
            let new = (out[i] - excess.max(deadband_w(rated))).max(floor);
            if out[i] - new >= deadband_w(rated) || (round == 1 && new < out[i]) {
                excess -= out[i] - new;
                out[i] = new;
            }
        }
    }
}

/// Raises limits by at most `room` in all, inverters in turn, each by at
/// least its deadband and at most to [`reach_w`] above its share or its
/// rating: the sum stays at or below the shares'. An inverter producing
/// more than a deadband below its limit is not raised: it could not use
/// the room, and the site would produce less than the limits sum to (the
/// loop counts it at its limit, so the cap would not rise for the others).
fn raise(slots: &[Slot], shares: &[f64], out: &mut [f64], mut room: f64) {
    for i in in_turn(shares) {
        let rated = slots[i].rated_w;
        if slots[i]
            .produced_w
            .is_some_and(|p| p < out[i] - deadband_w(rated))
        {
            continue;
        }
        let ceiling = (shares[i] + reach_w(rated)).min(rated.max(0.0));
        let up = room.min(ceiling - out[i]);
        if up >= deadband_w(rated) {
            out[i] += up;
            room -= up;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn park(n: usize, told: Option<f64>, share: f64) -> Vec<Slot> {
        vec![
            Slot {
                told_w: told,
                share_w: share,
                rated_w: 25_000.0,
                produced_w: None,
            };
            n
        ]
    }

    fn moved(before: &[Slot], after: &[f64]) -> usize {
        before
            .iter()
            .zip(after)
            .filter(|(s, a)| s.told_w != Some(**a))
            .count()
    }

    #[test]
    fn first_told_gets_the_shares() {
        let slots = park(4, None, 5_000.0);
        assert_eq!(settle(&slots), vec![5_000.0; 4]);
    }

    #[test]
    fn a_small_move_of_the_site_is_not_written() {
        // 200 inverters at 6 kW; the site's limit rises 2 kW: 10 W each.
        let slots = park(200, Some(6_000.0), 6_010.0);
        let out = settle(&slots);
        assert_eq!(moved(&slots, &out), 2, "{out:?}");
        let sum: f64 = out.iter().sum();
        assert!(sum <= 200.0 * 6_010.0 + 1e-6);
        assert!(200.0 * 6_010.0 - sum < deadband_w(25_000.0));
        // Each that moved, moved by at least its deadband.
        for (s, o) in slots.iter().zip(&out) {
            let d = (o - s.told_w.unwrap()).abs();
            assert!(d == 0.0 || d >= deadband_w(25_000.0), "{d}");
        }
        // Half a deadband up on every inverter: nothing worth writing.
        let slots = park(200, Some(6_000.0), 6_000.5);
        let out = settle(&slots);
        assert_eq!(moved(&slots, &out), 0);
    }

    #[test]
    fn a_lower_site_limit_is_written_at_once_by_few() {
        // 10 kW lower over 200 inverters (50 W each): a handful move, and
        // together they cover all of it.
        let slots = park(200, Some(6_000.0), 5_950.0);
        let out = settle(&slots);
        let sum: f64 = out.iter().sum();
        assert!(sum <= 200.0 * 5_950.0 + 1e-6, "{sum}");
        let n = moved(&slots, &out);
        assert!(n <= 20, "{n} moved");
        for o in &out {
            assert!(*o >= 5_950.0 - band_w(25_000.0) - 1e-9);
        }
        // A move of less than a deadband down is still written: the sum
        // must not pass the limit.
        let slots = park(3, Some(6_000.0), 5_999.0);
        let out = settle(&slots);
        assert!(out.iter().sum::<f64>() <= 3.0 * 5_999.0 + 1e-6);
        assert_eq!(moved(&slots, &out), 1);
    }

    #[test]
    fn inverters_take_turns_and_none_leaves_its_band() {
        // The site's limit walks down and up; each inverter stays within its
        // band around its share and the sum never passes the limit.
        let n = 50;
        let mut told: Vec<f64> = vec![6_000.0; n];
        let mut writes = vec![0usize; n];
        for step in 0..400 {
            let share = 6_000.0 + 400.0 * ((step as f64) * 0.13).sin();
            let slots: Vec<Slot> = told
                .iter()
                .map(|&t| Slot {
                    told_w: Some(t),
                    share_w: share,
                    rated_w: 25_000.0,
                    produced_w: None,
                })
                .collect();
            let out = settle(&slots);
            let sum: f64 = out.iter().sum();
            assert!(sum <= n as f64 * share + 1e-6, "step {step}: {sum}");
            for (k, o) in out.iter().enumerate() {
                assert!((o - share).abs() <= band_w(25_000.0) + 1e-9);
                assert!((0.0..=25_000.0).contains(o));
                if *o != told[k] {
                    writes[k] += 1;
                }
            }
            told = out;
        }
        // Where every inverter would follow its share 400 times, three at
        // most move per step, and the moves go round: none moves in more
        // than one step in ten, every one now and then.
        let total: usize = writes.iter().sum();
        assert!(total < 400 * 3, "{total}: {writes:?}");
        assert!(writes.iter().all(|&w| (5..40).contains(&w)), "{writes:?}");
    }

    #[test]
    fn a_limit_outside_its_band_or_rating_goes_to_its_share() {
        let slots = vec![
            Slot {
                told_w: Some(9_000.0),
                share_w: 5_000.0,
                rated_w: 25_000.0,
                produced_w: None,
            },
            Slot {
                told_w: Some(30_000.0),
                share_w: 5_000.0,
                rated_w: 25_000.0,
                produced_w: None,
            },
            Slot {
                told_w: Some(5_100.0),
                share_w: 5_000.0,
                rated_w: 25_000.0,
                produced_w: None,
            },
        ];
        let out = settle(&slots);
        assert!(out.iter().sum::<f64>() <= 15_000.0 + 1e-6, "{out:?}");
        for o in &out {
            assert!((o - 5_000.0).abs() <= band_w(25_000.0), "{out:?}");
        }
        assert_ne!(out[1], 30_000.0);
    }

    #[test]
    fn a_lower_limit_comes_off_a_limit_above_production_first() {
        // East told 1.4 kW, producing 0.6 kW; west told 19.3 kW, producing
        // 18.8 kW. The site's limit falls by 0.78 kW: it comes off the
        // limits above production, so each inverter counted at the larger of
        // its production and its limit fits the site's limit. (Lowering west
        // by all of it, below what it produces, would not have.)
        let slots = [
            Slot {
                told_w: Some(1_410.0),
                share_w: 940.0,
                rated_w: 30_000.0,
                produced_w: Some(627.0),
            },
            Slot {
                told_w: Some(19_287.0),
                share_w: 18_973.0,
                rated_w: 20_000.0,
                produced_w: Some(18_764.0),
            },
        ];
        let out = settle(&slots);
        let worst: f64 = out
            .iter()
            .zip(&slots)
            .map(|(o, s)| o.max(s.produced_w.unwrap_or(0.0)))
            .sum();
        assert!(worst <= 940.0 + 18_973.0 + 1e-6, "{out:?}");
        assert!(out[0] < 1_410.0 && out[1] >= 18_764.0, "{out:?}");
    }

    fn battery(soc: f64) -> BatteryView {
        BatteryView {
            rated_w: 10_000.0,
            max_charge_w: 10_000.0,
            max_discharge_w: 10_000.0,
            soc: Some(soc),
            soc_min: 5.0,
            soc_max: 95.0,
            capacity_wh: Some(20_000.0),
            priority: 0,
        }
    }

    #[test]
    fn battery_setpoints_move_few_and_keep_the_safe_side() {
        let bats = vec![battery(50.0); 6];
        let rule = EssFulfilment::Proportional;
        // First told: the shares.
        let first = storage_setpoints(rule, &bats, &[None; 6], -30_000.0, true);
        assert_eq!(first, vec![-5_000.0; 6]);
        let told: Vec<Option<f64>> = first.iter().copied().map(Some).collect();
        // Holding the export, 1.8 kW more charging: a few move, the sum
        // charges at least that much, each within its caps.
        let out = storage_setpoints(rule, &bats, &told, -31_800.0, true);
        let moved = out.iter().zip(&first).filter(|(a, b)| a != b).count();
        assert!((1..=2).contains(&moved), "{out:?}");
        assert!(out.iter().sum::<f64>() <= -31_800.0 + 1e-6, "{out:?}");
        assert!(out.iter().all(|w| (-10_000.0..=10_000.0).contains(w)));
        // 1.8 kW less charging: never less than asked, moved by few.
        let out = storage_setpoints(rule, &bats, &told, -28_200.0, true);
        assert!(out.iter().sum::<f64>() <= -28_200.0 + 1e-6, "{out:?}");
        assert!(out.iter().zip(&first).filter(|(a, b)| a != b).count() <= 2);
        // A move within a deadband of the range (100 W): nothing written.
        let out = storage_setpoints(rule, &bats, &told, -29_950.0, true);
        assert_eq!(out, first);
        // Holding the import, discharging: the sum never less than asked.
        let first = storage_setpoints(rule, &bats, &[None; 6], 24_000.0, false);
        let told: Vec<Option<f64>> = first.iter().copied().map(Some).collect();
        let out = storage_setpoints(rule, &bats, &told, 25_500.0, false);
        assert!(out.iter().sum::<f64>() >= 25_500.0 - 1e-6, "{out:?}");
        assert!(out.iter().zip(&first).filter(|(a, b)| a != b).count() <= 2);
        // A battery that filled up cannot keep charging: it goes to its share.
        let mut full = bats.clone();
        full[0] = battery(95.0);
        let told = vec![Some(-5_000.0); 6];
        let out = storage_setpoints(rule, &full, &told, -30_000.0, true);
        assert_eq!(out[0], 0.0, "{out:?}");
        assert!(out.iter().sum::<f64>() <= -30_000.0 + 1e-6, "{out:?}");
    }

    #[test]
    fn a_higher_limit_goes_to_inverters_that_can_use_it() {
        // West is told 19 kW and produces 18 kW (its sun); east produces at
        // its 21.6 kW limit. The site's limit rises 1 kW: east takes it,
        // whichever inverter's turn it is. (Raised, west would hold room it
        // cannot use, and the site would produce 1 kW short of its limit.)
        for total in [41_600.0, 41_601.0] {
            let slots = [
                Slot {
                    told_w: Some(21_600.0),
                    share_w: total - 19_500.0,
                    rated_w: 30_000.0,
                    produced_w: Some(21_600.0),
                },
                Slot {
                    told_w: Some(19_000.0),
                    share_w: 19_500.0,
                    rated_w: 20_000.0,
                    produced_w: Some(18_000.0),
                },
            ];
            let out = settle(&slots);
            assert_eq!(out[1], 19_000.0, "{out:?}");
            assert!(out[0] > 21_600.0, "{out:?}");
            assert!(out.iter().sum::<f64>() <= total + 1e-6, "{out:?}");
        }
    }

    #[test]
    fn a_limit_of_zero_is_zero_everywhere() {
        let slots = park(5, Some(300.0), 0.0);
        assert_eq!(settle(&slots), vec![0.0; 5]);
    }
}
