use super::*;
use proptest::prelude::*;

fn decoded(start: i64, n: usize, body: &[u8]) -> Vec<(i64, f64)> {
    let mut back = Vec::new();
    decode_chunk(start, n, body, |t, v| back.push((t, v))).expect("decodes");
    back
}

/// Encodes, decodes, compares bit for bit; returns the body's size.
fn round_trip(samples: &[(i64, f64)]) -> usize {
    let body = encode_chunk(samples);
    let back = decoded(samples[0].0, samples.len(), &body);
    assert_eq!(back.len(), samples.len());
    for (a, b) in samples.iter().zip(&back) {
        assert_eq!(a.0, b.0);
        assert_eq!(a.1.to_bits(), b.1.to_bits(), "{} vs {}", a.1, b.1);
    }
    body.len()
}

/// A small deterministic generator (xorshift), so sizes are the same each run.
struct Noise(u64);

impl Noise {
    /// Uniform in [-1, 1).
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

/// 600 samples at 1 Hz with 0 to 30 ms of jitter.
fn times(noise: &mut Noise) -> Vec<i64> {
    (0..600)
        .map(|i| 1_717_200_000_000 + i * 1000 + (15.0 + 15.0 * noise.next()) as i64)
        .collect()
}

#[test]
fn each_kind_round_trips_bit_for_bit() {
    let mut noise = Noise(7);
    let ts = times(&mut noise);
    let decimals: Vec<(i64, f64)> = ts
        .iter()
        .map(|&t| (t, ((2301.0 + 3.0 * noise.next()).round()) / 10.0))
        .collect();
    let floats: Vec<(i64, f64)> = ts
        .iter()
        .map(|&t| (t, f64::from((5000.0 + 25.0 * noise.next()) as f32)))
        .collect();
    let doubles: Vec<(i64, f64)> = ts.iter().map(|&t| (t, 5000.0 + noise.next())).collect();
    assert_eq!(Kind::of(&decimals), Kind::Decimal(1));
    assert_eq!(Kind::of(&floats), Kind::F32);
    assert_eq!(Kind::of(&doubles), Kind::F64);
    for s in [&decimals, &floats, &doubles] {
        round_trip(s);
    }
    // Signs of zero, extremes, a series that crosses zero, one sample.
    round_trip(&[
        (10, -0.0),
        (11, 0.0),
        (500, f64::MAX),
        (501, f64::MIN_POSITIVE),
        (9_000, -5.5),
        (9_001, f64::MIN),
    ]);
    round_trip(&[
        (0, f64::from(-0.0f32)),
        (1, f64::from(1.5e-40f32)),
        (2, 3.0),
    ]);
    round_trip(&[(0, 9_007_199_254_740_991.0), (1, 0.5)]);
    round_trip(&[(-5, 1.0)]);
    let crossing: Vec<(i64, f64)> = (0..100)
        .map(|i| (i * 1000, (i - 50) as f64 * 0.01))
        .collect();
    round_trip(&crossing);
}

#[test]
fn noisy_readings_cost_what_their_noise_carries() {
    let mut noise = Noise(11);
    let ts = times(&mut noise);
    let per_sample = |values: Vec<f64>| {
        let samples: Vec<(i64, f64)> = ts.iter().copied().zip(values).collect();
        round_trip(&samples) as f64 / samples.len() as f64
    };
    // Whole watts, ±0.5 % of 10 kW: 7 bits of noise, 6 of jitter, and two
    // 2-byte block heads per 16 samples.
    let watts = per_sample(
        (0..600)
            .map(|_| (6000.0 + 50.0 * noise.next()).round())
            .collect(),
    );
    assert!(watts < 2.0, "{watts:.2} B a sample");
    // The same as float32 with full precision: 2^11 steps a watt, 18 bits.
    let floats = per_sample(
        (0..600)
            .map(|_| f64::from((6000.0 + 50.0 * noise.next()) as f32))
            .collect(),
    );
    assert!(floats < 3.5, "{floats:.2} B a sample");
    // A whole-Wh counter growing by 1 or 2 a second: a bit, and the jitter.
    let mut wh = 12_345_678.0;
    let counter = per_sample(
        (0..600)
            .map(|_| {
                wh += 1.5 + 0.5 * noise.next().signum();
                wh
            })
            .collect(),
    );
    assert!(counter < 1.3, "{counter:.2} B a sample");
}

#[test]
fn chunks_of_earlier_sitegates_still_read() {
    let mut noise = Noise(3);
    let ts = times(&mut noise);
    let decimals: Vec<(i64, f64)> = ts
        .iter()
        .map(|&t| (t, (500.0 * noise.next()).round() / 100.0))
        .collect();
    let raw: Vec<(i64, f64)> = ts.iter().map(|&t| (t, noise.next())).collect();
    for samples in [&decimals, &raw] {
        let old = encode_chunk_before_packing(samples);
        assert_ne!(old[0], PACKED);
        let back = decoded(samples[0].0, samples.len(), &old);
        let bits = |s: &[(i64, f64)]| s.iter().map(|x| (x.0, x.1.to_bits())).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(samples));
        // And the new coding is smaller on either.
        assert!(encode_chunk(samples).len() < old.len());
    }
}

