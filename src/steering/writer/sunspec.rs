//! SunSpec write recipes (`steering.md`, "Writes to devices"; `sunspec.md` §4, §5).
//!
//! Model 124: an exact storage power as a window in % of `WChaMax` scaled by
//! `InOutWRte_SF` (discharge p: `InWRte = −p`, `OutWRte = +p`; charge p: the
//! opposite; idle: both 0), `InOutWRte_RvrtTms` first, `StorCtl_Mod = 3` last.
//! Release: `StorCtl_Mod = 0`, both rates 100 %.
//! Model 123: `WMaxLimPct` in % of `WMax` scaled by `WMaxLimPct_SF`, then
//! `WMaxLimPct_RvrtTms`, then `WMaxLim_Ena = 1`. Release: `WMaxLim_Ena = 0`.
//!
//! A writer reads only the registers it needs (its calibration: reference
//! values and scale factors) and reads back only the registers it wrote, each
//! on its own: never a whole control block, which a device may refuse when it
//! leaves some of the block's points out.

use ::sunspec::models::model123::Model123 as M123;
use ::sunspec::models::model124::Model124 as M124;
use ::sunspec::{Group, Point, Value};

use super::{RegWrite, WriteError, WritePlan};
use crate::modbus::codec::{self, Absent, ValueType, WordOrder};
use crate::modbus::plan::{self, Image, Span, Table};
use crate::modbus::sunspec::ModelBlock;
use crate::steering::decide::Command;

/// The registers of point `p` in `block`, when the block holds it.
pub(super) fn point_span<G: Group, T: Value>(block: &ModelBlock, p: &Point<G, T>) -> Option<Span> {
    block
        .holds(p.offset, p.length)
        .then(|| Span::new(Table::Holding, block.point(p.offset), p.length))
}

/// The calibration reads of a writer: each point on its own, so that a device
/// that refuses other registers of the block (power factor, ramp times) still
/// answers; adjacent points are read together.
pub(super) fn spans_of(spans: impl IntoIterator<Item = Option<Span>>) -> Vec<Span> {
    let spans: Vec<Span> = spans.into_iter().flatten().collect();
    plan::plan(&spans, 0)
}

pub(super) fn addr<G: Group, T: Value>(
    block: &ModelBlock,
    p: &Point<G, T>,
) -> Result<u16, WriteError> {
    if block.holds(p.offset, p.length) {
        Ok(block.point(p.offset))
    } else {
        Err(WriteError::Missing {
            what: "a control register",
            detail: format!(
                "model {} is {} registers long, offset {} is beyond it",
                block.id, block.len, p.offset
            ),
        })
    }
}

/// A scale factor point; "not implemented" (or not read) counts as 0.
pub(super) fn sf<G: Group, T: Value>(
    block: &ModelBlock,
    cal: &Image,
    p: &Point<G, T>,
) -> Result<i32, WriteError> {
    let a = addr(block, p)?;
    Ok(cal
        .get(Table::Holding, a, 1)
        .and_then(|w| codec::decode_sf(w[0]))
        .unwrap_or(0))
}

pub(super) fn encode(value: f64, ty: ValueType) -> Result<u16, WriteError> {
    codec::encode(value, ty, WordOrder::HighFirst)
        .map_err(|e| WriteError::Encode(e.to_string()))?
        .first()
        .copied()
        .ok_or_else(|| WriteError::Encode("empty encoding".into()))
}

pub(super) fn write(addr: u16, word: u16, plan: &mut WritePlan) {
    plan.writes.push(RegWrite {
        addr,
        values: vec![word],
    });
    plan.expect.push((addr, word));
}

/// A plan with no writes yet; [`finish`] adds its read-back.
pub(super) fn empty_plan() -> WritePlan {
    WritePlan {
        writes: Vec::new(),
        read_back: Vec::new(),
        expect: Vec::new(),
    }
}

/// Reads back exactly the registers written (adjacent ones together), never
/// the whole block: a device may refuse registers of a control model it does
/// not implement (e.g. model 123's power factor). The calibration registers
/// follow, so that each write also refreshes them.
pub(super) fn finish(mut plan: WritePlan, calibration: Vec<Span>) -> WritePlan {
    let written: Vec<Span> = plan
        .writes
        .iter()
        .map(|w| Span::new(Table::Holding, w.addr, w.values.len() as u16))
        .collect();
    plan.read_back = plan::plan(&written, 0);
    plan.read_back.extend(calibration);
    plan
}

/// Model 124 at `block`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sunspec124 {
    pub block: ModelBlock,
}

