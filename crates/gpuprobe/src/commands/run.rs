//! `gpuprobe run [--profile P] -- CMD ...`: runs a job with a profile applied and watches
//! it.
//!
//! - The profile is validated (catalogue settings only) and refused when it was proven on
//!   another stack, unless `--force`.
//! - The job runs in its own process group. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to
//!   gpuprobe are passed to that group; on a terminal the job's group gets the terminal.
//! - Its output is passed through unchanged, chunk by chunk, while gpuprobe scans it for
//!   the fatal messages GPU stacks print.
//! - A crash is a death by a crash signal, or a non-zero exit after a fatal message. A hang
//!   is `--hang-timeout` seconds without output and without GPU activity (AMD
//!   `gpu_busy_percent`, else `nvidia-smi` utilization, when present); the group is then
//!   killed.
//! - `--repeat N` runs it N times and reports crash and hang rates; `--fallback cpu` runs
//!   it again with every GPU hidden when the GPU stack is judged unsafe.
//!
//! gpuprobe's own lines go to stderr, prefixed `gpuprobe:`. The exit code is the job's
//! (128 + signal when a signal killed it, as shells report).

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use gpuprobe_model::profile::Profile;
use gpuprobe_model::text::visible_line;
use nix::sys::signal::{SigSet, Signal, killpg};
use nix::unistd::Pid;

use crate::cli::{FallbackArg, RunArgs};
use crate::{paths, profiles, stack, user_error};

use super::process_env;

/// Messages GPU stacks print when a job dies of a GPU fault.
pub const FATAL_MARKERS: &[&str] = &[
    "Memory access fault by GPU",
    "HW Exception by GPU",
    "HSA_STATUS_ERROR",
    "hipErrorIllegalAddress",
    "hipErrorLaunchFailure",
    "an illegal memory access was encountered",
    "unspecified launch failure",
    "device-side assert triggered",
    "CUDA error",
    "HIP error",
    "NCCL error",
    "RCCL error",
    "CUBLAS_STATUS_EXECUTION_FAILED",
    "Segmentation fault",
    "Fatal Python error",
    "terminate called after throwing",
];

/// Signals that mean the process crashed (SIGKILL too, when gpuprobe did not send it: the
/// out-of-memory killer).
const CRASH_SIGNALS: &[i32] = &[4, 5, 6, 7, 8, 9, 11, 31];

/// Signals passed through to the job's process group.
const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The variables that hide every GPU from a process (CUDA, HIP and ROCr levels).
pub const HIDE_GPUS: &[&str] = gpuprobe_model::env_vars::GPU_VISIBILITY_LISTS;

/// `SIGSEGV (signal 11)`.
fn signal_words(sig: i32) -> String {
    match Signal::try_from(sig) {
        Ok(signal) => format!("{} (signal {sig})", signal.as_str()),
        Err(_) => format!("signal {sig}"),
    }
}

/// One line of gpuprobe's own on stderr. Its messages quote the job's output (a fatal
/// line), the command's name and paths and values from the profile: the whole line is made
/// visible, so none of that can drive the terminal. (The job's own output is passed through
/// as the job wrote it; this is only what gpuprobe says.)
fn say(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "gpuprobe: {}", visible_line(line));
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
    /// Stopped by a signal gpuprobe passed on (Ctrl-C, SIGTERM) or sent by someone else.
    Interrupted {
        /// The signal.
        signal: i32,
    },
}

