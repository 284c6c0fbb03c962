//! The run directory: a run's plan, its results as they arrive, worker logs and the final
//! report.
//!
//! `results.jsonl` gets one line per probe result, written and synced the moment the result
//! is known. A run killed at any point keeps every finished result, and `--resume` finishes
//! it from there. A torn last line (the kill landed mid-write) is ignored on reading and
//! cut off before a resume appends ([`RunDir::repair_results`]).
//!
//! `stack.json` records what the plan cannot know in advance: the torch version the run's
//! first Python worker reported, and what each `--replan` changed. `--resume` compares it
//! with what it would continue under, so one report never silently mixes two stacks.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use gpuprobe_model::FixAccount;
use gpuprobe_model::ProbeResult;
use gpuprobe_model::Report;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::RunnerError;

// The layout: every name a run directory holds is defined here and nowhere else (a test
// of the workspace's sources keeps it so).

/// The plan: what the run was asked and every planned (probe, device).
pub const PLAN_FILE: &str = "plan.json";
/// Results, one JSON object per line.
pub(crate) const RESULTS_FILE: &str = "results.jsonl";
/// The final report; a `check` that has it is finished.
pub const REPORT_FILE: &str = "report.json";
/// What the run's probes ran under, as its workers reported it ([`RunStack`]).
pub(crate) const STACK_FILE: &str = "stack.json";
/// The directory of worker logs, made first in every run directory.
pub const WORKERS_DIR: &str = "workers";
/// The directory inside a `fix` run that holds its starting check, a run directory of its
/// own.
pub const FIX_CHECK_DIR: &str = "check";
/// A `fix`'s account of its search; a `fix` that has it is finished.
pub const FIX_ACCOUNT_FILE: &str = "fix.json";
/// The options a `fix` was started with, for `--resume`.
pub const FIX_OPTIONS_FILE: &str = "fix-options.json";
/// A `fix`'s trial journal, one trial per line.
pub const FIX_JOURNAL_FILE: &str = "trials.jsonl";
/// The directory of a `fix`'s trial runs.
pub const FIX_TRIALS_DIR: &str = "trials";
/// Where a `fix` writes its profile unless told otherwise (`run --profile` may read it from
/// there).
pub const PROFILE_FILE: &str = "profile.toml";
/// Locked (`flock`, exclusive) by the process writing the run for as long as it does: the
/// kernel drops the lock when that process ends however it ends (SIGKILL, a crash), so a run
/// whose lock is free and which has no finished marker was interrupted ([`RunFiles::writer`]).
pub const WRITER_LOCK_FILE: &str = "writer.lock";

/// A run file that cannot be used: which file, and why. Every typed reader of a run
/// directory ([`RunFiles`], [`read_report_file`]) answers with it; a command words it in its
/// own terms where its documented message needs them.
#[derive(Debug, thiserror::Error)]
pub enum RunFileError {
    /// It cannot be read (it may not exist: [`RunFileError::is_missing`]).
    #[error("cannot read {}: {source}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not what gpuprobe writes there.
    #[error("{} is not {what}: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What it should have been ("a gpuprobe report").
        what: &'static str,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
}

impl RunFileError {
    /// The file.
    pub fn path(&self) -> &Path {
        match self {
            RunFileError::Unreadable { path, .. } | RunFileError::Invalid { path, .. } => path,
        }
    }

