//! Tests of noisy mode's pure parts: ranges, determinism per seed, the load
//! walk's reversion and steps.

use super::*;

const SEED: u64 = 42;

#[test]
fn calm_jitter_changes_nothing() {
    let j = Jitter::CALM.at(12.7);
    assert_eq!(j.power(channel::W, 1234.5, 10_000.0), 1234.5);
    assert_eq!(j.share(channel::A, 3.25, 0.5), 3.25);
    assert_eq!(j.plus(channel::V, 230.1, 5.0), 230.1);
    assert_eq!(j.soc(55.55), 55.55);
    assert_eq!(j.unit(7), 0.0);
}

#[test]
fn noise_stays_within_its_amplitudes() {
    let base = Jitter::seeded(device_seed(SEED, "gw0", 3));
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for second in 0..5000 {
        let j = base.at_second(second);
        let w = j.power(channel::W, 5000.0, 10_000.0);
        assert!((w - 5000.0).abs() <= 50.0, "{w}");
        let v = j.plus(channel::V, 230.0, amplitude::VOLTS);
        assert!((v - 230.0).abs() <= 0.3, "{v}");
        let hz = j.plus(channel::HZ, 50.0, amplitude::HZ);
        assert!((hz - 50.0).abs() <= 0.01, "{hz}");
        let a = j.share(channel::A, 20.0, amplitude::CURRENT);
        assert!((a - 20.0).abs() <= 0.1, "{a}");
        // Never across zero, and 0 stays 0.
        assert!(j.power(channel::W, 10.0, 10_000.0) >= 0.0);
        assert!(j.power(channel::W, -10.0, 10_000.0) <= 0.0);
        assert_eq!(j.power(channel::W, 0.0, 10_000.0), 0.0);
        // SoC: 0.1 % steps, at most one step off the rounded value.
        let soc = j.soc(50.04);
        let steps = soc / 0.1;
        assert!((steps - steps.round()).abs() < 1e-6, "{soc}");
        assert!((soc - 50.0).abs() <= 0.1 + 1e-9, "{soc}");
        assert!((0.0..=100.0).contains(&j.soc(99.98)));
        lo = lo.min(j.unit(1));
        hi = hi.max(j.unit(1));
    }
    // The draws fill their range.
    assert!(lo < -0.99 && hi > 0.99, "{lo} {hi}");
}

#[test]
fn noise_moves_every_second_and_holds_within_it() {
    let j = Jitter::seeded(device_seed(SEED, "inv", 1));
    assert_eq!(j.at(10.1).unit(1), j.at(10.9).unit(1));
    let mut same = 0;
    for s in 0..1000 {
        if j.at_second(s).unit(1) == j.at_second(s + 1).unit(1) {
            same += 1;
        }
    }
    assert_eq!(same, 0);
    // Points of one device and devices of one site draw apart.
    assert_ne!(j.at_second(3).unit(1), j.at_second(3).unit(2));
    let other = Jitter::seeded(device_seed(SEED, "inv", 2));
    assert_ne!(j.at_second(3).unit(1), other.at_second(3).unit(1));
}

#[test]
fn the_same_seed_gives_the_same_noise() {
    let draw = |seed: u64| -> Vec<f64> {
        let j = Jitter::seeded(device_seed(seed, "gw1", 7));
        let mut walk = LoadWalk::new(seed);
        (0..200)
            .map(|s| j.at_second(s).unit(channel::W) + walk.factor_at(s))
            .collect()
    };
    assert_eq!(draw(SEED), draw(SEED));
    assert_ne!(draw(SEED), draw(SEED + 1));
    let mut a = Rng::new(9);
    let mut b = Rng::new(9);
    assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
}

#[test]
fn the_load_walk_moves_about_a_percent_a_second_and_steps() {
    let mut walk = LoadWalk::new(SEED);
    let mut last = walk.factor_at(0);
    let (mut small, mut steps, mut moves) = (Vec::new(), 0, 0);
    for s in 1..=36_000 {
        let f = walk.factor_at(s);
        let d = f - last;
        if d != 0.0 {
            moves += 1;
        }
        if d.abs() > 0.045 {
            steps += 1;
        } else {
            small.push(d);
        }
        assert!((0.5..=1.6).contains(&f), "{f}");
        last = f;
    }
    assert!(moves > 35_000, "moves every second: {moves}");
    let rms = (small.iter().map(|d| d * d).sum::<f64>() / small.len() as f64).sqrt();
    assert!((0.008..0.012).contains(&rms), "{rms}");
    // About one step in 90 s: 400 in ten hours, give or take.
    assert!((250..600).contains(&steps), "{steps}");
}

#[test]
fn the_load_walk_reverts_to_its_profile() {
    // Over many seeds, a walk pushed to +40 % is back near its profile after
    // five time constants; and over a long run its mean is the profile.
    let mut after = 0.0;
    let n = 200;
    for seed in 0..n {
        let mut walk = LoadWalk::new(seed);
        walk.level = 0.4;
        for _ in 0..(5.0 * WALK_TAU_S) as usize {
            walk.step();
        }
        after += walk.level();
    }
    let mean_after = after / f64::from(n as u32);
    assert!(mean_after.abs() < 0.03, "{mean_after}");
    let mut walk = LoadWalk::new(SEED);
    let total: f64 = (0..100_000)
        .map(|_| {
            walk.step();
            walk.level()
        })
        .sum();
    let mean = total / 100_000.0;
    assert!(mean.abs() < 0.03, "{mean}");
}

#[test]
fn a_walk_catches_up_on_missed_seconds_and_never_goes_back() {
    let mut a = LoadWalk::new(SEED);
    let mut b = LoadWalk::new(SEED);
    a.factor_at(0);
    b.factor_at(0);
    for s in 1..=10 {
        a.factor_at(s);
    }
    // Ten seconds in one call: the same ten moves.
    assert_eq!(b.factor_at(10), a.factor_at(10));
    // An older second moves nothing.
    assert_eq!(b.factor_at(5), a.factor_at(10));
}