impl JobOutcome {
    fn word(&self) -> &'static str {
        match self {
            JobOutcome::Succeeded => "succeeded",
            JobOutcome::Failed => "failed",
            JobOutcome::Crashed { .. } => "crashed",
            JobOutcome::Hung { .. } => "hung",
            JobOutcome::Interrupted { .. } => "was interrupted",
        }
    }

    /// Whether this run makes the GPU stack look unsafe (for `--fallback cpu`).
    fn unsafe_stack(&self) -> bool {
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
    /// The exit code gpuprobe reports for it (128 + signal for a signal).
    pub exit_code: i32,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// Where GPU activity can be read.
#[derive(Debug, Clone, PartialEq)]
enum ActivitySource {
    /// `/sys/class/drm/cardN/device/gpu_busy_percent` files (AMD).
    AmdSysfs(Vec<PathBuf>),
    /// `nvidia-smi` on PATH.
    NvidiaSmi(PathBuf),
    /// Nothing readable: output is the only sign of life.
    None,
}

impl ActivitySource {
    fn detect(env: &BTreeMap<String, String>) -> ActivitySource {
        let mut files = Vec::new();
        if let Ok(entries) = std::fs::read_dir("/sys/class/drm") {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                let is_card = name
                    .strip_prefix("card")
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
                let path = entry.path().join("device/gpu_busy_percent");
                if is_card && std::fs::read_to_string(&path).is_ok() {
                    files.push(path);
                }
            }
        }
        if !files.is_empty() {
            files.sort();
            return ActivitySource::AmdSysfs(files);
        }
        if let Some(path) = env.get("PATH") {
            for dir in std::env::split_paths(path) {
                let candidate = dir.join("nvidia-smi");
                if candidate.is_file() {
                    return ActivitySource::NvidiaSmi(candidate);
                }
            }
        }
        ActivitySource::None
    }

    fn describe(&self) -> String {
        match self {
            ActivitySource::AmdSysfs(files) => format!(
                "output, and GPU busy percent of {}",
                files
                    .iter()
                    .filter_map(|p| p.ancestors().nth(2))
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ActivitySource::NvidiaSmi(_) => {
                "output, and GPU utilization from nvidia-smi (per device, not per process)".into()
            }
            ActivitySource::None => "output only; no GPU activity source is readable here".into(),
        }
    }

    /// How often to read it.
    fn interval(&self, timeout: f64) -> Duration {
        match self {
            ActivitySource::AmdSysfs(_) => Duration::from_secs(1),
            ActivitySource::NvidiaSmi(_) => Duration::from_secs_f64((timeout / 10.0).max(2.0)),
            ActivitySource::None => Duration::MAX,
        }
    }

    /// Whether any GPU is busy now (`None`: could not tell).
    fn busy(&self) -> Option<bool> {
        match self {
            ActivitySource::AmdSysfs(files) => {
                let values: Vec<u32> = files
                    .iter()
                    .filter_map(|f| std::fs::read_to_string(f).ok())
                    .filter_map(|t| t.trim().parse().ok())
                    .collect();
                (!values.is_empty()).then(|| values.iter().any(|&v| v > 0))
            }
            ActivitySource::NvidiaSmi(program) => {
                let mut command = Command::new(program);
                command.args([
                    "--query-gpu=utilization.gpu",
                    "--format=csv,noheader,nounits",
                ]);
                let text = gpuprobe_detect::capture(command, Duration::from_secs(5))
                    .ok()?
                    .stdout;
                let values: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
                (!values.is_empty()).then(|| values.iter().any(|&v| v > 0))
            }
            ActivitySource::None => None,
        }
    }
}

/// State shared with the signal thread.
struct Signals {
    /// Process group of the running job (0: none).
    job_group: AtomicI32,
    /// The last signal passed on, 0 when none.
    forwarded: AtomicI32,
    /// Set once any forwarded signal arrived: stop repeating.
    stop: AtomicBool,
}

/// Blocks the forwarded signals in this (still single-threaded) process so every thread
/// inherits the mask, and starts a thread that waits for them and passes them to the job.
/// Child processes start with an empty mask (the standard library resets it).
fn install_signal_forwarding() -> Arc<Signals> {
    let state = Arc::new(Signals {
        job_group: AtomicI32::new(0),
        forwarded: AtomicI32::new(0),
        stop: AtomicBool::new(false),
    });
    let mut wanted = SigSet::empty();
    for signal in FORWARDED {
        wanted.add(*signal);
    }
    let mut blocked = wanted;
    // Blocked so that handing the terminal back from the background works.
    blocked.add(Signal::SIGTTOU);
    if blocked.thread_block().is_err() {
        return state;
    }
    let shared = Arc::clone(&state);
    thread::spawn(move || {
        while let Ok(signal) = wanted.wait() {
            shared.forwarded.store(signal as i32, Ordering::SeqCst);
            shared.stop.store(true, Ordering::SeqCst);
            let group = shared.job_group.load(Ordering::SeqCst);
            if group > 0 {
                let _ = killpg(Pid::from_raw(group), signal);
            }
        }
    });
    state
}

/// What the output readers saw.
#[derive(Default)]
struct Seen {
    fatal: Option<String>,
    tail: VecDeque<String>,
}

/// Copies `source` to `sink` chunk by chunk, noting activity and fatal messages.
fn pump(
    mut source: impl Read + Send + 'static,
    to_stderr: bool,
    started: Instant,
    last_output_ms: Arc<AtomicU64>,
    seen: Arc<Mutex<Seen>>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        let mut line = Vec::<u8>::new();
        loop {
            let n = match source.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let chunk = &buffer[..n];
            let written = if to_stderr {
                let mut err = std::io::stderr().lock();
                err.write_all(chunk).and_then(|()| err.flush())
            } else {
                let mut out = std::io::stdout().lock();
                out.write_all(chunk).and_then(|()| out.flush())
            };
            if written.is_err() {
                // Whoever reads gpuprobe's output is gone (`| head`): close the job's pipe
                // too, so it meets the same broken pipe it would without gpuprobe.
                break;
            }
            last_output_ms.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
            for &byte in chunk {
                if byte == b'\n' || line.len() >= 4096 {
                    note_line(&line, &seen);
                    line.clear();
                } else {
                    line.push(byte);
                }
            }
        }
        if !line.is_empty() {
            note_line(&line, &seen);
        }
    })
}

