//! Running a user's job (`gpuprobe run -- CMD ...`): once or `repeat` times, watched for
//! crashes and hangs, again on the CPU when the GPU stack is judged unsafe and the caller
//! allows a fallback.
//!
//! - The job runs in its own process group. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the
//!   supervisor are passed to that group ([`Signals`]); on a terminal the job's
//!   group gets the terminal.
//! - Its output is passed through unchanged, chunk by chunk, while it is scanned for the
//!   fatal messages GPU stacks print ([`gpuprobe_model::JOB_FATAL_MARKERS`]).
//! - A crash is a death by a crash signal, or a non-zero exit after a fatal message. A hang
//!   is `hang_timeout` seconds without output and without GPU activity (AMD
//!   `gpu_busy_percent`, else `nvidia-smi` utilization, when present); the group is then
//!   killed.
//!
//! The caller (the binary's `run` command) fills [`JobOptions`] from its arguments and the
//! profile it loaded, and prints the lines handed to its `say` callback; the job's own
//! output goes straight to stdout and stderr. The job starts through the `__exec-job`
//! re-exec ([`exec`]).

mod activity;
mod error;
mod exec;
mod lines;
mod startup_hook;
mod summary;
mod watch;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

pub use error::JobError;
pub use exec::exec_job;
pub use startup_hook::StartupHook;

use self::activity::ActivitySource;
use self::lines::rates;
use self::summary::write_summary;
use self::watch::run_once;
use crate::signals::Signals;

/// The variables that hide every GPU from a process (CUDA, HIP and ROCr levels).
pub(crate) const HIDE_GPUS: &[&str] = gpuprobe_model::env_vars::GPU_VISIBILITY_LISTS;

/// Changes to the environment the supervisor was started with (variables that are not
/// UTF-8 are passed through untouched).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvChanges {
    /// Variables set, with their values.
    pub set: BTreeMap<String, String>,
    /// Variables removed.
    pub remove: Vec<String>,
}

impl EnvChanges {
    /// The same with every GPU hidden.
    pub fn on_cpu(&self) -> EnvChanges {
        let mut cpu = self.clone();
        for name in HIDE_GPUS {
            cpu.set.insert(name.to_string(), String::new());
        }
        cpu
    }
}

/// What to run and how (the binary fills it from `gpuprobe run`'s arguments and profile).
#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    /// The command and its arguments (not empty).
    pub command: Vec<OsString>,
    /// The profile's settings.
    pub env: EnvChanges,
    /// How many times to run it (at least 1).
    pub repeat: u32,
    /// Seconds without output and GPU activity after which the job counts as hung.
    pub hang_timeout: Option<f64>,
    /// `--fallback cpu`: run again (or from the start) with every GPU hidden when the GPU
    /// stack is judged unsafe.
    pub fallback_cpu: bool,
    /// `--force-gpu`: never fall back.
    pub force_gpu: bool,
    /// Failures the profile records as not cured (the GPU stack is then judged unsafe).
    pub uncured: Vec<String>,
    /// The `PATH` to look for `nvidia-smi` on.
    pub search_path: Option<String>,
    /// Where to write the JSON summary, when asked.
    pub summary: Option<PathBuf>,
    /// The profile's path, for the summary.
    pub profile: Option<PathBuf>,
}

/// How one run of the job ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum JobOutcome {
    /// Exit 0.
    Succeeded,
    /// A non-zero exit without a sign of a GPU fault.
    Failed,
    /// Killed by a crash signal, or a non-zero exit after a fatal GPU message.
    Crashed {
        /// Why it counts as a crash.
        reason: String,
    },
    /// No output and no GPU activity for the hang timeout; its group was killed.
    Hung {
        /// What was watched.
        watched: String,
    },
    /// Stopped by a signal the supervisor passed on (Ctrl-C, SIGTERM) or sent by someone
    /// else.
    Interrupted {
        /// The signal.
        signal: i32,
    },
}