    /// Whether the file is simply not there.
    pub fn is_missing(&self) -> bool {
        matches!(self, RunFileError::Unreadable { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound)
    }
}

impl gpuprobe_model::ClassifiedError for RunFileError {
    /// The file is the user's to fix or to point elsewhere.
    fn exit_status(&self) -> gpuprobe_model::ExitStatus {
        gpuprobe_model::ExitStatus::UsageError
    }
}

/// What a report is called when one is not.
const A_REPORT: &str = "a gpuprobe report";

/// The one reader of a run file: its bytes, and `T` parsed from them.
fn read_parsed<T: DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<(T, Vec<u8>), RunFileError> {
    let bytes = fs::read(path).map_err(|source| RunFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let value = serde_json::from_slice(&bytes).map_err(|source| RunFileError::Invalid {
        path: path.to_path_buf(),
        what,
        source,
    })?;
    Ok((value, bytes))
}

/// Reads a report file anywhere (`report.json`, or a saved `check --json`).
pub fn read_report_file(path: &Path) -> Result<Report, RunFileError> {
    read_parsed(path, A_REPORT).map(|(report, _)| report)
}

/// A run directory's files, read and never written (a reader neither makes the directory
/// nor its `workers/`, as [`RunDir::open`] does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFiles {
    path: PathBuf,
}

impl RunFiles {
    /// The run directory at `path` (whatever it holds).
    pub fn at(path: &Path) -> RunFiles {
        RunFiles {
            path: path.to_path_buf(),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file or directory `name` of the layout in it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// A `fix` run's starting check, a run directory of its own.
    pub fn check_subrun(&self) -> RunFiles {
        RunFiles::at(&self.path.join(FIX_CHECK_DIR))
    }

    /// Whether the run holds its report (a finished `check`).
    pub fn has_report(&self) -> bool {
        self.path.join(REPORT_FILE).is_file()
    }

    /// Whether the run holds its plan.
    pub fn has_plan(&self) -> bool {
        self.path.join(PLAN_FILE).is_file()
    }

    /// Whether the run holds a `fix` account (a finished `fix`).
    pub fn has_fix_account(&self) -> bool {
        self.path.join(FIX_ACCOUNT_FILE).exists()
    }

    /// `report.json`.
    pub fn read_report(&self) -> Result<Report, RunFileError> {
        read_report_file(&self.path.join(REPORT_FILE))
    }

    /// `report.json` as a partial view `T` (an older report still yields what it has).
    pub fn read_report_as<T: DeserializeOwned>(&self) -> Result<T, RunFileError> {
        read_parsed(&self.path.join(REPORT_FILE), A_REPORT).map(|(report, _)| report)
    }

    /// `plan.json` as `T` ([`gpuprobe_model::RunPlan`], or a partial view that reads what it
    /// needs of it).
    pub fn read_plan<T: DeserializeOwned>(&self) -> Result<T, RunFileError> {
        self.read_plan_and_bytes().map(|(plan, _)| plan)
    }

    /// `plan.json` as `T`, and its bytes as they are on disk (a repro hands them on).
    pub fn read_plan_and_bytes<T: DeserializeOwned>(&self) -> Result<(T, Vec<u8>), RunFileError> {
        read_parsed(&self.path.join(PLAN_FILE), "a gpuprobe plan")
    }

    /// `fix.json`, a `fix`'s account (or a partial view of it).
    pub fn read_fix_account<T: DeserializeOwned>(&self) -> Result<T, RunFileError> {
        read_parsed(&self.path.join(FIX_ACCOUNT_FILE), "a gpuprobe fix account")
            .map(|(account, _)| account)
    }

    /// Whether the run holds a `fix` profile (anything by that name, a link included: a
    /// run holding one is never pruned).
    pub fn holds_profile(&self) -> bool {
        fs::symlink_metadata(self.path.join(PROFILE_FILE)).is_ok()
    }

    /// The `fix` profile's text.
    pub fn read_profile(&self) -> Result<String, RunFileError> {
        let path = self.path.join(PROFILE_FILE);
        fs::read_to_string(&path).map_err(|source| RunFileError::Unreadable { path, source })
    }

    /// Whether the process writing the run is still there ([`WRITER_LOCK_FILE`]). Asking
    /// takes the lock, shared, for an instant when it is free.
    pub fn writer(&self) -> Writer {
        use nix::fcntl::{Flock, FlockArg};
        let Ok(file) = File::open(self.path.join(WRITER_LOCK_FILE)) else {
            return Writer::Unknown;
        };
        match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(_free) => Writer::Gone,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Writer::Alive,
            Err(_) => Writer::Unknown,
        }
    }

    /// Every result recorded so far, a torn or foreign line skipped (none when there is
    /// no results file).
    pub fn recorded_results(&self) -> Option<Vec<ProbeResult>> {
        let text = fs::read_to_string(self.path.join(RESULTS_FILE)).ok()?;
        Some(
            text.lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect(),
        )
    }
}

/// Which run a directory holds, told by its layout: where a reader of the whole run (the
/// support bundle) finds each of its files ([`Run::contents`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// A `check`: its plan, results, report and worker logs at the top. A `memtest` keeps
    /// the same layout and never writes a report.
    Check(RunFiles),
    /// A `fix` that ran its starting check itself, in [`FIX_CHECK_DIR`]; its account,
    /// profile and trials' worker logs at the top. (A `fix --from` keeps no check of its
    /// own: its directory holds no run this recognises.)
    Fix {
        /// The fix's directory.
        fix: RunFiles,
        /// Its starting check.
        check: RunFiles,
    },
}

/// Why [`Run::open`] finds no run in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotARun {
    /// Nothing, or no directory, is there.
    #[error("no such directory")]
    NoDirectory,
    /// Neither a check's files nor a fix's starting check.
    #[error("no {PLAN_FILE} or {REPORT_FILE}")]
    NoPlanOrReport,
}

/// Where a run keeps each file a reader of the whole run takes, relative to its directory
/// (a fix's check's under [`FIX_CHECK_DIR`]). Whether each is there is the reader's to
/// find out: a run that did not finish has no report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContents {
    /// The check's report.
    pub report: PathBuf,
    /// The check's plan.
    pub plan: PathBuf,
    /// The check's results, one per line.
    pub results: PathBuf,
    /// A fix's profile (none for a check).
    pub profile: Option<PathBuf>,
    /// A fix's account (none for a check).
    pub fix_account: Option<PathBuf>,
    /// The worker-log directories: the check's, then a fix's own (its trials').
    pub workers: Vec<PathBuf>,
}

impl Run {
    /// The run in the directory at `path`: a `check` (or `memtest`) when its plan or report
    /// is at the top, a `fix` when its starting check (a directory, not a link) holds a plan.
    pub fn open(path: &Path) -> Result<Run, NotARun> {
        if !path.is_dir() {
            return Err(NotARun::NoDirectory);
        }
        let run = RunFiles::at(path);
        if run.has_plan() || run.has_report() {
            return Ok(Run::Check(run));
        }
        let check = run.check_subrun();
        let is_dir = fs::symlink_metadata(check.path()).is_ok_and(|m| m.is_dir());
        if is_dir && fs::symlink_metadata(check.path().join(PLAN_FILE)).is_ok() {
            return Ok(Run::Fix { fix: run, check });
        }
        Err(NotARun::NoPlanOrReport)
    }

