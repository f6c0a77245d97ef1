//! [`Problem`]: one thing wrong with the config and its TOML path, the unit
//! every check in `config` reports in (load, resolve, TLS files, gateway id).
//! Data only: it finds nothing and imports nothing of the crate.

use std::fmt;

/// One thing wrong with the config, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// TOML path such as `devices[2].unit_id`; empty for the file as a whole.
    pub path: String,
    pub message: String,
    /// The entry the path is in, for a reader of the file: `device
    /// "dvc_pv", line 42`.
    pub entry: Option<String>,
}

impl Problem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
            entry: None,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)?;
            match &self.entry {
                Some(e) => write!(f, " ({e})"),
                None => Ok(()),
            }
        }
    }
}
