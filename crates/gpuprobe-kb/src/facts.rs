//! Facts derived from a [`Fingerprint`], shared by the matcher and the lint: the effective OS,
//! parsed versions (and which field they came from), kernel command-line tokens, module
//! parameters, the allocator configuration torch actually reads, the decoded arch override.
//!
//! Every accessor returns `None` when the fingerprint lacks the fact; callers turn that into
//! "could not be checked", never into a guess.

use gpuprobe_model::Fingerprint;
use gpuprobe_model::{GpuInfo, TorchInfo, Vendor};

use crate::entry::OsName;
use crate::isa::{self, GfxIsa};
use crate::version::{DottedVersion, Pep440Version};

/// The name of the arch override variable.
pub(crate) const OVERRIDE_VAR: &str = "HSA_OVERRIDE_GFX_VERSION";

/// A parsed version and the words that say where it came from.
#[derive(Debug, Clone)]
pub struct Sourced<V> {
    /// The version.
    pub version: V,
    /// Where it came from ("torch 2.11.0+rocm7.2 local tag").
    pub source: String,
}

/// Read-only view of a fingerprint with derived facts.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The fingerprint.
    pub fp: &'a Fingerprint,
}

impl<'a> Facts<'a> {
    /// Wraps a fingerprint.
    pub fn new(fp: &'a Fingerprint) -> Self {
        Facts { fp }
    }

    /// Whether the fingerprint describes the machine gpuprobe runs on, where a missing
    /// component is absent, rather than pasted logs, where it may just not be shown.
    pub fn is_live(&self) -> bool {
        self.fp.source == "live"
    }

    /// The OS as conditions name it (`wsl` when running under WSL).
    pub fn os(&self) -> Option<OsName> {
        if self.fp.host.wsl {
            return Some(OsName::Wsl);
        }
        match self.fp.host.os.as_deref()?.to_ascii_lowercase().as_str() {
            "linux" => Some(OsName::Linux),
            "windows" => Some(OsName::Windows),
            _ => None,
        }
    }

    /// Whether the host is Windows (not WSL).
    pub fn is_windows(&self) -> bool {
        self.os() == Some(OsName::Windows)
    }

    /// The kernel release, parsed.
    pub fn kernel(&self) -> Option<Sourced<DottedVersion>> {
        let release = self.fp.host.kernel_release.as_deref()?;
        Some(Sourced {
            version: DottedVersion::parse(release).ok()?,
            source: format!("kernel {release}"),
        })
    }

