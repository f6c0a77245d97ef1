//! A profile's names for its `operatingState` codes: the `states` table of
//! its `operatingState` points, checked (codes that are numbers, names
//! spelt as SunSpec spells its symbols) and made one list. A device speaks
//! one enumeration, so two points whose tables differ are a problem.
//!
//! Checks and collects only; the device map and the API use the list.

use super::super::raw::RawPoint;
use super::Problems;
use crate::model::Property;

/// The names of `points`' operating state codes, by code, ascending;
/// empty where no point names them. `at` is the points' path.
pub(super) fn state_names(at: &str, points: &[RawPoint], p: &mut Problems) -> Vec<(u16, String)> {
    let mut found: Option<(usize, Vec<(u16, String)>)> = None;
    for (i, rp) in points.iter().enumerate() {
        if rp.states.is_empty() {
            continue;
        }
        let path = format!("{at}[{i}].states");
        if rp.property != Property::OperatingState.name() {
            p.push(
                path,
                format!(
                    "only operatingState has named states, not {:?}",
                    rp.property
                ),
            );
            continue;
        }
        let names = table(&path, rp, p);
        match &found {
            Some((j, first)) if *first != names => p.push(
                path,
                format!("differs from {at}[{j}].states: a device speaks one enumeration"),
            ),
            Some(_) => {}
            None => found = Some((i, names)),
        }
    }
    found.map(|(_, n)| n).unwrap_or_default()
}

/// One point's table, each bad entry reported by its key.
fn table(path: &str, rp: &RawPoint, p: &mut Problems) -> Vec<(u16, String)> {
    let mut names = Vec::new();
    for (code, name) in &rp.states {
        let Ok(c) = code.parse::<u16>() else {
            p.push(
                format!("{path}.{code}"),
                format!("{code:?} is not a state code (a number, 0 to 65535)"),
            );
            continue;
        };
        let spelt = !name.is_empty()
            && name.len() <= 32
            && name
                .chars()
                .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_');
        if !spelt {
            p.push(
                format!("{path}.{code}"),
                format!("{name:?}: a state's name is 1 to 32 of A-Z, 0-9 and _, as SunSpec's (MPPT, SHUTTING_DOWN)"),
            );
            continue;
        }
        names.push((c, name.clone()));
    }
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::super::parse;

    const HEAD: &str = "device_types = [\"battery\"]\n";

    fn point(property: &str, states: &str) -> String {
        format!("[[points]]\nproperty = \"{property}\"\nregister = 1\ntype = \"u16\"\nstates = {states}\n")
    }

    #[test]
    fn a_point_names_its_codes_in_order() {
        let text = format!(
            "{HEAD}{}",
            point(
                "operatingState",
                "{ \"3\" = \"FAULT\", \"0\" = \"OFFLINE\" }"
            )
        );
        let profile = parse("t", "test", &text).expect("valid");
        assert_eq!(
            profile.state_names,
            [(0, "OFFLINE".to_string()), (3, "FAULT".to_string())]
        );
    }

    #[test]
    fn bad_tables_are_named_by_their_path() {
        let text = format!(
            "{HEAD}{}{}{}",
            point("operatingState", "{ \"x\" = \"ON\", \"1\" = \"on\" }"),
            point("soc", "{ \"1\" = \"FULL\" }").replace("register = 1", "register = 2"),
            point("operatingState", "{ \"1\" = \"OTHER\" }")
                .replace("register = 1", "register = 3"),
        );
        let Err(crate::profile::ProfileError::Invalid { problems, .. }) = parse("t", "test", &text)
        else {
            panic!("refused");
        };
        let paths: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.path.as_str(), p.message.as_str()))
            .collect();
        assert!(paths.iter().any(|(p, m)| *p == "points[0].states.x" && m.contains("\"x\" is not a state code")), "{paths:?}");
        assert!(
            paths
                .iter()
                .any(|(p, m)| *p == "points[0].states.1" && m.contains("\"on\"")),
            "{paths:?}"
        );
        assert!(
            paths
                .iter()
                .any(|(p, m)| *p == "points[1].states" && m.contains("not \"soc\"")),
            "{paths:?}"
        );
        assert!(
            paths
                .iter()
                .any(|(p, m)| *p == "points[2].states"
                    && m.contains("differs from points[0].states")),
            "{paths:?}"
        );
    }
}
