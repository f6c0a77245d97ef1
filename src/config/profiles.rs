//! Finding a profile by what a device's `profile` key says.
//!
//! `profile = "NAME"` (no `/`, no `.toml`): `<profiles_dir>/NAME.toml` when that
//! file exists (an installer can add or patch a profile without a new binary),
//! else the profile of that name built into the binary. `profile = "PATH"` (with
//! a `/` or ending in `.toml`): that file, relative paths taken from the config
//! file's directory. Each profile is loaded once per resolver, however many
//! devices use it. Reads files; never touches the network or Modbus. The
//! profile model itself (parsing, validation) is `crate::profile`'s.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::profile::{builtin_names, parse, Profile, ProfileError, BUILTIN};

/// Where `sitegate run` looks for profiles unless the config says otherwise.
pub const DEFAULT_PROFILES_DIR: &str = "/etc/sitegate/profiles";

/// Resolves and caches profiles for one config.
#[derive(Debug)]
pub struct Resolver {
    profiles_dir: PathBuf,
    base_dir: PathBuf,
    cache: HashMap<String, Result<Arc<Profile>, ProfileError>>,
}

impl Resolver {
    /// `base_dir` anchors relative profile paths (the config file's directory).
    pub fn new(profiles_dir: &Path, base_dir: &Path) -> Resolver {
        Resolver {
            profiles_dir: profiles_dir.to_path_buf(),
            base_dir: base_dir.to_path_buf(),
            cache: HashMap::new(),
        }
    }

    pub fn resolve(&mut self, name: &str) -> Result<Arc<Profile>, ProfileError> {
        if let Some(r) = self.cache.get(name) {
            return r.clone();
        }
        let r = self.load(name).map(Arc::new);
        self.cache.insert(name.to_string(), r.clone());
        r
    }

    fn load(&self, name: &str) -> Result<Profile, ProfileError> {
        if is_path(name) {
            let path = self.base_dir.join(name);
            return read(name, &path);
        }
        let file = self.profiles_dir.join(format!("{name}.toml"));
        if file.is_file() {
            return read(name, &file);
        }
        match BUILTIN.iter().find(|(n, _)| *n == name) {
            Some((_, text)) => parse(name, &format!("built-in {name}"), text),
            None => Err(ProfileError::NotFound {
                name: name.to_string(),
                looked: file.display().to_string(),
                builtin: builtin_names().join(", "),
            }),
        }
    }
}

fn is_path(name: &str) -> bool {
    name.contains('/') || name.ends_with(".toml")
}

fn read(name: &str, path: &Path) -> Result<Profile, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|e| ProfileError::Unreadable {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    parse(name, &path.display().to_string(), &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOC: &str = "[[points]]\nproperty = \"soc\"\nregister = 1\ntype = \"u16\"\n";

    #[test]
    fn names_resolve_to_files_first_then_builtins() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mine.toml"), SOC).unwrap();
        std::fs::write(dir.path().join("sungrow-sh.toml"), SOC).unwrap();
        let mut r = Resolver::new(dir.path(), dir.path());
        assert_eq!(r.resolve("mine").unwrap().points.len(), 1);
        assert_eq!(
            r.resolve("sungrow-sh").unwrap().points.len(),
            1,
            "a file overrides the built-in"
        );
        assert!(r.resolve("goodwe-et").unwrap().origin.contains("built-in"));
        assert_eq!(r.resolve("./mine.toml").unwrap().points.len(), 1);
        match r.resolve("nope") {
            Err(e @ ProfileError::NotFound { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("nope.toml") && msg.contains("goodwe-et"),
                    "{msg}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            r.resolve("missing.toml"),
            Err(ProfileError::Unreadable { .. })
        ));
    }
}