    /// torch, when the fingerprint has it.
    pub fn torch(&self) -> Option<&'a TorchInfo> {
        self.fp.python.as_ref()?.torch.as_ref()
    }

    /// torch's version, parsed.
    pub fn torch_version(&self) -> Option<Pep440Version> {
        Pep440Version::parse(&self.torch()?.version).ok()
    }

    /// Whether torch is a ROCm build.
    pub fn torch_is_rocm(&self) -> bool {
        self.torch().is_some_and(|torch| {
            torch.hip.is_some()
                || self
                    .torch_version()
                    .and_then(|v| v.local().map(|l| l.starts_with("rocm")))
                    .unwrap_or(false)
        })
    }

    /// Whether torch is a CUDA build.
    pub fn torch_is_cuda(&self) -> bool {
        self.torch()
            .is_some_and(|torch| torch.cuda.is_some() && torch.hip.is_none())
    }

    /// The ROCm release torch runs on (local tag, else `torch.version.hip` major.minor), else
    /// the system ROCm.
    pub fn rocm(&self) -> Option<Sourced<DottedVersion>> {
        if let Some(torch) = self.torch() {
            let version = self.torch_version();
            if let Some(rest) = version
                .as_ref()
                .and_then(|v| v.local())
                .and_then(|local| local.strip_prefix("rocm"))
            {
                let numbers: Vec<&str> = rest
                    .split('.')
                    .take_while(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
                    .collect();
                if !numbers.is_empty()
                    && let Ok(version) = DottedVersion::parse(&numbers.join("."))
                {
                    let source = format!("ROCm {version} (local tag of torch {})", torch.version);
                    return Some(Sourced { version, source });
                }
            }
            if let Some(hip) = &torch.hip
                && let Ok(parsed) = DottedVersion::parse(hip)
                && parsed.release().len() >= 2
            {
                let major_minor = format!("{}.{}", parsed.release()[0], parsed.release()[1]);
                if let Ok(version) = DottedVersion::parse(&major_minor) {
                    return Some(Sourced {
                        version,
                        source: format!("ROCm {major_minor} (torch.version.hip {hip})"),
                    });
                }
            }
        }
        let system = self.fp.rocm.as_ref()?.version.as_deref()?;
        Some(Sourced {
            version: DottedVersion::parse(system).ok()?,
            source: format!("ROCm {system} (system install)"),
        })
    }

    /// The HIP runtime version: torch's, else the system's.
    pub fn hip(&self) -> Option<Sourced<DottedVersion>> {
        if let Some(hip) = self.torch().and_then(|torch| torch.hip.as_deref())
            && let Ok(version) = DottedVersion::parse(hip)
        {
            return Some(Sourced {
                version,
                source: format!("HIP {hip} (torch.version.hip)"),
            });
        }
        let hip = self.fp.rocm.as_ref()?.hip_version.as_deref()?;
        Some(Sourced {
            version: DottedVersion::parse(hip).ok()?,
            source: format!("HIP {hip} (system)"),
        })
    }

    /// Kernel command-line tokens (up to a lone `--`, after which arguments go to init).
    pub fn cmdline_tokens(&self) -> Option<Vec<&'a str>> {
        let cmdline = self.fp.host.kernel_cmdline.as_deref()?;
        Some(
            cmdline
                .split_whitespace()
                .take_while(|token| *token != "--")
                .collect(),
        )
    }

    /// A kernel command-line value (`amdgpu.cwsr_enable` → `0`); the last occurrence wins,
    /// as in the kernel.
    pub fn cmdline_value(&self, key: &str) -> Option<&'a str> {
        self.cmdline_tokens()?
            .into_iter()
            .rev()
            .find_map(|token| token.strip_prefix(key)?.strip_prefix('='))
    }

    /// A module parameter's running value from sysfs (`amdgpu.cwsr_enable`), when read.
    pub fn module_param(&self, name: &str) -> Option<&'a str> {
        let (module, param) = name.split_once('.')?;
        let driver = self.fp.amdgpu.as_ref()?;
        let table = match module {
            "amdgpu" => &driver.params,
            "ttm" | "amdttm" => &driver.ttm_params,
            _ => return None,
        };
        table.get(param).map(|value| value.trim())
    }

    /// An environment variable's value.
    pub fn env(&self, name: &str) -> Option<&'a str> {
        self.fp.env.get(name).map(String::as_str)
    }

    /// The GPUs with their framework index (`index`, else the position in the list).
    pub fn gpus(&self) -> impl Iterator<Item = (u32, &'a GpuInfo)> {
        self.fp
            .gpus
            .iter()
            .enumerate()
            .map(|(position, gpu)| (gpu.index.unwrap_or(position as u32), gpu))
    }

    /// Whether any AMD GPU is present.
    pub fn has_amd_gpu(&self) -> bool {
        self.fp.gpus.iter().any(|gpu| gpu.vendor == Vendor::Amd)
    }

    /// Whether the stack is AMD/ROCm at all (an AMD GPU, the amdgpu driver, ROCm, or a ROCm
    /// torch build).
    ///
    /// A stray `libamdhip64` on a CUDA machine (seen on real NVIDIA hosts) does not count: the
    /// ROCm install must have a version.
    pub fn is_rocm_stack(&self) -> bool {
        self.has_amd_gpu()
            || self.fp.amdgpu.as_ref().is_some_and(|driver| driver.loaded)
            || self
                .fp
                .rocm
                .as_ref()
                .is_some_and(|rocm| rocm.version.is_some())
            || self.torch_is_rocm()
    }

    /// The decoded arch override, when set: the raw value and the decoding.
    pub fn arch_override(&self) -> Option<(&'a str, Result<GfxIsa, isa::OverrideError>)> {
        let value = self.env(OVERRIDE_VAR)?;
        Some((value, isa::decode_override(value)))
    }

    /// A GPU's native ISA, parsed (`native_isa`, else `runtime_isa` when no override is set).
    pub fn native_isa(&self, gpu: &GpuInfo) -> Option<GfxIsa> {
        if let Some(native) = gpu.native_isa.as_deref() {
            return GfxIsa::parse(native);
        }
        if self.env(OVERRIDE_VAR).is_none() {
            return gpu.runtime_isa.as_deref().and_then(GfxIsa::parse);
        }
        None
    }

    /// Whether a GPU is an APU: the fingerprint's flag, else the ISA table. Returns the
    /// answer and its basis.
    pub fn is_apu(&self, gpu: &GpuInfo) -> Option<(bool, &'static str)> {
        if let Some(apu) = gpu.is_apu {
            return Some((apu, "reported"));
        }
        let native = self.native_isa(gpu)?;
        isa::gfx_facts(&native.name())?
            .apu()
            .map(|apu| (apu, "ISA table"))
    }
}
