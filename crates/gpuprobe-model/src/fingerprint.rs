//! The stack fingerprint: everything the known issues depend on.
//!
//! Filled by `gpuprobe-detect` from the live system (sysfs, procfs, libraries, the Python
//! worker) or from pasted logs (`gpuprobe triage`), and read by the knowledge-base matcher
//! and the config lint. Every field is optional or a collection: what could not be read is
//! absent, and the reason goes into [`Fingerprint::unreadable`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The whole fingerprint of one machine (or of what a set of logs reveals about one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fingerprint {
    /// Where the facts came from: `live` (this machine) or `triage` (pasted logs).
    pub source: String,
    /// Operating system, kernel and platform.
    pub host: HostInfo,
    /// Every GPU found, in the order the framework enumerates them where known.
    #[serde(default)]
    pub gpus: Vec<GpuInfo>,
    /// The amdgpu kernel driver, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amdgpu: Option<AmdgpuDriver>,
    /// The NVIDIA kernel driver, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia: Option<NvidiaDriver>,
    /// The ROCm / HIP userspace, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rocm: Option<RocmInfo>,
    /// The CUDA userspace, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaInfo>,
    /// The Python interpreter and framework gpuprobe used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<PythonEnv>,
    /// Compilers and build tools on `PATH` (what extensions and JIT kernels are built with).
    #[serde(default, skip_serializing_if = "Toolchain::is_empty")]
    pub toolchain: Toolchain,
    /// Relevant environment variables that are set (name → value), from the research list
    /// (HSA_*, HIP_*, AMD_*, PYTORCH_*, CUDA_*, MIOPEN_*, ...).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Kernel log lines of interest already present (page faults, resets, MES errors).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_events: Vec<KernelEvent>,
    /// Facts that could not be read, and why (permission, missing file, tool absent).
    #[serde(default)]
    pub unreadable: Vec<Unreadable>,
    /// Further facts that have no typed field yet, name → value, e.g.
    /// `gpu.0000:c5:00.0.kernel_driver` → `amdgpu`, `dkms.amdgpu` → the `dkms status` line,
    /// `amd-smi.amdgpu_version` → `6.17.0-5`. Names are stable once published.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
}

/// Operating system, kernel and platform facts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostInfo {
    /// Host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// `linux`, `windows`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// `/etc/os-release` ID (`ubuntu`, `fedora`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distro_id: Option<String>,
    /// `/etc/os-release` VERSION_ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distro_version: Option<String>,
    /// `/etc/os-release` PRETTY_NAME.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distro_pretty: Option<String>,
    /// Kernel release (`uname -r`), e.g. `6.17.0-19-generic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_release: Option<String>,
    /// Full kernel command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_cmdline: Option<String>,
    /// CPU architecture (`x86_64`, `aarch64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_arch: Option<String>,
    /// CPU model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// CPU identity and topology (what `lscpu` shows that matters to a bug report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuDetails>,
    /// The C library: `glibc`, `musl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libc_name: Option<String>,
    /// The C library's version (`2.36`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libc_version: Option<String>,
    /// Total system memory in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    /// Running under WSL.
    #[serde(default)]
    pub wsl: bool,
    /// Container runtime when inside one (`docker`, `podman`, `kubernetes`, `lxc`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Virtual machine hypervisor when detectable (`kvm`, `firecracker`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization: Option<String>,
    /// Secure Boot state, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
    /// IOMMU mode: `off`, `translated`, `passthrough`, or what the cmdline says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu: Option<String>,
    /// The current user's uid, and whether it can open the GPU device nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Device nodes the user cannot open (`/dev/kfd`, `/dev/dri/renderD128`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inaccessible_device_nodes: Vec<String>,
}

