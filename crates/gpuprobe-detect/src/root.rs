//! The filesystem root every reader goes through.
//!
//! All sysfs/procfs/library reads take a [`Root`]: `/` on the live machine, or a temporary
//! directory holding a fake tree in tests. Reads return [`ReadError`] values that say
//! *why* something could not be read, so the fingerprint can list it as unreadable.

use std::fmt;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

/// A path prefix under which absolute system paths are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    base: PathBuf,
    live: bool,
    denied: Vec<String>,
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The file does not exist.
    Missing,
    /// Permission denied (usually: needs root).
    Denied,
    /// Any other I/O error, with its text.
    Other(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Missing => f.write_str("not present"),
            ReadError::Denied => f.write_str("permission denied (needs root)"),
            ReadError::Other(text) => f.write_str(text),
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(err: io::Error) -> Self {
        match err.kind() {
            ErrorKind::NotFound => ReadError::Missing,
            ErrorKind::PermissionDenied => ReadError::Denied,
            _ if err.raw_os_error() == Some(1) => ReadError::Denied, // EPERM
            _ => ReadError::Other(err.to_string()),
        }
    }
}

impl Root {
    /// The live system (`/`).
    pub fn live() -> Root {
        Root {
            base: PathBuf::from("/"),
            live: true,
            denied: Vec::new(),
        }
    }

    /// A fake tree rooted at `path` (tests, offline analysis of a copied `/sys`).
    pub fn at(path: impl Into<PathBuf>) -> Root {
        let path = path.into();
        // Canonical, so that resolved symlinks map back to system paths.
        let base = std::fs::canonicalize(&path).unwrap_or(path);
        Root {
            base,
            live: false,
            denied: Vec::new(),
        }
    }

    /// Treats a system path and everything under it as permission-denied, to reproduce
    /// what an unprivileged user sees (debugfs, efivars) even when running as root.
    pub fn deny(mut self, system_path: &str) -> Root {
        self.denied
            .push(system_path.trim_end_matches('/').to_owned());
        self
    }

    /// `Err(Denied)` when the path was marked denied with [`Root::deny`].
    pub(crate) fn check(&self, system_path: &str) -> Result<(), ReadError> {
        let denied = self.denied.iter().any(|d| {
            system_path == d
                || system_path
                    .strip_prefix(d.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        });
        if denied {
            Err(ReadError::Denied)
        } else {
            Ok(())
        }
    }

    /// Whether this is the live system.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The base directory.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Resolves an absolute system path (`/sys/class/drm`) under this root.
    pub fn path(&self, system_path: &str) -> PathBuf {
        self.base.join(system_path.trim_start_matches('/'))
    }

    /// Maps a real path under this root back to the system path it stands for.
    pub fn system_path(&self, real: &Path) -> String {
        match real.strip_prefix(&self.base) {
            Ok(rel) => format!("/{}", rel.display()),
            Err(_) => real.display().to_string(),
        }
    }

    /// Reads a whole file as raw bytes.
    pub fn read_bytes(&self, system_path: &str) -> Result<Vec<u8>, ReadError> {
        self.check(system_path)?;
        Ok(std::fs::read(self.path(system_path))?)
    }

    /// Reads a whole file as text (lossy UTF-8).
    pub fn read(&self, system_path: &str) -> Result<String, ReadError> {
        self.check(system_path)?;
        let bytes = std::fs::read(self.path(system_path))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Reads a file and trims surrounding whitespace.
    pub fn read_trimmed(&self, system_path: &str) -> Result<String, ReadError> {
        self.read(system_path).map(|s| s.trim().to_owned())
    }

    /// Reads a file; `None` when it is missing or unreadable.
    pub fn read_opt(&self, system_path: &str) -> Option<String> {
        self.read_trimmed(system_path)
            .ok()
            .filter(|s| !s.is_empty())
    }

    /// Whether a path exists (without following a dangling link).
    pub fn exists(&self, system_path: &str) -> bool {
        std::fs::symlink_metadata(self.path(system_path)).is_ok()
    }

    /// Sorted entry names of a directory.
    pub fn list(&self, system_path: &str) -> Result<Vec<String>, ReadError> {
        self.check(system_path)?;
        let mut names: Vec<String> = std::fs::read_dir(self.path(system_path))?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_by(|a, b| natural_cmp(a, b));
        Ok(names)
    }

    /// The final component of a symlink's target (`driver` → `amdgpu`), or of the
    /// canonical path; `None` when neither resolves.
    pub fn link_name(&self, system_path: &str) -> Option<String> {
        let real = self.path(system_path);
        let target = std::fs::read_link(&real)
            .ok()
            .or_else(|| std::fs::canonicalize(&real).ok())?;
        target.file_name().map(|n| n.to_string_lossy().into_owned())
    }
}

/// Orders names so that `card2` sorts before `card10` and `node9` before `node10`.
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(s: &str) -> (&str, Option<u64>) {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = s.split_at(s.len() - digits);
        (head, tail.parse().ok())
    }
    let (ha, na) = split(a);
    let (hb, nb) = split(b);
    ha.cmp(hb).then(na.cmp(&nb)).then(a.cmp(b))
}
