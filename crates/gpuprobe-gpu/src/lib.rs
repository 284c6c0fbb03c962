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
//! The modules are private; the surface is what the crate root re-exports, and `memtest`.
//!
//! Entry points for the binary:
//! - [`native_catalog`] — the probe specs (backend `native`, layer `runtime`);
//! - [`run_worker`] — runs a [`gpuprobe_model::WorkerPlan`] and emits protocol
//!   events; [`open_event_fd`] and [`write_event`] put them on descriptor 3;
//!   [`parse_native_env_log`] reads the env mode's [`NativeEnv`] back from its `log` event;
//! - [`memtest`] — `gpuprobe memtest`'s command surface ([`memtest::MemtestOutcome`], its
//!   options, probe spec and JSON documents): a public module because these are several
//!   functions of that one command, named for it;
//! - [`memtest_report_from`] / [`render_memtest`] — read back and print the memtest report
//!   ([`MemtestReport`]).
//!
//! The runtimes themselves, for tests and tools that load one directly: [`CudaDriver`],
//! [`HipRuntime`], [`Hiprtc`] and [`Nvrtc`] (with [`NvrtcOutput`]), found through a
//! [`SearchConfig`] (its [`LibraryKind`]s and the [`SEARCH_ENV_VARS`] it reads); the
//! kernels' source as compiled ([`device_source`], [`source_fingerprint`]).
#![allow(unsafe_code)]

mod backend;
mod cuda;
mod error;
mod ffi;
mod fill;
mod hip;
mod hiprtc;
mod kernels;
mod loader;
pub mod memtest;
mod nvrtc;
mod probes;
mod runtime;
mod worker;

pub use backend::DeviceRuntime;
pub use cuda::CudaDriver;
pub use error::{GpuError, LoadError};
pub use hip::HipRuntime;
pub use hiprtc::Hiprtc;
pub use kernels::{device_source, source_fingerprint};
pub use loader::{LibraryKind, SEARCH_ENV_VARS, SearchConfig};
pub use memtest::{MemtestReport, memtest_report_from, render_memtest};
pub use nvrtc::{Nvrtc, NvrtcOutput};
pub use probes::native_catalog;
pub use runtime::NativeEnv;
pub use worker::{open_event_fd, parse_native_env_log, run_worker, write_event};
