//! Runs probes out of process and records what happened.
//!
//! This crate is the only place that spawns worker processes. It owns:
//! - finding the user's Python and extracting the embedded probe package ([`find_python`],
//!   [`extract_package`]);
//! - starting a worker with a private event descriptor and reading its JSON-lines events
//!   ([`WorkerCommand`], [`read_messages`]);
//! - supervising a sequence of probes on one device: per-probe timeouts, killing the
//!   process group on a hang, recording the signal and stderr tail on a crash, and starting
//!   a fresh worker for the probes that remain ([`supervise`]);
//! - the run directory, where every result is appended the moment it is known, so a killed
//!   run loses nothing and can be resumed ([`RunDir`], [`Writer`]);
//! - where run directories live and how they are named ([`runs_root`], [`new_run_dir`],
//!   [`rfc3339`]), and which of them are over and may be pruned ([`scan_runs`],
//!   [`prune_runs`]);
//! - fault-simulation presets and custom fault files ([`resolve_simulation`],
//!   [`parse_faults`]);
//! - one pre-imported Python interpreter that forks the lanes' workers, so a tier pays
//!   one framework import ([`Zygote`]);
//! - the reports under the paths `gpuprobe fleet` is given ([`find_fleet_reports`]);
//! - new kernel log lines seen while probes run ([`KernelLogSource`]);
//! - running a user's job for `gpuprobe run`, watched for crashes and hangs ([`run_job`]),
//!   with the process-group and signal handling it shares with the probe supervisor
//!   ([`FORWARDED`]);
//! - the one installer of signal handling: a signal cancels the supervisors and is passed
//!   to `gpuprobe run`'s job, and the binary hears of it as an event ([`Signals`]).
//!
//! It does not judge: workers report observations, and `gpuprobe-doctor` turns them into
//! verdicts.
//!
//! The modules are private: what other crates use is re-exported here, by name, and
//! nothing else is, so `unreachable_pub` flags a `pub` item no other crate can reach
//! (make it `pub(crate)`, or export it here when another crate needs it).

mod error;
mod fleet_reports;
mod job;
mod kmsg;
mod paths;
mod process;
mod python;
mod rundir;
mod runs;
mod signals;
mod simulation;
mod stamp;
mod supervisor;
mod worker;
mod zygote;

pub use error::RunnerError;
pub use fleet_reports::find as find_fleet_reports;
pub use job::{EnvChanges, JobError, JobOptions, StartupHook, exec_job, run_job};
pub use kmsg::KernelLogSource;
pub use paths::{bytecode_cache, new_run_dir, new_run_dir_in, parse_run_dir_name, runs_root};
pub use process::{FORWARDED, run_to_files};
pub use python::{
    BadInterpreter, ListedCatalog, PythonChoice, extract_package, fetch_catalog, fetch_env,
    find_python, resolve_explicit, validate_explicit, worker_command,
};
pub use rundir::{
    FIX_ACCOUNT_FILE, FIX_CHECK_DIR, FIX_JOURNAL_FILE, FIX_OPTIONS_FILE, FIX_TRIALS_DIR, PLAN_FILE,
    PROFILE_FILE, REPORT_FILE, Run, RunContents, RunDir, RunFileError, RunFiles, RunStack,
    WORKERS_DIR, read_finished, read_report_file,
};
pub use rundir::{
    PROFILE_USES_FILE, PROFILE_USES_KEPT, ProfileUse, WRITER_LOCK_FILE, Writer, append_profile_use,
    profile_digest, read_profile_uses,
};
pub use runs::{
    DEFAULT_KEEP, KEEP_ENV, Policy, Retention, RunInfo, RunState, after_check, inspect_run,
    keep_from_env, parse_age, prune as prune_runs, scan as scan_runs, scan_names as scan_run_names,
};
pub use signals::{SignalEvent, Signals};
pub use simulation::{
    Preset as SimulationPreset, parse_faults, presets as simulation_presets,
    resolve as resolve_simulation,
};
pub use stamp::rfc3339;
pub use supervisor::{
    Cancel, RawOutcome, RawResult, StartGate, SupervisorConfig, SupervisorEvent, Task, supervise,
    telling_line,
};
pub use worker::{WorkerCommand, WorkerMessage, read_messages};
pub use zygote::{Zygote, choice_from_environment, worth_it};

/// Files embedded at build time.
pub(crate) mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}
