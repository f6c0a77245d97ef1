//! The directories systemd gives a service (`$STATE_DIRECTORY`,
//! `$RUNTIME_DIRECTORY`): the value is a ':'-separated list when the unit
//! names several, and the first is the service's own. A pure function of the
//! variable's value; reading the environment is the caller's.

use std::ffi::OsStr;
use std::path::PathBuf;

/// The service's own directory in `value`, a systemd directory variable's
/// value; `None` when it is unset or empty.
pub fn first_dir(value: Option<&OsStr>) -> Option<PathBuf> {
    let value = value?.to_string_lossy();
    let first = value.split(':').next()?;
    (!first.is_empty()).then(|| PathBuf::from(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_a_list_unset_and_empty() {
        let v = |s: &str| first_dir(Some(OsStr::new(s)));
        assert_eq!(
            v("/var/lib/sitegate"),
            Some(PathBuf::from("/var/lib/sitegate"))
        );
        assert_eq!(
            v("/var/lib/a:/var/lib/b"),
            Some(PathBuf::from("/var/lib/a"))
        );
        assert_eq!(v(""), None);
        assert_eq!(v(":/var/lib/b"), None);
        assert_eq!(first_dir(None), None);
    }
}
