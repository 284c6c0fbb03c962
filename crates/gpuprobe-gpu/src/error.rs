//! Typed errors of the native layer. A missing library, an old driver, a missing symbol or a
//! failing API call is a finding for the report, never a panic: every one of them ends up as a
//! value of these types and, in the worker, as a probe outcome or a line of the hello event.

use std::fmt;
use std::path::PathBuf;

/// One library candidate that was tried, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Attempt {
    /// The file path, or the bare soname handed to the dynamic linker.
    pub candidate: String,
    /// Where the candidate came from (`GPUPROBE_HIP_LIB`, `ROCM_PATH`, `torch/lib`, ...).
    pub origin: String,
    /// Why it was not used (`absent`, the dynamic linker's message, a version problem);
    /// `None` for the candidate that was loaded.
    pub error: Option<String>,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            Some(error) => write!(f, "{} [{}]: {error}", self.candidate, self.origin),
            None => write!(f, "{} [{}]: loaded", self.candidate, self.origin),
        }
    }
}

/// Why a runtime library could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// No candidate could be opened.
    #[error("{library} not found ({} candidates tried: {})", .tried.len(), summarize_attempts(.tried))]
    NotFound {
        /// Human name of the library ("CUDA driver", "hipRTC", ...).
        library: &'static str,
        /// Every candidate, in the order tried.
        tried: Vec<Attempt>,
    },
    /// The library opened but lacks a symbol this layer needs.
    #[error("{library} at {} lacks the required symbol {symbol}", .path.display())]
    MissingSymbol {
        /// Human name of the library.
        library: &'static str,
        /// The file that was opened.
        path: PathBuf,
        /// The missing symbol (or alternatives, separated by " or ").
        symbol: String,
    },
    /// The library is older than this layer supports.
    #[error("{library} at {} is too old: version {found}, need {required} or newer", .path.display())]
    TooOld {
        /// Human name of the library.
        library: &'static str,
        /// The file that was opened.
        path: PathBuf,
        /// Version found.
        found: String,
        /// Oldest version supported.
        required: String,
    },
    /// The library's versions do not agree with each other (soname vs runtime version, HIP
    /// runtime vs hipRTC).
    #[error("{library} at {} has a version mismatch: {detail}", .path.display())]
    VersionMismatch {
        /// Human name of the library.
        library: &'static str,
        /// The file that was opened.
        path: PathBuf,
        /// What disagrees with what.
        detail: String,
    },
}

fn summarize_attempts(tried: &[Attempt]) -> String {
    const SHOWN: usize = 6;
    let mut parts: Vec<String> = tried.iter().take(SHOWN).map(Attempt::to_string).collect();
    if tried.len() > SHOWN {
        parts.push(format!("... {} more", tried.len() - SHOWN));
    }
    parts.join("; ")
}

/// An error from the native layer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GpuError {
    /// The runtime library could not be used.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A runtime API call returned an error code.
    #[error("{api} failed: {name} ({code}): {description}")]
    Api {
        /// The function that failed (`cuMemAlloc_v2`, `hipMemcpyHtoD`).
        api: &'static str,
        /// The raw error code.
        code: i32,
        /// The error's symbolic name (`CUDA_ERROR_OUT_OF_MEMORY`, `hipErrorNoDevice`).
        name: String,
        /// The runtime's description of it.
        description: String,
    },
    /// The runtime reports no usable device.
    #[error("{runtime}: no device ({detail})")]
    NoDevice {
        /// `cuda` or `hip`.
        runtime: &'static str,
        /// What the runtime said.
        detail: String,
    },
    /// The requested device ordinal does not exist.
    #[error("device {requested} requested but the runtime has {count}")]
    DeviceOutOfRange {
        /// Requested ordinal.
        requested: u32,
        /// Devices present.
        count: u32,
    },
    /// Run-time compilation of kernels failed.
    #[error("{compiler} could not compile the kernels ({code}): {log}")]
    Compile {
        /// `NVRTC` or `hipRTC`.
        compiler: &'static str,
        /// The compiler's result code.
        code: i32,
        /// The compiler's log (or the error text when there is no log).
        log: String,
    },
    /// Host memory could not be allocated.
    #[error("host allocation of {bytes} bytes failed")]
    HostAlloc {
        /// Requested size.
        bytes: usize,
    },
    /// A caller passed something this layer cannot use.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl GpuError {
    /// Whether the error is the runtime's out-of-memory code (CUDA and HIP both use 2).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, GpuError::Api { code: 2, .. })
    }

    /// A short type name for protocol `error` outcomes: the API error name, or the variant.
    pub fn type_name(&self) -> String {
        match self {
            GpuError::Load(LoadError::NotFound { .. }) => "LibraryNotFound".into(),
            GpuError::Load(LoadError::MissingSymbol { .. }) => "MissingSymbol".into(),
            GpuError::Load(LoadError::TooOld { .. }) => "RuntimeTooOld".into(),
            GpuError::Load(LoadError::VersionMismatch { .. }) => "VersionMismatch".into(),
            GpuError::Api { name, .. } => name.clone(),
            GpuError::NoDevice { .. } => "NoDevice".into(),
            GpuError::DeviceOutOfRange { .. } => "DeviceOutOfRange".into(),
            GpuError::Compile { .. } => "CompileError".into(),
            GpuError::HostAlloc { .. } => "HostAllocError".into(),
            GpuError::InvalidArgument(_) => "InvalidArgument".into(),
        }
    }
}

/// Shorthand for results of the native layer.
pub(crate) type GpuResult<T> = Result<T, GpuError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_lists_candidates_and_counts_them() {
        let tried: Vec<Attempt> = (0..8)
            .map(|i| Attempt {
                candidate: format!("/x/lib{i}.so"),
                origin: "test".into(),
                error: Some("absent".into()),
            })
            .collect();
        let text = LoadError::NotFound {
            library: "HIP runtime",
            tried,
        }
        .to_string();
        assert!(text.contains("8 candidates tried"), "{text}");
        assert!(text.contains("/x/lib0.so [test]: absent"), "{text}");
        assert!(text.contains("... 2 more"), "{text}");
    }

    #[test]
    fn out_of_memory_is_code_two() {
        let oom = GpuError::Api {
            api: "cuMemAlloc_v2",
            code: 2,
            name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
            description: "out of memory".into(),
        };
        assert!(oom.is_out_of_memory());
        assert_eq!(oom.type_name(), "CUDA_ERROR_OUT_OF_MEMORY");
        assert!(!GpuError::HostAlloc { bytes: 1 }.is_out_of_memory());
    }
}