/// CPU identity and topology, from `/proc/cpuinfo` and the sysfs CPU and NUMA topology
/// (`lscpu` fills what only it can tell, such as the hypervisor vendor).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuDetails {
    /// Vendor id (`AuthenticAMD`, `GenuineIntel`; the implementer on Arm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_id: Option<String>,
    /// CPU family number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// CPU model number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Stepping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stepping: Option<String>,
    /// Logical CPUs online.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_cpus: Option<u32>,
    /// The online CPU list as the kernel prints it (`0-63`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online: Option<String>,
    /// Sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
    /// Cores per socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_per_socket: Option<u32>,
    /// Hardware threads per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_per_core: Option<u32>,
    /// NUMA nodes and the CPUs of each (`node0` → `0-31,64-95`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub numa_nodes: BTreeMap<String, String>,
    /// `48 bits physical, 48 bits virtual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_sizes: Option<String>,
    /// The hypervisor the CPU reports (`KVM`, `Microsoft`), from `lscpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor_vendor: Option<String>,
    /// `full` or `para` virtualization, from `lscpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization_type: Option<String>,
    /// Feature flags (`avx512f`, `sha_ni`; `fphp`, `sve` on Arm).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// One compiler or build tool: what `TOOL --version` printed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolVersion {
    /// The program run (`/usr/bin/gcc`).
    pub path: String,
    /// The version alone (`12.2.0`, `12.4.131`), when it could be picked out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The line that carries the version, as printed
    /// (`gcc (Debian 12.2.0-14+deb12u1) 12.2.0`).
    pub banner: String,
}

/// Compilers and build tools found on `PATH` (and, for `nvcc` and `hipcc`, in the CUDA and
/// ROCm installs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Toolchain {
    /// GNU C compiler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcc: Option<ToolVersion>,
    /// Clang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clang: Option<ToolVersion>,
    /// CMake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmake: Option<ToolVersion>,
    /// The CUDA compiler (its version is the toolkit's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvcc: Option<ToolVersion>,
    /// The HIP compiler driver (its version is the HIP toolkit's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hipcc: Option<ToolVersion>,
}

impl Toolchain {
    /// Whether no tool was found.
    pub fn is_empty(&self) -> bool {
        self.gcc.is_none()
            && self.clang.is_none()
            && self.cmake.is_none()
            && self.nvcc.is_none()
            && self.hipcc.is_none()
    }
}

/// The version of a GPU library component (cuDNN, NCCL, MIOpen, rocBLAS, ...), with where it
/// was read. One component may appear more than once (a system copy and a pip wheel's):
/// which one a process loads depends on its library path, as with collect_env's "probably
/// one of the following".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ComponentVersion {
    /// `cudnn`, `nccl`, `cublas`, `cusparselt`, `miopen`, `rccl`, `rocblas`, `hipblaslt`, ...
    pub name: String,
    /// Version (`9.26.0`, `2.30.7`).
    pub version: String,
    /// Where it was read: a version header's path, or `pip nvidia-cudnn-cu13`.
    pub source: String,
}

