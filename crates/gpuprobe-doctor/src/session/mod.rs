//! A probe session: the steps `check` and `fix` share. Find the interpreter, extract the
//! probe package, fetch the probe catalog, plan the devices (GPU 0 plus the others its
//! worker reports, or the listed ones; the CPU under simulation without a GPU), run the
//! plan through the engine, and build the report with fingerprint, knowledge-base
//! matches, lint and diagnosis.
//!
//! By phase: `options` (what was asked, the devices), `prepare` (a new run, one reopened
//! for `fix`, one resumed), [`execute`] (the probes), `assemble` (the report); `spread`
//! plans every identical GPU up front and runs each stack probe on one of them.
//!
//! A resumed run continues only under what it ran under (interpreter, torch, gpuprobe):
//! anything else is refused unless `--replan` asks to re-plan, which the report then says.
//! A signal stops the workers and leaves the run resumable: the session then returns
//! [`SessionError::Interrupted`] (`interrupt`) and never prints or leaves the process.
//!
//! What belongs to the process that runs a session (where its caches are, the native
//! probes it carries, how progress is drawn) comes in from the caller ([`SessionHost`],
//! [`SessionProgress`]).

mod assemble;
mod execute;
mod interrupt;
mod options;
mod prepare;
mod spread;

use std::collections::BTreeMap;
use std::path::PathBuf;

use gpuprobe_kb::KbMatch;
use gpuprobe_model::Report;
use gpuprobe_model::{ClassifiedError, ExitStatus};
use gpuprobe_model::{ProbeSpec, Tier};
use gpuprobe_runner::{Cancel, PythonChoice, RunDir, RunnerError};

pub(crate) use assemble::{absent_gpus_note, exit_status_for, untested_gpus_note};
pub(crate) use execute::Collector;
pub use execute::{execute, spawn_collector};
pub use interrupt::{Interrupted, Stopped};
pub(crate) use options::{DeviceRequest, applies_to, supervisor_config};
pub use options::{SessionOptions, validate_python};
pub use prepare::prepare_check;
pub(crate) use prepare::{prepare_existing, prepare_new};

use crate::exec::{self, EngineConfig};
use gpuprobe_model::RunPlan;

/// What a session takes from the process that runs it.
#[derive(Debug, Clone, Default)]
pub struct SessionHost {
    /// The process environment (interpreter search, visibility lists, fingerprint).
    pub env: BTreeMap<String, String>,
    /// Where workers cache Python bytecode when the interpreter cannot cache torch's in
    /// place; none without a cache directory.
    pub bytecode_cache: Option<PathBuf>,
    /// The native probes this gpuprobe carries (planned unless `--no-native`).
    pub native_catalog: Vec<ProbeSpec>,
    /// The flag the process's signal handling cancels (`gpuprobe_runner::signals`): every
    /// supervisor of the session watches it, and a session it stopped returns
    /// [`SessionError::Interrupted`]. By default one that never is.
    pub cancel: Cancel,
}

/// Told how the probes of a session advance (the binary draws a progress bar).
pub trait SessionProgress {
    /// The probes are about to start; `label` names the run (`quick tier`).
    fn started(&mut self, label: &str);
    /// A probe was planned, started or finished, or a worker said something.
    fn update(&mut self, event: &exec::Progress<'_>);
    /// The probes are over.
    fn finished(&mut self);
}

/// Progress nobody watches.
#[derive(Debug, Default)]
pub struct NoProgress;

impl SessionProgress for NoProgress {
    fn started(&mut self, _label: &str) {}
    fn update(&mut self, _event: &exec::Progress<'_>) {}
    fn finished(&mut self) {}
}

/// Why a session cannot be prepared or run. The user's to fix (exit 2) unless said
/// otherwise.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A `--device` entry that is no device.
    #[error("--device: {part:?} is not `all`, `cpu` or a GPU index")]
    BadDevice {
        /// The entry as given.
        part: String,
    },
    /// `--device` lists nothing.
    #[error("--device: no device given")]
    NoDevice,
    /// `--timeout-scale` out of range.
    #[error("--timeout-scale must be a positive number")]
    TimeoutScale,
    /// `--python` names no interpreter.
    #[error(transparent)]
    BadInterpreter(#[from] gpuprobe_runner::BadInterpreter),
    /// `--simulate` names no preset or readable file.
    #[error(transparent)]
    Simulation(RunnerError),
    /// The run directory cannot be created, read or written.
    #[error(transparent)]
    RunDir(RunnerError),
    /// The probe package cannot be written into the run directory (exit 3).
    #[error("cannot extract the probe package into the run directory")]
    ExtractPackage(#[source] RunnerError),
    /// `--only` selects nothing in the tier.
    #[error(
        "no probe of the {} tier matches --only {}{}",
        tier.name(),
        only.join(" --only "),
        unmatched.iter().map(|line| format!("\n  {line}")).collect::<String>()
    )]
    NothingSelected {
        /// The tier.
        tier: Tier,
        /// The patterns.
        only: Vec<String>,
        /// What each unmatched pattern matches elsewhere, one line each.
        unmatched: Vec<String>,
    },
    /// A resume would run under another stack than the run's.
    #[error(
        "cannot resume {} as it was planned: {}.\n\
         Finishing it so would report results of two different stacks as one run. Resume \
         without --python to use the run's interpreter, start a new run, or add --replan \
         to continue anyway (the report then says what changed).",
        dir.display(),
        differences.join("; ")
    )]
    ResumeDiffers {
        /// The run directory.
        dir: PathBuf,
        /// What differs.
        differences: Vec<String>,
    },
    /// A signal stopped the session; what it finished is recorded. The caller decides what
    /// is printed and leaves with 128 + the signal (never an [`ExitStatus`]).
    #[error("{0}")]
    Interrupted(#[source] interrupt::Interrupted),
}

