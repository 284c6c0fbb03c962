//! Embeds the Python probe package and the simulation presets into the binary, so probes
//! run in the user's interpreter with no install step. Both live outside the crate
//! (`python/gpuprobe`, `simulate/presets`) and are reached through the crate's
//! `python-package` and `presets` symlinks, so that `cargo package` and `maturin sdist`
//! ship them inside the crate. Either one missing stops the build: a binary without them
//! could run no probe.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, root: &Path, exts: &[&str], out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        if path.is_dir() {
            collect(&path, root, exts, out);
        } else if exts.iter().any(|ext| name.ends_with(ext)) {
            let rel = path
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, path));
        }
    }
}

fn write_table(name: &str, files: &[(String, PathBuf)], code: &mut String) {
    writeln!(code, "/// Embedded files: (relative path, contents).").unwrap();
    writeln!(code, "pub(crate) static {name}: &[(&str, &str)] = &[").unwrap();
    for (rel, path) in files {
        writeln!(
            code,
            "    ({rel:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    writeln!(code, "];").unwrap();
}

/// Stops the build, saying what is missing and how to get it.
fn missing(dir: &Path, what: &str) -> ! {
    eprintln!(
        "error: gpuprobe-runner: {what} is missing: nothing usable at {}.\n\
         The crate reaches it through a symlink into the repository, and every source \
         archive must carry it. Fix: build from a git checkout of gpuprobe, or restore the \
         links with `git checkout -- crates/gpuprobe-runner python simulate`; make source \
         archives with scripts/build-sdist.sh, which checks that they carry it.",
        dir.display()
    );
    std::process::exit(1);
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let package_dir = manifest.join("python-package");
    let presets_root = manifest.join("presets");
    println!("cargo:rerun-if-changed={}", package_dir.display());
    println!("cargo:rerun-if-changed={}", presets_root.display());

    let mut python = Vec::new();
    collect(
        &package_dir,
        &package_dir,
        // `.json`: data the worker reads beside its modules (`gpuprobe/worker/tolerances.json`).
        &[".py", ".typed", ".json"],
        &mut python,
    );
    // Paths inside the package keep its name (`gpuprobe/worker/...`), as extracted.
    for (rel, _) in &mut python {
        *rel = format!("gpuprobe/{rel}");
    }
    let mut presets = Vec::new();
    collect(&presets_root, &presets_root, &[".toml"], &mut presets);
    if !python
        .iter()
        .any(|(rel, _)| rel == "gpuprobe/worker/__main__.py")
    {
        missing(&package_dir, "the Python probe package (python/gpuprobe)");
    }
    if presets.is_empty() {
        missing(
            &presets_root,
            "the simulation presets (simulate/presets/*.toml)",
        );
    }
    for (_, path) in python.iter().chain(presets.iter()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    // Directories themselves change when files are added or removed.
    let mut dirs = vec![package_dir.clone()];
    while let Some(dir) = dirs.pop() {
        println!("cargo:rerun-if-changed={}", dir.display());
        if let Ok(entries) = fs::read_dir(&dir) {
            dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }

    let mut code = String::new();
    write_table("PYTHON_PACKAGE", &python, &mut code);
    write_table("SIMULATION_PRESETS", &presets, &mut code);
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets it")).join("embedded.rs");
    fs::write(out, code).expect("write embedded.rs");
}
