//! Finding and opening the vendor runtime libraries at run time.
//!
//! The search follows where the libraries really live (`docs/native.md`, "Finding the
//! libraries", has the order and the file names): an explicit
//! override, the ROCm install directories (`$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib`,
//! `/opt/rocm-*/lib` newest first), the user's `torch/lib` and `site-packages/nvidia/*/lib`
//! (pip wheels, which lack unversioned symlinks), the CUDA toolkit directories for NVRTC,
//! `LD_LIBRARY_PATH`, and finally the bare sonames through the dynamic linker.
//! Every candidate is recorded with its outcome, and the file finally used is resolved to
//! its real path through `/proc/self/maps`, so a report can say exactly which library was
//! tested. Libraries are never unloaded: a driver unloaded under a live context crashes at
//! exit.

use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};

use gpuprobe_model::env_vars;

use crate::error::{Attempt, LoadError};

/// The runtime libraries this layer loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LibraryKind {
    /// `libcuda.so.1`, the CUDA driver API (installed with the NVIDIA driver).
    CudaDriver,
    /// `libnvrtc.so.N`, NVIDIA's run-time compiler (toolkit or pip wheel).
    Nvrtc,
    /// `libamdhip64.so.N`, the HIP runtime.
    HipRuntime,
    /// `libhiprtc.so.N`, HIP's run-time compiler (a separate library since ROCm 6).
    Hiprtc,
}

impl LibraryKind {
    /// Human name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            LibraryKind::CudaDriver => "CUDA driver",
            LibraryKind::Nvrtc => "NVRTC",
            LibraryKind::HipRuntime => "HIP runtime",
            LibraryKind::Hiprtc => "hipRTC",
        }
    }

    /// The environment variable that names an explicit file (or directory) to use.
    pub fn override_var(self) -> &'static str {
        match self {
            LibraryKind::CudaDriver => env_vars::GPUPROBE_CUDA_LIB,
            LibraryKind::Nvrtc => env_vars::GPUPROBE_NVRTC_LIB,
            LibraryKind::HipRuntime => env_vars::GPUPROBE_HIP_LIB,
            LibraryKind::Hiprtc => env_vars::GPUPROBE_HIPRTC_LIB,
        }
    }

    /// File names to look for, most preferred first.
    pub fn file_names(self) -> &'static [&'static str] {
        match self {
            LibraryKind::CudaDriver => &["libcuda.so.1", "libcuda.so"],
            LibraryKind::Nvrtc => &[
                "libnvrtc.so.13",
                "libnvrtc.so.12",
                "libnvrtc.so.11.2",
                "libnvrtc.so",
            ],
            LibraryKind::HipRuntime => &[
                "libamdhip64.so.8",
                "libamdhip64.so.7",
                "libamdhip64.so.6",
                "libamdhip64.so.5",
                "libamdhip64.so",
            ],
            LibraryKind::Hiprtc => &[
                "libhiprtc.so.8",
                "libhiprtc.so.7",
                "libhiprtc.so.6",
                "libhiprtc.so",
            ],
        }
    }

    fn is_rocm(self) -> bool {
        matches!(self, LibraryKind::HipRuntime | LibraryKind::Hiprtc)
    }
}

/// Environment variables the search reads (snapshotted so tests can supply their own).
pub const SEARCH_ENV_VARS: &[&str] = &[
    env_vars::GPUPROBE_CUDA_LIB,
    env_vars::GPUPROBE_NVRTC_LIB,
    env_vars::GPUPROBE_HIP_LIB,
    env_vars::GPUPROBE_HIPRTC_LIB,
    "ROCM_PATH",
    "HIP_PATH",
    "CUDA_PATH",
    "CUDA_HOME",
    "LD_LIBRARY_PATH",
];

