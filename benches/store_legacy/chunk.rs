//! The raw-sample chunk coding of sitegate before migration 0011, kept in the
//! benchmarks only so that the bytes a sample takes can be measured beside
//! the current coding on the same chunks: per sample a varint of the change
//! of the time step, then, when every value of the chunk is a short decimal,
//! a varint of the mantissa's step, else each value on its own (a varint tag,
//! and 8 bytes for any value that is no short decimal, float32s included).

const MAX_DECIMALS: u8 = 6;
const MAX_MANTISSA: f64 = 9_007_199_254_740_992.0;
const POW10: [f64; MAX_DECIMALS as usize + 1] = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6];

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn mantissa(value: f64, k: u8) -> Option<i64> {
    let p = POW10[usize::from(k)];
    let m = (value * p).round();
    if m.is_nan() || m.abs() > MAX_MANTISSA {
        return None;
    }
    let m = m as i64;
    ((m as f64 / p).to_bits() == value.to_bits()).then_some(m)
}

fn decimal(value: f64) -> Option<(i64, u8)> {
    (0..=MAX_DECIMALS).find_map(|k| mantissa(value, k).map(|m| (m, k)))
}

fn put_value(out: &mut Vec<u8>, value: f64) {
    match decimal(value) {
        Some((m, k)) => put_varint(out, zigzag(m) << 3 | u64::from(k)),
        None => {
            put_varint(out, 7);
            out.extend_from_slice(&value.to_bits().to_le_bytes());
        }
    }
}

/// The body the earlier coding gave a chunk of `samples` (ascending times).
pub fn encode_chunk(samples: &[(i64, f64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(samples.len() * 4 + 2);
    let k = samples
        .iter()
        .try_fold(0u8, |k, &(_, v)| decimal(v).map(|(_, kv)| k.max(kv)));
    let mantissas: Option<Vec<i64>> =
        k.and_then(|k| samples.iter().map(|&(_, v)| mantissa(v, k)).collect());
    match (k, &mantissas) {
        (Some(k), Some(_)) => out.extend_from_slice(&[1, k]),
        _ => out.push(2),
    }
    let (mut prev_ts, mut prev_step, mut prev_m) = (samples.first().map_or(0, |s| s.0), 0i64, 0i64);
    for (i, &(ts, v)) in samples.iter().enumerate() {
        if i > 0 {
            let step = ts - prev_ts;
            put_varint(&mut out, zigzag(step - prev_step));
            prev_step = step;
            prev_ts = ts;
        }
        match &mantissas {
            Some(ms) => {
                put_varint(&mut out, zigzag(ms[i].wrapping_sub(prev_m)));
                prev_m = ms[i];
            }
            None => put_value(&mut out, v),
        }
    }
    out
}
