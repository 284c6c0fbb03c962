//! What a GPU fault looks like in text: the substrings gpuprobe looks for in a process's
//! output and in the kernel log. Data only; the readers are in `gpuprobe-runner` (the job
//! supervisor of `gpuprobe run`, the probe supervisor, the kernel log watcher).
//!
//! The lists serve different purposes, so they differ on purpose:
//! - [`JOB_FATAL_MARKERS`]: is this line of a job's output a fatal GPU-stack message? A
//!   non-zero exit after one counts as a crash. Order does not matter.
//! - [`CRASH_TELLING_MARKERS`]: which line of a dead worker's last output best explains its
//!   death? Strongest first: the first marker found anywhere in the tail wins.
//! - [`KERNEL_LOG_MARKERS`]: is this kernel log line worth keeping with a probe's result? Only
//!   kept lines reach the knowledge base's `kernel_log` signatures, so every kernel-side
//!   signature must be able to match a kept line (`gpuprobe-kb`'s `fault_markers` test checks
//!   it). Order does not matter.

/// Messages GPU stacks print when a job dies of a GPU fault (`gpuprobe run` scans the job's
/// stdout and stderr for them).
pub const JOB_FATAL_MARKERS: &[&str] = &[
    "Memory access fault by GPU",
    "HW Exception by GPU",
    "HSA_STATUS_ERROR",
    "hipErrorIllegalAddress",
    "hipErrorLaunchFailure",
    "an illegal memory access was encountered",
    "unspecified launch failure",
    "device-side assert triggered",
    "CUDA error",
    "HIP error",
    "NCCL error",
    "RCCL error",
    "CUBLAS_STATUS_EXECUTION_FAILED",
    "Segmentation fault",
    "Fatal Python error",
    "terminate called after throwing",
];

/// Markers of the line that best explains a worker's crash, strongest first (the probe
/// supervisor quotes that line as the crash's message).
pub const CRASH_TELLING_MARKERS: &[&str] = &[
    "Memory access fault",
    "Page not present",
    "HSA_STATUS_ERROR",
    "illegal memory access",
    "Segmentation fault",
    "Fatal Python error",
    "HIP error",
    "CUDA error",
    "hipError",
    "CUDA_ERROR",
    "terminate called",
    "Aborted",
    "Error",
];

/// Substrings that make a kernel log line worth keeping while probes run (the watcher drops
/// every other line).
pub const KERNEL_LOG_MARKERS: &[&str] = &[
    "amdgpu",
    "amdkfd",
    "kfd",
    "gfxhub",
    "mmhub",
    "page fault",
    "NVRM",
    "Xid",
    "segfault",
    "MES",
    "ring ",
    "GPU reset",
    "gpu reset",
    "iommu",
    "IOMMU",
    "AMD-Vi",
];