/// Where to look for the libraries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchConfig {
    /// Values of [`SEARCH_ENV_VARS`] (absent keys are unset).
    pub env: BTreeMap<String, String>,
    /// Explicit files (or directories) per library, from the worker plan; these take
    /// precedence over the environment overrides.
    pub overrides: BTreeMap<LibraryKind, PathBuf>,
    /// The user's `torch/lib` directory, when the caller knows it.
    pub torch_lib_dir: Option<PathBuf>,
    /// The user's `site-packages` directories, when the caller knows them.
    pub site_packages: Vec<PathBuf>,
    /// Directories searched before all others except the overrides (the directory of the
    /// loaded HIP runtime when looking for hipRTC, so the two match).
    pub preferred_dirs: Vec<PathBuf>,
    /// Root of the `/opt/rocm*` scan (`/opt`; tests point it at a temporary directory).
    pub opt_root: PathBuf,
    /// Whether to try fixed system directories (`/opt/rocm/lib`, `/usr/local/cuda/...`).
    pub system_dirs: bool,
    /// Whether to end with the bare sonames through the dynamic linker.
    pub dynamic_linker: bool,
}

impl SearchConfig {
    /// The search a real run uses: this process's environment, the system directories and
    /// the dynamic linker.
    pub fn from_process_env() -> SearchConfig {
        let env = SEARCH_ENV_VARS
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.to_string(), v)))
            .collect();
        SearchConfig {
            env,
            opt_root: PathBuf::from("/opt"),
            system_dirs: true,
            dynamic_linker: true,
            ..SearchConfig::default()
        }
    }

    /// A search of explicitly given places only (no system directories, no dynamic linker);
    /// the tests' starting point.
    pub fn isolated() -> SearchConfig {
        SearchConfig::default()
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.env
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn site_packages_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = self.site_packages.clone();
        // torch/lib sits in site-packages/torch/lib: its grandparent is site-packages.
        if let Some(site) = self
            .torch_lib_dir
            .as_deref()
            .and_then(Path::parent)
            .and_then(Path::parent)
        {
            dirs.push(site.to_path_buf());
        }
        dirs
    }
}

/// One place to try, before it is tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Candidate {
    /// A directory to look in for [`LibraryKind::file_names`].
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Where the directory came from.
        origin: String,
    },
    /// One explicit file.
    File {
        /// The file.
        path: PathBuf,
        /// Where it came from.
        origin: String,
    },
    /// A bare soname for the dynamic linker.
    Soname {
        /// The soname.
        name: String,
    },
}

/// The ordered candidate list for one library (pure: reads only the configuration and, for
/// `/opt/rocm-*` and `site-packages/nvidia/*`, directory listings).
pub(crate) fn candidates(kind: LibraryKind, cfg: &SearchConfig) -> Vec<Candidate> {
    let mut out = Vec::new();
    let dir = |dir: PathBuf, origin: &str| Candidate::Dir {
        dir,
        origin: origin.to_string(),
    };
    let explicit = cfg
        .overrides
        .get(&kind)
        .cloned()
        .map(|p| (p, "plan option".to_string()))
        .or_else(|| {
            cfg.var(kind.override_var())
                .map(|v| (PathBuf::from(v), kind.override_var().to_string()))
        });
    if let Some((path, origin)) = explicit {
        // An explicit choice is exclusive: the user wants that library tested, not another.
        if path.is_dir() {
            out.push(Candidate::Dir { dir: path, origin });
        } else {
            out.push(Candidate::File { path, origin });
        }
        return out;
    }
    for preferred in &cfg.preferred_dirs {
        out.push(dir(preferred.clone(), "beside the HIP runtime"));
    }
    if kind.is_rocm() {
        for var in ["ROCM_PATH", "HIP_PATH"] {
            if let Some(root) = cfg.var(var) {
                out.push(dir(Path::new(root).join("lib"), var));
            }
        }
        let opt = if !cfg.opt_root.as_os_str().is_empty() {
            Some(cfg.opt_root.clone())
        } else if cfg.system_dirs {
            Some(PathBuf::from("/opt"))
        } else {
            None
        };
        if let Some(opt) = opt {
            out.push(dir(opt.join("rocm").join("lib"), "/opt/rocm"));
            for versioned in versioned_rocm_dirs(&opt) {
                out.push(dir(versioned.join("lib"), "/opt/rocm-*"));
            }
        }
    }
    if let Some(torch_lib) = &cfg.torch_lib_dir {
        out.push(dir(torch_lib.clone(), "torch/lib"));
    }
    for site in cfg.site_packages_dirs() {
        match kind {
            LibraryKind::Nvrtc => {
                for sub in nvidia_wheel_lib_dirs(&site) {
                    out.push(dir(sub, "site-packages/nvidia"));
                }
            }
            LibraryKind::HipRuntime | LibraryKind::Hiprtc => {
                out.push(dir(
                    site.join("_rocm_sdk_core").join("lib"),
                    "site-packages/_rocm_sdk_core",
                ));
            }
            LibraryKind::CudaDriver => {}
        }
    }
    // The toolkit's NVRTC comes after the user's own (torch wheels), which matches the
    // framework being diagnosed.
    if kind == LibraryKind::Nvrtc {
        for var in ["CUDA_PATH", "CUDA_HOME"] {
            if let Some(root) = cfg.var(var) {
                out.push(dir(Path::new(root).join("lib64"), var));
            }
        }
        if cfg.system_dirs {
            out.push(dir(
                PathBuf::from("/usr/local/cuda/lib64"),
                "/usr/local/cuda",
            ));
            out.push(dir(
                PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"),
                "/usr/local/cuda",
            ));
        }
    }
    if let Some(paths) = cfg.var("LD_LIBRARY_PATH") {
        for entry in paths.split(':').filter(|e| !e.is_empty()) {
            if !is_build_tool_dir(Path::new(entry)) {
                out.push(dir(PathBuf::from(entry), "LD_LIBRARY_PATH"));
            }
        }
    }
    if cfg.dynamic_linker {
        for name in kind.file_names() {
            out.push(Candidate::Soname {
                name: name.to_string(),
            });
        }
    }
    dedup_candidates(out)
}

