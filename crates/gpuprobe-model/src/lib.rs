//! gpuprobe's data model, shared by every other crate and by the Python worker.
//!
//! This crate holds data only: no I/O, no process spawning, no GPU access. Everything here
//! serializes with serde and derives a JSON Schema, so the `--json` report, the worker
//! protocol and the profile files all have one published shape.
//!
//! The flow the types follow:
//! [`ProbeSpec`] (what to run and how to judge it) → [`Observation`] (facts a probe measured)
//! → [`Verdict`] (the judgement, made in Rust) → [`Finding`] (what it means) → [`Report`].

pub mod build_info;
pub mod command_line;
pub mod env_vars;
pub mod exit;
pub mod fault_text;
pub mod finding;
pub mod fingerprint;
pub mod isa;
pub mod observation;
pub mod plan;
pub mod probe;
pub mod profile;
pub mod protocol;
pub mod report;
pub mod repro;
pub mod text;
pub mod verdict;

pub use build_info::BuildInfo;
pub use exit::{ClassifiedError, ExitStatus};
pub use finding::{Confidence, Cost, Evidence, Finding, FindingLayer, Remedy, Severity};
pub use fingerprint::Fingerprint;
pub use observation::{
    CompareStats, Distribution, InvariantCheck, Measurement, Observation, SampleStats,
};
pub use probe::{Backend, DeviceRef, Layer, Placement, ProbeId, ProbeSpec, Rule, Tier};
pub use profile::Profile;
pub use report::{Report, Summary};
pub use verdict::{FailClass, ProbeResult, Verdict};

/// Version of the JSON report schema; bumped on any incompatible change.
pub const REPORT_SCHEMA_VERSION: u32 = 1;