fn note_line(line: &[u8], seen: &Mutex<Seen>) {
    let text = String::from_utf8_lossy(line).trim_end().to_string();
    if text.is_empty() {
        return;
    }
    let Ok(mut seen) = seen.lock() else { return };
    if seen.fatal.is_none() && FATAL_MARKERS.iter().any(|m| text.contains(m)) {
        seen.fatal = Some(text.chars().take(300).collect());
    }
    seen.tail.push_back(text);
    if seen.tail.len() > 20 {
        seen.tail.pop_front();
    }
}

/// Hands the terminal's foreground to the job's group when gpuprobe holds it, so a job
/// that reads the terminal is not stopped; gives it back on drop.
struct Foreground {
    ours: Option<Pid>,
}

impl Foreground {
    fn give(group: Pid) -> Foreground {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Foreground { ours: None };
        }
        let ours = nix::unistd::getpgrp();
        match nix::unistd::tcgetpgrp(&stdin) {
            Ok(foreground) if foreground == ours => {
                if nix::unistd::tcsetpgrp(&stdin, group).is_ok() {
                    // The job may have tried to read before it owned the terminal.
                    let _ = killpg(group, Signal::SIGCONT);
                    return Foreground { ours: Some(ours) };
                }
                Foreground { ours: None }
            }
            _ => Foreground { ours: None },
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        if let Some(ours) = self.ours {
            let _ = nix::unistd::tcsetpgrp(std::io::stdin(), ours);
        }
    }
}

/// Changes to the environment gpuprobe was started with (variables that are not UTF-8 are
/// passed through untouched).
#[derive(Debug, Clone, Default)]
struct EnvChanges {
    set: BTreeMap<String, String>,
    remove: Vec<String>,
}

impl EnvChanges {
    fn from_profile(profile: Option<&Profile>) -> EnvChanges {
        let mut changes = EnvChanges::default();
        if let Some(profile) = profile {
            changes.remove = profile.unset.clone();
            changes.set = profile.env.clone();
        }
        changes
    }

    /// The same with every GPU hidden.
    fn on_cpu(&self) -> EnvChanges {
        let mut cpu = self.clone();
        for name in HIDE_GPUS {
            cpu.set.insert(name.to_string(), String::new());
        }
        cpu
    }
}