/// Whether `dir` is one that `cargo run` and `cargo test` put on `LD_LIBRARY_PATH` for
/// their own sake: a directory in a Cargo build directory (one holding Cargo's
/// `CACHEDIR.TAG` and `.rustc_info.json`: `target/debug`, `target/debug/deps`) or in a Rust
/// toolchain (`…/lib/rustlib/…`, or the toolchain's `lib` beside it). No GPU runtime lives
/// there: searching them only lengthens the list of places a runtime was looked for.
fn is_build_tool_dir(dir: &Path) -> bool {
    let in_cargo_target = dir.ancestors().any(|ancestor| {
        ancestor.join("CACHEDIR.TAG").is_file() && ancestor.join(".rustc_info.json").is_file()
    });
    let in_toolchain = dir.components().any(|c| c.as_os_str() == "rustlib")
        || dir.join("rustlib").join("components").is_file();
    in_cargo_target || in_toolchain
}

fn dedup_candidates(list: Vec<Candidate>) -> Vec<Candidate> {
    let mut seen = std::collections::BTreeSet::new();
    list.into_iter()
        .filter(|c| {
            let key = match c {
                Candidate::Dir { dir, .. } => format!("d:{}", dir.display()),
                Candidate::File { path, .. } => format!("f:{}", path.display()),
                Candidate::Soname { name } => format!("s:{name}"),
            };
            seen.insert(key)
        })
        .collect()
}

/// `/opt/rocm-X.Y.Z` directories under `opt`, newest version first.
pub(crate) fn versioned_rocm_dirs(opt: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(opt) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u64>, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix("rocm-")?;
            let key: Vec<u64> = version
                .split(['.', '-'])
                .map(|part| part.parse().unwrap_or(0))
                .collect();
            Some((key, e.path()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|(_, p)| p).collect()
}

/// `site-packages/nvidia/*/lib`, with the directories that hold NVRTC in today's wheels
/// (`cu13`, `cuda_nvrtc`) first.
pub(crate) fn nvidia_wheel_lib_dirs(site: &Path) -> Vec<PathBuf> {
    let root = site.join("nvidia");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("lib").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let rank = |n: &str| match n {
        "cu13" => 0,
        "cuda_nvrtc" => 1,
        "cu12" => 2,
        _ => 3,
    };
    names.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    names
        .into_iter()
        .map(|n| root.join(n).join("lib"))
        .collect()
}

/// A library that is open, with where it came from. Never unloaded.
pub struct OpenedLibrary {
    kind: LibraryKind,
    library: ManuallyDrop<libloading::Library>,
    /// What was handed to `dlopen` (path or soname).
    pub opened_as: String,
    /// Where that candidate came from.
    pub origin: String,
    /// The real file, resolved after loading (symlinks followed).
    pub resolved: Option<PathBuf>,
}

impl std::fmt::Debug for OpenedLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedLibrary")
            .field("kind", &self.kind)
            .field("opened_as", &self.opened_as)
            .field("resolved", &self.resolved)
            .finish()
    }
}

