//! `python -m torch.utils.collect_env` output, ROCm and CUDA variants.
//!
//! Facts this parser relies on (real samples in `fixtures/collect_env/`): `Key: value`
//! lines at the top; `GPU models and configuration` is `name (gcnArchName)` for torch's
//! current device on ROCm, and `nvidia-smi -L` lines (`GPU 0: NVIDIA ...`, PCI order, not
//! torch order) on CUDA; `cuDNN version: Probably one of the following:` is followed by
//! paths; a `CPU:` section holds `lscpu` output; `Versions of relevant libraries:` lists
//! `[pip3] name==version` and `[conda] name version ...` lines. A Python warning may
//! precede `Collecting environment information...`.
//!
//! Values collect_env has not got are placeholders, never facts: `No CUDA` (every CUDA
//! field when torch sees no CUDA device, the most common paste in bug reports), `None`
//! (`torch.version.cuda` of a CPU build), `Could not collect`, `N/A`; `value` turns them
//! all into `None` before anything else reads them.
//!
//! On Windows (real samples `collect_env/windows-*`), `OS` is the product name with the
//! build (`Microsoft Windows 11 Pro (10.0.26100 64-bit)`, older ones without it), `Python
//! platform` is `Windows-11-10.0.26100-SP0`, the `CPU:` section holds WMI properties
//! (`Name: ...` or `Name=...`) instead of lscpu, and a ROCm build reports the HIP SDK's
//! runtime in `HIP runtime version`; there is no kernel and no AMD driver line.

use std::collections::BTreeMap;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{CudaInfo, GpuInfo, PythonEnv, RocmInfo, TorchDevice, TorchInfo, Vendor};

use super::ParseError;
use crate::merge::{derive_gpu_facts, fill, merge_gpu, merge_python, nvidia_driver, push_unique};
use crate::text::{body_lines, meaningful, split_key_value};

/// A collect_env value, or `None` for the placeholders it prints instead of one.
fn value(raw: &str) -> Option<String> {
    let v = meaningful(raw)?;
    let lower = v.to_ascii_lowercase();
    // `No CUDA` replaces every CUDA field when torch sees no CUDA device;
    // `No relevant packages` replaces an empty package list.
    if matches!(lower.as_str(), "no cuda" | "no relevant packages") {
        None
    } else {
        Some(v)
    }
}

/// Parsed collect_env output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectEnv {
    /// `PyTorch version`.
    pub torch_version: Option<String>,
    /// `Is debug build`.
    pub debug_build: Option<bool>,
    /// `CUDA used to build PyTorch` (`torch.version.cuda`).
    pub cuda_build: Option<String>,
    /// `torch.version.hip`: `HIP used to build PyTorch` (`ROCM used to build PyTorch` before
    /// torch 2.10, which printed the HIP version under that name).
    pub rocm_build: Option<String>,
    /// `ROCm SDK used to build PyTorch` (`torch.version.rocm`, newer collect_env only).
    pub rocm_sdk_build: Option<String>,
    /// `OS` (`Ubuntu 24.04.3 LTS (x86_64)`).
    pub os: Option<String>,
    /// `Python version`, first word (`3.12.3`).
    pub python_version: Option<String>,
    /// The CPU architecture the interpreter was built for, from the compiler tag of
    /// `Python version` (`[MSC v.1943 64 bit (AMD64)]` → `x86_64`); Windows prints it nowhere
    /// else.
    pub python_arch: Option<String>,
    /// `Python platform` (`Linux-6.18.44-...-x86_64-with-glibc2.39`).
    pub python_platform: Option<String>,
    /// Kernel release taken from the Python platform string (Linux only).
    pub kernel_release: Option<String>,
    /// Windows build (`10.0.26100`), from `OS` or `Python platform`.
    pub windows_build: Option<String>,
    /// `Is CUDA available`.
    pub gpu_available: Option<bool>,
    /// `CUDA runtime version` (the toolkit collect_env found).
    pub cuda_runtime: Option<String>,
    /// `GPU models and configuration`, one entry per line.
    pub gpu_models: Vec<String>,
    /// `Nvidia driver version`.
    pub nvidia_driver: Option<String>,
    /// cuDNN libraries or version.
    pub cudnn: Vec<String>,
    /// `HIP runtime version`.
    pub hip_runtime: Option<String>,
    /// `MIOpen runtime version`.
    pub miopen_runtime: Option<String>,
    /// `Caching allocator config`.
    pub allocator_config: Option<String>,
    /// The `CPU:` section (lscpu's `Model name`, `Hypervisor vendor`, ...; WMI's `Name`,
    /// `Manufacturer`, ... on Windows), placeholders left out.
    pub cpu: BTreeMap<String, String>,
    /// `[pip3]` and `[conda]` packages, name → version.
    pub packages: BTreeMap<String, String>,
    /// Every top-level `Key: value` as printed.
    pub fields: BTreeMap<String, String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Top,
    GpuModels,
    Cudnn,
    Cpu,
    Libraries,
}

