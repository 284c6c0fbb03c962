//! Runs probes out of process and records what happened.
//!
//! This crate is the only place that spawns worker processes. It owns:
//! - finding the user's Python and extracting the embedded probe package ([`python`]);
//! - starting a worker with a private event descriptor and reading its JSON-lines events
//!   ([`worker`]);
//! - supervising a sequence of probes on one device: per-probe timeouts, killing the
//!   process group on a hang, recording the signal and stderr tail on a crash, and starting
//!   a fresh worker for the probes that remain ([`supervisor`]);
//! - the run directory, where every result is appended the moment it is known, so a killed
//!   run loses nothing and can be resumed ([`rundir`]);
//! - where run directories live and how they are named ([`paths`], [`stamp`]), and which
//!   of them are over and may be pruned ([`runs`]);
//! - fault-simulation presets and custom fault files ([`simulation`]);
//! - one pre-imported Python interpreter that forks the lanes' workers, so a tier pays
//!   one framework import ([`zygote`]);
//! - the reports under the paths `gpuprobe fleet` is given ([`fleet_reports`]);
//! - new kernel log lines seen while probes run ([`kmsg`]);
//! - running a user's job for `gpuprobe run`, watched for crashes and hangs ([`job`]), with
//!   the process-group and signal handling it shares with the probe supervisor
//!   ([`process`]);
//! - the one installer of signal handling: a signal cancels the supervisors and is passed
//!   to `gpuprobe run`'s job, and the binary hears of it as an event ([`signals`]).
//!
//! It does not judge: workers report observations, and `gpuprobe-doctor` turns them into
//! verdicts.

pub mod error;
pub mod fleet_reports;
pub mod job;
pub mod kmsg;
pub mod paths;
pub mod process;
pub mod python;
pub mod rundir;
pub mod runs;
pub mod signals;
pub mod simulation;
pub mod stamp;
pub mod supervisor;
pub mod worker;
pub mod zygote;

pub use error::RunnerError;
pub use kmsg::KernelLogSource;
pub use python::{PythonChoice, find_python};
pub use rundir::RunDir;
pub use supervisor::{RawOutcome, RawResult, StartGate, SupervisorConfig, Task};
pub use worker::WorkerCommand;

/// Files embedded at build time.
pub(crate) mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}
