//! Register layout of the simulated grid meter: which points of model 203
//! (integers and scale factors) or 213 (floats) it implements, and their scale
//! factors. No behaviour.

use sunspec::models::model203::Model203;
use sunspec::models::model213::Model213;

use super::common::{fit_sf, GRID_V, I16_LIMIT};
use super::map::{Block, MapBuilder};
use crate::register::codec::ValueType::{F32, I16, U32};

/// Model 203 for a site whose power stays within ± `max_w`; `fine` (noisy
/// mode): power scale factors as fine as that range allows.
pub fn int(b: &mut MapBuilder, max_w: f64, fine: bool) -> Block<Model203> {
    type M = Model203;
    let m = b.model::<M>();
    let amps = max_w / (3.0 * GRID_V);
    let w_sf = if fine { -2 } else { 0 };
    b.set(
        m,
        &M::A_SF,
        I16,
        f64::from(fit_sf(amps * 3.3, I16_LIMIT, -2)),
    );
    b.set(m, &M::V_SF, I16, -1.0);
    b.set(m, &M::HZ_SF, I16, -2.0);
    b.set(
        m,
        &M::W_SF,
        I16,
        f64::from(fit_sf(max_w * 1.1, I16_LIMIT, w_sf)),
    );
    b.set(
        m,
        &M::VAR_SF,
        I16,
        f64::from(fit_sf(max_w * 1.1, I16_LIMIT, w_sf)),
    );
    b.set(m, &M::TOT_WH_SF, I16, 0.0);
    for p in [&M::VA, &M::V_APH_A, &M::V_APH_B, &M::V_APH_C, &M::VA_SF] {
        b.unimpl(m, p);
    }
    for p in [&M::VA_RPH_A, &M::VA_RPH_B, &M::VA_RPH_C] {
        b.unimpl(m, p);
    }
    for p in [&M::PF, &M::P_FPH_A, &M::P_FPH_B, &M::P_FPH_C, &M::PF_SF] {
        b.unimpl(m, p);
    }
    // Per-phase energies and apparent/reactive energies: accumulators left
    // unimplemented (0), with their scale factors unimplemented too.
    for p in [
        &M::TOT_WH_EXP_PH_A,
        &M::TOT_WH_EXP_PH_B,
        &M::TOT_WH_EXP_PH_C,
        &M::TOT_WH_IMP_PH_A,
        &M::TOT_WH_IMP_PH_B,
        &M::TOT_WH_IMP_PH_C,
        &M::TOT_V_AH_EXP,
        &M::TOT_V_AH_EXP_PH_A,
        &M::TOT_V_AH_EXP_PH_B,
        &M::TOT_V_AH_EXP_PH_C,
        &M::TOT_V_AH_IMP,
        &M::TOT_V_AH_IMP_PH_A,
        &M::TOT_V_AH_IMP_PH_B,
        &M::TOT_V_AH_IMP_PH_C,
        &M::TOT_V_ARH_IMP_Q1,
        &M::TOT_V_ARH_IMP_Q1_PH_A,
        &M::TOT_V_ARH_IMP_Q1_PH_B,
        &M::TOT_V_ARH_IMP_Q1_PH_C,
        &M::TOT_V_ARH_IMP_Q2,
        &M::TOT_V_ARH_IMP_Q2_PH_A,
        &M::TOT_V_ARH_IMP_Q2_PH_B,
        &M::TOT_V_ARH_IMP_Q2_PH_C,
        &M::TOT_V_ARH_EXP_Q3,
        &M::TOT_V_ARH_EXP_Q3_PH_A,
        &M::TOT_V_ARH_EXP_Q3_PH_B,
        &M::TOT_V_ARH_EXP_Q3_PH_C,
        &M::TOT_V_ARH_EXP_Q4,
        &M::TOT_V_ARH_EXP_Q4_PH_A,
        &M::TOT_V_ARH_EXP_Q4_PH_B,
        &M::TOT_V_ARH_EXP_Q4_PH_C,
    ] {
        b.unimpl_acc(m, p);
    }
    b.unimpl(m, &M::TOT_V_AH_SF);
    b.unimpl(m, &M::TOT_V_ARH_SF);
    b.set(m, &M::EVT, U32, 0.0);
    m
}

/// Model 213: what a float meter measures starts at 0; what it does not
/// (apparent power, power factor, the per-phase and reactive energies) is NaN.
pub fn float(b: &mut MapBuilder) -> Block<Model213> {
    type M = Model213;
    let m = b.model::<M>();
    for p in [
        &M::A,
        &M::APH_A,
        &M::APH_B,
        &M::APH_C,
        &M::PH_V,
        &M::PH_VPH_A,
        &M::PH_VPH_B,
        &M::PH_VPH_C,
        &M::PPV,
        &M::PP_VPH_AB,
        &M::PP_VPH_BC,
        &M::PP_VPH_CA,
        &M::HZ,
        &M::W,
        &M::TOT_WH_EXP,
        &M::TOT_WH_IMP,
    ] {
        b.set(m, p, F32, 0.0);
    }
    for p in [&M::WPH_A, &M::WPH_B, &M::WPH_C, &M::VAR] {
        b.set(m, p, F32, 0.0);
    }
    for p in [
        &M::VA,
        &M::V_APH_A,
        &M::V_APH_B,
        &M::V_APH_C,
        &M::VA_RPH_A,
        &M::VA_RPH_B,
        &M::VA_RPH_C,
        &M::PF,
        &M::P_FPH_A,
        &M::P_FPH_B,
        &M::P_FPH_C,
        &M::TOT_WH_EXP_PH_A,
        &M::TOT_WH_EXP_PH_B,
        &M::TOT_WH_EXP_PH_C,
        &M::TOT_WH_IMP_PH_A,
        &M::TOT_WH_IMP_PH_B,
        &M::TOT_WH_IMP_PH_C,
        &M::TOT_V_AH_EXP,
        &M::TOT_V_AH_EXP_PH_A,
        &M::TOT_V_AH_EXP_PH_B,
        &M::TOT_V_AH_EXP_PH_C,
        &M::TOT_V_AH_IMP,
        &M::TOT_V_AH_IMP_PH_A,
        &M::TOT_V_AH_IMP_PH_B,
        &M::TOT_V_AH_IMP_PH_C,
        &M::TOT_V_ARH_IMP_Q1,
        &M::TOT_V_ARH_IMP_Q1PH_A,
        &M::TOT_V_ARH_IMP_Q1PH_B,
        &M::TOT_V_ARH_IMP_Q1PH_C,
        &M::TOT_V_ARH_IMP_Q2,
        &M::TOT_V_ARH_IMP_Q2PH_A,
        &M::TOT_V_ARH_IMP_Q2PH_B,
        &M::TOT_V_ARH_IMP_Q2PH_C,
        &M::TOT_V_ARH_EXP_Q3,
        &M::TOT_V_ARH_EXP_Q3PH_A,
        &M::TOT_V_ARH_EXP_Q3PH_B,
        &M::TOT_V_ARH_EXP_Q3PH_C,
        &M::TOT_V_ARH_EXP_Q4,
        &M::TOT_V_ARH_EXP_Q4PH_A,
        &M::TOT_V_ARH_EXP_Q4PH_B,
        &M::TOT_V_ARH_EXP_Q4PH_C,
    ] {
        b.unimpl(m, p);
    }
    b.set(m, &M::EVT, U32, 0.0);
    m
}
