//! Stack fingerprint: sysfs/procfs readers behind a root path, library discovery, and
//! parsers for pasted tool output.
//!
//! The modules are private; the surface is what the crate root re-exports, and `parse`.
//!
//! Three entry points serve the CLI:
//!
//! * [`collect`] builds the live [`Fingerprint`] for `gpuprobe env` and every `check`
//!   report: host, GPUs (PCI, KFD topology, DRM, NVIDIA procfs), drivers and their module
//!   parameters, firmware, ROCm/CUDA libraries, relevant environment variables, and
//!   optionally external tools and the kernel log. What cannot be read is listed in
//!   `Fingerprint::unreadable` with the reason; nothing is invented. Beside it: the
//!   [`CollectOptions`], [`capture`] of one external tool ([`Captured`], [`CaptureError`]),
//!   the kernel log reader ([`KmsgReader`], [`merge_watched_kernel_lines`]), GPU counts and
//!   device nodes ([`compute_gpu_count`], [`gpu_device_nodes_present`]), free memory
//!   ([`gpu_headroom`], [`GpuHeadroom`]), the environment filter ([`relevant_env`],
//!   [`is_relevant_env_var`]), [`scan_python_libraries`] and [`cuda_kernel_cache_empty`].
//! * [`merge_python`] reconciles what the Python worker saw (torch's device list) with
//!   the PCI view.
//! * [`triage`] reads pasted logs and builds as much of a fingerprint as they allow
//!   ([`TriageInput`] in, [`TriageOutcome`] out, with its [`Recognized`] blocks, [`Skipped`]
//!   [`LineRange`]s by [`ToolKind`] and [`KernelLogSummary`]); [`Triager`] takes inputs one
//!   at a time, and [`triage_inputs`] reads a run's files under a byte cap
//!   ([`DEFAULT_TRIAGE_MAX_BYTES`], [`parse_byte_size`], [`Truncation`], [`TriagedInputs`]).
//!
//! [`render_text`] is the readable view ([`human_bytes`] its byte sizes). [`parse`] stays a
//! public module, one module per tool whose output it reads: pure functions over text that
//! never panic ([`ParseError`]). [`amd_isa_from_name`] reads the ISA from a marketing name,
//! [`parse_amdgpu_ids`] libdrm's table of them ([`AmdgpuIdsEntry`]); [`normalize_bdf`] and
//! [`bdf_from_location`] spell PCI addresses one way.
//!
//! All file access goes through [`Root`] ([`ReadError`]), so tests run the collector on fake
//! trees.
//!
//! [`Fingerprint`]: gpuprobe_model::Fingerprint

mod collect;
mod isa;
mod merge;
pub mod parse;
mod render;
mod root;
mod text;
mod triage;

pub use collect::{
    CaptureError, Captured, CollectOptions, GpuHeadroom, KmsgReader, capture, collect,
    compute_gpu_count, cuda_kernel_cache_empty, gpu_device_nodes_present, gpu_headroom,
    is_relevant_env_var, merge_watched_kernel_lines, relevant_env, scan_python_libraries,
};
pub use isa::{AmdgpuIdsEntry, amd_isa_from_name, parse_amdgpu_ids};
pub use merge::merge_python;
pub use parse::ParseError;
pub use render::{human_bytes, render_text};
pub use root::{ReadError, Root};
pub use text::{bdf_from_location, normalize_bdf};
pub use triage::input::{
    DEFAULT_MAX_BYTES as DEFAULT_TRIAGE_MAX_BYTES, Truncation, parse_byte_size,
};
pub use triage::read::{TriagedInputs, triage_inputs};
pub use triage::{
    KernelLogSummary, LineRange, Recognized, Skipped, ToolKind, TriageInput, TriageOutcome,
    Triager, triage,
};
