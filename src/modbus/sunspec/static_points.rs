//! Which registers of a SunSpec device are static points: settings and
//! nameplate data, read at discovery and refreshed rarely, never in the
//! per-poll plan (`docs/devices.md`, "Static points").
//!
//! - every point the map reads from model 120 (nameplate) or 121 (basic
//!   settings), with its scale factor;
//! - the scale factors of the control models 123, 124 and 704 (`*_SF`);
//! - the ratings (`info::rating_spans`: 120, 121, 702, 713, 802);
//! - the count points of every model's repeating groups (160's `N`, 705's
//!   `NPt` and `NCrv`, ...: `unimplemented::count_offsets`), which lay out
//!   the rest of the model for a client that reads it from the mirror.
//!
//! A control recipe's calibration registers are added by `DeviceMap`. Pure:
//! it must not decide how often they are read (`modbus::statics` does).

use super::{rating_spans, unimplemented, ModelBlock};
use crate::register::plan::{Span, Table};
use crate::register::point::{PointSpec, Scale};

/// Models whose every point is static.
const SETTINGS_MODELS: [u16; 2] = [120, 121];
/// Control models whose scale factors are static.
const CONTROL_MODELS: [u16; 3] = [123, 124, 704];

/// The model holding register `addr`, if any block of `chain` does.
pub fn model_at(chain: &[ModelBlock], addr: u16) -> Option<u16> {
    chain.iter().find(|b| b.covers(addr)).map(|b| b.id)
}

/// The static spans of a device with `chain` read through `points`, sorted
/// and without duplicates.
pub fn static_spans(chain: &[ModelBlock], points: &[PointSpec]) -> Vec<Span> {
    let in_models =
        |addr: u16, ids: &[u16]| model_at(chain, addr).is_some_and(|m| ids.contains(&m));
    let mut out = rating_spans(chain);
    for b in chain {
        for o in unimplemented::count_offsets(b.id) {
            if b.holds(o, 1) {
                out.push(Span::new(Table::Holding, b.point(o), 1));
            }
        }
    }
    for p in points {
        if in_models(p.addr, &SETTINGS_MODELS) {
            out.extend(p.spans());
        } else if let Scale::SunspecSf(sf) = p.scale {
            if in_models(sf, &CONTROL_MODELS) {
                out.push(Span::new(Table::Holding, sf, 1));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modbus::sunspec::points_for;
    use crate::model::DeviceType;

    fn chain(blocks: &[(u16, u16)]) -> Vec<ModelBlock> {
        let mut addr = 40002;
        blocks
            .iter()
            .map(|&(id, len)| {
                let b = ModelBlock { id, addr, len };
                addr += 2 + len;
                b
            })
            .collect()
    }

    #[test]
    fn an_inverter_keeps_its_limit_and_measurements_per_poll() {
        // Models 1, 103, 120, 121, 123 as the official definitions lay them out.
        let c = chain(&[(1, 66), (103, 50), (120, 26), (121, 30), (123, 24)]);
        let points = points_for(&c, DeviceType::Inverter, false);
        let statics = static_spans(&c, &points);
        let h = |addr| Span::new(Table::Holding, addr, 1);
        // WMaxLimPct_SF, 40205 on this layout, is static; WMaxLimPct (40187)
        // and WMaxLim_Ena (40191) are read with every poll.
        assert!(statics.contains(&h(40205)), "{statics:?}");
        assert!(!statics.contains(&h(40187)) && !statics.contains(&h(40191)));
        // 103's own scale factors stay in the poll (W_SF at 40085).
        assert!(!statics.contains(&h(40085)));
        // 121 WMax (40152) and its scale factor (40172), 120 WRtg (40125).
        for addr in [40152, 40172, 40125] {
            assert!(statics.contains(&h(addr)), "{addr} in {statics:?}");
        }
    }

    #[test]
    fn the_count_points_of_repeating_groups_are_static() {
        // 160 (MPPT modules, N at data offset 6) after 1, 103.
        let c = chain(&[(1, 66), (103, 50), (160, 8 + 2 * 20)]);
        let points = points_for(&c, DeviceType::Inverter, false);
        let statics = static_spans(&c, &points);
        assert!(
            statics.contains(&Span::new(Table::Holding, 40122 + 2 + 6, 1)),
            "{statics:?}"
        );
    }
}
