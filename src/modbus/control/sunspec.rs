//! SunSpec write recipes (`docs/steering.md` and `docs/devices.md` on writes;
//! the SunSpec model definitions of 123, 124 and 704).
//!
//! Model 124: an exact storage power as a window in % of `WChaMax` scaled by
//! `InOutWRte_SF` (discharge p: `InWRte = −p`, `OutWRte = +p`; charge p: the
//! opposite; idle: both 0), `InOutWRte_RvrtTms` first, `StorCtl_Mod = 3` last.
//! Release: `StorCtl_Mod = 0`, both rates 100 %.
//!
//! Models 123 and 704 share one shape, a setpoint that an enable point switches
//! on and a revert timer holds ([`Switched`]): the setpoint, then the timer,
//! then the enable point = 1; release: the enable point = 0 alone.
//! - Production limit (123 `WMaxLimPct`, or 704 `WMaxLimPct` for devices
//!   without 123): % of `WMax` scaled by `WMaxLimPct_SF`; the timer is
//!   `WMaxLimPct_RvrtTms` (123, uint16 s) or `WMaxLimPctRvrtTms` (704, uint32 s).
//! - Storage power (704, for devices without 124): `WSetMod = 1` (watts) with
//!   `WSet` (int32 W, + discharge, scaled by `WSet_SF`) in one write, timer
//!   `WSetRvrtTms` (uint32 s), enable `WSetEna`.
//!
//! 704's reversion values (`WMaxLimPctRvrt`, `WMaxLimPctEnaRvrt`, `WSetRvrt`,
//! `WSetEnaRvrt`) are left as the installer set them: when the timer runs out
//! the device goes to its own defaults, as with model 123.
//!
//! A recipe reads only the registers it needs (its calibration), each point on
//! its own: never a whole control block, which a device may refuse when it
//! leaves some of the block's points out.

use ::sunspec::models::model123::Model123 as M123;
use ::sunspec::models::model124::Model124 as M124;
use ::sunspec::models::model704::Model704 as M704;
use ::sunspec::{Group, Point, Value};

use super::{Originals, RegWrite, WriteError};
use crate::modbus::sunspec::ModelBlock;
use crate::register::codec::{self, Absent, ValueType, WordOrder};
use crate::register::plan::{self, Image, Span, Table};

/// Where a point sits in its model (from the `sunspec` crate's tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct At {
    offset: u16,
    len: u16,
}

const fn at<G: Group, T: Value>(p: &Point<G, T>) -> At {
    At {
        offset: p.offset,
        len: p.length,
    }
}

impl At {
    /// The registers of the point in `block`, when the block holds it.
    fn span(self, block: &ModelBlock) -> Option<Span> {
        block
            .holds(self.offset, self.len)
            .then(|| Span::new(Table::Holding, block.point(self.offset), self.len))
    }

    fn addr(self, block: &ModelBlock) -> Result<u16, WriteError> {
        if block.holds(self.offset, self.len) {
            Ok(block.point(self.offset))
        } else {
            Err(WriteError::Missing {
                what: "a control register",
                detail: format!(
                    "model {} is {} registers long, offset {} is beyond it",
                    block.id, block.len, self.offset
                ),
            })
        }
    }

    /// The point as a scale factor; "not implemented" (or not read) counts as 0.
    fn sf(self, block: &ModelBlock, cal: &Image) -> Result<i32, WriteError> {
        let a = self.addr(block)?;
        Ok(cal
            .get(Table::Holding, a, 1)
            .and_then(|w| codec::decode_sf(w[0]))
            .unwrap_or(0))
    }

    /// A write of `value` as `ty` to the point (high word first, as SunSpec has it).
    fn write(self, block: &ModelBlock, value: f64, ty: ValueType) -> Result<RegWrite, WriteError> {
        Ok(RegWrite {
            addr: self.addr(block)?,
            values: words(value, ty)?,
        })
    }
}

fn words(value: f64, ty: ValueType) -> Result<Vec<u16>, WriteError> {
    codec::encode(value, ty, WordOrder::HighFirst).map_err(|e| WriteError::Encode(e.to_string()))
}

/// The calibration reads: each point on its own, so that a device that
/// refuses other registers of the block (power factor, ramp times) still
/// answers; adjacent points are read together.
fn calibration(block: &ModelBlock, points: &[At]) -> Vec<Span> {
    let spans: Vec<Span> = points.iter().filter_map(|p| p.span(block)).collect();
    plan::plan(&spans, 0)
}

/// A setpoint that an enable point switches on and a revert timer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Switched {
    timer: At,
    /// What the timer is (seconds as uint16 or uint32).
    timer_ty: ValueType,
    enable: At,
}

