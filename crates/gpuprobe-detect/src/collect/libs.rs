//! Library discovery: where the HIP (`libamdhip64`, `libhiprtc`, `libhsa-runtime64`) and
//! CUDA (`libcuda`, `libnvrtc`, `libcudart`) shared libraries are, with versions read
//! from file names. Nothing is loaded here (that is `gpuprobe-gpu`'s job).
//!
//! Layouts covered: system ROCm (`$ROCM_PATH`, `/opt/rocm*`), distro packages in the
//! multiarch directories, `LD_LIBRARY_PATH`, CUDA toolkits (`/usr/local/cuda*`, including
//! `targets/<arch>/lib`), NVIDIA container mounts (`/usr/local/nvidia/lib64`), and Python
//! environments (`torch/lib` copies, TheRock's `_rocm_sdk_core/lib`, and
//! `site-packages/nvidia/*/lib`), where files may lack the unversioned symlink.

use std::collections::BTreeMap;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{CudaInfo, LibraryInfo, RocmInfo};

use crate::merge::fill;
use crate::root::Root;

const HIP_LIBS: &[&str] = &[
    "libamdhip64",
    "libhiprtc",
    "libhsa-runtime64",
    "libMIOpen",
    "librccl",
    "librocblas",
    "libhipblaslt",
];
const CUDA_LIBS: &[&str] = &[
    "libcuda",
    "libnvrtc",
    "libcudart",
    "libcudnn",
    "libnccl",
    "libcublas",
    "libcublasLt",
];

/// `LibraryInfo::origin` of TheRock's pip-installed ROCm (`_rocm_sdk_*` packages).
const PIP_ROCM: &str = "rocm-sdk (pip)";

/// A directory to scan and what to call it in `LibraryInfo::origin`.
#[derive(Clone)]
struct ScanDir {
    path: String,
    origin: String,
}

/// `libamdhip64.so.6.2.60202` → (`libamdhip64`, `Some("6.2.60202")`); `None` for other files.
fn library_name(file: &str, wanted: &[&str]) -> Option<(&'static str, Option<String>)> {
    let (stem, rest) = file.split_once(".so")?;
    let name = HIP_LIBS
        .iter()
        .chain(CUDA_LIBS)
        .find(|n| **n == stem && wanted.contains(n))?;
    let version = rest.strip_prefix('.');
    match version {
        None if rest.is_empty() => Some((name, None)),
        Some(v)
            if !v.is_empty()
                && v.split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())) =>
        {
            Some((name, Some(v.to_owned())))
        }
        _ => None,
    }
}

/// Scans the directories and returns one entry per real file (symlinks resolved), with
/// the version of the most specific name.
fn scan(root: &Root, dirs: &[ScanDir], wanted: &[&str]) -> Vec<LibraryInfo> {
    let mut by_real: BTreeMap<String, LibraryInfo> = BTreeMap::new();
    for dir in dirs {
        let Ok(files) = root.list(&dir.path) else {
            continue;
        };
        for file in files {
            let Some((name, version)) = library_name(&file, wanted) else {
                continue;
            };
            let system = format!("{}/{}", dir.path.trim_end_matches('/'), file);
            let real_path =
                std::fs::canonicalize(root.path(&system)).unwrap_or_else(|_| root.path(&system));
            let real = root.system_path(&real_path);
            let real_version = real_path
                .file_name()
                .and_then(|f| library_name(&f.to_string_lossy(), wanted))
                .and_then(|(_, v)| v);
            let version = [version, real_version]
                .into_iter()
                .flatten()
                .max_by_key(|v| v.split('.').count());
            let entry = by_real.entry(real.clone()).or_insert_with(|| LibraryInfo {
                name: name.to_owned(),
                path: real.clone(),
                version: None,
                origin: Some(dir.origin.clone()),
            });
            if version.as_ref().map(|v| v.split('.').count())
                > entry.version.as_ref().map(|v| v.split('.').count())
            {
                entry.version = version;
            }
        }
    }
    let mut libs: Vec<LibraryInfo> = by_real.into_values().collect();
    libs.sort_by(|a, b| a.name.cmp(&b.name).then(a.path.cmp(&b.path)));
    libs
}