    /// The run's directory.
    pub fn path(&self) -> &Path {
        match self {
            Run::Check(run) | Run::Fix { fix: run, .. } => run.path(),
        }
    }

    /// Its check: the run itself, or a fix's starting check.
    pub fn check(&self) -> &RunFiles {
        match self {
            Run::Check(check) | Run::Fix { check, .. } => check,
        }
    }

    /// Where it keeps each file, relative to [`Run::path`].
    pub fn contents(&self) -> RunContents {
        let (check, fix) = match self {
            Run::Check(_) => (PathBuf::new(), false),
            Run::Fix { .. } => (PathBuf::from(FIX_CHECK_DIR), true),
        };
        RunContents {
            report: check.join(REPORT_FILE),
            plan: check.join(PLAN_FILE),
            results: check.join(RESULTS_FILE),
            profile: fix.then(|| PathBuf::from(PROFILE_FILE)),
            fix_account: fix.then(|| PathBuf::from(FIX_ACCOUNT_FILE)),
            workers: std::iter::once(check.join(WORKERS_DIR))
                .chain(fix.then(|| PathBuf::from(WORKERS_DIR)))
                .collect(),
        }
    }
}

/// A finished run as `report` renders it: its report and, for a `fix` run, the account of
/// its search.
#[derive(Debug, Clone)]
pub struct FinishedRun {
    /// `report.json` (a `fix` run without one: the report of the run it started from).
    pub report: Report,
    /// `fix.json`, when the run holds one.
    pub fix: Option<FixAccount>,
}

/// Reads a finished run directory: `report.json` (required: a run that never finished has
/// none) and `fix.json` when present. Reads only; a missing or broken file is a
/// [`RunnerError::BadRunDir`], a usage error.
pub fn read_finished(dir: &Path) -> Result<FinishedRun, RunnerError> {
    fn optional<T>(read: Result<T, RunFileError>, dir: &Path) -> Result<Option<T>, RunnerError> {
        match read {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.is_missing() => Ok(None),
            Err(RunFileError::Unreadable { path, source }) => {
                Err(RunnerError::io("cannot read", path, source))
            }
            Err(RunFileError::Invalid { path, source, .. }) => Err(RunnerError::BadRunDir {
                path: dir.to_path_buf(),
                reason: format!(
                    "{} is not a gpuprobe report: {source}",
                    path.file_name().unwrap_or_default().to_string_lossy()
                ),
            }),
        }
    }
    if !dir.is_dir() {
        return Err(RunnerError::BadRunDir {
            path: dir.to_path_buf(),
            reason: "no such directory".into(),
        });
    }
    let run = RunFiles::at(dir);
    let fix = optional(run.read_fix_account::<FixAccount>(), dir)?;
    // A fix run reports on the check it started from, which may live in its own directory.
    let mut report = optional(run.read_report(), dir)?;
    if report.is_none()
        && let Some(source) = fix.as_ref().and_then(|f| f.source_run.as_deref())
    {
        let source = Path::new(source);
        report = optional(RunFiles::at(source).read_report(), source)?;
    }
    let report = report.ok_or_else(|| RunnerError::BadRunDir {
        path: dir.to_path_buf(),
        reason: format!(
            "no {REPORT_FILE}: not a finished gpuprobe run (an interrupted check finishes with `gpuprobe check --resume`)"
        ),
    })?;
    Ok(FinishedRun { report, fix })
}

/// What a run's probes ran under, beyond its plan: kept so that a resume can tell whether it
/// would continue under something else.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStack {
    /// The torch version the run's first Python worker reported in its hello (none until
    /// one has, or when none could import torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// One line per `--replan`, oldest first: what changed and how many results came
    /// before. Every later report of the run repeats them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replans: Vec<String>,
}

/// A run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    path: PathBuf,
    /// The run's writer lock, held while any copy of this lives ([`WRITER_LOCK_FILE`]).
    _writer: Option<std::sync::Arc<nix::fcntl::Flock<File>>>,
}

/// Whether the process that writes a run is still there, as its writer lock tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// No lock file: a run made before the lock existed, or one whose process has not
    /// started writing yet. Other signs must tell.
    Unknown,
    /// A process holds the lock: the run is being written.
    Alive,
    /// The lock is free: whoever wrote the run is gone.
    Gone,
}

/// Takes the writer lock of the run at `path`, made when missing. Another process holding it
/// briefly (a reader asking [`RunFiles::writer`]) is waited for a moment; one that keeps it
/// (two writers of one run) or a lock that cannot be made leaves the run unlocked, which only
/// costs readers their certainty, never the run.
fn hold_writer(path: &Path) -> Option<std::sync::Arc<nix::fcntl::Flock<File>>> {
    use nix::fcntl::{Flock, FlockArg};
    let lock = path.join(WRITER_LOCK_FILE);
    for _ in 0..40 {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock)
            .ok()?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => return Some(std::sync::Arc::new(held)),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            Err(_) => return None,
        }
    }
    None
}