impl Switched {
    /// `setpoint`, the timer at `revert_s`, then enable = 1.
    fn on(
        self,
        block: &ModelBlock,
        setpoint: RegWrite,
        revert_s: u16,
    ) -> Result<Vec<RegWrite>, WriteError> {
        let timer = self
            .timer
            .write(block, f64::from(revert_s), self.timer_ty)?;
        let enable = self.enable.write(block, 1.0, ValueType::U16)?;
        Ok(vec![setpoint, timer, enable])
    }

    /// Enable = 0 alone.
    fn off(self, block: &ModelBlock) -> Result<Vec<RegWrite>, WriteError> {
        Ok(vec![self.enable.write(block, 0.0, ValueType::U16)?])
    }
}

// The points each recipe uses.

const W_CHA_MAX: At = at(&M124::W_CHA_MAX);
const W_CHA_MAX_SF: At = at(&M124::W_CHA_MAX_SF);
const IN_OUT_W_RTE_SF: At = at(&M124::IN_OUT_W_RTE_SF);
/// `OutWRte` and `InWRte`, neighbours written together.
const RATES: At = At {
    offset: M124::OUT_W_RTE.offset,
    len: 2,
};
const _: () = assert!(M124::IN_W_RTE.offset == M124::OUT_W_RTE.offset + 1);
const STOR_CTL_MOD: At = at(&M124::STOR_CTL_MOD);
const IN_OUT_W_RTE_RVRT_TMS: At = at(&M124::IN_OUT_W_RTE_RVRT_TMS);

/// The points of a production limit in one model.
struct LimitPoints {
    pct: At,
    pct_sf: At,
    switch: Switched,
}

const LIMIT_123: LimitPoints = LimitPoints {
    pct: at(&M123::W_MAX_LIM_PCT),
    pct_sf: at(&M123::W_MAX_LIM_PCT_SF),
    switch: Switched {
        timer: at(&M123::W_MAX_LIM_PCT_RVRT_TMS),
        timer_ty: ValueType::U16,
        enable: at(&M123::W_MAX_LIM_ENA),
    },
};

const LIMIT_704: LimitPoints = LimitPoints {
    pct: at(&M704::W_MAX_LIM_PCT),
    pct_sf: at(&M704::W_MAX_LIM_PCT_SF),
    switch: Switched {
        timer: at(&M704::W_MAX_LIM_PCT_RVRT_TMS),
        timer_ty: ValueType::U32,
        enable: at(&M704::W_MAX_LIM_PCT_ENA),
    },
};

const W_SET_MOD: At = at(&M704::W_SET_MOD);
const W_SET: At = at(&M704::W_SET);
const W_SET_SF: At = at(&M704::W_SET_SF);
const _: () = assert!(M704::W_SET.offset == M704::W_SET_MOD.offset + 1);
const W_SET_SWITCH: Switched = Switched {
    timer: at(&M704::W_SET_RVRT_TMS),
    timer_ty: ValueType::U32,
    enable: at(&M704::W_SET_ENA),
};

/// Model 124 at `block`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Storage124 {
    pub block: ModelBlock,
}

impl Storage124 {
    /// `WChaMax`, its scale factor and `InOutWRte_SF`.
    pub fn calibration(&self) -> Vec<Span> {
        calibration(&self.block, &[W_CHA_MAX, W_CHA_MAX_SF, IN_OUT_W_RTE_SF])
    }

    /// The `OutWRte`/`InWRte` pair (neighbours: one write) in % of `WChaMax`.
    fn rates(&self, out_pct: f64, in_pct: f64, cal: &Image) -> Result<RegWrite, WriteError> {
        let sf = IN_OUT_W_RTE_SF.sf(&self.block, cal)?;
        let raw = |pct: f64| words(codec::unapply_sf(pct, sf), ValueType::I16);
        let mut values = raw(out_pct)?;
        values.extend(raw(in_pct)?);
        Ok(RegWrite {
            addr: RATES.addr(&self.block)?,
            values,
        })
    }

    /// `InOutWRte_RvrtTms`, the window, `StorCtl_Mod = 3`.
    pub fn power(&self, w: f64, revert_s: u16, cal: &Image) -> Result<Vec<RegWrite>, WriteError> {
        let pct = self.percent_of_w_cha_max(w, cal)?;
        let (out_pct, in_pct) = if w > 0.0 { (pct, -pct) } else { (-pct, pct) };
        self.window_writes(3, out_pct, in_pct, revert_s, cal)
    }

    /// `|w|` in % of `WChaMax`, never beyond 100 % (the rates cannot
    /// express more).
    pub(super) fn percent_of_w_cha_max(&self, w: f64, cal: &Image) -> Result<f64, WriteError> {
        let cha_max = self.w_cha_max(cal)?;
        Ok((w.abs() / cha_max * 100.0).min(100.0))
    }

