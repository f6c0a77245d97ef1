//! Fulfilment rules as pure functions: how a site-level storage target or
//! production limit is spread over the site's devices (`docs/steering.md`:
//! proportional, priority, socBalance, dynamic).
//!
//! Invariants, checked by property tests: the setpoints sum to the target clamped
//! to what the devices can do; no device gets more than its limit; no battery
//! charges at or above its max SoC or discharges at or below its min SoC; a larger
//! target never gives any device a smaller setpoint. No I/O, no clock.

mod ess;
mod production;

pub use ess::{allocate_ess, site_soc, BatteryView, EssAllocation};
pub use production::{allocate_cap, allocate_production, InverterView, DYNAMIC_HEADROOM};

/// Spreads `total` over slots so that slot `i` gets `min(caps[i], level × weights[i])`
/// for one common level; the result sums to `min(total, Σ caps)`. Slots whose weight
/// is zero (or not finite) are filled last, by their caps.
pub(crate) fn water_fill(total: f64, weights: &[f64], caps: &[f64]) -> Vec<f64> {
    let n = caps.len();
    let mut out = vec![0.0; n];
    let caps: Vec<f64> = caps.iter().map(|c| c.max(0.0)).collect();
    let mut remaining = total.max(0.0).min(caps.iter().sum());
    let w = |i: usize| {
        let x = weights.get(i).copied().unwrap_or(0.0);
        if x.is_finite() && x > 0.0 {
            x
        } else {
            0.0
        }
    };
    // Pass 1 uses the weights; pass 2 spreads any rest by remaining room.
    for pass in 0..2 {
        let mut open: Vec<usize> = (0..n)
            .filter(|&i| caps[i] - out[i] > 0.0 && (pass == 1 || w(i) > 0.0))
            .collect();
        let pass_w: Vec<f64> = (0..n)
            .map(|i| if pass == 0 { w(i) } else { caps[i] - out[i] })
            .collect();
        let weight = |i: usize| pass_w[i];
        while remaining > 0.0 && !open.is_empty() {
            let sum_w: f64 = open.iter().map(|&i| weight(i)).sum();
            if sum_w <= 0.0 {
                break;
            }
            let level = remaining / sum_w;
            let (full, rest): (Vec<usize>, Vec<usize>) = open
                .iter()
                .partition(|&&i| level * weight(i) >= caps[i] - out[i]);
            if full.is_empty() {
                for &i in &open {
                    out[i] += level * weight(i);
                }
                remaining = 0.0;
                break;
            }
            for &i in &full {
                remaining -= caps[i] - out[i];
                out[i] = caps[i];
            }
            remaining = remaining.max(0.0);
            open = rest;
        }
    }
    out
}

/// Fills slots in `order`, each to its cap, until `total` is spent.
pub(crate) fn fill_in_order(total: f64, caps: &[f64], order: &[usize]) -> Vec<f64> {
    let mut out = vec![0.0; caps.len()];
    let mut remaining = total.max(0.0);
    for &i in order {
        let take = remaining.min(caps[i].max(0.0));
        out[i] = take;
        remaining -= take;
    }
    out
}

/// Indices sorted by `(priority, index)`.
pub(crate) fn priority_order(priorities: &[u32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..priorities.len()).collect();
    order.sort_by_key(|&i| (priorities[i], i));
    order
}

#[cfg(test)]
mod tests;
