//! Native runtime layer of gpuprobe: the CUDA driver API + NVRTC and the HIP runtime +
//! hipRTC, loaded at run time (never linked), the native probes written once against one
//! [`DeviceRuntime`] trait, and the VRAM test engine behind `gpuprobe memtest`.
//!
//! This is the only crate of the workspace allowed to contain `unsafe` (FFI calls into the
//! vendor runtimes); every unsafe block is small and carries a `// SAFETY:` comment. Nothing
//! here panics on a missing or broken runtime: a missing library, an old driver, a missing
//! symbol or a failing call is a typed error ([`GpuError`], [`LoadError`]) that becomes a
//! finding.
//!
//! Entry points for the binary:
//! - [`native_catalog`] — the probe specs (backend `native`, layer `runtime`);
//! - [`run_worker`] — runs a [`gpuprobe_model::WorkerPlan`] and emits protocol
//!   events; [`open_event_fd`] and [`write_event`] put them on descriptor 3;
//! - [`memtest_report_from`] / [`render_memtest`] — read back and print the memtest report.
#![allow(unsafe_code)]

pub mod backend;
pub mod cuda;
pub mod error;
mod ffi;
pub mod hip;
pub mod hiprtc;
pub mod kernels;
pub mod loader;
pub mod memtest;
pub mod nvrtc;
pub mod probes;
pub mod runtime;
pub mod worker;

pub use backend::{DeviceInfo, DeviceRuntime, MemInfo, RuntimeKind, RuntimeVersions};
pub use error::{Attempt, GpuError, GpuResult, LoadError};
pub use loader::{LibraryKind, SearchConfig};
pub use memtest::{MemtestOptions, MemtestReport, memtest_report_from, render_memtest};
pub use probes::{ids as probe_ids, native_catalog};
pub use runtime::{NativeEnv, RuntimePreference, Runtimes, discover};
pub use worker::{
    NATIVE_ENV_LOG_PREFIX, open_event_fd, parse_native_env_log, run_worker, search_config,
    write_event,
};