const TOP_KEYS: &[&str] = &[
    "PyTorch version",
    "Is debug build",
    "CUDA used to build PyTorch",
    "ROCM used to build PyTorch",
    "ROCm SDK used to build PyTorch",
    "HIP used to build PyTorch",
    "OS",
    "GCC version",
    "Clang version",
    "CMake version",
    "Libc version",
    "Python version",
    "Python platform",
    "Is CUDA available",
    "CUDA runtime version",
    "CUDA_MODULE_LOADING set to",
    "GPU models and configuration",
    "Nvidia driver version",
    "cuDNN version",
    "Is XPU available",
    "HIP runtime version",
    "MIOpen runtime version",
    "Is XNNPACK available",
    "Caching allocator config",
    "Is XPU available",
    "XPU used to build PyTorch",
    "Intel GPU driver version",
];

/// Parses collect_env output.
pub fn parse(text: &str) -> Result<CollectEnv, ParseError> {
    let mut out = CollectEnv::default();
    let mut section = Section::Top;
    let mut recognised = false;
    for line in body_lines(text) {
        let raw = line.text.as_str();
        let t = raw.trim();
        if t.starts_with("Collecting environment information") {
            recognised = true;
            continue;
        }
        if t == "CPU:" {
            section = Section::Cpu;
            continue;
        }
        if t.starts_with("Versions of relevant libraries") {
            section = Section::Libraries;
            continue;
        }
        if let Some((key, value)) = split_key_value(t)
            && TOP_KEYS.contains(&key)
            && section != Section::Cpu
        {
            recognised = true;
            section = Section::Top;
            out.fields.insert(key.to_owned(), value.to_owned());
            set_field(&mut out, key, value);
            if key == "GPU models and configuration" && value.is_empty() {
                section = Section::GpuModels;
            } else if key == "cuDNN version" && value.starts_with("Probably one of") {
                section = Section::Cudnn;
            }
            continue;
        }
        match section {
            Section::GpuModels if !t.is_empty() => {
                if let Some(model) = value(t) {
                    out.gpu_models.push(model);
                }
            }
            Section::Cudnn if t.starts_with('/') || is_windows_path(t) => {
                out.cudnn.push(t.to_owned());
            }
            Section::Cpu => {
                // lscpu and newer WMI output print `Key: value`; older Windows ones `Key=value`.
                let pair = split_key_value(t).or_else(|| {
                    let (key, value) = t.split_once('=')?;
                    let key = key.trim();
                    (!key.is_empty()).then(|| (key, value.trim()))
                });
                if let Some((key, raw)) = pair
                    && let Some(v) = value(raw)
                {
                    out.cpu.insert(key.to_owned(), v);
                }
            }
            Section::Libraries => {
                if let Some((name, version)) = package_line(t) {
                    out.packages.insert(name, version);
                }
            }
            _ => {
                if t.is_empty() && section != Section::Libraries {
                    section = Section::Top;
                }
            }
        }
    }
    if !recognised {
        return Err(ParseError::NotRecognized {
            tool: "collect_env",
            reason: "no `Collecting environment information` or `PyTorch version:` line",
        });
    }
    out.windows_build = out
        .os
        .as_deref()
        .and_then(windows_build_from_os)
        .or_else(|| {
            out.python_platform
                .as_deref()
                .and_then(windows_build_from_platform)
        });
    Ok(out)
}