impl OpenedLibrary {
    /// The library kind.
    pub fn kind(&self) -> LibraryKind {
        self.kind
    }

    /// The best path to show: the resolved file, else what was opened.
    pub fn path(&self) -> PathBuf {
        self.resolved
            .clone()
            .unwrap_or_else(|| PathBuf::from(&self.opened_as))
    }

    /// The major version in the soname or file name (`libamdhip64.so.6.3.1` → 6).
    pub fn soname_major(&self) -> Option<u32> {
        soname_major(&self.opened_as).or_else(|| {
            self.resolved
                .as_deref()
                .and_then(|p| soname_major(&p.to_string_lossy()))
        })
    }

    /// Resolves a required symbol.
    ///
    /// # Safety
    /// `T` must be the exact `extern "C"` function-pointer type of `name` in this library.
    pub unsafe fn required<T: Copy>(&self, name: &str) -> Result<T, LoadError> {
        // SAFETY: the caller guarantees `T` matches the symbol's type.
        unsafe { self.optional(name) }.ok_or_else(|| LoadError::MissingSymbol {
            library: self.kind.name(),
            path: self.path(),
            symbol: name.to_string(),
        })
    }

    /// Resolves an optional symbol.
    ///
    /// # Safety
    /// `T` must be the exact `extern "C"` function-pointer type of `name` in this library.
    pub unsafe fn optional<T: Copy>(&self, name: &str) -> Option<T> {
        // SAFETY: the symbol's type is the caller's promise; the library is never unloaded
        // (ManuallyDrop), so copying the function pointer out of the Symbol cannot dangle.
        unsafe { self.library.get::<T>(name).ok().map(|symbol| *symbol) }
    }

    /// Address of a symbol, used to find the mapped file.
    fn symbol_address(&self, name: &str) -> Option<usize> {
        // SAFETY: the pointer is only converted to an integer, never called or dereferenced.
        unsafe { self.optional::<*const std::ffi::c_void>(name) }.map(|p| p as usize)
    }
}

/// The major version in a library file name: the first number after `.so.`.
pub(crate) fn soname_major(name: &str) -> Option<u32> {
    let file = name.rsplit('/').next().unwrap_or(name);
    let (_, rest) = file.split_once(".so.")?;
    rest.split('.').next()?.parse().ok()
}

/// What trying every candidate produced.
#[derive(Debug)]
pub struct LoadOutcome<T> {
    /// The library and what the validation step built from it, or why none worked.
    pub result: Result<T, LoadError>,
    /// Every candidate in the order tried.
    pub attempts: Vec<Attempt>,
}