impl JobOutcome {
    /// The verb of the outcome, for messages (`crashed`, `was interrupted`).
    pub fn word(&self) -> &'static str {
        match self {
            JobOutcome::Succeeded => "succeeded",
            JobOutcome::Failed => "failed",
            JobOutcome::Crashed { .. } => "crashed",
            JobOutcome::Hung { .. } => "hung",
            JobOutcome::Interrupted { .. } => "was interrupted",
        }
    }

    /// Whether this run makes the GPU stack look unsafe (for the CPU fallback).
    pub fn unsafe_stack(&self) -> bool {
        matches!(self, JobOutcome::Crashed { .. } | JobOutcome::Hung { .. })
    }
}

/// One run of the job.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobRun {
    /// `gpu` or `cpu` (fallback, GPUs hidden).
    pub device: &'static str,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: JobOutcome,
    /// The exit code reported for it (128 + signal for a signal).
    pub exit_code: i32,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// Every run of the job and the exit code they earn together.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// The runs on the GPU (or on the CPU from the start), in order.
    pub runs: Vec<JobRun>,
    /// The CPU fallback's run, when there was one.
    pub fallback: Option<JobRun>,
    /// The exit code to leave with: the fallback's, else the only run's, else the last
    /// non-zero one.
    pub exit_code: i32,
}

/// Runs the job as `options` say, reporting gpuprobe's own lines (without prefix) through
/// `say`. `signals` must have been installed while the process had a single thread. The
/// summary file, when asked for, is written at the end; a failure to write it is said, not
/// returned: the job has run, and its exit code is what the caller must see.
pub fn run_job(options: &JobOptions, signals: &Signals, say: &mut dyn FnMut(&str)) -> JobReport {
    if options.force_gpu && options.fallback_cpu {
        say("--force-gpu: the job stays on the GPU; --fallback cpu will not be used");
    }
    let may_fall_back = options.fallback_cpu && !options.force_gpu;
    let cpu_from_start = !options.uncured.is_empty() && may_fall_back;
    if let Some(line) = lines::uncured_warning(&options.uncured, may_fall_back, options.force_gpu) {
        say(&line);
    }
    let activity = if options.hang_timeout.is_some() {
        ActivitySource::detect(options.search_path.as_deref())
    } else {
        ActivitySource::None
    };
    let mut runs: Vec<JobRun> = Vec::new();
    for index in 0..options.repeat {
        if signals.stopped() {
            break;
        }
        let (run_env, device, source) = if cpu_from_start {
            (options.env.on_cpu(), "cpu", &ActivitySource::None)
        } else {
            (options.env.clone(), "gpu", &activity)
        };
        let job = run_once(
            &options.command,
            &run_env,
            options.hang_timeout,
            source,
            signals,
            device,
            say,
        );
        if let Some(line) = lines::run_line(&job, index + 1, options.repeat) {
            say(&line);
        }
        runs.push(job);
    }
    let gpu_unsafe = runs
        .iter()
        .any(|r| r.device == "gpu" && r.outcome.unsafe_stack());
    let mut fallback = None;
    if gpu_unsafe && may_fall_back && !signals.stopped() {
        say(&lines::fallback_warning(&runs));
        let job = run_once(
            &options.command,
            &options.env.on_cpu(),
            options.hang_timeout,
            &ActivitySource::None,
            signals,
            "cpu",
            say,
        );
        say(&lines::fallback_line(&job));
        fallback = Some(job);
    }
    if options.repeat > 1 {
        say(&rates(&runs));
    }
    let exit_code = match &fallback {
        Some(job) => job.exit_code,
        None if runs.len() == 1 => runs[0].exit_code,
        None => runs
            .iter()
            .rev()
            .find(|r| r.exit_code != 0)
            .map_or(0, |r| r.exit_code),
    };
    let report = JobReport {
        runs,
        fallback,
        exit_code,
    };
    if let Some(path) = &options.summary
        && let Err(err) = write_summary(path, options, &report)
    {
        // The path was checked before the job started, so this is a full disk or the like.
        say(&format!("error: {err:#}"));
    }
    report
}