/// `C:\Program Files\...`: a cuDNN DLL in collect_env's list on Windows.
fn is_windows_path(line: &str) -> bool {
    let bytes = line.as_bytes();
    bytes.len() > 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'\\' | b'/')
}

fn set_field(out: &mut CollectEnv, key: &str, raw: &str) {
    let text = value(raw);
    // Older collect_env prints `Yes`/`No`.
    let flag = || match raw.trim() {
        "True" | "Yes" => Some(true),
        "False" | "No" => Some(false),
        _ => None,
    };
    match key {
        "PyTorch version" => out.torch_version = text,
        "Is debug build" => out.debug_build = flag(),
        "CUDA used to build PyTorch" => out.cuda_build = text,
        "ROCM used to build PyTorch" | "HIP used to build PyTorch" => out.rocm_build = text,
        "ROCm SDK used to build PyTorch" => out.rocm_sdk_build = text,
        "OS" => out.os = text,
        "Python version" => {
            out.python_arch = text.as_deref().and_then(arch_from_python_version);
            out.python_version = text
                .as_deref()
                .and_then(|v| v.split_whitespace().next())
                .map(str::to_owned);
        }
        "Python platform" => {
            out.kernel_release = text.as_deref().and_then(kernel_from_platform);
            out.python_platform = text;
        }
        "Is CUDA available" => out.gpu_available = flag(),
        "CUDA runtime version" => out.cuda_runtime = text,
        "GPU models and configuration" => out.gpu_models.extend(text),
        "Nvidia driver version" => out.nvidia_driver = text,
        "cuDNN version" => {
            if let Some(v) = text.filter(|v| !v.starts_with("Probably one of")) {
                out.cudnn.push(v);
            }
        }
        "HIP runtime version" => out.hip_runtime = text,
        "MIOpen runtime version" => out.miopen_runtime = text,
        "Caching allocator config" => out.allocator_config = text,
        _ => {}
    }
}

/// `Linux-6.17.0-8-generic-x86_64-with-glibc2.42` → `6.17.0-8-generic`.
fn kernel_from_platform(platform: &str) -> Option<String> {
    let rest = platform.strip_prefix("Linux-")?;
    let cut = rest.find("-with-").unwrap_or(rest.len());
    let rest = &rest[..cut];
    for arch in [
        "-x86_64", "-aarch64", "-ppc64le", "-s390x", "-arm64", "-riscv64",
    ] {
        if let Some(kernel) = rest.strip_suffix(arch) {
            return Some(kernel.to_owned());
        }
    }
    None
}

/// `Microsoft Windows 11 Pro (10.0.26100 64-bit)` → `10.0.26100`.
fn windows_build_from_os(os: &str) -> Option<String> {
    if !os.starts_with("Microsoft Windows") {
        return None;
    }
    let (_, tail) = os.rsplit_once(" (")?;
    let build = tail.split_whitespace().next()?;
    is_dotted_number(build).then(|| build.to_owned())
}

/// `Windows-11-10.0.26100-SP0` or `Windows-10-10.0.19041-SP0` → the build (`10.0.26100`).
fn windows_build_from_platform(platform: &str) -> Option<String> {
    let rest = platform.strip_prefix("Windows-")?;
    rest.split('-')
        .find(|part| part.contains('.') && is_dotted_number(part))
        .map(str::to_owned)
}