/// Tries the candidates in order; each one that opens is passed to `validate` (symbol
/// resolution, version checks). The first that validates wins; a candidate that opens but
/// fails validation is recorded and the search goes on. When none wins, the error is the
/// first validation failure if any candidate opened (the most telling), else `NotFound`.
pub(crate) fn load_first<T>(
    kind: LibraryKind,
    cfg: &SearchConfig,
    symbol_for_path: &str,
    mut validate: impl FnMut(OpenedLibrary) -> Result<T, LoadError>,
) -> LoadOutcome<T> {
    let mut attempts = Vec::new();
    let mut first_invalid: Option<LoadError> = None;
    for candidate in candidates(kind, cfg) {
        let (files, origin): (Vec<String>, String) = match &candidate {
            Candidate::Dir { dir, origin } => {
                let present: Vec<String> = kind
                    .file_names()
                    .iter()
                    .map(|n| dir.join(n))
                    .filter(|p| p.exists())
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                if present.is_empty() {
                    attempts.push(Attempt {
                        candidate: format!("{}/{{{}}}", dir.display(), kind.file_names().join(",")),
                        origin: origin.clone(),
                        error: Some("absent".into()),
                    });
                    continue;
                }
                (present, origin.clone())
            }
            Candidate::File { path, origin } => {
                if !path.exists() {
                    attempts.push(Attempt {
                        candidate: path.to_string_lossy().into_owned(),
                        origin: origin.clone(),
                        error: Some("absent".into()),
                    });
                    continue;
                }
                (vec![path.to_string_lossy().into_owned()], origin.clone())
            }
            Candidate::Soname { name } => (vec![name.clone()], "dynamic linker".to_string()),
        };
        for file in files {
            // SAFETY: opening a vendor runtime runs its initialisers. That is the point of
            // this layer, and it happens only inside the worker process, whose crash the
            // supervisor records.
            let opened = unsafe { libloading::Library::new(&file) };
            let library = match opened {
                Ok(library) => library,
                Err(error) => {
                    attempts.push(Attempt {
                        candidate: file,
                        origin: origin.clone(),
                        error: Some(dlerror_text(&error)),
                    });
                    continue;
                }
            };
            let mut opened = OpenedLibrary {
                kind,
                library: ManuallyDrop::new(library),
                opened_as: file.clone(),
                origin: origin.clone(),
                resolved: None,
            };
            opened.resolved = opened
                .symbol_address(symbol_for_path)
                .and_then(mapped_file_of)
                .or_else(|| std::fs::canonicalize(&file).ok());
            let shown = opened.path().to_string_lossy().into_owned();
            match validate(opened) {
                Ok(value) => {
                    attempts.push(Attempt {
                        candidate: file,
                        origin,
                        error: None,
                    });
                    return LoadOutcome {
                        result: Ok(value),
                        attempts,
                    };
                }
                Err(error) => {
                    attempts.push(Attempt {
                        candidate: if shown == file {
                            file
                        } else {
                            format!("{file} ({shown})")
                        },
                        origin: origin.clone(),
                        error: Some(error.to_string()),
                    });
                    first_invalid.get_or_insert(error);
                }
            }
        }
    }
    let error = first_invalid.unwrap_or_else(|| LoadError::NotFound {
        library: kind.name(),
        tried: attempts.clone(),
    });
    LoadOutcome {
        result: Err(error),
        attempts,
    }
}

fn dlerror_text(error: &libloading::Error) -> String {
    // libloading's own text is generic ("dlopen failed"); dlerror()'s text, which names the
    // file and the reason, is its source.
    match std::error::Error::source(error) {
        Some(source) => source.to_string(),
        None => error.to_string(),
    }
}

/// The file mapped at `address` in this process, from `/proc/self/maps`.
pub(crate) fn mapped_file_of(address: usize) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    mapped_file_in(&maps, address as u64)
}

