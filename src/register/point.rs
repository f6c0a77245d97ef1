//! Point specifications: where a property lives in a device's registers and how
//! its raw value becomes a value in the vocabulary's unit and sign.
//!
//! Pure. Both SunSpec maps and register-map profiles produce `PointSpec`s; the
//! poller reads the planned spans and calls [`decode_points`].

use super::codec::{self, Absent, ValueType, WordOrder};
use super::plan::{Image, Span, Table};
use crate::model::Property;

/// How a raw value is scaled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Used as read.
    One,
    /// Multiplied by a fixed factor (register maps: 0.1, 10, ...).
    Factor(f64),
    /// `raw × 10^sf` with `sf` in a SunSpec `sunssf` holding register.
    SunspecSf(u16),
}

/// A register whose value decides whether the point's value applies; otherwise
/// the point reads as `otherwise` (e.g. a limit that is disabled reads as 100 %).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gate {
    pub table: Table,
    pub addr: u16,
    pub enabled_when: u16,
    pub otherwise: f64,
}

/// A register bit that gives the sign of a magnitude (a vendor that reports
/// battery power as a magnitude plus "charging" and "discharging" flags). A
/// signed register whose raw value is negative keeps that sign whatever the flag.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SignFlag {
    pub table: Table,
    pub addr: u16,
    /// The value is negated while `register & mask != 0`.
    pub mask: u16,
}

/// A signed 16-bit register whose sign is the point's (a vendor whose
/// firmware reports a magnitude with its direction flags clear, while a
/// battery current keeps its sign: Sungrow 13020). Like the flag, it gives
/// the sign of a magnitude only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SignOf {
    pub table: Table,
    pub addr: u16,
}

/// A second register of the point's type, order and scale whose value is
/// subtracted from the point's: a vendor that reports a battery's discharge
/// and charge power as two magnitudes (Growatt SPH 1009 and 1011), so the
/// point reads discharge − charge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Minus {
    pub table: Table,
    pub addr: u16,
}

/// One property's location and decoding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PointSpec {
    pub property: Property,
    pub table: Table,
    pub addr: u16,
    pub ty: ValueType,
    pub order: WordOrder,
    pub absent: Absent,
    pub scale: Scale,
    /// Flip the sign after scaling (vendor sign conventions, `invert_power`).
    pub negate: bool,
    pub gate: Option<Gate>,
    /// Negates a non-negative raw value while a flag register says so (applied
    /// before `negate`).
    pub sign: Option<SignFlag>,
    /// Negates a non-negative raw value while another signed register is
    /// negative (tried after `sign`; applied before `negate`).
    pub sign_of: Option<SignOf>,
    /// Subtracted from the raw value before scaling (read with the point).
    pub minus: Option<Minus>,
}

impl PointSpec {
    /// A holding-register point with SunSpec sentinel handling.
    pub fn sunspec(
        property: Property,
        addr: u16,
        ty: ValueType,
        absent: Absent,
        scale: Scale,
    ) -> Self {
        Self {
            property,
            table: Table::Holding,
            addr,
            ty,
            order: WordOrder::HighFirst,
            absent,
            scale,
            negate: false,
            gate: None,
            sign: None,
            sign_of: None,
            minus: None,
        }
    }

    pub fn negated(mut self, negate: bool) -> Self {
        self.negate ^= negate;
        self
    }

