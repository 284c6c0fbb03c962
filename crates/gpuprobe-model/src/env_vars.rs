//! The names of the environment variables gpuprobe reads or sets, in one place: the GPU
//! visibility lists of the three runtimes, gpuprobe's own settings, and the directories it
//! keeps state in. A name spelled anywhere else is a name that can drift.

/// NVIDIA's list of the GPUs a CUDA process sees.
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
/// HIP's list of the GPUs a HIP process sees (the one Windows honours).
pub const HIP_VISIBLE_DEVICES: &str = "HIP_VISIBLE_DEVICES";
/// ROCr's list of the GPUs a ROCm process sees (applied below HIP on Linux).
pub const ROCR_VISIBLE_DEVICES: &str = "ROCR_VISIBLE_DEVICES";
/// The older HIP/OpenCL device list.
pub const GPU_DEVICE_ORDINAL: &str = "GPU_DEVICE_ORDINAL";
/// How CUDA numbers devices (`PCI_BUS_ID` keeps the order of `nvidia-smi`).
pub const CUDA_DEVICE_ORDER: &str = "CUDA_DEVICE_ORDER";

/// The visibility lists that hide GPUs from a process: set empty, no GPU is visible.
pub const GPU_VISIBILITY_LISTS: &[&str] = &[
    CUDA_VISIBLE_DEVICES,
    HIP_VISIBLE_DEVICES,
    ROCR_VISIBLE_DEVICES,
];

/// Every variable that renumbers or filters the GPUs a process sees.
pub const GPU_RENUMBERING: &[&str] = &[
    CUDA_VISIBLE_DEVICES,
    HIP_VISIBLE_DEVICES,
    ROCR_VISIBLE_DEVICES,
    GPU_DEVICE_ORDINAL,
];

/// The source commit a packaging build records when it has no git checkout (read by
/// gpuprobe-kb's build script, which spells it again: a build script cannot use this crate).
pub const GPUPROBE_BUILD_COMMIT: &str = "GPUPROBE_BUILD_COMMIT";
/// The interpreter gpuprobe runs its probes in, when `--python` is not given.
pub const GPUPROBE_PYTHON: &str = "GPUPROBE_PYTHON";
/// How many finished run directories gpuprobe keeps.
pub const GPUPROBE_KEEP_RUNS: &str = "GPUPROBE_KEEP_RUNS";
/// The CUDA driver library to load instead of the one the search finds.
pub const GPUPROBE_CUDA_LIB: &str = "GPUPROBE_CUDA_LIB";
/// The NVRTC library to load instead of the one the search finds.
pub const GPUPROBE_NVRTC_LIB: &str = "GPUPROBE_NVRTC_LIB";
/// The HIP runtime library to load instead of the one the search finds.
pub const GPUPROBE_HIP_LIB: &str = "GPUPROBE_HIP_LIB";
/// The hipRTC library to load instead of the one the search finds.
pub const GPUPROBE_HIPRTC_LIB: &str = "GPUPROBE_HIPRTC_LIB";

/// The user's home directory.
pub const HOME: &str = "HOME";
/// Where run directories go (XDG base directories).
pub const XDG_STATE_HOME: &str = "XDG_STATE_HOME";
/// Where the bytecode cache goes (XDG base directories).
pub const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";

/// The login name, as the shell sets it (`bundle` redacts its value).
pub const USER: &str = "USER";
/// The login name, as `login` sets it (`bundle` redacts its value).
pub const LOGNAME: &str = "LOGNAME";
/// The host name, as some shells export it (`bundle` redacts its value).
pub const HOSTNAME: &str = "HOSTNAME";
/// The plan's simulation spec as JSON, read by the `sitecustomize.py` of
/// `gpuprobe/repro/simulate_site/` when `gpuprobe repro` runs a script made from a
/// SIMULATED result (docs/repro.md).
pub const GPUPROBE_REPRO_SIMULATE: &str = "GPUPROBE_REPRO_SIMULATE";

/// Turns colour off when set to a non-empty value (<https://no-color.org>); `--color always`
/// overrides it.
pub const NO_COLOR: &str = "NO_COLOR";
/// Turns colour on even when the output is not a terminal, when set to a non-empty value.
pub const CLICOLOR_FORCE: &str = "CLICOLOR_FORCE";
/// `0` turns colour off; any other value allows it on a terminal.
pub const CLICOLOR: &str = "CLICOLOR";
/// The terminal type: `dumb`, or unset, means no colour on a terminal (unless `CLICOLOR` or
/// `CI` says the terminal can show it).
pub const TERM: &str = "TERM";
/// Set by CI services, whose log viewers show colour.
pub const CI: &str = "CI";
/// The width of the terminal in columns, when the terminal itself does not say.
pub const COLUMNS: &str = "COLUMNS";