impl RunDir {
    /// Creates a new run directory (and its parents). Fails clearly when it exists already
    /// or cannot be written.
    pub fn create(path: &Path) -> Result<RunDir, RunnerError> {
        if path.join(PLAN_FILE).exists() {
            return Err(RunnerError::BadRunDir {
                path: path.to_path_buf(),
                reason:
                    "it already holds a run; use --resume to finish it or choose another directory"
                        .into(),
            });
        }
        fs::create_dir_all(path.join(WORKERS_DIR))
            .map_err(|e| RunnerError::io("cannot create run directory", path, e))?;
        // Prove it is writable now rather than after the first probe.
        let probe = path.join(".write-test");
        fs::write(&probe, b"")
            .map_err(|e| RunnerError::io("cannot write in run directory", path, e))?;
        let _ = fs::remove_file(probe);
        Ok(RunDir {
            path: path.to_path_buf(),
            _writer: hold_writer(path),
        })
    }

    /// Opens an existing run directory (for `--resume`).
    pub fn open(path: &Path) -> Result<RunDir, RunnerError> {
        if !path.join(PLAN_FILE).is_file() {
            return Err(RunnerError::BadRunDir {
                path: path.to_path_buf(),
                reason: format!("no {PLAN_FILE}: not a gpuprobe run directory"),
            });
        }
        fs::create_dir_all(path.join(WORKERS_DIR))
            .map_err(|e| RunnerError::io("cannot write in", path, e))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            _writer: hold_writer(path),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where worker logs go.
    pub fn workers_dir(&self) -> PathBuf {
        self.path.join(WORKERS_DIR)
    }

    /// Writes `name` as pretty JSON, atomically (temporary file, then rename).
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<PathBuf, RunnerError> {
        let path = self.path.join(name);
        let tmp = self.path.join(format!(".{name}.tmp"));
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| RunnerError::Protocol(format!("cannot serialize {name}: {e}")))?;
        fs::write(&tmp, text + "\n").map_err(|e| RunnerError::io("cannot write", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| RunnerError::io("cannot write", &path, e))?;
        Ok(path)
    }

    /// Reads `name` as JSON.
    pub fn read_json<T: DeserializeOwned>(&self, name: &str) -> Result<T, RunnerError> {
        let path = self.path.join(name);
        let text =
            fs::read_to_string(&path).map_err(|e| RunnerError::io("cannot read", &path, e))?;
        serde_json::from_str(&text).map_err(|e| RunnerError::BadRunDir {
            path: path.clone(),
            reason: format!("{name} is not valid: {e}"),
        })
    }

    /// The run's [`RunStack`]; empty for a run that recorded none (made before it existed,
    /// or stopped before any worker said hello).
    pub fn read_stack(&self) -> Result<RunStack, RunnerError> {
        if !self.path.join(STACK_FILE).exists() {
            return Ok(RunStack::default());
        }
        self.read_json(STACK_FILE)
    }

    /// Records the run's [`RunStack`].
    pub fn write_stack(&self, stack: &RunStack) -> Result<(), RunnerError> {
        self.write_json(STACK_FILE, stack).map(|_| ())
    }

    /// Appends one result and syncs it to disk before returning.
    pub fn append_result(&self, result: &ProbeResult) -> Result<(), RunnerError> {
        let path = self.path.join(RESULTS_FILE);
        let mut line = serde_json::to_string(result)
            .map_err(|e| RunnerError::Protocol(format!("cannot serialize a result: {e}")))?;
        line.push('\n');
        let mut file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| RunnerError::io("cannot open", &path, e))?;
        file.write_all(line.as_bytes())
            .map_err(|e| RunnerError::io("cannot append to", &path, e))?;
        file.sync_data()
            .map_err(|e| RunnerError::io("cannot sync", &path, e))?;
        Ok(())
    }

    /// Cuts a torn last line of `results.jsonl` (a kill that landed mid-write) before more
    /// results are appended: appended to, the fragment would swallow the next result's
    /// line, both would be unreadable, and every later resume would run that probe again.
    /// Every complete line is kept, and a last result whole but for its newline gets one.
    /// Returns whether a fragment was cut.
    pub fn repair_results(&self) -> Result<bool, RunnerError> {
        let path = self.path.join(RESULTS_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(RunnerError::io("cannot read", &path, e)),
        };
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let tail = &bytes[complete..];
        if tail.iter().all(u8::is_ascii_whitespace) {
            return Ok(false);
        }
        let file = File::options()
            .append(true)
            .open(&path)
            .map_err(|e| RunnerError::io("cannot open", &path, e))?;
        let whole = serde_json::from_slice::<ProbeResult>(tail).is_ok();
        if whole {
            (&file)
                .write_all(b"\n")
                .map_err(|e| RunnerError::io("cannot append to", &path, e))?;
        } else {
            file.set_len(complete as u64)
                .map_err(|e| RunnerError::io("cannot truncate", &path, e))?;
        }
        file.sync_data()
            .map_err(|e| RunnerError::io("cannot sync", &path, e))?;
        Ok(!whole)
    }

    /// Every result recorded so far; a torn or foreign line is skipped and counted.
    pub fn load_results(&self) -> Result<(Vec<ProbeResult>, usize), RunnerError> {
        let path = self.path.join(RESULTS_FILE);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => return Err(RunnerError::io("cannot read", &path, e)),
        };
        let mut results = Vec::new();
        let mut skipped = 0;
        for line in BufReader::new(file).lines() {
            let Ok(line) = line else {
                skipped += 1;
                continue;
            };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(&line) {
                Ok(result) => results.push(result),
                Err(_) => skipped += 1,
            }
        }
        Ok((results, skipped))
    }
}

