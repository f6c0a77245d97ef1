//! Byte encodings of samples inside SQLite blobs: the staging slots
//! ([`stage`](super::stage)) and the raw-sample chunks ([`chunks`](super::chunks)).
//!
//! Both are exact: a decoded value has the bits of the stored one. A value that
//! is a short decimal (whole watts, one-decimal volts, ...) is stored as the
//! integer `m` with `value = m / 10^k`; any other finite value as its 8 bytes.
//! Integers are LEB128 varints, signed ones zigzag-coded first.
//!
//! Pure: no SQLite, no clock. Decoders never panic on malformed input; they
//! return [`Malformed`] instead.

/// Most decimals a value may have to be stored as a decimal.
const MAX_DECIMALS: u8 = 6;
/// The value-code tag that says "8 raw bytes follow".
const RAW_TAG: u64 = 7;
/// Largest mantissa stored exactly (2^53).
const MAX_MANTISSA: f64 = 9_007_199_254_740_992.0;
const POW10: [f64; MAX_DECIMALS as usize + 1] = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6];

/// A blob that does not decode (truncated, or an unknown format byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed sample blob")
    }
}

impl std::error::Error for Malformed {}

pub fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

pub fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// Reads a blob front to back.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    pub fn varint(&mut self) -> Result<u64, Malformed> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.at).ok_or(Malformed)?;
            self.at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(n);
            }
        }
        Err(Malformed)
    }

    pub fn signed(&mut self) -> Result<i64, Malformed> {
        self.varint().map(unzigzag)
    }

    pub fn byte(&mut self) -> Result<u8, Malformed> {
        let b = *self.bytes.get(self.at).ok_or(Malformed)?;
        self.at += 1;
        Ok(b)
    }

    pub fn fixed8(&mut self) -> Result<[u8; 8], Malformed> {
        let end = self.at.checked_add(8).ok_or(Malformed)?;
        let slice = self.bytes.get(self.at..end).ok_or(Malformed)?;
        self.at = end;
        let mut out = [0u8; 8];
        out.copy_from_slice(slice);
        Ok(out)
    }

    /// A value written by [`put_value`].
    pub fn value(&mut self) -> Result<f64, Malformed> {
        let code = self.varint()?;
        let tag = code & 7;
        if tag == RAW_TAG {
            return self.value_body(RAW_TAG);
        }
        Ok(decimal_value(code >> 3, tag))
    }

    /// The body of a value whose tag (the low three bits of what
    /// [`split_value`] returns) the caller read elsewhere.
    pub fn value_body(&mut self, tag: u64) -> Result<f64, Malformed> {
        if tag & 7 == RAW_TAG {
            return Ok(f64::from_bits(u64::from_le_bytes(self.fixed8()?)));
        }
        Ok(decimal_value(self.varint()?, tag))
    }
}

/// `unzigzag(z) / 10^tag` for a decimal tag (below [`RAW_TAG`]).
fn decimal_value(z: u64, tag: u64) -> f64 {
    unzigzag(z) as f64 / POW10[(tag & 7) as usize]
}

/// `value` as `(m, k)` with `value == m / 10^k` bit for bit and the smallest
/// such `k`, if there is one with at most [`MAX_DECIMALS`] decimals.
pub fn decimal(value: f64) -> Option<(i64, u8)> {
    for k in 0..=MAX_DECIMALS {
        let p = POW10[usize::from(k)];
        let m = (value * p).round();
        if m.is_nan() || m.abs() > MAX_MANTISSA {
            return None; // too large (or not finite): larger k only grows it
        }
        // Through the integer, as the decoder does (which also turns -0 into 0).
        let m = m as i64;
        if (m as f64 / p).to_bits() == value.to_bits() {
            return Some((m, k));
        }
    }
    None
}

/// `value` as `m` for a given number of decimals `k`, if exact.
fn mantissa(value: f64, k: u8) -> Option<i64> {
    let p = POW10[usize::from(k)];
    let m = (value * p).round();
    if m.is_nan() || m.abs() > MAX_MANTISSA {
        return None;
    }
    let m = m as i64;
    ((m as f64 / p).to_bits() == value.to_bits()).then_some(m)
}

/// What follows a value's tag: the zigzag-coded mantissa of a decimal
/// (a varint), or the 8 bytes of any other value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueBody {
    Mantissa(u64),
    Raw(u64),
}

/// `value` as a three-bit tag (its decimals `k`, or [`RAW_TAG`]) and a body,
/// for an encoding that keeps the tag apart from the body (a staging slot
/// packs it into the sample's first byte).
pub fn split_value(value: f64) -> (u64, ValueBody) {
    match decimal(value) {
        Some((m, k)) => (u64::from(k), ValueBody::Mantissa(zigzag(m))),
        None => (RAW_TAG, ValueBody::Raw(value.to_bits())),
    }
}

/// Writes what [`Reader::value_body`] reads.
pub fn put_value_body(out: &mut Vec<u8>, body: ValueBody) {
    match body {
        ValueBody::Mantissa(z) => put_varint(out, z),
        ValueBody::Raw(bits) => out.extend_from_slice(&bits.to_le_bytes()),
    }
}

/// One value on its own (in a chunk of values, and in the staging slots of
/// earlier sitegates): a varint `zigzag(m) << 3 | k`, or tag 7 and 8 bytes.
pub fn put_value(out: &mut Vec<u8>, value: f64) {
    match split_value(value) {
        (k, ValueBody::Mantissa(z)) => put_varint(out, z << 3 | k),
        (_, raw) => {
            put_varint(out, RAW_TAG);
            put_value_body(out, raw);
        }
    }
}

