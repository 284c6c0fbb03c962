//! Shared helpers: fixture loading and fake filesystem trees.

use std::path::{Path, PathBuf};

use gpuprobe_detect::Root;

/// The repository's `fixtures/` directory.
pub(crate) fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Reads `fixtures/<relative>`.
pub(crate) fn fixture(relative: &str) -> String {
    let path = fixtures_dir().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// Every fixture of a tool triage reads (`fixtures/env/` holds inputs of the live
/// collector instead: see [`env_fixtures`]).
pub(crate) fn all_fixtures() -> Vec<String> {
    let mut out = every_fixture();
    out.retain(|f| !f.starts_with("env/"));
    out
}

/// The live collector's inputs in `fixtures/env/` (compiler banners, headers, lscpu, ...).
pub(crate) fn env_fixtures() -> Vec<String> {
    let mut out = every_fixture();
    out.retain(|f| f.starts_with("env/"));
    out
}

fn every_fixture() -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("fixtures dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "txt") {
                out.push(
                    path.strip_prefix(base)
                        .expect("prefix")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    let base = fixtures_dir();
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

/// A fake filesystem tree in a temporary directory.
pub(crate) struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    pub(crate) fn new() -> Tree {
        Tree {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn real(&self, system_path: &str) -> PathBuf {
        self.dir.path().join(system_path.trim_start_matches('/'))
    }

    /// Writes a file (creating parent directories).
    pub(crate) fn file(&self, system_path: &str, content: impl AsRef<[u8]>) -> &Tree {
        let path = self.real(system_path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write");
        self
    }

    /// Creates a directory.
    pub(crate) fn dir(&self, system_path: &str) -> &Tree {
        std::fs::create_dir_all(self.real(system_path)).expect("mkdir");
        self
    }

    /// Creates a relative symlink `link` → `target` (both system paths).
    pub(crate) fn link(&self, link: &str, target: &str) -> &Tree {
        let link_path = self.real(link);
        let target_path = self.real(target);
        std::fs::create_dir_all(link_path.parent().expect("parent")).expect("mkdir");
        std::fs::create_dir_all(&target_path).ok();
        let rel = relative(link_path.parent().expect("parent"), &target_path);
        std::os::unix::fs::symlink(rel, &link_path).expect("symlink");
        self
    }

    /// Sets a file's mode bits.
    pub(crate) fn mode(&self, system_path: &str, mode: u32) -> &Tree {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            self.real(system_path),
            std::fs::Permissions::from_mode(mode),
        )
        .expect("chmod");
        self
    }

    /// The owner and group of a file in the tree.
    pub(crate) fn owner(&self, system_path: &str) -> (u32, u32) {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(self.real(system_path)).expect("metadata");
        (meta.uid(), meta.gid())
    }

    pub(crate) fn root(&self) -> Root {
        Root::at(self.dir.path())
    }

    /// A PCI device directory with class, vendor, device and revision.
    pub(crate) fn pci(
        &self,
        bdf: &str,
        class: &str,
        vendor: &str,
        device: &str,
        revision: &str,
    ) -> &Tree {
        let dir = format!("/sys/bus/pci/devices/{bdf}");
        self.file(&format!("{dir}/class"), format!("{class}\n"));
        self.file(&format!("{dir}/vendor"), format!("{vendor}\n"));
        self.file(&format!("{dir}/device"), format!("{device}\n"));
        self.file(&format!("{dir}/revision"), format!("{revision}\n"))
    }
}

fn relative(from_dir: &Path, to: &Path) -> PathBuf {
    let from: Vec<_> = from_dir.components().collect();
    let to_c: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to_c).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for c in &to_c[common..] {
        out.push(c);
    }
    out
}