// The journal of profile uses. It lives right under a runs directory, beside the run
// directories and in none of them: a `run --profile` makes no run directory, and the page
// that lists which runs used a profile reads it from here.

/// The journal of `gpuprobe run --profile` uses: one JSON line per use ([`ProfileUse`]).
pub const PROFILE_USES_FILE: &str = "profile-uses.jsonl";
/// The journal while it is being cut to its last [`PROFILE_USES_KEPT`] lines.
const PROFILE_USES_TMP: &str = ".profile-uses.jsonl.tmp";
/// The uses the journal keeps at least: when it grows past 512 KiB it is cut to its newest
/// this many lines.
pub const PROFILE_USES_KEPT: usize = 1000;
/// The size past which the journal is cut (a line is about 250 bytes: some 2,000 uses).
const PROFILE_USES_MAX_BYTES: u64 = 512 * 1024;

/// One `run --profile`: when, which profile, what ran and how it ended. The command is its
/// program's name only (`python`, `torchrun`), never its arguments: a command line may carry
/// tokens, passwords and private paths, and the journal is shown by `gpuprobe ui` and kept
/// in a state directory that may be shared or copied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileUse {
    /// When the job ended, RFC 3339 UTC.
    pub at: String,
    /// The profile file, as an absolute path.
    pub profile: String,
    /// [`profile_digest`] of the profile's text: tells the profile that was used from a
    /// later one written to the same path.
    pub digest: String,
    /// The job's program: the last component of its first argument.
    pub program: String,
    /// The job's exit code (128 + the signal when a signal ended it, as shells say).
    pub exit_code: i32,
}

/// A short fingerprint of a profile's text (64-bit FNV-1a, hex): enough to tell two versions
/// of a profile apart, no protection against a forged one.
pub fn profile_digest(text: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in text {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}")
}

/// Appends `entry` to the journal of the runs directory `root` (made when missing). The line
/// is written by one `write` on a file opened for appending, under an exclusive lock of the
/// journal, so two jobs ending together never interleave; a journal grown past its bound is
/// cut to its newest [`PROFILE_USES_KEPT`] lines through a temporary file and a rename.
pub fn append_profile_use(root: &Path, entry: &ProfileUse) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    fs::create_dir_all(root)?;
    let path = root.join(PROFILE_USES_FILE);
    let mut line = serde_json::to_string(entry).map_err(std::io::Error::other)?;
    line.push('\n');
    // A cut replaces the file: a writer that waited for the lock on the old one opens the new.
    let file = loop {
        let file = File::options().create(true).append(true).open(&path)?;
        let file = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| std::io::Error::from(errno))?;
        let current = fs::metadata(&path).ok().map(|m| (m.dev(), m.ino()));
        let held = file.metadata()?;
        if current == Some((held.dev(), held.ino())) {
            break file;
        }
    };
    (&*file).write_all(line.as_bytes())?;
    if file.metadata()?.len() > PROFILE_USES_MAX_BYTES {
        let text = fs::read_to_string(&path)?;
        let lines: Vec<&str> = text.lines().collect();
        let kept = &lines[lines.len().saturating_sub(PROFILE_USES_KEPT)..];
        let tmp = root.join(PROFILE_USES_TMP);
        fs::write(&tmp, kept.join("\n") + "\n")?;
        fs::rename(&tmp, &path)?;
    }
    Ok(())
}

