//! SunSpec model 704 (DER AC controls) write recipes, for devices that have 704
//! but not 123 (inverters) or 124 (storage) (`sunspec.md` §6.3).
//!
//! Production limit: `WMaxLimPct` in % of `WMax` scaled by `WMaxLimPct_SF`, then
//! `WMaxLimPctRvrtTms` (uint32 s), then `WMaxLimPctEna = 1`. Release:
//! `WMaxLimPctEna = 0`.
//! Storage power: `WSetMod = 1` (watts) with `WSet` (int32 W, + discharge,
//! scaled by `WSet_SF`) in one write, then `WSetRvrtTms` (uint32 s), then
//! `WSetEna = 1`. Release: `WSetEna = 0`.
//!
//! The reversion values (`WMaxLimPctRvrt`, `WMaxLimPctEnaRvrt`, `WSetRvrt`,
//! `WSetEnaRvrt`) are left as the installer set them: when the timer runs out
//! the device goes to its own defaults, as with model 123's revert timer.

use ::sunspec::models::model704::Model704 as M704;
use ::sunspec::{Group, Point, Value};

use super::sunspec::{addr, empty_plan, encode, finish, point_span, sf, spans_of, write};
use super::{RegWrite, WriteError, WritePlan};
use crate::modbus::codec::{self, ValueType, WordOrder};
use crate::modbus::plan::{Image, Span};
use crate::modbus::sunspec::ModelBlock;
use crate::steering::decide::Command;

/// Writes a multi-register value (high word first, as SunSpec has it).
fn write_words<G: Group, T: Value>(
    block: &ModelBlock,
    p: &Point<G, T>,
    value: f64,
    ty: ValueType,
    plan: &mut WritePlan,
) -> Result<(), WriteError> {
    let a = addr(block, p)?;
    let values = codec::encode(value, ty, WordOrder::HighFirst)
        .map_err(|e| WriteError::Encode(e.to_string()))?;
    plan.expect.extend(
        values
            .iter()
            .enumerate()
            .map(|(i, w)| (a.wrapping_add(i as u16), *w)),
    );
    plan.writes.push(RegWrite { addr: a, values });
    Ok(())
}

/// Model 704's production limit at `block`; limits are in % of `wmax_w`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sunspec704Limit {
    pub block: ModelBlock,
    pub wmax_w: f64,
}

impl Sunspec704Limit {
    /// `WMaxLimPct_SF`.
    pub fn calibration(&self) -> Vec<Span> {
        spans_of([point_span(&self.block, &M704::W_MAX_LIM_PCT_SF)])
    }

    pub fn plan(&self, cmd: Command, revert_s: u16, cal: &Image) -> Result<WritePlan, WriteError> {
        let b = &self.block;
        let ena = addr(b, &M704::W_MAX_LIM_PCT_ENA)?;
        let mut plan = empty_plan();
        match cmd {
            Command::ProductionLimit(w) => {
                let pct_sf = sf(b, cal, &M704::W_MAX_LIM_PCT_SF)?;
                let pct = (w / self.wmax_w * 100.0).clamp(0.0, 100.0);
                let raw = encode(codec::unapply_sf(pct, pct_sf), ValueType::U16)?;
                write(addr(b, &M704::W_MAX_LIM_PCT)?, raw, &mut plan);
                write_words(
                    b,
                    &M704::W_MAX_LIM_PCT_RVRT_TMS,
                    f64::from(revert_s),
                    ValueType::U32,
                    &mut plan,
                )?;
                write(ena, 1, &mut plan);
            }
            Command::ProductionRelease => write(ena, 0, &mut plan),
            other => return Err(WriteError::WrongCommand(other)),
        }
        Ok(finish(plan, self.calibration()))
    }
}

/// Model 704's active power setpoint at `block`, for storage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sunspec704Power {
    pub block: ModelBlock,
}

impl Sunspec704Power {
    /// `WSet_SF`.
    pub fn calibration(&self) -> Vec<Span> {
        spans_of([point_span(&self.block, &M704::W_SET_SF)])
    }

    pub fn plan(&self, cmd: Command, revert_s: u16, cal: &Image) -> Result<WritePlan, WriteError> {
        let b = &self.block;
        let ena = addr(b, &M704::W_SET_ENA)?;
        let mut plan = empty_plan();
        match cmd {
            Command::EssPower(w) => {
                let w_sf = sf(b, cal, &M704::W_SET_SF)?;
                let mode = addr(b, &M704::W_SET_MOD)?;
                let set = addr(b, &M704::W_SET)?;
                let raw = codec::encode(
                    codec::unapply_sf(w, w_sf),
                    ValueType::I32,
                    WordOrder::HighFirst,
                )
                .map_err(|e| WriteError::Encode(e.to_string()))?;
                // WSetMod and WSet are neighbours: one write, mode first.
                debug_assert_eq!(set, mode + 1);
                plan.expect.push((mode, 1));
                plan.expect.extend(
                    raw.iter()
                        .enumerate()
                        .map(|(i, x)| (set.wrapping_add(i as u16), *x)),
                );
                let mut values = vec![1];
                values.extend(raw);
                plan.writes.push(RegWrite { addr: mode, values });
                write_words(
                    b,
                    &M704::W_SET_RVRT_TMS,
                    f64::from(revert_s),
                    ValueType::U32,
                    &mut plan,
                )?;
                write(ena, 1, &mut plan);
            }
            Command::EssRelease => write(ena, 0, &mut plan),
            other => return Err(WriteError::WrongCommand(other)),
        }
        Ok(finish(plan, self.calibration()))
    }
}
