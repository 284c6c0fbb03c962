//! The environment variables that matter to a GPU stack (`docs/fingerprint.md`, `env`): ROCr
//! (`HSA_*`, `HSAKMT_*`, `ROCR_*`), HIP/CLR (`HIP_*`, `AMD_*`, `GPU_*`, `ROC_*`, `PAL_*`),
//! PyTorch (`PYTORCH_*`, `TORCH_*`), math libraries (`MIOPEN_*`, `TENSILE_*`,
//! `ROCBLAS_*`, `HIPBLASLT_*`), CUDA and NCCL/RCCL (`CUDA_*`, `NCCL_*`, `RCCL_*`,
//! `NVIDIA_*`), and library search paths. Values are kept as set.

use std::collections::BTreeMap;

const PREFIXES: &[&str] = &[
    "HSA_",
    "HSAKMT_",
    "ROCR_",
    "HIP_",
    "AMD_",
    "GPU_",
    "ROC_",
    "PAL_",
    "PYTORCH_",
    "TORCH_",
    "MIOPEN_",
    "TENSILE_",
    "ROCBLAS_",
    "HIPBLASLT_",
    "HIPBLAS_",
    "CUDA_",
    "NCCL_",
    "RCCL_",
    "NVIDIA_",
    "CUBLAS_",
    "CUDNN_",
];

const EXACT: &[&str] = &[
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "ROCM_PATH",
    "ROCM_HOME",
    "CUDA_HOME",
    "CUDA_PATH",
    "HIP_PATH",
    "OMP_NUM_THREADS",
];

/// Whether a variable is one gpuprobe records.
pub fn is_relevant_env_var(name: &str) -> bool {
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The relevant subset of an environment.
pub fn relevant_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .filter(|(k, _)| is_relevant_env_var(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
