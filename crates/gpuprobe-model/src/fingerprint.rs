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
    /// PyTorch, when importable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<TorchInfo>,
    /// Why torch could not be used, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_error: Option<String>,
    /// Other relevant packages and their versions (numpy, accelerate, safetensors, ...).
    #[serde(default)]
    pub packages: BTreeMap<String, String>,
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