fn multiarch_dirs(root: &Root) -> Vec<String> {
    let arch = root
        .read_opt("/proc/sys/kernel/arch")
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let mut dirs = vec![
        format!("/usr/lib/{arch}-linux-gnu"),
        format!("/lib/{arch}-linux-gnu"),
        "/usr/lib64".to_owned(),
        "/lib64".to_owned(),
        "/usr/lib".to_owned(),
    ];
    dirs.dedup();
    dirs
}

/// Site-packages directories of the active Python environments named by the environment.
pub(super) fn site_packages(root: &Root, env: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        let Some(prefix) = env.get(var) else { continue };
        let lib = format!("{}/lib", prefix.trim_end_matches('/'));
        for entry in root.list(&lib).unwrap_or_default() {
            if entry.starts_with("python3") {
                out.push(format!("{lib}/{entry}/site-packages"));
            }
        }
    }
    out
}

/// Directories of a Python environment's GPU libraries under one site-packages.
fn python_dirs(root: &Root, site: &str) -> Vec<ScanDir> {
    let mut dirs = vec![ScanDir {
        path: format!("{site}/torch/lib"),
        origin: "torch/lib".to_owned(),
    }];
    for entry in root.list(site).unwrap_or_default() {
        if entry.starts_with("_rocm_sdk") {
            dirs.push(ScanDir {
                path: format!("{site}/{entry}/lib"),
                origin: PIP_ROCM.to_owned(),
            });
        }
    }
    for entry in root.list(&format!("{site}/nvidia")).unwrap_or_default() {
        dirs.push(ScanDir {
            path: format!("{site}/nvidia/{entry}/lib"),
            origin: "site-packages/nvidia".to_owned(),
        });
    }
    dirs
}

/// `/opt/rocm*` installations, one per real directory (`/opt/rocm` is usually a link to
/// `/opt/rocm-X.Y.Z`; the versioned name is kept).
fn rocm_installs(root: &Root) -> Vec<String> {
    let mut seen: Vec<std::path::PathBuf> = Vec::new();
    let mut out = Vec::new();
    let mut names: Vec<String> = root
        .list("/opt")
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.starts_with("rocm"))
        .collect();
    // Versioned names first, so they win over the `/opt/rocm` link.
    names.sort_by_key(|n| n == "rocm");
    for name in names {
        let system = format!("/opt/{name}");
        let real = std::fs::canonicalize(root.path(&system)).unwrap_or_else(|_| root.path(&system));
        if !seen.contains(&real) {
            seen.push(real);
            out.push(system);
        }
    }
    out
}

fn cuda_installs(root: &Root) -> Vec<String> {
    root.list("/usr/local")
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.starts_with("cuda"))
        .map(|e| format!("/usr/local/{e}"))
        .collect()
}

/// Records HIP libraries: one entry per file, the pip flag, and the HIP version from a
/// three-part `libamdhip64` version.
fn add_hip_libraries(fp: &mut Fingerprint, libs: Vec<LibraryInfo>) {
    let rocm = fp.rocm.get_or_insert_with(RocmInfo::default);
    rocm.pip_installed |= libs.iter().any(|l| l.origin.as_deref() == Some(PIP_ROCM));
    if let Some(hip) = libs.iter().find(|l| {
        l.name == "libamdhip64"
            && l.version
                .as_ref()
                .is_some_and(|v| v.split('.').count() >= 3)
    }) {
        fill(&mut rocm.hip_version, hip.version.clone());
    }
    for lib in libs {
        if !rocm.libraries.iter().any(|l| l.path == lib.path) {
            rocm.libraries.push(lib);
        }
    }
}

