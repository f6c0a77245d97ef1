//! Register codec: numeric types over 16-bit registers, word order, SunSpec
//! "not implemented" sentinels and scale factors.
//!
//! Pure functions only; no transport. Shared by the poller, the steering writes,
//! register-map profiles and the simulator.

/// A numeric type laid over one or more registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueType {
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
}

impl ValueType {
    /// Registers the type occupies.
    pub const fn words(self) -> u16 {
        match self {
            ValueType::U16 | ValueType::I16 => 1,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 2,
            ValueType::U64 | ValueType::I64 => 4,
        }
    }
}

/// Order of the registers of a multi-register value. Bytes inside a register are
/// always big-endian, as Modbus defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WordOrder {
    /// Most significant register first (Modbus and SunSpec convention).
    #[default]
    HighFirst,
    /// Least significant register first ("word swapped").
    LowFirst,
}

/// Which raw values mean "no value".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Absent {
    /// Every raw value is a value (register-map profiles).
    #[default]
    Never,
    /// SunSpec numbers: int = MIN, uint/enum/bitfield = MAX, float = NaN.
    SunspecNumber,
    /// SunSpec accumulators (acc16/32/64): 0.
    SunspecAccumulator,
    /// One raw bit pattern (register-map profiles: a vendor's "not available",
    /// such as 0x7FFF), compared before any sign interpretation.
    Raw(u64),
    /// Several raw bit patterns (a vendor with more than one "not available",
    /// such as GoodWe's temperatures: 0xFFFF and 0x7FFF).
    RawAny(Sentinels),
}

/// Up to [`Sentinels::MAX`] raw bit patterns that mean "no value".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sentinels {
    len: u8,
    values: [u64; Sentinels::MAX],
}

impl Sentinels {
    /// Most patterns one point may list.
    pub const MAX: usize = 4;

    /// `None` when `values` is empty or longer than [`Sentinels::MAX`].
    pub fn new(values: &[u64]) -> Option<Sentinels> {
        if values.is_empty() || values.len() > Self::MAX {
            return None;
        }
        let mut s = Sentinels {
            len: values.len() as u8,
            values: [0; Self::MAX],
        };
        s.values[..values.len()].copy_from_slice(values);
        Some(s)
    }

    pub fn contains(&self, bits: u64) -> bool {
        self.values[..usize::from(self.len)].contains(&bits)
    }
}

/// Assembles registers into one unsigned integer per the word order.
fn assemble(words: &[u16], order: WordOrder) -> u64 {
    let fold = |acc: u64, w: &u16| (acc << 16) | u64::from(*w);
    match order {
        WordOrder::HighFirst => words.iter().fold(0, fold),
        WordOrder::LowFirst => words.iter().rev().fold(0, fold),
    }
}

/// Decodes a value, or `None` when the registers are missing or hold the
/// type's "not implemented" value.
pub fn decode(words: &[u16], ty: ValueType, order: WordOrder, absent: Absent) -> Option<f64> {
    let n = ty.words() as usize;
    let words = words.get(..n)?;
    let bits = assemble(words, order);
    if absent == Absent::SunspecAccumulator && bits == 0 {
        return None;
    }
    if absent == Absent::Raw(bits) {
        return None;
    }
    if let Absent::RawAny(s) = absent {
        if s.contains(bits) {
            return None;
        }
    }
    let sunspec = absent == Absent::SunspecNumber;
    let v = match ty {
        ValueType::U16 => {
            let v = bits as u16;
            if sunspec && v == u16::MAX {
                return None;
            }
            f64::from(v)
        }
        ValueType::I16 => {
            let v = bits as u16 as i16;
            if sunspec && v == i16::MIN {
                return None;
            }
            f64::from(v)
        }
        ValueType::U32 => {
            let v = bits as u32;
            if sunspec && v == u32::MAX {
                return None;
            }
            f64::from(v)
        }
        ValueType::I32 => {
            let v = bits as u32 as i32;
            if sunspec && v == i32::MIN {
                return None;
            }
            f64::from(v)
        }
        ValueType::U64 => {
            if sunspec && bits == u64::MAX {
                return None;
            }
            bits as f64
        }
        ValueType::I64 => {
            let v = bits as i64;
            if sunspec && v == i64::MIN {
                return None;
            }
            v as f64
        }
        ValueType::F32 => {
            let v = f32::from_bits(bits as u32);
            // NaN and infinities are never measurements.
            if !v.is_finite() {
                return None;
            }
            f64::from(v)
        }
    };
    Some(v)
}