/// GPU vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    /// AMD (PCI 0x1002).
    Amd,
    /// NVIDIA (PCI 0x10de).
    Nvidia,
    /// Intel (PCI 0x8086).
    Intel,
    /// Anything else.
    Other,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuInfo {
    /// Index as the framework enumerates it (`cuda:N`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// Vendor.
    pub vendor: Vendor,
    /// Marketing name ("AMD Radeon 8060S", "NVIDIA H100 80GB HBM3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// PCI bus address (`0000:c5:00.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus: Option<String>,
    /// PCI vendor id (`0x1002`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_vendor_id: Option<String>,
    /// PCI device id (`0x1586`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_device_id: Option<String>,
    /// PCI revision (`0xc1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_revision: Option<String>,
    /// Native ISA from the KFD topology `gfx_target_version` (immune to
    /// `HSA_OVERRIDE_GFX_VERSION`), e.g. `gfx1151`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_isa: Option<String>,
    /// ISA the runtime reports (rocminfo agent name, torch `gcnArchName` without features);
    /// differs from `native_isa` under an override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_isa: Option<String>,
    /// Target features reported with the ISA (`sramecc+`, `xnack-`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub isa_features: Vec<String>,
    /// NVIDIA compute capability (`9.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    /// Integrated GPU sharing system memory (APU / unified memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_apu: Option<bool>,
    /// Dedicated VRAM, or the BIOS carve-out on an APU, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_total_bytes: Option<u64>,
    /// CPU-visible VRAM in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vis_vram_total_bytes: Option<u64>,
    /// GTT (GPU-mappable system memory) in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtt_total_bytes: Option<u64>,
    /// Compute units / SMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_units: Option<u32>,
    /// Cache line size the runtime reports, bytes (rocminfo `Cacheline Size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacheline_bytes: Option<u32>,
    /// DRM card (`card1`) and render node (`renderD128`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drm_card: Option<String>,
    /// Render node name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_node: Option<String>,
    /// VBIOS version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vbios: Option<String>,
    /// Firmware versions readable for this GPU (`MES` → `0x00000083`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub firmware: Vec<FirmwareVersion>,
    /// Where the facts about this GPU came from (`sysfs`, `kfd`, `rocminfo`, `torch`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

impl GpuInfo {
    /// An empty record for a vendor; callers fill in what they know.
    pub fn new(vendor: Vendor) -> Self {
        GpuInfo {
            index: None,
            vendor,
            name: None,
            pci_bus: None,
            pci_vendor_id: None,
            pci_device_id: None,
            pci_revision: None,
            native_isa: None,
            runtime_isa: None,
            isa_features: Vec::new(),
            compute_capability: None,
            is_apu: None,
            vram_total_bytes: None,
            vis_vram_total_bytes: None,
            gtt_total_bytes: None,
            compute_units: None,
            cacheline_bytes: None,
            drm_card: None,
            render_node: None,
            vbios: None,
            firmware: Vec::new(),
            sources: Vec::new(),
        }
    }

    /// The ISA to match known issues against: the native one when known, else the runtime's.
    pub fn effective_isa(&self) -> Option<&str> {
        self.native_isa.as_deref().or(self.runtime_isa.as_deref())
    }
}

/// A firmware component's version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FirmwareVersion {
    /// Component (`MES`, `MES_KIQ`, `SMC`, `VCN`, ...).
    pub name: String,
    /// Feature version, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<u32>,
    /// Firmware version as printed (`0x00000083`).
    pub version: String,
}

/// Where the amdgpu driver came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DriverSource {
    /// Shipped with the kernel.
    Inbox,
    /// Installed out of tree by amdgpu-dkms.
    Dkms,
    /// Not determined.
    Unknown,
}

/// The amdgpu kernel driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AmdgpuDriver {
    /// Whether the module is loaded.
    pub loaded: bool,
    /// Inbox or DKMS.
    pub source: DriverSource,
    /// DKMS / module version (`6.16.13`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Module parameters (`/sys/module/amdgpu/parameters/*`), name → value.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// TTM parameters (`/sys/module/ttm/parameters/*` or `amdttm`), name → value.
    #[serde(default)]
    pub ttm_params: BTreeMap<String, String>,
}

/// The NVIDIA kernel driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NvidiaDriver {
    /// Driver version (`580.159.04`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Highest CUDA version the driver supports (`13.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<String>,
    /// Open or proprietary kernel module, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
}

/// A shared library that was found or loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LibraryInfo {
    /// Library name (`libamdhip64`, `libcuda`, `libnvrtc`).
    pub name: String,
    /// Absolute path of the file.
    pub path: String,
    /// Version, when determinable (from the file name or an API call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where it was found (`ROCM_PATH`, `/opt/rocm`, `torch/lib`, `site-packages/nvidia`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// ROCm / HIP userspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RocmInfo {
    /// ROCm release (`7.2.0`), from `/opt/rocm/.info/version`, amd-smi, or torch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// HIP runtime version (`7.2.26015`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip_version: Option<String>,
    /// Install root (`/opt/rocm-7.2.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Whether this ROCm is TheRock / pip-installed (`rocm-sdk`) rather than a system install.
    #[serde(default)]
    pub pip_installed: bool,
    /// Libraries found.
    #[serde(default)]
    pub libraries: Vec<LibraryInfo>,
    /// Versions of the ROCm math and communication libraries (MIOpen, RCCL, rocBLAS,
    /// hipBLASLt), from their version headers and pip wheels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<ComponentVersion>,
}