/// Records CUDA libraries, one entry per file.
fn add_cuda_libraries(fp: &mut Fingerprint, libs: Vec<LibraryInfo>) {
    let cuda = fp.cuda.get_or_insert_with(CudaInfo::default);
    for lib in libs {
        if !cuda.libraries.iter().any(|l| l.path == lib.path) {
            cuda.libraries.push(lib);
        }
    }
}

pub(super) fn collect(root: &Root, env: &BTreeMap<String, String>, fp: &mut Fingerprint) {
    // Directories both runtimes are searched in, after their own install locations.
    let mut shared: Vec<ScanDir> = env
        .get("LD_LIBRARY_PATH")
        .into_iter()
        .flat_map(|p| p.split(':'))
        .filter(|d| d.starts_with('/'))
        .map(|d| ScanDir {
            path: d.to_owned(),
            origin: "LD_LIBRARY_PATH".to_owned(),
        })
        .collect();
    shared.extend(multiarch_dirs(root).into_iter().map(|d| ScanDir {
        path: d,
        origin: "system library directory".to_owned(),
    }));
    for site in site_packages(root, env) {
        shared.extend(python_dirs(root, &site));
    }
    collect_rocm(root, env, &shared, fp);
    collect_cuda(root, env, &shared, fp);
}

fn collect_rocm(
    root: &Root,
    env: &BTreeMap<String, String>,
    shared: &[ScanDir],
    fp: &mut Fingerprint,
) {
    let rocm_path = env
        .get("ROCM_PATH")
        .or_else(|| env.get("HIP_PATH"))
        .cloned();
    let installs = rocm_installs(root);
    let mut dirs: Vec<ScanDir> = Vec::new();
    for sub in ["lib", "lib64"] {
        dirs.extend(rocm_path.iter().map(|p| ScanDir {
            path: format!("{p}/{sub}"),
            origin: "ROCM_PATH".to_owned(),
        }));
    }
    dirs.extend(installs.iter().map(|i| ScanDir {
        path: format!("{i}/lib"),
        origin: i.clone(),
    }));
    dirs.extend(shared.iter().cloned());
    let hip_libs = scan(root, &dirs, HIP_LIBS);
    let version_file = rocm_path.iter().chain(&installs).find_map(|p| {
        root.read_opt(&format!("{p}/.info/version"))
            .map(|v| (p.clone(), v))
    });
    if hip_libs.is_empty() && version_file.is_none() && rocm_path.is_none() {
        return;
    }
    let rocm = fp.rocm.get_or_insert_with(RocmInfo::default);
    if let Some((path, version)) = &version_file {
        // `.info/version` holds `6.2.2-116`: the release before the build number.
        fill(
            &mut rocm.version,
            version.split('-').next().map(str::to_owned),
        );
        let real = std::fs::canonicalize(root.path(path))
            .map(|p| root.system_path(&p))
            .unwrap_or_else(|_| path.clone());
        fill(&mut rocm.path, Some(real));
    } else {
        fill(&mut rocm.path, rocm_path);
    }
    add_hip_libraries(fp, hip_libs);
    if installs.len() > 1 {
        fp.extra
            .insert("rocm.installs".to_owned(), installs.join(" "));
    }
}