/// Chunk formats (first byte of a chunk body).
const CHUNK_DECIMAL: u8 = 1;
const CHUNK_VALUES: u8 = 2;

/// Encodes the samples of one series, `ts` strictly ascending, into a chunk
/// body. The first timestamp is not in the body (the chunk row's `start`
/// column holds it); nor is the count (`n`).
///
/// Times are stored as the change of the step between samples (a steady poll
/// interval costs a byte); values, when every one is a decimal with at most
/// [`MAX_DECIMALS`] places, as steps of a common mantissa, else one by one.
pub fn encode_chunk(samples: &[(i64, f64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(samples.len() * 4 + 2);
    let k = samples
        .iter()
        .try_fold(0u8, |k, &(_, v)| decimal(v).map(|(_, kv)| k.max(kv)));
    let mantissas: Option<Vec<i64>> =
        k.and_then(|k| samples.iter().map(|&(_, v)| mantissa(v, k)).collect());
    match (k, &mantissas) {
        (Some(k), Some(_)) => {
            out.push(CHUNK_DECIMAL);
            out.push(k);
        }
        _ => out.push(CHUNK_VALUES),
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

/// Calls `f(ts, value)` for each of the `n` samples of a chunk that starts at
/// `start`, in time order.
pub fn decode_chunk(
    start: i64,
    n: usize,
    body: &[u8],
    mut f: impl FnMut(i64, f64),
) -> Result<(), Malformed> {
    let mut r = Reader::new(body);
    let decimals = match r.byte()? {
        CHUNK_DECIMAL => {
            let k = r.byte()?;
            if k > MAX_DECIMALS {
                return Err(Malformed);
            }
            Some(POW10[usize::from(k)])
        }
        CHUNK_VALUES => None,
        _ => return Err(Malformed),
    };
    let (mut ts, mut step, mut m) = (start, 0i64, 0i64);
    for i in 0..n {
        if i > 0 {
            step = step.wrapping_add(r.signed()?);
            ts = ts.wrapping_add(step);
        }
        let v = match decimals {
            Some(p) => {
                m = m.wrapping_add(r.signed()?);
                m as f64 / p
            }
            None => r.value()?,
        };
        f(ts, v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(samples: &[(i64, f64)]) -> usize {
        let body = encode_chunk(samples);
        let mut back = Vec::new();
        decode_chunk(samples[0].0, samples.len(), &body, |t, v| back.push((t, v)))
            .expect("decodes");
        assert_eq!(back.len(), samples.len());
        for (a, b) in samples.iter().zip(&back) {
            assert_eq!(a.0, b.0);
            assert_eq!(a.1.to_bits(), b.1.to_bits(), "{} vs {}", a.1, b.1);
        }
        body.len()
    }

    #[test]
    fn varints_and_zigzag_round_trip() {
        for n in [0i64, 1, -1, 63, -64, 64, 1 << 40, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_varint(&mut out, zigzag(n));
            assert_eq!(Reader::new(&out).signed(), Ok(n));
        }
        assert_eq!(Reader::new(&[0x80]).varint(), Err(Malformed));
    }

    #[test]
    fn decimals_are_exact_and_shortest() {
        assert_eq!(decimal(230.1), Some((2301, 1)));
        assert_eq!(decimal(3000.0), Some((3000, 0)));
        assert_eq!(decimal(-0.125), Some((-125, 3)));
        assert_eq!(decimal(1.0 / 3.0), None);
        assert_eq!(decimal(-0.0), None, "the sign of zero is kept as raw bytes");
        assert_eq!(decimal(1e300), None);
        assert_eq!(decimal(f64::NAN), None);
        for v in [0.1, 0.7, 49.95, 1e-6, 123_456.789, 9_007_199_254_740_992.0] {
            let mut out = Vec::new();
            put_value(&mut out, v);
            assert_eq!(Reader::new(&out).value().map(f64::to_bits), Ok(v.to_bits()));
        }
    }

    #[test]
    fn chunks_round_trip_bit_for_bit_and_are_small() {
        // A steady 1 Hz gauge with one decimal: about two bytes a sample.
        let steady: Vec<(i64, f64)> = (0..600)
            .map(|i| {
                (
                    1_717_200_000_000 + i * 1000 + i % 3,
                    230.0 + (i % 17) as f64 / 10.0,
                )
            })
            .collect();
        let size = round_trip(&steady);
        assert!(size < 600 * 3, "{size} bytes");
        // Values that are not short decimals, negative zero, huge ones.
        let odd = [
            (10, 1.0 / 3.0),
            (11, -0.0),
            (500, 1e300),
            (501, f64::MIN_POSITIVE),
            (9_000, -5.5),
        ];
        round_trip(&odd);
        // Decimals whose common mantissa would not be exact fall back too.
        round_trip(&[(0, 9_007_199_254_740_991.0), (1, 0.5)]);
        round_trip(&[(-5, 1.0)]);
    }

    #[test]
    fn malformed_chunks_are_errors_not_panics() {
        let body = encode_chunk(&[(0, 1.5), (1000, 2.5)]);
        for cut in 0..body.len() {
            assert_eq!(decode_chunk(0, 2, &body[..cut], |_, _| {}), Err(Malformed));
        }
        assert_eq!(decode_chunk(0, 1, &[9], |_, _| {}), Err(Malformed));
        assert_eq!(
            decode_chunk(0, 1, &[CHUNK_DECIMAL, 40, 0], |_, _| {}),
            Err(Malformed)
        );
    }
}
