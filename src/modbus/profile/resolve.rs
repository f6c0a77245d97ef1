//! Finding a profile by what a device's `profile` key says.
//!
//! `profile = "NAME"` (no `/`, no `.toml`): `<profiles_dir>/NAME.toml` when that
//! file exists (an installer can add or patch a profile without a new binary),
//! else the profile of that name built into the binary. `profile = "PATH"` (with
//! a `/` or ending in `.toml`): that file, relative paths taken from the config
//! file's directory. Each profile is loaded once per resolver, however many
//! devices use it. Reads files; never touches the network or Modbus.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{parse, Profile, ProfileError};

/// Where `sitegate run` looks for profiles unless the config says otherwise.
pub const DEFAULT_PROFILES_DIR: &str = "/etc/sitegate/profiles";

/// Profiles compiled into the binary: `config/profiles/*.toml`.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "abb-b2x",
        include_str!("../../../config/profiles/abb-b2x.toml"),
    ),
    (
        "alpha-ess",
        include_str!("../../../config/profiles/alpha-ess.toml"),
    ),
    (
        "carlo-gavazzi-em24",
        include_str!("../../../config/profiles/carlo-gavazzi-em24.toml"),
    ),
    (
        "deye-hybrid",
        include_str!("../../../config/profiles/deye-hybrid.toml"),
    ),
    (
        "eastron-sdm630",
        include_str!("../../../config/profiles/eastron-sdm630.toml"),
    ),
    (
        "eastron-sdm72",
        include_str!("../../../config/profiles/eastron-sdm72.toml"),
    ),
    (
        "goodwe-et",
        include_str!("../../../config/profiles/goodwe-et.toml"),
    ),
    (
        "growatt-tl",
        include_str!("../../../config/profiles/growatt-tl.toml"),
    ),
    (
        "huawei-luna2000",
        include_str!("../../../config/profiles/huawei-luna2000.toml"),
    ),
    (
        "janitza-umg",
        include_str!("../../../config/profiles/janitza-umg.toml"),
    ),
    (
        "kostal-plenticore",
        include_str!("../../../config/profiles/kostal-plenticore.toml"),
    ),
    (
        "sma-storage",
        include_str!("../../../config/profiles/sma-storage.toml"),
    ),
    (
        "solaredge-storage",
        include_str!("../../../config/profiles/solaredge-storage.toml"),
    ),
    (
        "sungrow-sh",
        include_str!("../../../config/profiles/sungrow-sh.toml"),
    ),
    (
        "victron-gx",
        include_str!("../../../config/profiles/victron-gx.toml"),
    ),
];

/// Names of the built-in profiles.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

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
