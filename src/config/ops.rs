//! `[ops]`: how the operations channel watches a configuration change: the
//! time a new config has to prove itself healthy before the last good one is
//! restored (`docs/operations.md`, "Changing the configuration").
//!
//! Values only: it must not watch, restore or start anything.

use serde::Deserialize;

/// The default health window after a config change, in seconds.
pub const ROLLBACK_AFTER_S_DEFAULT: u64 = 120;
/// The shortest window: a start, a first poll and an MQTT connect fit.
pub const ROLLBACK_AFTER_S_MIN: u64 = 5;
/// The longest window: a site runs an unproven config at most this long.
pub const ROLLBACK_AFTER_S_MAX: u64 = 3_600;

/// The `[ops]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct OpsConfig {
    /// Within this many seconds of its start on a changed config the agent
    /// must be healthy, or the last good config is restored.
    #[serde(deserialize_with = "rollback_after_s")]
    pub rollback_after_s: u64,
}

impl Default for OpsConfig {
    fn default() -> Self {
        Self {
            rollback_after_s: ROLLBACK_AFTER_S_DEFAULT,
        }
    }
}

fn rollback_after_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = u64::deserialize(d)?;
    if (ROLLBACK_AFTER_S_MIN..=ROLLBACK_AFTER_S_MAX).contains(&n) {
        Ok(n)
    } else {
        Err(serde::de::Error::custom(format!(
            "{n} is out of range: rollback_after_s must be from {ROLLBACK_AFTER_S_MIN} to {ROLLBACK_AFTER_S_MAX} seconds"
        )))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    #[test]
    fn the_window_has_a_default_and_bounds() {
        let base = "gateway_id = \"t\"\n[http]\nauth = \"none\"\nlisten = [\"127.0.0.1:8080\"]\n";
        assert_eq!(
            parse(base).expect("ok").ops.rollback_after_s,
            super::ROLLBACK_AFTER_S_DEFAULT
        );
        let c = parse(&format!("{base}[ops]\nrollback_after_s = 30\n")).expect("ok");
        assert_eq!(c.ops.rollback_after_s, 30);
        for bad in ["1", "3601"] {
            let e = parse(&format!("{base}[ops]\nrollback_after_s = {bad}\n")).expect_err(bad);
            assert_eq!(e.problems[0].path, "ops.rollback_after_s", "{e}");
            assert!(e.problems[0].message.contains(bad), "{e}");
        }
        let e = parse(&format!("{base}[ops]\nrollback = 30\n")).expect_err("unknown");
        assert_eq!(e.problems[0].path, "ops.rollback", "{e}");
    }
}