/// CUDA userspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CudaInfo {
    /// CUDA toolkit / runtime version in use (`13.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_version: Option<String>,
    /// Libraries found.
    #[serde(default)]
    pub libraries: Vec<LibraryInfo>,
    /// Versions of the CUDA math and communication libraries (cuDNN, NCCL, cuBLAS, ...),
    /// from their version headers and pip wheels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<ComponentVersion>,
}

/// The Python interpreter gpuprobe ran its probes in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PythonEnv {
    /// Interpreter path as used.
    pub executable: String,
    /// How it was chosen (`--python`, `VIRTUAL_ENV`, `CONDA_PREFIX`, `PATH`).
    #[serde(default)]
    pub chosen_by: String,
    /// `sys.version` first line (`3.12.3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The whole `sys.version` on one line, with the build date and compiler
    /// (`3.11.7 (main, May  9 2026, 07:35:25) [GCC 12.2.0]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Pointer width of the interpreter in bits (64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bits: Option<u32>,
    /// `platform.platform()` (`Linux-6.8.0-45-generic-x86_64-with-glibc2.39`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// PyTorch, when importable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<TorchInfo>,
    /// Why torch could not be used, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_error: Option<String>,
    /// Installed distributions relevant to GPU work and their versions, read from their
    /// metadata (never imported): torch*, numpy, triton, the NVIDIA and ROCm wheels,
    /// accelerate, transformers, ... (`docs/fingerprint.md` lists the patterns). In a conda
    /// environment, joined by the relevant packages conda installed that no distribution
    /// metadata lists (`cudatoolkit`, `cudnn`, `nccl`, `pytorch`); [`PythonEnv::conda`] says
    /// which packages conda installed.
    #[serde(default)]
    pub packages: BTreeMap<String, String>,
    /// The conda environment the interpreter belongs to, when its `sys.prefix` has a
    /// `conda-meta` directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conda: Option<CondaEnv>,
}

/// A conda environment, read from the `conda-meta/*.json` records conda writes for each
/// package it installs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CondaEnv {
    /// The environment's prefix (the interpreter's `sys.prefix`).
    pub prefix: String,
    /// The GPU-relevant packages conda installed (the patterns of [`PythonEnv::packages`],
    /// and `cuda`, `magma`, `soumith` as collect_env's conda list), name → record.
    #[serde(default)]
    pub packages: BTreeMap<String, CondaPackage>,
    /// Records that could not be read, each with why (`cudnn-9.1.json: not JSON: ...`):
    /// broken, not a regular file, longer than 1 MiB without a `name-version-build.json`
    /// name, or beyond the first 5,000.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// One package conda installed, as `conda list` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CondaPackage {
    /// Its version (`11.8.0`).
    pub version: String,
    /// Its build string, which names what it was built for (`py3.10_cuda12.1_cudnn8.9.2_0`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub build: String,
    /// The channel it came from (`pytorch`, `nvidia`, `conda-forge`, `pkgs/main`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub channel: String,
}

/// The interpreter's build and platform as the worker reports them (the `hello` event's
/// `interpreter`), copied into [`PythonEnv`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interpreter {
    /// `sys.version` on one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Pointer width in bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bits: Option<u32>,
    /// `platform.platform()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

impl PythonEnv {
    /// Takes the interpreter's build facts from a `hello` event.
    pub fn set_interpreter(&mut self, interpreter: Option<&Interpreter>) {
        if let Some(i) = interpreter {
            self.build = i.build.clone();
            self.bits = i.bits;
            self.platform = i.platform.clone();
        }
    }
}

