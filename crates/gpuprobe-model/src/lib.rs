//! gpuprobe's data model, shared by every other crate and by the Python worker.
//!
//! This crate holds data only: no I/O, no process spawning, no GPU access. Everything here
//! serializes with serde and derives a JSON Schema, so the `--json` report, the worker
//! protocol and the profile files all have one published shape.
//!
//! The flow the types follow:
//! [`ProbeSpec`] (what to run and how to judge it) → [`Observation`] (facts a probe measured)
//! → [`Verdict`] (the judgement, made in Rust) → [`Finding`] (what it means) → [`Report`].
//!
//! Each module owns one part of that shape: `probe` (what a probe is, where it runs),
//! `observation`, `verdict`, `finding`, `fingerprint` (the stack), `report`, `plan` (a
//! run's `plan.json`), `protocol` (the worker protocol), `profile` (`fix`'s profiles and
//! account), `repro`, `isa` (AMD ISA identity), `exit` (exit codes), `build_info`,
//! `command_line` (the commands a report suggests), `fault_text` (what a GPU fault looks
//! like in text) and `text` (the sanitizer every renderer uses).
//!
//! Those modules are private: every item another crate uses is re-exported here under its
//! own name (no two modules define the same name), and nothing else is, so
//! `unreachable_pub` flags a `pub` item no other crate can reach. One module stays public
//! on purpose: [`env_vars`], whose constants are named as the variables themselves (`HOME`,
//! `USER`, `CI`, `TERM`) and read as what they are only as `env_vars::HOME`.

mod build_info;
mod command_line;
pub mod env_vars;
mod exit;
mod fault_text;
mod finding;
mod fingerprint;
mod isa;
mod observation;
mod plan;
mod probe;
mod profile;
mod protocol;
mod report;
mod repro;
mod text;
mod verdict;

pub use build_info::BuildInfo;
pub use command_line::{StackOptions, shell_word};
pub use exit::{ClassifiedError, ExitStatus};
pub use fault_text::{CRASH_TELLING_MARKERS, JOB_FATAL_MARKERS, KERNEL_LOG_MARKERS};
pub use finding::{
    Confidence, Cost, Evidence, Finding, FindingLayer, Remedy, Severity, WITHOUT_SIGNATURE,
    qualifier,
};
pub use fingerprint::{
    AmdgpuDriver, ComponentVersion, CondaEnv, CondaPackage, CpuDetails, CudaInfo, DriverSource,
    Fingerprint, FirmwareVersion, GpuInfo, HostInfo, KernelEvent, LibraryInfo, NvidiaDriver,
    PythonEnv, RocmInfo, ToolVersion, TorchDevice, TorchInfo, Unreadable, Vendor,
};
pub use isa::{GfxFacts, GfxIsa, Integration, OverrideError, decode_override, gfx_facts};
pub use observation::{
    CompareStats, Distribution, InvariantCheck, Measurement, MismatchExample, Observation,
    OutputDigest, SampleStats, SweepError, SweepFailure, SweepStats,
};
pub use plan::{RunPlan, Settings, SpreadGroup, SpreadPlan, Task};
pub use probe::{
    Backend, DeviceRef, Layer, Placement, ProbeId, ProbeSpec, Rule, Tier, longest_prefix_value,
};
pub use profile::{
    CandidateTrial, CostMeasurement, FixAccount, FixOutcome, FixTarget, GroupTrial, MetricCost,
    PROFILE_VERSION, PartialCure, ProbeOutcomeRef, ProbeRef, Profile, ProfileSetting,
    ReportedChange, RunBudget, SWITCHES_VARIABLE, SettingChange, StackKey, TargetStatus,
    Verification, is_probe_side_switch, is_switch_name, switches_value,
};
pub use protocol::{
    EVENT_FD, FaultSpec, Outcome, PROTOCOL_VERSION, START_LINE, SimulationSpec, WorkerEvent,
    WorkerMode, WorkerPlan,
};
pub use report::{LaneTiming, Report, Summary, Timings};
pub use repro::{
    ISSUE_FILE, MANIFEST_FILE, PLAN_INPUT, REPRO_DIR, RESULT_INPUT, RUN_FILE, Repro, ReproManifest,
    SCRIPT_FILE, ScriptOutcome, ScriptRun,
};
pub use text::{display_width, terminal_safe, visible, visible_line, wrap_words};
pub use verdict::{FailClass, ProbeResult, Verdict};

/// Version of the JSON report schema; bumped on any incompatible change.
pub const REPORT_SCHEMA_VERSION: u32 = 1;