impl ClassifiedError for SessionError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            SessionError::ExtractPackage(_) => ExitStatus::InternalFailure,
            // Not an exit status at all: the binary leaves with 128 + the signal first.
            SessionError::Interrupted(_) => ExitStatus::InternalFailure,
            _ => ExitStatus::UsageError,
        }
    }
}

/// Everything a session needs once the plan is known.
pub struct Prepared {
    /// The run directory.
    pub run_dir: RunDir,
    /// The plan (also in `plan.json`).
    pub plan: RunPlan,
    /// How workers start.
    pub config: EngineConfig,
    /// Every probe the workers know (Python, then native).
    pub catalog: Vec<ProbeSpec>,
    /// The devices asked for.
    pub device_request: DeviceRequest,
    /// Remarks for the report.
    pub notes: Vec<String>,
    /// The interpreter.
    pub python: Option<PythonChoice>,
}

/// A finished session.
pub struct Completed {
    /// The report (also in `report.json`).
    pub report: Report,
    /// The run directory.
    pub run_dir: RunDir,
    /// The plan, with any devices added while it ran.
    pub plan: RunPlan,
    /// How workers were started.
    pub config: EngineConfig,
    /// Every probe the workers know.
    pub catalog: Vec<ProbeSpec>,
    /// The interpreter.
    pub python: Option<PythonChoice>,
    /// Knowledge-base matches behind the report's KB findings.
    pub matches: Vec<KbMatch>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_errors_say_what_the_binary_said_and_classify_themselves() {
        let nothing = SessionError::NothingSelected {
            tier: Tier::Quick,
            only: vec!["copy".into(), "sweep.x".into()],
            unmatched: vec!["--only sweep.x matches no probe in any tier".into()],
        };
        assert_eq!(
            nothing.to_string(),
            "no probe of the quick tier matches --only copy --only sweep.x\n  --only sweep.x matches no probe in any tier"
        );
        assert_eq!(nothing.exit_status(), ExitStatus::UsageError);
        let differs = SessionError::ResumeDiffers {
            dir: PathBuf::from("/runs/check-1"),
            differences: vec!["a".into(), "b".into()],
        };
        assert!(
            differs
                .to_string()
                .starts_with("cannot resume /runs/check-1 as it was planned: a; b.\nFinishing it so would report results of two different stacks as one run. Resume without --python"),
            "{differs}"
        );
        assert_eq!(
            SessionError::BadDevice { part: "gpu".into() }.to_string(),
            "--device: \"gpu\" is not `all`, `cpu` or a GPU index"
        );
        let extract = SessionError::ExtractPackage(RunnerError::io(
            "cannot write",
            "/run/python",
            std::io::Error::other("disk full"),
        ));
        assert_eq!(extract.exit_status(), ExitStatus::InternalFailure);
        // Its cause is a source, not repeated in its own message.
        assert_eq!(
            extract.to_string(),
            "cannot extract the probe package into the run directory"
        );
        assert!(std::error::Error::source(&extract).is_some());
    }
}
