//! §14a EnWG's floor for a site dimmed through its energy manager: the
//! controllable consumers together keep at least
//! Pmin = max(4.2 kW, n × 4.2 kW × GZF), with the simultaneity factors of
//! BNetzA's ruling BK6-22-300 (Anlage 1, 4.5.2). It is the default failsafe
//! consumption limit; the operator's own value overrides it.
//!
//! Pure.

/// What §14a leaves one controllable consumer, W.
pub const PER_CONSUMER_W: f64 = 4_200.0;

/// The simultaneity factor (Gleichzeitigkeitsfaktor) for `n` consumers.
pub fn simultaneity(n: u32) -> f64 {
    match n {
        0 | 1 => 1.0,
        2 => 0.8,
        3 => 0.75,
        4 => 0.7,
        5 => 0.65,
        6 => 0.6,
        7 => 0.55,
        8 => 0.5,
        _ => 0.45,
    }
}

/// Pmin for `n` controllable consumers behind one energy manager, W.
pub fn pmin_w(n: u32) -> f64 {
    let n = n.max(1);
    (f64::from(n) * PER_CONSUMER_W * simultaneity(n)).max(PER_CONSUMER_W)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmin_for_one_two_and_nine_consumers() {
        assert_eq!(pmin_w(1), 4_200.0);
        // 2 × 4.2 kW × 0.8
        assert!((pmin_w(2) - 6_720.0).abs() < 1e-6);
        // 9 × 4.2 kW × 0.45
        assert!((pmin_w(9) - 17_010.0).abs() < 1e-6);
        // Past nine the factor stays 0.45.
        assert!((pmin_w(20) - 37_800.0).abs() < 1e-6);
        // Never below one consumer's 4.2 kW.
        assert_eq!(pmin_w(0), 4_200.0);
    }
}