    pub fn gated(mut self, gate: Gate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Registers this point needs read.
    pub fn spans(&self) -> impl Iterator<Item = Span> {
        let value = Span::new(self.table, self.addr, self.ty.words());
        let sf = match self.scale {
            Scale::SunspecSf(addr) => Some(Span::new(Table::Holding, addr, 1)),
            _ => None,
        };
        let gate = self.gate.map(|g| Span::new(g.table, g.addr, 1));
        let sign = self.sign.map(|s| Span::new(s.table, s.addr, 1));
        let sign_of = self.sign_of.map(|s| Span::new(s.table, s.addr, 1));
        let minus = self
            .minus
            .map(|m| Span::new(m.table, m.addr, self.ty.words()));
        std::iter::once(value)
            .chain(sf)
            .chain(gate)
            .chain(sign)
            .chain(sign_of)
            .chain(minus)
    }

    /// The value in the vocabulary's unit and sign, or `None` when the registers
    /// say "not implemented" or were not read.
    pub fn decode(&self, img: &Image) -> Option<f64> {
        if let Some(g) = self.gate {
            let flag = img.get(g.table, g.addr, 1)?[0];
            if flag != g.enabled_when {
                return Some(g.otherwise);
            }
        }
        let words = img.get(self.table, self.addr, self.ty.words())?;
        let mut raw = codec::decode(words, self.ty, self.order, self.absent)?;
        if let Some(m) = self.minus {
            let words = img.get(m.table, m.addr, self.ty.words())?;
            raw -= codec::decode(words, self.ty, self.order, self.absent)?;
        }
        let v = match self.scale {
            Scale::One => raw,
            Scale::Factor(f) => raw * f,
            Scale::SunspecSf(addr) => {
                let sf = codec::decode_sf(img.get(Table::Holding, addr, 1)?[0])?;
                codec::apply_sf(raw, sf)
            }
        };
        // A raw value that is already negative carries its own sign: the flag
        // gives the sign of a magnitude only (a vendor whose newer firmware made
        // the register signed, e.g. Sungrow 13021, reads right either way).
        let flag = match self.sign {
            Some(s) => img.get(s.table, s.addr, 1)?[0] & s.mask != 0,
            None => false,
        };
        let other_negative = match self.sign_of {
            Some(s) => (img.get(s.table, s.addr, 1)?[0] as i16) < 0,
            None => false,
        };
        let flagged = raw >= 0.0 && (flag || other_negative);
        let v = if self.negate ^ flagged { -v } else { v };
        // -0.0 reads oddly in JSON.
        Some(if v == 0.0 { 0.0 } else { v })
    }
}

/// Every register span the points need.
pub fn spans(points: &[PointSpec]) -> Vec<Span> {
    points.iter().flat_map(PointSpec::spans).collect()
}

/// Decodes points; where several points map the same property, the first one
/// that has a value wins (points are listed in order of preference).
pub fn decode_points(points: &[PointSpec], img: &Image) -> Vec<(Property, f64)> {
    let mut seen = [false; Property::COUNT];
    let mut out = Vec::with_capacity(points.len().min(Property::COUNT));
    for p in points {
        if seen[p.property.index()] {
            continue;
        }
        if let Some(v) = p.decode(img) {
            seen[p.property.index()] = true;
            out.push((p.property, v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(addr: u16, words: &[u16]) -> Image {
        Image::holding(addr, words)
    }

    #[test]
    fn scale_factor_and_sign() {
        // W = 2450 at 100, W_SF = -1 at 101
        let i = img(100, &[2450, 0xFFFF]);
        let p = PointSpec::sunspec(
            Property::ActivePower,
            100,
            ValueType::I16,
            Absent::SunspecNumber,
            Scale::SunspecSf(101),
        );
        assert_eq!(p.decode(&i), Some(245.0));
        assert_eq!(p.negated(true).decode(&i), Some(-245.0));
    }

    #[test]
    fn unimplemented_scale_factor_means_no_value() {
        let i = img(100, &[2450, 0x8000]);
        let p = PointSpec::sunspec(
            Property::ActivePower,
            100,
            ValueType::I16,
            Absent::SunspecNumber,
            Scale::SunspecSf(101),
        );
        assert_eq!(p.decode(&i), None);
    }

    #[test]
    fn gate_reads_otherwise_when_disabled() {
        // WMaxLimPct = 5000 (SF -2) at 10, SF at 11, Ena at 12
        let gate = Gate {
            table: Table::Holding,
            addr: 12,
            enabled_when: 1,
            otherwise: 100.0,
        };
        let p = PointSpec::sunspec(
            Property::ActivePowerLimit,
            10,
            ValueType::U16,
            Absent::SunspecNumber,
            Scale::SunspecSf(11),
        )
        .gated(gate);
        assert_eq!(p.decode(&img(10, &[5000, 0xFFFE, 1])), Some(50.0));
        assert_eq!(p.decode(&img(10, &[5000, 0xFFFE, 0])), Some(100.0));
    }

    #[test]
    fn first_point_with_a_value_wins() {
        let i = img(0, &[0xFFFF, 55]);
        let points = [
            PointSpec::sunspec(
                Property::Soc,
                0,
                ValueType::U16,
                Absent::SunspecNumber,
                Scale::One,
            ),
            PointSpec::sunspec(
                Property::Soc,
                1,
                ValueType::U16,
                Absent::SunspecNumber,
                Scale::One,
            ),
            PointSpec::sunspec(
                Property::Soc,
                1,
                ValueType::U16,
                Absent::SunspecNumber,
                Scale::Factor(2.0),
            ),
        ];
        assert_eq!(decode_points(&points, &i), vec![(Property::Soc, 55.0)]);
    }

    #[test]
    fn a_flag_signs_magnitudes_and_leaves_negative_values_alone() {
        // 13021 (i16) at 0, running state at 1 with bit 1 = charging.
        let p = PointSpec {
            sign: Some(SignFlag {
                table: Table::Holding,
                addr: 1,
                mask: 0x0002,
            }),
            ..PointSpec::sunspec(
                Property::ActivePower,
                0,
                ValueType::I16,
                Absent::Never,
                Scale::One,
            )
        };
        // Older firmware: a magnitude and the flag.
        assert_eq!(p.decode(&img(0, &[1500, 0x0002])), Some(-1500.0));
        assert_eq!(p.decode(&img(0, &[1500, 0x0004])), Some(1500.0));
        // Newer firmware: signed, with or without the flag.
        assert_eq!(
            p.decode(&img(0, &[(-1500i16) as u16, 0x0002])),
            Some(-1500.0)
        );
        assert_eq!(
            p.decode(&img(0, &[(-1500i16) as u16, 0x0000])),
            Some(-1500.0)
        );
    }

    #[test]
    fn a_signed_register_signs_magnitudes_whose_flags_are_clear() {
        // 13021 (i16) at 0, running state at 1 (bit 1 charging), battery
        // current (i16, − charging) at 2.
        let p = PointSpec {
            sign: Some(SignFlag {
                table: Table::Holding,
                addr: 1,
                mask: 0x0002,
            }),
            sign_of: Some(SignOf {
                table: Table::Holding,
                addr: 2,
            }),
            ..PointSpec::sunspec(
                Property::ActivePower,
                0,
                ValueType::I16,
                Absent::Never,
                Scale::One,
            )
        };
        let neg = |v: i16| v as u16;
        for (what, words, want) in [
            ("magnitude, flag: charging", [1500, 0x0002, 0], -1500.0),
            (
                "magnitude, flag clear, current −: charging",
                [1500, 0, neg(-32)],
                -1500.0,
            ),
            (
                "magnitude, flag clear, current +: discharging",
                [2000, 0, 40],
                2000.0,
            ),
            (
                "magnitude, discharging flag, current +",
                [2000, 0x0004, 40],
                2000.0,
            ),
            ("signed −, nothing else", [neg(-1500), 0, 0], -1500.0),
            (
                "signed −, current − too: not negated twice",
                [neg(-1500), 0, neg(-32)],
                -1500.0,
            ),
        ] {
            assert_eq!(p.decode(&img(0, &words)), Some(want), "{what}");
        }
        assert_eq!(
            p.spans().last(),
            Some(Span::new(Table::Holding, 2, 1)),
            "the sign register is read with the point"
        );
        // Not read: no value rather than a guessed sign.
        assert_eq!(p.decode(&img(0, &[1500, 0])), None);
    }

    #[test]
    fn a_second_register_is_subtracted() {
        // Discharge power (u32, 0.1 W) at 0, charge power at 2.
        let p = PointSpec {
            minus: Some(Minus {
                table: Table::Holding,
                addr: 2,
            }),
            ..PointSpec::sunspec(
                Property::ActivePower,
                0,
                ValueType::U32,
                Absent::Never,
                Scale::Factor(0.1),
            )
        };
        assert_eq!(p.decode(&img(0, &[0, 15_000, 0, 0])), Some(1500.0));
        assert_eq!(p.decode(&img(0, &[0, 0, 0, 20_000])), Some(-2000.0));
        assert_eq!(
            p.spans().last(),
            Some(Span::new(Table::Holding, 2, 2)),
            "the subtracted register is read with the point"
        );
        // Not read: no value rather than a magnitude without its other half.
        assert_eq!(p.decode(&img(0, &[0, 15_000])), None);
    }

    #[test]
    fn spans_include_sf_and_gate() {
        let gate = Gate {
            table: Table::Holding,
            addr: 12,
            enabled_when: 1,
            otherwise: 100.0,
        };
        let p = PointSpec::sunspec(
            Property::ActivePowerLimit,
            10,
            ValueType::U32,
            Absent::SunspecNumber,
            Scale::SunspecSf(11),
        )
        .gated(gate);
        let s: Vec<Span> = p.spans().collect();
        assert_eq!(
            s,
            vec![
                Span::new(Table::Holding, 10, 2),
                Span::new(Table::Holding, 11, 1),
                Span::new(Table::Holding, 12, 1)
            ]
        );
    }
}