/// Parses a `/proc/<pid>/maps` text and returns the path of the mapping holding `address`.
pub(crate) fn mapped_file_in(maps: &str, address: u64) -> Option<PathBuf> {
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let range = fields.next()?;
        let (start, end) = range.split_once('-')?;
        let start = u64::from_str_radix(start, 16).ok()?;
        let end = u64::from_str_radix(end, 16).ok()?;
        if !(start..end).contains(&address) {
            return None;
        }
        // perms, offset, dev, inode, then the path (which may contain spaces).
        let path: Vec<&str> = fields.skip(4).collect();
        let path = path.join(" ");
        path.starts_with('/').then(|| PathBuf::from(path))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg_with(env: &[(&str, &str)]) -> SearchConfig {
        SearchConfig {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..SearchConfig::isolated()
        }
    }

    fn dirs(list: &[Candidate]) -> Vec<String> {
        list.iter()
            .map(|c| match c {
                Candidate::Dir { dir, .. } => dir.display().to_string(),
                Candidate::File { path, .. } => format!("file:{}", path.display()),
                Candidate::Soname { name } => format!("soname:{name}"),
            })
            .collect()
    }

    #[test]
    fn directories_only_cargo_puts_on_the_search_path_are_not_searched() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("target");
        let debug_deps = target.join("debug").join("deps");
        std::fs::create_dir_all(&debug_deps).unwrap();
        std::fs::write(
            target.join("CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        )
        .unwrap();
        std::fs::write(target.join(".rustc_info.json"), "{}").unwrap();
        let toolchain_lib = tmp.path().join("toolchains").join("stable").join("lib");
        let rustlib = toolchain_lib.join("rustlib");
        let host_lib = rustlib.join("x86_64-unknown-linux-gnu").join("lib");
        std::fs::create_dir_all(&host_lib).unwrap();
        std::fs::write(rustlib.join("components"), "rustc\n").unwrap();
        // A directory named `target` that is no Cargo build directory stays.
        let not_cargo = tmp.path().join("project").join("target").join("debug");
        std::fs::create_dir_all(&not_cargo).unwrap();
        let path = [
            target.join("debug"),
            debug_deps,
            host_lib,
            toolchain_lib,
            not_cargo.clone(),
            PathBuf::from("/usr/local/nvidia/lib64"),
        ]
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
        let cfg = cfg_with(&[("LD_LIBRARY_PATH", &path)]);
        assert_eq!(
            dirs(&candidates(LibraryKind::CudaDriver, &cfg)),
            vec![
                not_cargo.display().to_string(),
                "/usr/local/nvidia/lib64".to_string()
            ]
        );
    }

    #[test]
    fn hip_search_order_follows_the_real_install_places() {
        let opt = tempfile::tempdir().unwrap();
        for v in ["rocm-6.2.0", "rocm-6.10.1", "rocm-5.7.1", "other"] {
            std::fs::create_dir_all(opt.path().join(v).join("lib")).unwrap();
        }
        let mut cfg = cfg_with(&[
            ("ROCM_PATH", "/r"),
            ("HIP_PATH", "/h"),
            ("LD_LIBRARY_PATH", "/l1::/l2"),
        ]);
        cfg.opt_root = opt.path().to_path_buf();
        cfg.torch_lib_dir = Some(PathBuf::from("/venv/site-packages/torch/lib"));
        cfg.dynamic_linker = true;
        let got = dirs(&candidates(LibraryKind::HipRuntime, &cfg));
        let o = opt.path().display();
        assert_eq!(
            got,
            vec![
                "/r/lib".to_string(),
                "/h/lib".into(),
                format!("{o}/rocm/lib"),
                format!("{o}/rocm-6.10.1/lib"),
                format!("{o}/rocm-6.2.0/lib"),
                format!("{o}/rocm-5.7.1/lib"),
                "/venv/site-packages/torch/lib".into(),
                "/venv/site-packages/_rocm_sdk_core/lib".into(),
                "/l1".into(),
                "/l2".into(),
                "soname:libamdhip64.so.8".into(),
                "soname:libamdhip64.so.7".into(),
                "soname:libamdhip64.so.6".into(),
                "soname:libamdhip64.so.5".into(),
                "soname:libamdhip64.so".into(),
            ]
        );
    }

    #[test]
    fn override_is_exclusive() {
        let cfg = cfg_with(&[
            ("GPUPROBE_HIP_LIB", "/x/libamdhip64.so.6"),
            ("ROCM_PATH", "/r"),
        ]);
        assert_eq!(
            dirs(&candidates(LibraryKind::HipRuntime, &cfg)),
            vec!["file:/x/libamdhip64.so.6".to_string()]
        );
        let mut cfg = cfg;
        cfg.overrides
            .insert(LibraryKind::HipRuntime, PathBuf::from("/plan/lib.so"));
        assert_eq!(
            dirs(&candidates(LibraryKind::HipRuntime, &cfg)),
            vec!["file:/plan/lib.so".to_string()]
        );
    }

    #[test]
    fn nvrtc_looks_in_pip_wheels_with_cu13_first() {
        let site = tempfile::tempdir().unwrap();
        for sub in ["cudnn", "cuda_nvrtc", "cu13", "nccl"] {
            std::fs::create_dir_all(site.path().join("nvidia").join(sub).join("lib")).unwrap();
        }
        let mut cfg = cfg_with(&[("CUDA_HOME", "/cuda")]);
        cfg.site_packages = vec![site.path().to_path_buf()];
        let got = dirs(&candidates(LibraryKind::Nvrtc, &cfg));
        let s = site.path().display();
        assert_eq!(
            got,
            vec![
                format!("{s}/nvidia/cu13/lib"),
                format!("{s}/nvidia/cuda_nvrtc/lib"),
                format!("{s}/nvidia/cudnn/lib"),
                format!("{s}/nvidia/nccl/lib"),
                "/cuda/lib64".to_string(),
            ]
        );
    }

    #[test]
    fn missing_library_lists_every_candidate() {
        let mut cfg = cfg_with(&[
            ("ROCM_PATH", "/nonexistent-rocm"),
            ("LD_LIBRARY_PATH", "/nope"),
        ]);
        cfg.opt_root = PathBuf::from("/nonexistent-opt");
        let outcome = load_first(LibraryKind::HipRuntime, &cfg, "hipInit", |_| Ok(()));
        let Err(LoadError::NotFound { library, tried }) = outcome.result else {
            panic!("expected NotFound, got {:?}", outcome.result);
        };
        assert_eq!(library, "HIP runtime");
        let shown: Vec<&str> = tried.iter().map(|a| a.candidate.as_str()).collect();
        assert!(
            shown[0].starts_with("/nonexistent-rocm/lib/{libamdhip64.so.8"),
            "{shown:?}"
        );
        assert!(shown.iter().any(|c| c.starts_with("/nope/")), "{shown:?}");
        assert!(tried.iter().all(|a| a.error.as_deref() == Some("absent")));
        assert_eq!(tried, outcome.attempts);
    }

    #[test]
    fn dynamic_linker_failures_carry_dlerror_text() {
        let mut cfg = SearchConfig::isolated();
        cfg.dynamic_linker = true;
        let outcome = load_first(LibraryKind::Hiprtc, &cfg, "hiprtcVersion", |_| Ok(()));
        // This machine has no ROCm: every soname fails with the linker's message.
        if let Err(LoadError::NotFound { tried, .. }) = outcome.result {
            assert_eq!(tried.len(), LibraryKind::Hiprtc.file_names().len());
            assert!(
                tried[0]
                    .error
                    .as_deref()
                    .unwrap_or("")
                    .contains("libhiprtc.so.8")
            );
        }
    }

    #[test]
    fn soname_major_reads_versions() {
        assert_eq!(
            soname_major("/opt/rocm/lib/libamdhip64.so.6.3.60300"),
            Some(6)
        );
        assert_eq!(soname_major("libcuda.so.1"), Some(1));
        assert_eq!(soname_major("libnvrtc.so"), None);
        assert_eq!(soname_major("libnvrtc.so.11.2"), Some(11));
    }

    #[test]
    fn maps_lookup_finds_the_mapping() {
        let maps = "7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libfoo.so.1.2\n\
                    7f10-7f20 rw-p 00000000 00:00 0 \n\
                    7f20-7f30 r-xp 00001000 08:01 13 /opt/with space/libbar.so\n";
        assert_eq!(
            mapped_file_in(maps, 0x7f05),
            Some(PathBuf::from("/usr/lib/libfoo.so.1.2"))
        );
        assert_eq!(mapped_file_in(maps, 0x7f15), None);
        assert_eq!(
            mapped_file_in(maps, 0x7f2f),
            Some(PathBuf::from("/opt/with space/libbar.so"))
        );
        assert_eq!(mapped_file_in(maps, 0x9000), None);
    }

    proptest::proptest! {
        #[test]
        fn maps_parser_never_panics(text in ".{0,400}", addr: u64) {
            let _ = mapped_file_in(&text, addr);
        }
    }
}