/// Every use the journal of `root` records, oldest first; a line that is not one (torn,
/// foreign) is skipped, and a missing journal records none.
pub fn read_profile_uses(root: &Path) -> Vec<ProfileUse> {
    fs::read_to_string(root.join(PROFILE_USES_FILE))
        .map(|text| {
            text.lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::Verdict;
    use gpuprobe_model::{DeviceRef, Layer, ProbeId};

    fn result(id: &str) -> ProbeResult {
        ProbeResult {
            elapsed_s: Some(0.1),
            ..ProbeResult::new(
                ProbeId::new(id),
                DeviceRef::Cpu,
                Layer::Framework,
                Verdict::Pass,
            )
        }
    }

    #[test]
    fn results_survive_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(&dir.path().join("run")).unwrap();
        run.write_json(PLAN_FILE, &serde_json::json!({"x": 1}))
            .unwrap();
        run.append_result(&result("a.b")).unwrap();
        run.append_result(&result("a.c")).unwrap();
        let mut f = File::options()
            .append(true)
            .open(run.path().join(RESULTS_FILE))
            .unwrap();
        f.write_all(br#"{"probe":"a.d","dev"#).unwrap();
        let (results, skipped) = RunDir::open(run.path()).unwrap().load_results().unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(skipped, 1);
    }

    #[test]
    fn a_torn_last_line_is_cut_before_appending_and_complete_lines_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(&dir.path().join("run")).unwrap();
        assert!(!run.repair_results().unwrap(), "no results file yet");
        run.append_result(&result("a.b")).unwrap();
        let path = run.path().join(RESULTS_FILE);
        let mut f = File::options().append(true).open(&path).unwrap();
        f.write_all(br#"{"probe":"a.d","dev"#).unwrap();
        assert!(run.repair_results().unwrap());
        run.append_result(&result("a.d")).unwrap();
        let (results, skipped) = run.load_results().unwrap();
        let ids: Vec<&str> = results.iter().map(|r| r.probe.as_str()).collect();
        assert_eq!((ids, skipped), (vec!["a.b", "a.d"], 0));
        // A last result whole but for its newline is kept, and ends its line.
        let whole = serde_json::to_string(&result("a.e")).unwrap();
        f.write_all(whole.as_bytes()).unwrap();
        assert!(!run.repair_results().unwrap());
        run.append_result(&result("a.f")).unwrap();
        let (results, skipped) = run.load_results().unwrap();
        assert_eq!((results.len(), skipped), (4, 0));
        // Nothing to repair: nothing changes.
        let before = fs::read(&path).unwrap();
        assert!(!run.repair_results().unwrap());
        assert_eq!(fs::read(&path).unwrap(), before);
    }

    #[test]
    fn refuses_to_reuse_a_run_and_to_open_a_non_run() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        run.write_json(PLAN_FILE, &1).unwrap();
        assert!(RunDir::create(dir.path()).is_err());
        let other = tempfile::tempdir().unwrap();
        assert!(
            RunDir::open(other.path())
                .unwrap_err()
                .to_string()
                .contains("not a gpuprobe run")
        );
    }

    #[test]
    fn the_stack_reads_back_and_is_empty_until_written() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        assert_eq!(run.read_stack().unwrap(), RunStack::default());
        let stack = RunStack {
            torch: Some("2.5.1+cpu".into()),
            replans: vec!["re-planned".into()],
        };
        run.write_stack(&stack).unwrap();
        assert_eq!(run.read_stack().unwrap(), stack);
    }

    /// A finished report of three results, one of them failing.
    fn finished_report() -> Report {
        let mut failed = result("a.c");
        failed.verdict = Verdict::Fail {
            class: gpuprobe_model::FailClass::AllZeros,
            detail: "all zeros".into(),
        };
        let results = vec![result("a.b"), failed, result("a.d")];
        let summary = gpuprobe_model::Summary::of(&results);
        Report {
            schema_version: 1,
            tool_version: "0.1.0".into(),
            build: None,
            command: "check".into(),
            run_dir: None,
            started_at: "2026-01-01T00:00:00Z".into(),
            wall_s: 1.0,
            tier: gpuprobe_model::Tier::Quick,
            simulation: None,
            fingerprint: Default::default(),
            results,
            findings: Vec::new(),
            summary,
            exit_status: gpuprobe_model::ExitStatus::ProblemsFound,
            exit_code: gpuprobe_model::ExitStatus::ProblemsFound.code(),
            notes: Vec::new(),
            timings: None,
        }
    }

    fn fix_account(source_run: &Path) -> FixAccount {
        serde_json::from_value(serde_json::json!({
            "tool_version": "0.1.0",
            "started_at": "2026-11-25T00:00:00Z",
            "wall_s": 3.0,
            "simulated": false,
            "source_run": source_run.display().to_string(),
            "stack": {"gpus": ["gfx1100"]},
            "chosen": [],
            "budget": {"max_runs": 10, "trials": 1, "workers": 1, "exhausted": false},
            "outcome": "none_cured",
            "exit_status": "problems_found",
            "exit_code": 1
        }))
        .expect("a fix account")
    }

    #[test]
    fn a_finished_run_is_read_with_its_fix_account_and_refused_when_unfinished_or_broken() {
        use gpuprobe_model::{ClassifiedError, ExitStatus};
        let dir = tempfile::tempdir().unwrap();
        let err = read_finished(dir.path()).unwrap_err();
        assert!(err.to_string().contains("no report.json"), "{err}");
        assert_eq!(err.exit_status(), ExitStatus::UsageError);
        fs::write(
            dir.path().join(REPORT_FILE),
            "{\"schema_version\": 1, \"results\": [",
        )
        .unwrap();
        let err = read_finished(dir.path()).unwrap_err();
        assert!(
            err.to_string()
                .contains("report.json is not a gpuprobe report"),
            "{err}"
        );
        assert_eq!(err.exit_status(), ExitStatus::UsageError);
        fs::write(
            dir.path().join(REPORT_FILE),
            serde_json::to_string(&finished_report()).unwrap(),
        )
        .unwrap();
        let run = read_finished(dir.path()).unwrap();
        assert_eq!(run.report, finished_report());
        assert!(run.fix.is_none());
        // A fix run without a report of its own reports on the check it started from.
        let fix_dir = tempfile::tempdir().unwrap();
        let account = fix_account(dir.path());
        fs::write(
            fix_dir.path().join(FIX_ACCOUNT_FILE),
            serde_json::to_string(&account).unwrap(),
        )
        .unwrap();
        let run = read_finished(fix_dir.path()).unwrap();
        assert_eq!(run.fix, Some(account));
        assert_eq!(run.report.results.len(), 3);
        let err = read_finished(&dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().contains("no such directory"), "{err}");
    }

    #[test]
    fn a_run_is_told_by_its_layout_and_its_files_found_where_it_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        assert_eq!(Run::open(&missing), Err(NotARun::NoDirectory));
        assert_eq!(Run::open(dir.path()), Err(NotARun::NoPlanOrReport));
        assert_eq!(
            NotARun::NoPlanOrReport.to_string(),
            "no plan.json or report.json"
        );

        // A check, finished or not (a memtest writes no report).
        let check = dir.path().join("check-run");
        let created = RunDir::create(&check).unwrap();
        created.write_json(PLAN_FILE, &1).unwrap();
        let run = Run::open(&check).unwrap();
        assert_eq!(run, Run::Check(RunFiles::at(&check)));
        assert_eq!((run.path(), run.check().path()), (&*check, &*check));
        assert_eq!(
            run.contents(),
            RunContents {
                report: "report.json".into(),
                plan: "plan.json".into(),
                results: "results.jsonl".into(),
                profile: None,
                fix_account: None,
                workers: vec!["workers".into()],
            }
        );
        let reported = dir.path().join("reported");
        fs::create_dir_all(&reported).unwrap();
        fs::write(reported.join(REPORT_FILE), "{}").unwrap();
        assert!(matches!(Run::open(&reported), Ok(Run::Check(_))));

        // A fix with its starting check inside.
        let fix = dir.path().join("fix-run");
        fs::create_dir_all(fix.join(FIX_CHECK_DIR)).unwrap();
        fs::write(fix.join(FIX_CHECK_DIR).join(PLAN_FILE), "{}").unwrap();
        let run = Run::open(&fix).unwrap();
        assert_eq!(run.path(), fix);
        assert_eq!(run.check().path(), fix.join("check"));
        assert_eq!(
            run.contents(),
            RunContents {
                report: "check/report.json".into(),
                plan: "check/plan.json".into(),
                results: "check/results.jsonl".into(),
                profile: Some("profile.toml".into()),
                fix_account: Some("fix.json".into()),
                workers: vec!["check/workers".into(), "workers".into()],
            }
        );
        // A starting check that is a link is not followed.
        let linked = dir.path().join("linked-fix");
        fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(fix.join(FIX_CHECK_DIR), linked.join(FIX_CHECK_DIR)).unwrap();
        assert_eq!(Run::open(&linked), Err(NotARun::NoPlanOrReport));
    }

    /// The source of `text` outside `#[cfg(test)]` items and comments.
    fn shipped_code(text: &str) -> String {
        let mut kept = String::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("#[cfg(test)]") {
                // Skip the item that follows: to the end of its braces, or its `;`.
                let mut depth = 0i32;
                for item in lines.by_ref() {
                    depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
                    if depth <= 0 && (item.contains('}') || item.trim_end().ends_with(';')) {
                        break;
                    }
                }
                continue;
            }
            if trimmed.starts_with("//") {
                continue;
            }
            kept.push_str(line);
            kept.push('\n');
        }
        kept
    }

    /// The shipped code ([`shipped_code`]) of every workspace source file outside this
    /// module and outside `tests.rs` files, by path.
    fn sources_outside_the_layout() -> Vec<(PathBuf, String)> {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let own = fs::canonicalize(file!().strip_prefix("crates/gpuprobe-runner/").map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rundir.rs"),
            |rel| Path::new(env!("CARGO_MANIFEST_DIR")).join(rel),
        ))
        .unwrap();
        let mut pending: Vec<PathBuf> = fs::read_dir(&crates)
            .unwrap()
            .flatten()
            .map(|e| e.path().join("src"))
            .collect();
        let mut sources = Vec::new();
        while let Some(path) = pending.pop() {
            if path.is_dir() {
                pending.extend(fs::read_dir(&path).unwrap().flatten().map(|e| e.path()));
                continue;
            }
            let is_test_file = path.file_name().is_some_and(|n| n == "tests.rs");
            if path.extension().is_none_or(|e| e != "rs")
                || is_test_file
                || fs::canonicalize(&path).unwrap() == own
            {
                continue;
            }
            let code = shipped_code(&fs::read_to_string(&path).unwrap());
            sources.push((path, code));
        }
        assert!(
            sources.len() > 50,
            "the workspace's sources were not found ({})",
            sources.len()
        );
        sources
    }

    #[test]
    fn only_the_layout_names_a_run_directory_s_files() {
        let mut offenders = Vec::new();
        for (path, code) in sources_outside_the_layout() {
            for name in [PLAN_FILE, REPORT_FILE, FIX_ACCOUNT_FILE] {
                if code.contains(&format!("\"{name}\"")) {
                    offenders.push(format!("{}: \"{name}\"", path.display()));
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "a run directory's file names are rundir.rs's constants: {offenders:?}"
        );
        // The scan sees what it looks for, outside test code only.
        let sample = "let a = \"plan.json\";\n#[cfg(test)]\nmod t {\n    \"fix.json\"\n}\n// \"report.json\"\n";
        let code = shipped_code(sample);
        assert!(
            code.contains("\"plan.json\"")
                && !code.contains("fix.json")
                && !code.contains("report.json")
        );
    }

    /// The run files that more than one module reads back. They are found through
    /// [`RunFiles`]' readers and [`Run::contents`], never by joining their names to a
    /// directory. (A fix's options and journal are read and written by the fix alone; the
    /// directories are made, not read.)
    const READ_BACK: [&str; 6] = [
        "PLAN_FILE",
        "REPORT_FILE",
        "RESULTS_FILE",
        "STACK_FILE",
        "FIX_ACCOUNT_FILE",
        "PROFILE_FILE",
    ];

    /// The constants of [`READ_BACK`] that `code` joins to a path (`.join(REPORT_FILE)`,
    /// `.join(rundir::REPORT_FILE)`, over several lines too).
    fn joined_run_files(code: &str) -> Vec<&'static str> {
        let mut joined = Vec::new();
        for (at, _) in code.match_indices("join(") {
            let argument = &code[at + "join(".len()..];
            let argument = &argument[..argument.find(')').unwrap_or(argument.len())];
            let argument = argument.trim().trim_end_matches(',').trim();
            let name = argument.rsplit("::").next().unwrap_or(argument);
            joined.extend(
                READ_BACK
                    .iter()
                    .copied()
                    .filter(|&constant| constant == name),
            );
        }
        joined
    }

    #[test]
    fn no_module_but_the_layout_joins_a_run_file_s_name_to_open_it() {
        let mut offenders = Vec::new();
        for (path, code) in sources_outside_the_layout() {
            for name in joined_run_files(&code) {
                offenders.push(format!("{}: .join({name})", path.display()));
            }
        }
        assert!(
            offenders.is_empty(),
            "read a run's files through rundir.rs (RunFiles, Run::contents): {offenders:?}"
        );
        // The scan sees what it looks for, and only that.
        let sample = "dir.join(REPORT_FILE).is_file();\nfrom.join(\n    gpuprobe_runner::rundir::PLAN_FILE,\n);\n\
                      dir.join(FIX_OPTIONS_FILE);\ndir.join(WORKERS_DIR);\nx.join(\"a\");\n";
        assert_eq!(joined_run_files(sample), ["REPORT_FILE", "PLAN_FILE"]);
        for name in READ_BACK {
            assert!(
                include_str!("rundir.rs").contains(&format!(" const {name}: &str")),
                "{name} is no constant of the layout"
            );
        }
    }

    #[test]
    fn profile_uses_are_appended_read_back_and_kept_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("runs");
        assert!(read_profile_uses(&root).is_empty());
        let used = |n: usize| ProfileUse {
            at: format!("2026-11-29T10:00:{:02}Z", n % 60),
            profile: format!("/{}/fix-{n}/profile.toml", "d".repeat(200)),
            digest: profile_digest(format!("p{n}").as_bytes()),
            program: "python".into(),
            exit_code: i32::try_from(n % 3).unwrap(),
        };
        append_profile_use(&root, &used(0)).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(root.join(PROFILE_USES_FILE))
            .unwrap()
            .write_all(b"{\"at\": torn\n")
            .unwrap();
        append_profile_use(&root, &used(1)).unwrap();
        assert_eq!(read_profile_uses(&root), [used(0), used(1)]);
        assert_ne!(profile_digest(b"a"), profile_digest(b"b"));
        assert_eq!(profile_digest(b""), "fnv1a64:cbf29ce484222325");
        // Past its bound the journal keeps its newest lines.
        for n in 2..2600 {
            append_profile_use(&root, &used(n)).unwrap();
        }
        let size = fs::metadata(root.join(PROFILE_USES_FILE)).unwrap().len();
        assert!(size <= PROFILE_USES_MAX_BYTES, "{size}");
        let uses = read_profile_uses(&root);
        assert!(uses.len() >= PROFILE_USES_KEPT, "{}", uses.len());
        assert_eq!(uses.last(), Some(&used(2599)));
        assert!(!root.join(PROFILE_USES_TMP).exists());
    }

    #[test]
    fn the_writer_lock_is_held_while_the_run_is_written_and_free_once_its_writer_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let files = RunFiles::at(dir.path());
        assert_eq!(files.writer(), Writer::Unknown);
        let run = RunDir::create(dir.path()).unwrap();
        assert_eq!(files.writer(), Writer::Alive);
        let copy = run.clone();
        drop(run);
        assert_eq!(files.writer(), Writer::Alive, "a copy still holds it");
        drop(copy);
        assert_eq!(files.writer(), Writer::Gone);
        run_dir_with_plan(dir.path());
        let resumed = RunDir::open(dir.path()).unwrap();
        assert_eq!(files.writer(), Writer::Alive);
        drop(resumed);
        // A process killed outright leaves the lock free: the kernel drops it.
        // (`-o`: the lock stays with `flock` itself, not the command it runs.)
        let child = std::process::Command::new("flock")
            .arg("-o")
            .arg(dir.path().join(WRITER_LOCK_FILE))
            .args(["sleep", "30"])
            .spawn();
        if let Ok(mut child) = child {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while files.writer() != Writer::Alive && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert_eq!(files.writer(), Writer::Alive);
            child.kill().unwrap();
            child.wait().unwrap();
            assert_eq!(files.writer(), Writer::Gone);
        }
    }

    fn run_dir_with_plan(path: &Path) {
        fs::write(path.join(PLAN_FILE), "{}").unwrap();
    }

    #[test]
    fn unwritable_directory_is_a_clear_error() {
        let err = RunDir::create(Path::new("/proc/gpuprobe-cannot-write-here")).unwrap_err();
        assert!(err.to_string().contains("cannot"), "{err}");
    }
}