    /// `InOutWRte_RvrtTms = revert_s`, the `OutWRte`/`InWRte` pair, then
    /// `StorCtl_Mod = mode`.
    pub(super) fn window_writes(
        &self,
        mode: u16,
        out_pct: f64,
        in_pct: f64,
        revert_s: u16,
        cal: &Image,
    ) -> Result<Vec<RegWrite>, WriteError> {
        let b = &self.block;
        Ok(vec![
            IN_OUT_W_RTE_RVRT_TMS.write(b, f64::from(revert_s), ValueType::U16)?,
            self.rates(out_pct, in_pct, cal)?,
            STOR_CTL_MOD.write(b, f64::from(mode), ValueType::U16)?,
        ])
    }

    /// `StorCtl_Mod = 0`, then both rates 100 %.
    pub fn release(&self, cal: &Image) -> Result<Vec<RegWrite>, WriteError> {
        Ok(vec![
            STOR_CTL_MOD.write(&self.block, 0.0, ValueType::U16)?,
            self.rates(100.0, 100.0, cal)?,
        ])
    }

    /// `WChaMax` in W: the 100 % of both rates.
    fn w_cha_max(&self, cal: &Image) -> Result<f64, WriteError> {
        let b = &self.block;
        let a = W_CHA_MAX.addr(b)?;
        let raw = cal.get(Table::Holding, a, 1).and_then(|w| {
            codec::decode(
                w,
                ValueType::U16,
                WordOrder::HighFirst,
                Absent::SunspecNumber,
            )
        });
        let scale = W_CHA_MAX_SF.sf(b, cal)?;
        match raw.map(|r| codec::apply_sf(r, scale)) {
            Some(w) if w > 0.0 => Ok(w),
            other => Err(WriteError::Missing {
                what: "WChaMax",
                detail: format!("it reads {other:?}"),
            }),
        }
    }
}

/// `WMaxLimPct` of model 123 (or 704, by the block's id) at `block`; limits
/// are in % of `wmax_w`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SunspecLimit {
    pub block: ModelBlock,
    pub wmax_w: f64,
}

impl SunspecLimit {
    fn points(&self) -> &'static LimitPoints {
        if self.block.id == 123 {
            &LIMIT_123
        } else {
            &LIMIT_704
        }
    }

    /// `WMaxLimPct_SF`.
    pub fn calibration(&self) -> Vec<Span> {
        calibration(&self.block, &[self.points().pct_sf])
    }

    /// `WMaxLimPct`, its timer, its enable point = 1.
    pub fn limit(&self, w: f64, revert_s: u16, cal: &Image) -> Result<Vec<RegWrite>, WriteError> {
        let (b, p) = (&self.block, self.points());
        let sf = p.pct_sf.sf(b, cal)?;
        let pct = (w / self.wmax_w * 100.0).clamp(0.0, 100.0);
        let set = p.pct.write(b, codec::unapply_sf(pct, sf), ValueType::U16)?;
        p.switch.on(b, set, revert_s)
    }

    /// The enable point = 0.
    pub fn release(&self) -> Result<Vec<RegWrite>, WriteError> {
        self.points().switch.off(&self.block)
    }

    /// The limit the device had switched on when found, in % of `WMax`
    /// (`None`: none on, or not read).
    pub fn found_limit(&self, found: &Originals, cal: &Image) -> Option<f64> {
        let (b, p) = (&self.block, self.points());
        if found.word(p.switch.enable.addr(b).ok()?)? != 1 {
            return None;
        }
        let raw = found.word(p.pct.addr(b).ok()?)?;
        let sf = p.pct_sf.sf(b, cal).ok()?;
        Some(codec::apply_sf(f64::from(raw), sf))
    }
}

/// Model 704's active power setpoint at `block`, for storage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Storage704 {
    pub block: ModelBlock,
}

impl Storage704 {
    /// `WSet_SF`.
    pub fn calibration(&self) -> Vec<Span> {
        calibration(&self.block, &[W_SET_SF])
    }

    /// `WSetMod = 1` and `WSet` in one write, `WSetRvrtTms`, `WSetEna = 1`.
    pub fn power(&self, w: f64, revert_s: u16, cal: &Image) -> Result<Vec<RegWrite>, WriteError> {
        let b = &self.block;
        let sf = W_SET_SF.sf(b, cal)?;
        // WSetMod and WSet are neighbours: one write, mode first.
        let mut set = W_SET_MOD.write(b, 1.0, ValueType::U16)?;
        set.values.extend(
            W_SET
                .write(b, codec::unapply_sf(w, sf), ValueType::I32)?
                .values,
        );
        W_SET_SWITCH.on(b, set, revert_s)
    }

    /// `WSetEna = 0`.
    pub fn release(&self) -> Result<Vec<RegWrite>, WriteError> {
        W_SET_SWITCH.off(&self.block)
    }
}