/// PyTorch build and devices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TorchInfo {
    /// `torch.__version__` (`2.11.0+rocm7.2`, PEP 440 with local tag).
    pub version: String,
    /// `torch.version.hip`, for ROCm builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip: Option<String>,
    /// `torch.version.cuda`, for CUDA builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// `torch.version.rocm`: the ROCm SDK of a ROCm build (newer torch only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rocm: Option<String>,
    /// `torch.version.debug`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<bool>,
    /// `torch.version.git_version`: the commit torch was built from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_version: Option<String>,
    /// `torch.backends.xnnpack.enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xnnpack: Option<bool>,
    /// `torch.xpu.is_available()`, where torch has `torch.xpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xpu_available: Option<bool>,
    /// `CUDA_MODULE_LOADING` after torch initialised CUDA (torch sets `LAZY` when unset);
    /// only when a GPU is available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_module_loading: Option<String>,
    /// What torch was built with (`torch._C._show_config()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Box<TorchBuild>>,
    /// `torch.cuda.get_arch_list()`.
    #[serde(default)]
    pub arch_list: Vec<String>,
    /// `torch.cuda.is_available()`.
    #[serde(default)]
    pub gpu_available: bool,
    /// Devices as torch sees them.
    #[serde(default)]
    pub devices: Vec<TorchDevice>,
    /// The allocator-config variable this torch version actually reads, and its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_conf: Option<AllocatorConf>,
    /// Where torch's shared libraries are (`.../site-packages/torch/lib`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lib_dir: Option<String>,
    /// The cuDNN (MIOpen on ROCm) this torch loaded, asked of torch
    /// (`torch._C._cudnn.getRuntimeVersion()`, `9.26.0`): a host may have two installed.
    /// Absent on a CPU-only torch or where torch cannot load one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn_runtime: Option<String>,
    /// The NCCL (RCCL on ROCm) this torch loaded (`torch.cuda.nccl.version()`, `2.30.7`).
    /// Absent on a CPU-only torch or a build without NCCL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_runtime: Option<String>,
}

/// What torch was built with, from `torch._C._show_config()`: versions of the libraries
/// compiled in, which may differ from those loaded at run time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TorchBuild {
    /// The C++ compiler (`GCC 13.3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler: Option<String>,
    /// `CPU capability usage` (`AVX512`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_capability: Option<String>,
    /// `CUDA_VERSION` of the build settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// `CUDNN_VERSION` of the build settings (`9.26.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudnn: Option<String>,
    /// The `HIP Runtime` line (collect_env's "HIP runtime version").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip_runtime: Option<String>,
    /// The `MIOpen` line (collect_env's "MIOpen runtime version").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miopen: Option<String>,
    /// The `Magma` line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub magma: Option<String>,
}

/// One device as torch reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TorchDevice {
    /// `cuda:N` index.
    pub index: u32,
    /// `get_device_name`.
    pub name: String,
    /// `gcnArchName` (ROCm, with features) or `sm_90` (CUDA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// `total_memory` in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_memory: Option<u64>,
    /// Multiprocessor count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_processor_count: Option<u32>,
    /// PCI bus id, when torch exposes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus: Option<String>,
    /// Whether the device is integrated (shares host memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrated: Option<bool>,
}

/// The caching-allocator configuration in effect.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AllocatorConf {
    /// The variable this torch version reads first among those set.
    pub variable: String,
    /// Its value.
    pub value: String,
    /// Other allocator-config variables that are set but shadowed.
    #[serde(default)]
    pub shadowed: Vec<String>,
}

/// A kernel log event of interest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KernelEvent {
    /// `page_fault`, `ring_timeout`, `gpu_reset`, `mes_failure`, `segfault`, `xid`, ...
    pub kind: String,
    /// Timestamp as printed (seconds since boot or journal time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// PCI address of the GPU, when printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus: Option<String>,
    /// Faulting client (`CPF`, `TCP`, `SDMA0`) for page faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Process name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// Process id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The library a userspace segfault happened in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// Further key facts (`ring` → `gfx_0.0.0`, `status` → `0x00801A31`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub details: BTreeMap<String, String>,
    /// The first raw line of the event.
    pub line: String,
}

/// A fact that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unreadable {
    /// What was wanted ("MES firmware version", "Secure Boot state").
    pub what: String,
    /// Why it could not be read ("needs root: /sys/kernel/debug", "mokutil not installed").
    pub reason: String,
}
