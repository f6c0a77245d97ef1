//! Byte encodings of values inside SQLite blobs, shared by the staging slots
//! ([`stage`](super::stage)) and the raw-sample chunks
//! ([`chunk_codec`](super::chunk_codec)).
//!
//! Every encoding is exact: a decoded value has the bits of the stored one. A
//! value that is a short decimal (whole watts, one-decimal volts, ...) is
//! stored as the integer `m` with `value = m / 10^k`; a value that is exactly
//! a float32 (what a float register gives) as its 4 bytes; any other finite
//! value as its 8 bytes. Integers are LEB128 varints, signed ones
//! zigzag-coded first.
//!
//! Pure: no SQLite, no clock. Decoders never panic on malformed input; they
//! return [`Malformed`] instead.

/// Most decimals a value may have to be stored as a decimal.
pub const MAX_DECIMALS: u8 = 6;
/// The value-code tag that says "8 raw bytes follow".
const RAW_TAG: u64 = 7;
/// The tag that says "the 4 bytes of a float32 follow" (staging slots of the
/// current format only: their tags have four bits).
pub const F32_TAG: u64 = 8;
/// Largest mantissa stored exactly (2^53).
const MAX_MANTISSA: f64 = 9_007_199_254_740_992.0;
pub const POW10: [f64; MAX_DECIMALS as usize + 1] = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6];

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
        let mut out = [0u8; 8];
        out.copy_from_slice(self.take(8)?);
        Ok(out)
    }

    pub fn fixed4(&mut self) -> Result<[u8; 4], Malformed> {
        let mut out = [0u8; 4];
        out.copy_from_slice(self.take(4)?);
        Ok(out)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.at.checked_add(n).ok_or(Malformed)?;
        let slice = self.bytes.get(self.at..end).ok_or(Malformed)?;
        self.at = end;
        Ok(slice)
    }

    /// A value written by `put_value` (tests; the store writes chunks).
    pub fn value(&mut self) -> Result<f64, Malformed> {
        let code = self.varint()?;
        let tag = code & 7;
        if tag == RAW_TAG {
            return self.value_body(RAW_TAG);
        }
        Ok(decimal_value(code >> 3, tag))
    }

    /// The body of a value whose tag (what [`split_value`] returns) the
    /// caller read elsewhere.
    pub fn value_body(&mut self, tag: u64) -> Result<f64, Malformed> {
        match tag {
            RAW_TAG => Ok(f64::from_bits(u64::from_le_bytes(self.fixed8()?))),
            F32_TAG => Ok(f64::from(f32::from_bits(u32::from_le_bytes(
                self.fixed4()?,
            )))),
            0..RAW_TAG => Ok(decimal_value(self.varint()?, tag)),
            _ => Err(Malformed),
        }
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
pub fn mantissa(value: f64, k: u8) -> Option<i64> {
    let p = POW10[usize::from(k)];
    let m = (value * p).round();
    if m.is_nan() || m.abs() > MAX_MANTISSA {
        return None;
    }
    let m = m as i64;
    ((m as f64 / p).to_bits() == value.to_bits()).then_some(m)
}

/// `value` as a float32, if it is one exactly (what a float register
/// decodes to; its sign of zero kept).
pub fn as_f32(value: f64) -> Option<f32> {
    let f = value as f32;
    (f64::from(f).to_bits() == value.to_bits()).then_some(f)
}

/// A float32's bits as an integer in the floats' own order (a step between
/// close values is small, also across zero; -0 is just below +0).
pub fn f32_ordered(f: f32) -> i64 {
    let bits = f.to_bits();
    if bits & 0x8000_0000 == 0 {
        i64::from(bits)
    } else {
        -i64::from(bits & 0x7fff_ffff) - 1
    }
}

/// The float32 of [`f32_ordered`].
pub fn f32_from_ordered(n: i64) -> Result<f32, Malformed> {
    let magnitude = |m: i64| {
        u32::try_from(m)
            .ok()
            .filter(|&m| m <= 0x7fff_ffff)
            .ok_or(Malformed)
    };
    let bits = if n >= 0 {
        magnitude(n)?
    } else {
        magnitude(-(n + 1))? | 0x8000_0000
    };
    Ok(f32::from_bits(bits))
}

/// A float64's bits as an integer in the floats' own order (see
/// [`f32_ordered`]); every `i64` is some float64's.
pub fn f64_ordered(v: f64) -> i64 {
    let bits = v.to_bits();
    if bits >> 63 == 0 {
        bits as i64
    } else {
        -((bits & !(1 << 63)) as i64) - 1
    }
}

/// The float64 of [`f64_ordered`].
pub fn f64_from_ordered(n: i64) -> f64 {
    if n >= 0 {
        f64::from_bits(n as u64)
    } else {
        // -(n + 1) is in 0..=i64::MAX.
        f64::from_bits((-(n + 1)) as u64 | 1 << 63)
    }
}

/// What follows a value's tag: the zigzag-coded mantissa of a decimal
/// (a varint), the 4 bytes of a float32, or the 8 bytes of any other value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueBody {
    Mantissa(u64),
    F32(u32),
    Raw(u64),
}