impl Sunspec124 {
    /// `WChaMax`, its scale factor and `InOutWRte_SF`.
    pub fn calibration(&self) -> Vec<Span> {
        let b = &self.block;
        spans_of([
            point_span(b, &M124::W_CHA_MAX),
            point_span(b, &M124::W_CHA_MAX_SF),
            point_span(b, &M124::IN_OUT_W_RTE_SF),
        ])
    }

    pub fn plan(&self, cmd: Command, revert_s: u16, cal: &Image) -> Result<WritePlan, WriteError> {
        let b = &self.block;
        let rte_sf = sf(b, cal, &M124::IN_OUT_W_RTE_SF)?;
        let raw_pct = |pct: f64| encode(codec::unapply_sf(pct, rte_sf), ValueType::I16);
        let out_addr = addr(b, &M124::OUT_W_RTE)?;
        let in_addr = addr(b, &M124::IN_W_RTE)?;
        let mode_addr = addr(b, &M124::STOR_CTL_MOD)?;
        let mut plan = empty_plan();
        match cmd {
            Command::EssPower(w) => {
                let cha_max = self.w_cha_max(cal)?;
                // Never beyond 100 %: the window cannot express more.
                let pct = (w.abs() / cha_max * 100.0).min(100.0);
                let (out_pct, in_pct) = if w > 0.0 { (pct, -pct) } else { (-pct, pct) };
                let (out_w, in_w) = (raw_pct(out_pct)?, raw_pct(in_pct)?);
                write(addr(b, &M124::IN_OUT_W_RTE_RVRT_TMS)?, revert_s, &mut plan);
                plan.writes.push(RegWrite {
                    addr: out_addr,
                    values: vec![out_w, in_w],
                });
                plan.expect.extend([(out_addr, out_w), (in_addr, in_w)]);
                write(mode_addr, 3, &mut plan);
            }
            Command::EssRelease => {
                let full = raw_pct(100.0)?;
                write(mode_addr, 0, &mut plan);
                plan.writes.push(RegWrite {
                    addr: out_addr,
                    values: vec![full, full],
                });
                plan.expect.extend([(out_addr, full), (in_addr, full)]);
            }
            other => return Err(WriteError::WrongCommand(other)),
        }
        debug_assert_eq!(in_addr, out_addr + 1);
        Ok(finish(plan, self.calibration()))
    }

    /// `WChaMax` in W: the 100 % of both rates.
    fn w_cha_max(&self, cal: &Image) -> Result<f64, WriteError> {
        let b = &self.block;
        let a = addr(b, &M124::W_CHA_MAX)?;
        let raw = cal.get(Table::Holding, a, 1).and_then(|w| {
            codec::decode(
                w,
                ValueType::U16,
                WordOrder::HighFirst,
                Absent::SunspecNumber,
            )
        });
        let scale = sf(b, cal, &M124::W_CHA_MAX_SF)?;
        match raw.map(|r| codec::apply_sf(r, scale)) {
            Some(w) if w > 0.0 => Ok(w),
            other => Err(WriteError::Missing {
                what: "WChaMax",
                detail: format!("it reads {other:?}"),
            }),
        }
    }
}

/// Model 123 at `block`; limits are in % of `wmax_w`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sunspec123 {
    pub block: ModelBlock,
    pub wmax_w: f64,
}

impl Sunspec123 {
    /// `WMaxLimPct_SF`.
    pub fn calibration(&self) -> Vec<Span> {
        spans_of([point_span(&self.block, &M123::W_MAX_LIM_PCT_SF)])
    }

    pub fn plan(&self, cmd: Command, revert_s: u16, cal: &Image) -> Result<WritePlan, WriteError> {
        let b = &self.block;
        let ena = addr(b, &M123::W_MAX_LIM_ENA)?;
        let mut plan = empty_plan();
        match cmd {
            Command::ProductionLimit(w) => {
                let pct_sf = sf(b, cal, &M123::W_MAX_LIM_PCT_SF)?;
                let pct = (w / self.wmax_w * 100.0).clamp(0.0, 100.0);
                let raw = encode(codec::unapply_sf(pct, pct_sf), ValueType::U16)?;
                write(addr(b, &M123::W_MAX_LIM_PCT)?, raw, &mut plan);
                write(addr(b, &M123::W_MAX_LIM_PCT_RVRT_TMS)?, revert_s, &mut plan);
                write(ena, 1, &mut plan);
            }
            Command::ProductionRelease => write(ena, 0, &mut plan),
            other => return Err(WriteError::WrongCommand(other)),
        }
        Ok(finish(plan, self.calibration()))
    }
}