fn collect_cuda(
    root: &Root,
    env: &BTreeMap<String, String>,
    shared: &[ScanDir],
    fp: &mut Fingerprint,
) {
    let cuda_homes: Vec<String> = env
        .get("CUDA_HOME")
        .or_else(|| env.get("CUDA_PATH"))
        .cloned()
        .into_iter()
        .chain(cuda_installs(root))
        .collect();
    let mut dirs: Vec<ScanDir> = Vec::new();
    for home in &cuda_homes {
        dirs.push(ScanDir {
            path: format!("{home}/lib64"),
            origin: home.clone(),
        });
        for target in root.list(&format!("{home}/targets")).unwrap_or_default() {
            dirs.push(ScanDir {
                path: format!("{home}/targets/{target}/lib"),
                origin: home.clone(),
            });
        }
    }
    for nv in ["/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"] {
        dirs.push(ScanDir {
            path: nv.to_owned(),
            origin: "/usr/local/nvidia".to_owned(),
        });
    }
    dirs.push(ScanDir {
        path: "/usr/lib/wsl/lib".to_owned(),
        origin: "WSL driver".to_owned(),
    });
    dirs.extend(shared.iter().cloned());
    let cuda_libs = scan(root, &dirs, CUDA_LIBS);
    let toolkit_version = cuda_homes.iter().find_map(|home| {
        if let Ok(text) = root.read(&format!("{home}/version.json")) {
            let json: serde_json::Value = serde_json::from_str(&text).ok()?;
            return json
                .get("cuda")?
                .get("version")?
                .as_str()
                .map(str::to_owned);
        }
        let text = root.read_opt(&format!("{home}/version.txt"))?;
        text.strip_prefix("CUDA Version ")
            .map(|v| v.trim().to_owned())
    });
    if cuda_libs.is_empty() && toolkit_version.is_none() {
        return;
    }
    let cuda = fp.cuda.get_or_insert_with(CudaInfo::default);
    fill(
        &mut cuda.runtime_version,
        toolkit_version.or_else(|| env.get("CUDA_VERSION").cloned()),
    );
    add_cuda_libraries(fp, cuda_libs);
}

/// Scans the Python environment that the worker reported (`torch.lib_dir` and its
/// site-packages: TheRock `_rocm_sdk_*`, `nvidia/*/lib`) for GPU libraries and adds them
/// to `rocm.libraries` / `cuda.libraries`, with the component versions of the wheels'
/// headers and of the distributions the worker listed (`nvidia-cudnn-cu13` → cuDNN).
/// Call after [`crate::merge_python`].
pub fn scan_python_libraries(root: &Root, fp: &mut Fingerprint) {
    let Some(lib_dir) = fp
        .python
        .as_ref()
        .and_then(|p| p.torch.as_ref())
        .and_then(|t| t.lib_dir.clone())
    else {
        return;
    };
    let site = lib_dir
        .trim_end_matches('/')
        .trim_end_matches("/torch/lib")
        .to_owned();
    let dirs = python_dirs(root, &site);
    let hip = scan(root, &dirs, HIP_LIBS);
    let cuda = scan(root, &dirs, CUDA_LIBS);
    if !hip.is_empty() {
        add_hip_libraries(fp, hip);
    }
    if !cuda.is_empty() {
        add_cuda_libraries(fp, cuda);
    }
    let includes = super::buildenv::include_dirs(root, &BTreeMap::new(), &[site]);
    // Only the interpreter's own wheels: the system directories were read by `collect`.
    let wheel_includes: Vec<String> = includes
        .into_iter()
        .filter(|d| d.contains("site-packages") || d.contains("dist-packages"))
        .collect();
    super::buildenv::header_components(root, &wheel_includes, fp);
    super::buildenv::wheel_components(fp);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names_and_versions() {
        assert_eq!(
            library_name("libamdhip64.so.6.2.60202", HIP_LIBS),
            Some(("libamdhip64", Some("6.2.60202".to_owned())))
        );
        assert_eq!(
            library_name("libamdhip64.so", HIP_LIBS),
            Some(("libamdhip64", None))
        );
        assert_eq!(library_name("libnvrtc.alt.so.13", CUDA_LIBS), None);
        assert_eq!(library_name("libnvrtc-builtins.so.13.0", CUDA_LIBS), None);
        assert_eq!(
            library_name("libcudart.so.13", CUDA_LIBS),
            Some(("libcudart", Some("13".to_owned())))
        );
        assert_eq!(library_name("libcuda.so.1", HIP_LIBS), None);
    }
}