#[test]
fn malformed_chunks_are_errors_not_panics() {
    let samples: Vec<(i64, f64)> = (0..40)
        .map(|i| (i * 1000, f64::from(i as f32 * 0.3)))
        .collect();
    let body = encode_chunk(&samples);
    for cut in 0..body.len() {
        assert_eq!(
            decode_chunk(0, samples.len(), &body[..cut], |_, _| {}),
            Err(Malformed),
            "cut at {cut}"
        );
    }
    assert_eq!(decode_chunk(0, 1, &[9], |_, _| {}), Err(Malformed));
    assert_eq!(
        decode_chunk(0, 1, &[DECIMAL, 40, 0], |_, _| {}),
        Err(Malformed)
    );
    assert_eq!(
        decode_chunk(0, 1, &[PACKED, 9, 0, 0], |_, _| {}),
        Err(Malformed)
    );
    // A float32 chunk whose integer is no float32's.
    let mut bad = vec![PACKED, KIND_F32];
    put_block(&mut bad, &[1 << 40], &mut Carry::new(0));
    assert_eq!(decode_chunk(0, 1, &bad, |_, _| {}), Err(Malformed));
}

proptest! {
    #[test]
    fn any_finite_samples_round_trip(
        start in -1_000_000_000_000i64..4_000_000_000_000,
        steps in prop::collection::vec(1i64..100_000, 1..200),
        bits in prop::collection::vec(any::<u64>(), 200),
        which in prop::collection::vec(0u8..4, 200),
    ) {
        let mut t = start;
        let samples: Vec<(i64, f64)> = steps
            .iter()
            .enumerate()
            .map(|(i, step)| {
                let v = match which[i] {
                    0 => f64::from_bits(bits[i]),
                    1 => f64::from(f32::from_bits(bits[i] as u32)),
                    2 => (bits[i] % 100_000) as f64 / 100.0,
                    _ => (bits[i] % 7) as f64,
                };
                let v = if v.is_finite() { v } else { 1.0 };
                let s = (t, v);
                t += step;
                s
            })
            .collect();
        round_trip(&samples);
    }
}

#[test]
fn a_chunk_with_another_chunks_times_holds_its_values_only() {
    let mut noise = Noise(5);
    let ts = times(&mut noise);
    let power: Vec<(i64, f64)> = ts
        .iter()
        .map(|&t| (t, (6000.0 + 50.0 * noise.next()).round()))
        .collect();
    let volts: Vec<(i64, f64)> = ts
        .iter()
        .map(|&t| (t, f64::from((230.0 + 0.3 * noise.next()) as f32)))
        .collect();
    let own = encode_chunk(&power);
    assert_eq!(times_of(&own), Ok(None));
    let shared = encode_shared(77, &volts);
    assert_eq!(times_of(&shared), Ok(Some(77)));
    let mut back = Vec::new();
    decode_shared(&ts, &shared, |t, v| back.push((t, v.to_bits()))).expect("decodes");
    let want: Vec<(i64, u64)> = volts.iter().map(|&(t, v)| (t, v.to_bits())).collect();
    assert_eq!(back, want);
    assert_eq!(
        decode_chunk(ts[0], ts.len(), &shared, |_, _| {}),
        Err(Malformed)
    );
    // Without the times: 16 bits of noise and the blocks' heads.
    assert!(shared.len() < ts.len() * 9 / 4, "{} bytes", shared.len());
    for cut in 0..shared.len() {
        assert!(decode_shared(&ts, &shared[..cut], |_, _| {}).is_err());
    }
}
