//! The names of a device's operating state codes (`operatingState`), as the
//! SunSpec model it is read from enumerates them: `St` of the inverter
//! models 101-103 and 111-113, `InvSt` of model 701 (which counts from 0),
//! and `ChaSt` of the storage models 124 and 802.
//!
//! Data and lookups only; which model a device's state comes from is the
//! device map's to say (`DeviceInfo::state_model`). A register-map profile
//! names its codes itself (its points' `states`).

/// Code and name of each state, as the model's symbols spell them.
pub type StateNames = &'static [(u16, &'static str)];

/// `St` of models 101-103 and 111-113.
const INVERTER: StateNames = &[
    (1, "OFF"),
    (2, "SLEEPING"),
    (3, "STARTING"),
    (4, "MPPT"),
    (5, "THROTTLED"),
    (6, "SHUTTING_DOWN"),
    (7, "FAULT"),
    (8, "STANDBY"),
];

/// `InvSt` of model 701 (DER AC measurement).
const DER_INVERTER: StateNames = &[
    (0, "OFF"),
    (1, "SLEEPING"),
    (2, "STARTING"),
    (3, "RUNNING"),
    (4, "THROTTLED"),
    (5, "SHUTTING_DOWN"),
    (6, "FAULT"),
    (7, "STANDBY"),
];

/// `ChaSt` of models 124 and 802.
const STORAGE: StateNames = &[
    (1, "OFF"),
    (2, "EMPTY"),
    (3, "DISCHARGING"),
    (4, "CHARGING"),
    (5, "FULL"),
    (6, "HOLDING"),
    (7, "TESTING"),
];

/// The state names of SunSpec model `model`, if it has an operating state.
pub fn names_of(model: u16) -> Option<StateNames> {
    match model {
        101..=103 | 111..=113 => Some(INVERTER),
        701 => Some(DER_INVERTER),
        124 | 802 => Some(STORAGE),
        _ => None,
    }
}

/// The name of state `code` (a polled value) read from `model`; `None`
/// for a code the model does not enumerate or a value that is no code.
pub fn name(model: u16, code: f64) -> Option<&'static str> {
    let code = self::code(code)?;
    names_of(model)?
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, n)| *n)
}

/// A polled value as a state code: `None` for a value that is no code.
pub fn code(value: f64) -> Option<u16> {
    (value.fract() == 0.0 && (0.0..=f64::from(u16::MAX)).contains(&value)).then_some(value as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_model_names_its_own_codes() {
        assert_eq!(name(103, 4.0), Some("MPPT"));
        assert_eq!(name(113, 7.0), Some("FAULT"));
        // 701 counts from 0: its 3 is RUNNING, where 101-103's is STARTING.
        assert_eq!(name(701, 3.0), Some("RUNNING"));
        assert_eq!(name(101, 3.0), Some("STARTING"));
        assert_eq!(name(701, 0.0), Some("OFF"));
        assert_eq!(name(124, 4.0), Some("CHARGING"));
        assert_eq!(name(802, 5.0), Some("FULL"));
    }

    #[test]
    fn unknown_codes_models_and_values_have_no_name() {
        assert_eq!(name(103, 0.0), None, "St has no 0");
        assert_eq!(name(103, 9.0), None);
        assert_eq!(name(203, 4.0), None, "a meter has no operating state");
        assert_eq!(name(103, 4.5), None);
        assert_eq!(name(103, -1.0), None);
        assert_eq!(name(103, f64::NAN), None);
    }
}
