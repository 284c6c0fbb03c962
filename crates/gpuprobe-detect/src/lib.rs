//! Stack fingerprint: sysfs/procfs readers behind a root path, library discovery, and
//! parsers for pasted tool output.
//!
//! Three entry points serve the CLI:
//!
//! * [`collect`] builds the live [`Fingerprint`] for `gpuprobe env` and every `check`
//!   report: host, GPUs (PCI, KFD topology, DRM, NVIDIA procfs), drivers and their module
//!   parameters, firmware, ROCm/CUDA libraries, relevant environment variables, and
//!   optionally external tools and the kernel log. What cannot be read is listed in
//!   `Fingerprint::unreadable` with the reason; nothing is invented.
//! * [`merge_python`] reconciles what the Python worker saw (torch's device list) with
//!   the PCI view.
//! * [`triage`] reads pasted logs and builds as much of a fingerprint as they allow.
//!
//! [`render_text`] is the readable view. The [`parse`] modules are pure functions over
//! text and never panic; [`isa`] holds the gfx/PCI tables and ISA decoders.
//!
//! All file access goes through [`Root`], so tests run the collector on fake trees.

pub mod collect;
pub mod isa;
mod merge;
pub mod parse;
mod render;
mod root;
mod text;
pub mod triage;

pub use collect::{
    CaptureError, Captured, CollectOptions, GpuHeadroom, KmsgReader, capture, collect,
    compute_gpu_count, cuda_kernel_cache_empty, gpu_device_nodes_present, gpu_headroom,
    is_relevant_env_var, merge_watched_kernel_lines, relevant_env, scan_python_libraries,
};
pub use merge::merge_python;
pub use parse::ParseError;
pub use render::{human_bytes, render_text};
pub use root::{ReadError, Root};
pub use text::{bdf_from_location, normalize_bdf};
pub use triage::{LineRange, Recognized, Skipped, ToolKind, TriageInput, TriageOutcome, triage};