/// Why a value cannot be written as a register value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    #[error("{value} does not fit in {ty:?}")]
    OutOfRange { value: f64, ty: ValueType },
    #[error("{0} is not a finite number")]
    NotFinite(f64),
}

/// Encodes a value (rounded to the nearest integer for integer types).
pub fn encode(value: f64, ty: ValueType, order: WordOrder) -> Result<Vec<u16>, EncodeError> {
    if !value.is_finite() {
        return Err(EncodeError::NotFinite(value));
    }
    let r = value.round();
    let out_of_range = || EncodeError::OutOfRange { value, ty };
    let bits: u64 = match ty {
        ValueType::U16 => u64::from(u16::try_from(r as i64).map_err(|_| out_of_range())?),
        ValueType::I16 => u64::from(i16::try_from(r as i64).map_err(|_| out_of_range())? as u16),
        ValueType::U32 => u64::from(u32::try_from(r as i64).map_err(|_| out_of_range())?),
        ValueType::I32 => u64::from(i32::try_from(r as i64).map_err(|_| out_of_range())? as u32),
        ValueType::U64 => {
            if r < 0.0 || r >= u64::MAX as f64 {
                return Err(out_of_range());
            }
            r as u64
        }
        ValueType::I64 => {
            if r < i64::MIN as f64 || r >= i64::MAX as f64 {
                return Err(out_of_range());
            }
            r as i64 as u64
        }
        ValueType::F32 => {
            let f = value as f32;
            if !f.is_finite() {
                return Err(out_of_range());
            }
            u64::from(f.to_bits())
        }
    };
    let n = ty.words() as usize;
    let mut words: Vec<u16> = (0..n).rev().map(|i| (bits >> (16 * i)) as u16).collect();
    if order == WordOrder::LowFirst {
        words.reverse();
    }
    Ok(words)
}

/// Reads a SunSpec scale factor register: `None` when not implemented or outside
/// the −10..=10 range the model definitions allow.
pub fn decode_sf(word: u16) -> Option<i32> {
    let sf = word as i16;
    (sf != i16::MIN && (-10..=10).contains(&sf)).then_some(i32::from(sf))
}

/// `raw × 10^sf`.
pub fn apply_sf(raw: f64, sf: i32) -> f64 {
    // Multiplying by 10^-n accumulates binary error (0.1 is inexact); dividing by
    // 10^n keeps integers with a decimal scale exact to the printed digit.
    if sf >= 0 {
        raw * 10f64.powi(sf)
    } else {
        raw / 10f64.powi(-sf)
    }
}

/// The raw register value that represents `value` at scale `sf`.
pub fn unapply_sf(value: f64, sf: i32) -> f64 {
    if sf >= 0 {
        value / 10f64.powi(sf)
    } else {
        value * 10f64.powi(-sf)
    }
}

/// Decodes a NUL-padded ASCII/UTF-8 string register block; `None` when empty.
pub fn decode_string(words: &[u16]) -> Option<String> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let s = String::from_utf8_lossy(&bytes[..end]).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Encodes a string into exactly `words` registers, NUL-padded and truncated.
pub fn encode_string(s: &str, words: usize) -> Vec<u16> {
    let mut bytes = s.as_bytes().to_vec();
    bytes.resize(words * 2, 0);
    bytes
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect()
}

#[cfg(test)]
mod tests;
