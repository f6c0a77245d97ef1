//! The config file on disk, changed so that a kill or a power cut at any
//! moment leaves a whole file at the config path, the old one or the new
//! one: every write goes to `<name>.new`, is fsynced, renamed over its
//! target, and the directory is fsynced. The running config is kept as
//! `<name>.last-good` (written the same way) before the new one goes in,
//! and restored from there on a rollback.
//!
//! Blocking file I/O (callers run it on a blocking thread). It must not
//! decide whether a change is good: it only moves whole files.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `<config>` with `suffix` appended to its file name (`sitegate.toml.new`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// Where the running config is kept while a change is on trial.
pub fn last_good(path: &Path) -> PathBuf {
    sibling(path, ".last-good")
}

/// Why a file could not be changed, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{action} {}: {source}", path.display())]
pub struct FileError {
    pub action: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

fn fail<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> FileError + 'a {
    move |source| FileError {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Step 1: the whole text in `<target>.new`, on disk. The target is
/// untouched.
fn stage(target: &Path, bytes: &[u8]) -> Result<PathBuf, FileError> {
    let tmp = sibling(target, ".new");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(fail("cannot create", &tmp))?;
    f.write_all(bytes).map_err(fail("cannot write", &tmp))?;
    f.sync_all().map_err(fail("cannot sync", &tmp))?;
    Ok(tmp)
}

/// Step 2: the staged file renamed over the target (atomic on one file
/// system), and the directory synced so the rename survives a power cut.
fn commit(tmp: &Path, target: &Path) -> Result<(), FileError> {
    std::fs::rename(tmp, target).map_err(fail("cannot rename into place", target))?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(fail("cannot sync the directory", dir))
}

/// Replaces `target` with `bytes`: whole before, whole after.
pub fn write_atomic(target: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let tmp = stage(target, bytes)?;
    commit(&tmp, target)
}

/// Keeps the running config (`current`, the bytes at `path`) as
/// `<path>.last-good`, then puts `new` at `path`.
pub fn replace_keeping_last_good(path: &Path, current: &[u8], new: &[u8]) -> Result<(), FileError> {
    write_atomic(&last_good(path), current)?;
    write_atomic(path, new)
}

/// Puts `<path>.last-good` back at `path` (the last-good copy stays).
pub fn restore_last_good(path: &Path) -> Result<(), FileError> {
    let from = last_good(path);
    let bytes = std::fs::read(&from).map_err(fail("cannot read", &from))?;
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str =
        "gateway_id = \"old\"\n[http]\nauth = \"none\"\nlisten = [\"127.0.0.1:8080\"]\n";
    const NEW: &str =
        "gateway_id = \"new\"\n[http]\nauth = \"none\"\nlisten = [\"127.0.0.1:8080\"]\n";

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("sitegate.toml");
        std::fs::write(&path, OLD).expect("write");
        (dir, path)
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).expect("read")
    }

    /// A crash between any two steps leaves a whole config at the path:
    /// each prefix of the steps is run, then what a restart would load is
    /// checked.
    #[test]
    fn a_crash_between_steps_leaves_a_whole_file() {
        let (_dir, path) = setup();
        let lg = last_good(&path);
        // Crash after staging the last-good copy: the config is the old one.
        stage(&lg, OLD.as_bytes()).expect("stage");
        assert_eq!(read(&path), OLD);
        // After committing it, before staging the new config.
        commit(&sibling(&lg, ".new"), &lg).expect("commit");
        assert_eq!((read(&path), read(&lg)), (OLD.into(), OLD.into()));
        // After staging the new one (a half-written `.new` is harmless:
        // nobody reads it, the next write truncates it).
        std::fs::write(sibling(&path, ".new"), &NEW[..5]).expect("partial");
        assert_eq!(read(&path), OLD);
        let tmp = stage(&path, NEW.as_bytes()).expect("stage");
        assert_eq!(read(&path), OLD);
        // After the rename: the new one, whole.
        commit(&tmp, &path).expect("commit");
        assert_eq!(read(&path), NEW);
        assert!(!sibling(&path, ".new").exists());
        crate::config::parse(&read(&path)).expect("a whole config");
    }

    #[test]
    fn replace_keeps_the_last_good_and_restore_puts_it_back() {
        let (_dir, path) = setup();
        replace_keeping_last_good(&path, OLD.as_bytes(), NEW.as_bytes()).expect("replace");
        assert_eq!(read(&path), NEW);
        assert_eq!(read(&last_good(&path)), OLD);
        restore_last_good(&path).expect("restore");
        assert_eq!(read(&path), OLD);
        assert_eq!(read(&last_good(&path)), OLD);
    }

    #[test]
    fn errors_name_the_file() {
        let (dir, path) = setup();
        let e = restore_last_good(&path).expect_err("no last-good");
        assert!(e.to_string().contains("sitegate.toml.last-good"), "{e}");
        let e = write_atomic(&dir.path().join("missing/x.toml"), b"x").expect_err("no dir");
        assert!(e.to_string().contains("x.toml.new"), "{e}");
    }
}