/// `value` as a tag (its decimals `k`, [`F32_TAG`] or [`RAW_TAG`]) and a
/// body, for an encoding that keeps the tag apart from the body (a staging
/// slot packs it into the sample's first byte). With `f32s` false, a float32
/// is raw (the three-bit tags of earlier slot formats).
pub fn split_value(value: f64, f32s: bool) -> (u64, ValueBody) {
    match (decimal(value), as_f32(value)) {
        (Some((m, k)), _) => (u64::from(k), ValueBody::Mantissa(zigzag(m))),
        (None, Some(f)) if f32s => (F32_TAG, ValueBody::F32(f.to_bits())),
        _ => (RAW_TAG, ValueBody::Raw(value.to_bits())),
    }
}

/// Writes what [`Reader::value_body`] reads.
pub fn put_value_body(out: &mut Vec<u8>, body: ValueBody) {
    match body {
        ValueBody::Mantissa(z) => put_varint(out, z),
        ValueBody::F32(bits) => out.extend_from_slice(&bits.to_le_bytes()),
        ValueBody::Raw(bits) => out.extend_from_slice(&bits.to_le_bytes()),
    }
}

#[cfg(test)]
/// One value on its own (in a chunk of values, and in the staging slots of
/// earlier sitegates): a varint `zigzag(m) << 3 | k`, or tag 7 and 8 bytes.
pub fn put_value(out: &mut Vec<u8>, value: f64) {
    match split_value(value, false) {
        (k, ValueBody::Mantissa(z)) => put_varint(out, z << 3 | k),
        (_, raw) => {
            put_varint(out, RAW_TAG);
            put_value_body(out, raw);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn float32s_are_told_and_ordered() {
        assert_eq!(as_f32(f64::from(230.1f32)), Some(230.1f32));
        assert_eq!(as_f32(230.1), None);
        assert_eq!(as_f32(-0.0).map(f32::to_bits), Some((-0.0f32).to_bits()));
        assert_eq!(as_f32(1e300), None);
        let floats = [
            f32::MIN,
            -1.5,
            -f32::MIN_POSITIVE,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            1.0,
            49.99,
            f32::MAX,
        ];
        let ordered: Vec<i64> = floats.iter().map(|&f| f32_ordered(f)).collect();
        assert!(ordered.windows(2).all(|w| w[0] < w[1]), "{ordered:?}");
        for f in floats {
            let back = f32_from_ordered(f32_ordered(f)).expect("a float32");
            assert_eq!(back.to_bits(), f.to_bits());
        }
        assert_eq!(f32_from_ordered(1 << 40), Err(Malformed));
        assert_eq!(f32_ordered(0.0) - f32_ordered(-0.0), 1);
        for v in [f64::MIN, -1e-300, -0.0, 0.0, 5e-324, 1.0, f64::MAX] {
            assert_eq!(f64_from_ordered(f64_ordered(v)).to_bits(), v.to_bits());
        }
        for n in [i64::MIN, -1, 0, i64::MAX] {
            assert_eq!(f64_ordered(f64_from_ordered(n)), n);
        }
        let mut out = Vec::new();
        let (tag, body) = split_value(f64::from(49.99f32), true);
        assert_eq!(tag, F32_TAG);
        put_value_body(&mut out, body);
        assert_eq!(out.len(), 4);
        let back = Reader::new(&out).value_body(tag).expect("decodes");
        assert_eq!(back.to_bits(), f64::from(49.99f32).to_bits());
        assert_eq!(split_value(f64::from(49.99f32), false).0, RAW_TAG);
        assert_eq!(Reader::new(&[0; 8]).value_body(9), Err(Malformed));
    }
}