/// Runs the job once and watches it.
fn run_once(
    command: &[OsString],
    env: &EnvChanges,
    hang_timeout: Option<f64>,
    activity: &ActivitySource,
    signals: &Signals,
    device: &'static str,
) -> JobRun {
    let started = Instant::now();
    // Started through `gpuprobe __exec-job`, which clears the signal mask this process
    // runs with (so signals can be waited for) and then becomes the job: the job starts
    // with no signal blocked, and with the dispositions gpuprobe inherited (a job run
    // under nohup still ignores SIGHUP).
    let mut launcher = match std::env::current_exe() {
        Ok(program) => {
            let mut launcher = Command::new(program);
            launcher.arg(EXEC_JOB).arg("--").args(command);
            launcher
        }
        Err(_) => {
            let mut launcher = Command::new(&command[0]);
            launcher.args(&command[1..]);
            launcher
        }
    };
    for name in &env.remove {
        launcher.env_remove(name);
    }
    let mut child = match launcher
        .envs(&env.set)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(err) => {
            let code = if err.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            say(&format!(
                "cannot run {}: {err}",
                Path::new(&command[0]).display()
            ));
            return JobRun {
                device,
                outcome: JobOutcome::Failed,
                exit_code: code,
                seconds: 0.0,
            };
        }
    };
    let group = Pid::from_raw(child.id() as i32);
    signals.job_group.store(group.as_raw(), Ordering::SeqCst);
    let foreground = Foreground::give(group);
    let last_output_ms = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(pump(
            out,
            false,
            started,
            Arc::clone(&last_output_ms),
            Arc::clone(&seen),
        ));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(pump(
            err,
            true,
            started,
            Arc::clone(&last_output_ms),
            Arc::clone(&seen),
        ));
    }
    let (done_tx, done_rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let status = child.wait();
        let _ = done_tx.send(());
        status
    });

    let mut hung = false;
    let mut last_gpu_ms = 0u64;
    let mut last_poll = Instant::now();
    let tick = hang_timeout
        .map(|t| Duration::from_secs_f64((t / 4.0).clamp(0.05, 1.0)))
        .unwrap_or(Duration::from_secs(3600));
    loop {
        match done_rx.recv_timeout(tick) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let Some(timeout) = hang_timeout else {
            continue;
        };
        let now_ms = started.elapsed().as_millis() as u64;
        let active_ms = last_output_ms.load(Ordering::SeqCst).max(last_gpu_ms);
        let silent = Duration::from_millis(now_ms.saturating_sub(active_ms));
        if silent >= Duration::from_secs(1)
            && last_poll.elapsed() >= activity.interval(timeout)
            && *activity != ActivitySource::None
        {
            last_poll = Instant::now();
            if activity.busy() == Some(true) {
                last_gpu_ms = started.elapsed().as_millis() as u64;
                continue;
            }
        }
        if silent.as_secs_f64() >= timeout {
            hung = true;
            say(&format!(
                "the job hung: no sign of life for {timeout:.0} s (watched: {}); killing its process group",
                activity.describe()
            ));
            let _ = killpg(group, Signal::SIGTERM);
            if done_rx.recv_timeout(Duration::from_secs(3)).is_err() {
                let _ = killpg(group, Signal::SIGKILL);
            }
            break;
        }
    }
    let status = waiter.join().ok().and_then(|s| s.ok());
    if hung {
        // Whatever the job left behind in its group goes too.
        let _ = killpg(group, Signal::SIGKILL);
    }
    signals.job_group.store(0, Ordering::SeqCst);
    drop(foreground);
    // Let the readers drain what is left; a background process that keeps the pipes open
    // is not waited for.
    let drain_until = Instant::now() + Duration::from_secs(2);
    for reader in readers {
        while !reader.is_finished() && Instant::now() < drain_until {
            thread::sleep(Duration::from_millis(5));
        }
        if reader.is_finished() {
            let _ = reader.join();
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let (code, signal) = match status {
        Some(status) => (status.code(), status.signal()),
        None => (None, None),
    };
    let exit_code = code.unwrap_or_else(|| 128 + signal.unwrap_or(0));
    let seen = seen.lock().map(|s| s.fatal.clone()).unwrap_or(None);
    let forwarded = signals.forwarded.load(Ordering::SeqCst);
    let outcome = if hung {
        JobOutcome::Hung {
            watched: activity.describe(),
        }
    } else if let Some(sig) = signal {
        if forwarded != 0 && sig == forwarded {
            JobOutcome::Interrupted { signal: sig }
        } else if sig == Signal::SIGPIPE as i32 {
            // Its reader went away (`gpuprobe run -- job | head`): what the job would
            // meet without gpuprobe too.
            JobOutcome::Failed
        } else if CRASH_SIGNALS.contains(&sig) {
            let mut reason = format!("killed by {}", signal_words(sig));
            if sig == 9 {
                reason.push_str(", possibly by the out-of-memory killer");
            }
            if let Some(line) = &seen {
                reason.push_str(&format!(": {line}"));
            }
            JobOutcome::Crashed { reason }
        } else {
            JobOutcome::Interrupted { signal: sig }
        }
    } else if exit_code == 0 {
        if let Some(line) = &seen {
            say(&format!(
                "note: a GPU fault message appeared but the job exited 0: {line}"
            ));
        }
        JobOutcome::Succeeded
    } else if let Some(line) = seen {
        JobOutcome::Crashed {
            reason: format!("exit {exit_code} after: {line}"),
        }
    } else if forwarded != 0 {
        JobOutcome::Interrupted { signal: forwarded }
    } else {
        JobOutcome::Failed
    };
    JobRun {
        device,
        outcome,
        exit_code,
        seconds,
    }
}

/// The hidden subcommand that starts a job (see [`exec_job`]).
pub const EXEC_JOB: &str = "__exec-job";

/// Becomes the job: clears the signal mask inherited from `gpuprobe run`, then replaces
/// this process with `command`. Returns only when that fails (127: not found, 126: not
/// executable, as shells report).
pub fn exec_job(command: &[OsString]) -> u8 {
    let _ = SigSet::all().thread_unblock();
    let Some(program) = command.first() else {
        say("__exec-job: no command");
        return 2;
    };
    let err = Command::new(program).args(&command[1..]).exec();
    say(&format!(
        "cannot run {}: {err}",
        Path::new(program).display()
    ));
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Validates the profile and checks it against this machine's stack.
fn load_profile(args: &RunArgs, env: &BTreeMap<String, String>) -> Result<Option<Profile>> {
    let Some(path) = &args.profile else {
        return Ok(None);
    };
    let profile = profiles::load(path).map_err(|e| user_error(visible_line(&e.to_string())))?;
    let here = stack::live_key(args.python.as_deref(), env);
    let differences = profile.proven_on.differences(&here);
    if !differences.is_empty() {
        let list = differences.join("; ");
        if !args.force {
            return Err(user_error(format!(
                "profile {} was proven on a different stack ({}); its settings are not \
                 proven here: run `gpuprobe fix` on this machine, or pass --force to apply \
                 them anyway",
                visible_line(&path.display().to_string()),
                visible_line(&list)
            )));
        }
        say(&format!(
            "warning: --force: applying profile {} proven on a different stack ({list})",
            path.display()
        ));
    }
    if profile.simulated {
        say(&format!(
            "warning: profile {} was made under fault SIMULATION: its settings are not proven on real hardware",
            path.display()
        ));
    }
    Ok(Some(profile))
}

/// Runs `run`; returns the exit code to leave with.
pub fn run(args: RunArgs) -> Result<u8> {
    // First, while gpuprobe has a single thread: every later thread inherits the mask.
    let signals = install_signal_forwarding();
    if args.command.is_empty() {
        return Err(user_error(
            "no command given: gpuprobe run [OPTIONS] -- CMD ...",
        ));
    }
    // --repeat and --hang-timeout are range-checked by the command line parser.
    // Every output is checked before the job starts: a typo in --summary must not cost a
    // run of the job, nor replace the job's exit code afterwards.
    if let Some(path) = &args.summary {
        paths::check_writable_file(path)
            .map_err(|e| user_error(format!("--summary: {}", visible_line(&e))))?;
    }
    let env = process_env();
    let profile = load_profile(&args, &env)?;
    let changes = EnvChanges::from_profile(profile.as_ref());
    let fallback = args.fallback == Some(FallbackArg::Cpu);
    if args.force_gpu && fallback {
        say("--force-gpu: the job stays on the GPU; --fallback cpu will not be used");
    }
    let may_fall_back = fallback && !args.force_gpu;
    let uncured: Vec<String> = profile
        .as_ref()
        .map(|p| p.still_failing.clone())
        .unwrap_or_default();
    let mut cpu_from_start = false;
    if !uncured.is_empty() {
        let list = uncured.join(", ");
        if may_fall_back {
            say(&format!(
                "warning: the profile records failures it could not cure ({list}): the GPU stack \
                 is judged unsafe; --fallback cpu: running on the CPU with every GPU hidden. \
                 Expect it to be much slower (often 10-100x for training); --force-gpu keeps the GPU"
            ));
            cpu_from_start = true;
        } else if args.force_gpu {
            say(&format!(
                "warning: the profile records failures it could not cure ({list}); running on the GPU anyway (--force-gpu)"
            ));
        } else {
            say(&format!(
                "warning: the profile records failures it could not cure ({list}); results may be wrong \
                 (--fallback cpu runs the job on the CPU instead)"
            ));
        }
    }
    let activity = if args.hang_timeout.is_some() {
        ActivitySource::detect(&env)
    } else {
        ActivitySource::None
    };
    let mut runs: Vec<JobRun> = Vec::new();
    for index in 0..args.repeat {
        if signals.stop.load(Ordering::SeqCst) {
            break;
        }
        let (run_env, device, source) = if cpu_from_start {
            (changes.on_cpu(), "cpu", &ActivitySource::None)
        } else {
            (changes.clone(), "gpu", &activity)
        };
        let job = run_once(
            &args.command,
            &run_env,
            args.hang_timeout,
            source,
            &signals,
            device,
        );
        report_run(&job, index + 1, args.repeat);
        runs.push(job);
    }
    let gpu_unsafe = runs
        .iter()
        .any(|r| r.device == "gpu" && r.outcome.unsafe_stack());
    let mut fallback_run = None;
    if gpu_unsafe && may_fall_back && !signals.stop.load(Ordering::SeqCst) {
        say(&format!(
            "warning: the job {} on the GPU; --fallback cpu: running it again on the CPU with every \
             GPU hidden ({} set empty). Expect it to be much slower (often 10-100x for training)",
            runs.iter()
                .rev()
                .find(|r| r.outcome.unsafe_stack())
                .map_or("failed", |r| r.outcome.word()),
            HIDE_GPUS.join(", ")
        ));
        let job = run_once(
            &args.command,
            &changes.on_cpu(),
            args.hang_timeout,
            &ActivitySource::None,
            &signals,
            "cpu",
        );
        say(&format!(
            "CPU fallback {} (exit {}, {:.1} s)",
            job.outcome.word(),
            job.exit_code,
            job.seconds
        ));
        fallback_run = Some(job);
    }
    if args.repeat > 1 {
        say(&rates(&runs));
    }
    let exit_code = match &fallback_run {
        Some(job) => job.exit_code,
        None if runs.len() == 1 => runs[0].exit_code,
        None => runs
            .iter()
            .rev()
            .find(|r| r.exit_code != 0)
            .map_or(0, |r| r.exit_code),
    };
    if let Some(path) = &args.summary
        && let Err(err) = write_summary(path, &args, &runs, fallback_run.as_ref(), exit_code)
    {
        // The job has run: its exit code is what the caller must see, not gpuprobe's
        // (the path was checked before the job started, so this is a full disk or the like).
        say(&format!("error: {err:#}"));
    }
    Ok(u8::try_from(exit_code.clamp(0, 255)).unwrap_or(1))
}

fn report_run(job: &JobRun, number: u32, total: u32) {
    let detail = match &job.outcome {
        JobOutcome::Crashed { reason } => format!(": {reason}"),
        JobOutcome::Hung { watched } => format!(" (watched: {watched})"),
        JobOutcome::Interrupted { signal } => format!(" by {}", signal_words(*signal)),
        _ => String::new(),
    };
    let quiet = total == 1 && matches!(job.outcome, JobOutcome::Succeeded | JobOutcome::Failed);
    if quiet {
        return;
    }
    let prefix = if total > 1 {
        format!("run {number}/{total}: ")
    } else {
        String::new()
    };
    say(&format!(
        "{prefix}the job {}{detail} (exit {}, {:.1} s)",
        job.outcome.word(),
        job.exit_code,
        job.seconds
    ));
}

/// The crash and hang rates of repeated runs, with the exit codes.
fn rates(runs: &[JobRun]) -> String {
    let n = runs.len().max(1) as f64;
    let count =
        |pred: &dyn Fn(&JobOutcome) -> bool| runs.iter().filter(|r| pred(&r.outcome)).count();
    let succeeded = count(&|o| matches!(o, JobOutcome::Succeeded));
    let crashed = count(&|o| matches!(o, JobOutcome::Crashed { .. }));
    let hung = count(&|o| matches!(o, JobOutcome::Hung { .. }));
    let failed = count(&|o| matches!(o, JobOutcome::Failed));
    let interrupted = count(&|o| matches!(o, JobOutcome::Interrupted { .. }));
    let mut codes: BTreeMap<i32, usize> = BTreeMap::new();
    for run in runs {
        *codes.entry(run.exit_code).or_default() += 1;
    }
    let codes: Vec<String> = codes.iter().map(|(c, n)| format!("{c}×{n}")).collect();
    let mut line = format!(
        "{} runs: {succeeded} succeeded, crash rate {crashed}/{} ({:.0}%), hang rate {hung}/{} ({:.0}%), {failed} failed otherwise",
        runs.len(),
        runs.len(),
        100.0 * crashed as f64 / n,
        runs.len(),
        100.0 * hung as f64 / n,
    );
    if interrupted > 0 {
        line.push_str(&format!(", {interrupted} interrupted"));
    }
    line.push_str(&format!("; exit codes {}", codes.join(", ")));
    line
}

fn write_summary(
    path: &Path,
    args: &RunArgs,
    runs: &[JobRun],
    fallback: Option<&JobRun>,
    exit_code: i32,
) -> Result<()> {
    let n = runs.len().max(1) as f64;
    let crashed = runs
        .iter()
        .filter(|r| matches!(r.outcome, JobOutcome::Crashed { .. }))
        .count();
    let hung = runs
        .iter()
        .filter(|r| matches!(r.outcome, JobOutcome::Hung { .. }))
        .count();
    let value = serde_json::json!({
        "command": args.command.iter().map(|a| a.to_string_lossy().to_string()).collect::<Vec<_>>(),
        "profile": args.profile.as_ref().map(|p| p.display().to_string()),
        "runs": runs,
        "crash_rate": crashed as f64 / n,
        "hang_rate": hung as f64 / n,
        "fallback": fallback,
        "exit_code": exit_code,
    });
    // Missing parent directories are made, as for a profile (the path was checked before
    // the job started).
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            user_error(format!(
                "cannot create {}: {e}",
                visible_line(&parent.display().to_string())
            ))
        })?;
    }
    std::fs::write(path, serde_json::to_string_pretty(&value)? + "\n").map_err(|e| {
        user_error(format!(
            "cannot write {}: {e}",
            visible_line(&path.display().to_string())
        ))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(outcome: JobOutcome, exit_code: i32) -> JobRun {
        JobRun {
            device: "gpu",
            outcome,
            exit_code,
            seconds: 1.0,
        }
    }

    #[test]
    fn rates_count_each_outcome() {
        let runs = vec![
            job(JobOutcome::Succeeded, 0),
            job(JobOutcome::Crashed { reason: "x".into() }, 139),
            job(
                JobOutcome::Hung {
                    watched: "output".into(),
                },
                143,
            ),
            job(JobOutcome::Succeeded, 0),
        ];
        let line = rates(&runs);
        assert!(line.contains("4 runs: 2 succeeded"), "{line}");
        assert!(line.contains("crash rate 1/4 (25%)"), "{line}");
        assert!(line.contains("hang rate 1/4 (25%)"), "{line}");
        assert!(line.contains("0×2, 139×1, 143×1"), "{line}");
    }

    #[test]
    fn fatal_lines_are_remembered() {
        let seen = Mutex::new(Seen::default());
        note_line(b"step 1 ok", &seen);
        note_line(
            b"Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x7f. Reason: Page not present",
            &seen,
        );
        note_line(
            b"RuntimeError: CUDA error: an illegal memory access was encountered",
            &seen,
        );
        let seen = seen.into_inner().unwrap();
        assert!(seen.fatal.unwrap().starts_with("Memory access fault"));
        assert_eq!(seen.tail.len(), 3);
    }
}