fn is_dotted_number(text: &str) -> bool {
    !text.is_empty()
        && text
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

/// The compiler tag of `Python version` names the build's CPU: `(AMD64)` or `(ARM64)` from
/// MSVC; GCC/Clang builds print no architecture (Linux gives it in `OS` instead).
fn arch_from_python_version(version: &str) -> Option<String> {
    let tag = version.rsplit_once("[MSC ")?.1;
    let arch = tag.split_once('(')?.1.split_once(')')?.0;
    match arch {
        "AMD64" => Some("x86_64".to_owned()),
        "ARM64" => Some("aarch64".to_owned()),
        _ => None,
    }
}

/// `[pip3] torch==2.11.0` or `[conda] torch  2.11.0  py312  pytorch`.
fn package_line(line: &str) -> Option<(String, String)> {
    let rest = line
        .strip_prefix("[pip3]")
        .or_else(|| line.strip_prefix("[pip]"))
        .or_else(|| line.strip_prefix("[conda]"))?;
    let rest = rest.trim();
    // collect_env's placeholders for an empty or unreadable list.
    if rest.starts_with("Could not") || rest.starts_with("No relevant packages") || rest.is_empty()
    {
        return None;
    }
    if let Some((name, version)) = rest.split_once("==") {
        return Some((name.trim().to_owned(), version.trim().to_owned()));
    }
    let mut words = rest.split_whitespace();
    let name = words.next()?;
    let version = words.next()?;
    // A conda row's second column is a version; a line of words is not a package.
    if !version.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some((name.to_owned(), version.to_owned()))
}

impl CollectEnv {
    /// Whether the paste comes from Windows: the `OS` product name or the `Python platform`
    /// (WSL prints Linux in both, so it is not Windows here).
    pub fn is_windows(&self) -> bool {
        self.os
            .as_deref()
            .is_some_and(|os| os.starts_with("Microsoft Windows"))
            || self
                .python_platform
                .as_deref()
                .is_some_and(|p| p.starts_with("Windows-"))
    }

    /// The CPU model: lscpu's `Model name`, WMI's `Name` on Windows.
    pub fn cpu_model(&self) -> Option<&str> {
        self.cpu
            .get("Model name")
            .or_else(|| self.cpu.get("Name"))
            .map(String::as_str)
    }

    /// Whether this is a ROCm build of torch.
    pub fn is_rocm(&self) -> bool {
        self.rocm_build.is_some()
            || self
                .torch_version
                .as_deref()
                .is_some_and(|v| v.contains("rocm"))
    }

    /// The interpreter and torch facts as the Python worker would report them.
    pub fn python_env(&self) -> PythonEnv {
        let torch = self.torch_version.as_ref().map(|version| {
            let mut devices = Vec::new();
            if self.is_rocm() && self.gpu_available == Some(true) {
                // ROCm: collect_env prints torch's current device as `name (gcnArchName)`.
                if let Some(model) = self.gpu_models.first() {
                    let (name, arch) = match model.rsplit_once(" (") {
                        Some((name, arch)) => (
                            name.trim().to_owned(),
                            Some(arch.trim_end_matches(')').to_owned()),
                        ),
                        None => (model.clone(), None),
                    };
                    devices.push(TorchDevice {
                        index: 0,
                        name,
                        arch,
                        ..TorchDevice::default()
                    });
                }
            }
            TorchInfo {
                version: version.clone(),
                hip: self.rocm_build.clone(),
                rocm: self.rocm_sdk_build.clone(),
                cuda: self.cuda_build.clone(),
                gpu_available: self.gpu_available.unwrap_or(false),
                devices,
                ..TorchInfo::default()
            }
        });
        PythonEnv {
            executable: String::new(),
            chosen_by: "collect_env".to_owned(),
            version: self.python_version.clone(),
            torch,
            torch_error: None,
            packages: self.packages.clone(),
            ..PythonEnv::default()
        }
    }

    /// Merges host, driver, runtime, GPU and torch facts.
    pub fn apply(&self, fp: &mut Fingerprint) {
        if self.is_windows() {
            // `Microsoft Windows 11 Pro (10.0.26100 64-bit)`: the parenthesis is the build
            // and bitness, not the CPU architecture as on Linux.
            fill(&mut fp.host.os, Some("windows".to_owned()));
            fill(&mut fp.host.distro_id, Some("windows".to_owned()));
            fill(&mut fp.host.distro_version, self.windows_build.clone());
            if let Some(os) = self.os.as_deref() {
                let pretty = match os.rsplit_once(" (") {
                    Some((pretty, _)) => pretty.trim(),
                    None => os,
                };
                fill(&mut fp.host.distro_pretty, Some(pretty.to_owned()));
            }
            fill(&mut fp.host.cpu_arch, self.python_arch.clone());
        } else {
            if let Some(os) = self.os.as_deref() {
                let (pretty, arch) = match os.rsplit_once(" (") {
                    Some((pretty, arch)) => (
                        pretty.trim().to_owned(),
                        Some(arch.trim_end_matches(')').to_owned()),
                    ),
                    None => (os.to_owned(), None),
                };
                fill(&mut fp.host.distro_pretty, Some(pretty));
                fill(&mut fp.host.cpu_arch, arch);
            }
            if self
                .python_platform
                .as_deref()
                .is_some_and(|p| p.starts_with("Linux"))
            {
                fill(&mut fp.host.os, Some("linux".to_owned()));
            }
            // WSL2's kernel (`5.15.153.1-microsoft-standard-WSL2`): Linux under WSL, where the
            // GPU stack differs (the KB's `wsl` OS).
            if self
                .kernel_release
                .as_deref()
                .is_some_and(|k| k.to_ascii_lowercase().contains("microsoft"))
            {
                fp.host.wsl = true;
            }
            fill(&mut fp.host.kernel_release, self.kernel_release.clone());
        }
        fill(&mut fp.host.cpu_model, self.cpu_model().map(str::to_owned));
        if let Some(hypervisor) = self
            .cpu
            .get("Hypervisor vendor")
            .and_then(|v| meaningful(v))
        {
            fill(
                &mut fp.host.virtualization,
                Some(hypervisor.to_ascii_lowercase()),
            );
        }
        if let Some(driver) = self.nvidia_driver.clone() {
            let nvidia = nvidia_driver(fp);
            fill(&mut nvidia.version, Some(driver));
        }
        if let Some(cuda) = self.cuda_runtime.clone() {
            fill(
                &mut fp
                    .cuda
                    .get_or_insert_with(CudaInfo::default)
                    .runtime_version,
                Some(cuda),
            );
        }
        if let Some(hip) = self.hip_runtime.clone() {
            fill(
                &mut fp.rocm.get_or_insert_with(RocmInfo::default).hip_version,
                Some(hip),
            );
        }
        if let Some(miopen) = &self.miopen_runtime {
            fp.extra
                .entry("miopen.version".to_owned())
                .or_insert_with(|| miopen.clone());
        }
        if let Some(conf) = &self.allocator_config {
            fp.extra
                .entry("torch.caching_allocator_config".to_owned())
                .or_insert_with(|| conf.clone());
        }
        if !self.is_rocm() {
            // CUDA: the lines come from `nvidia-smi -L` (PCI order, not torch order).
            for model in &self.gpu_models {
                let name = match model.split_once(": ") {
                    Some((head, name)) if head.starts_with("GPU ") => name,
                    _ => model.as_str(),
                };
                let name = name.split(" (UUID").next().unwrap_or(name).trim();
                if name.is_empty() {
                    continue;
                }
                let mut gpu =
                    GpuInfo::new(if name.contains("NVIDIA") || self.cuda_build.is_some() {
                        Vendor::Nvidia
                    } else {
                        Vendor::Other
                    });
                gpu.name = Some(name.to_owned());
                gpu.sources.push("collect_env".to_owned());
                derive_gpu_facts(&mut gpu);
                merge_gpu(fp, gpu);
            }
        }
        let python = self.python_env();
        if python.torch.is_some() || python.version.is_some() {
            merge_python(fp, python);
            if self.is_rocm()
                && let Some(gpu) = fp
                    .gpus
                    .iter_mut()
                    .find(|g| g.index == Some(0) && g.vendor == Vendor::Amd)
            {
                push_unique(&mut gpu.sources, "collect_env".to_owned());
            }
        }
    }
}
