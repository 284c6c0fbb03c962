//! `gpuprobe fix` as a whole: a new fix (its directory checked, its options recorded, its
//! starting point made), or an interrupted one resumed from its journal; then the search,
//! and the account and profile written. What it prints and how progress is drawn is the
//! caller's ([`FixHost`]).
//!
//! Layout of the fix's run directory: `fix-options.json` (what it was started with),
//! `check/` (the starting check, when run here), `trials/NN-<phase>/` (each trial's results
//! and worker logs), `trials.jsonl` (every finished trial, appended and synced as it ends),
//! `fix.json`, `profile.toml`.
//!
//! `--resume RUN_DIR` finishes an interrupted fix: it reads the options back, finishes the
//! starting check if that was interrupted, and replays the journal's trials into the same
//! search, so only the trials not yet finished run (see [`super::journal`]).
//!
//! Every output path is checked before any work: a profile path that cannot be written
//! must not cost the whole search.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use gpuprobe_model::ProbeResult;
use gpuprobe_model::StackOptions;
use gpuprobe_model::visible_line;
use gpuprobe_model::{Backend, DeviceRef, ProbeId, ProbeSpec, Rule};
use gpuprobe_model::{ClassifiedError, ExitStatus};
use gpuprobe_model::{FixAccount, FixOutcome, ProbeRef};
use gpuprobe_runner::{
    FIX_ACCOUNT_FILE, FIX_JOURNAL_FILE, FIX_OPTIONS_FILE, FIX_TRIALS_DIR, PLAN_FILE, PROFILE_FILE,
    REPORT_FILE, RunDir, RunFiles, RunnerError,
};

use super::SearchInput;
use super::account::{self, AccountHeader};
use super::candidates::{self, Candidate, CandidateContext, CandidateRefused, CandidateSet};
use super::journal::{Journal, JournalError, Journaled, TrialRecord};
use super::options::{FixOptions, RECORDED_VERSION, Recorded, ResumeOptions, validate};
use super::search::{Phase, TrialSummary};
use super::sentinels::{self, SentinelQuota};
use super::start::{Start, resume_check, start_from, start_with_check};
use super::trials::{EngineTrials, remove_trial_dirs_after};
use crate::plan;
use crate::profile;
use crate::session::Interrupted;
use crate::session::{self, SessionError, SessionHost, SessionProgress};

/// What a fix takes from the process that runs it.
pub struct FixHost<'a> {
    /// What its sessions (the starting check) take.
    pub session: SessionHost,
    /// Told how the starting check advances.
    pub progress: &'a mut dyn SessionProgress,
    /// Says one line of progress (what is searched, each trial) to the user.
    pub say: &'a dyn Fn(&str),
    /// The time now, as the account and profile record it (RFC 3339, UTC).
    pub now: fn() -> String,
    /// Checks that a file can be written at a path later, without leaving anything behind;
    /// the reason when it cannot.
    pub check_writable_file: fn(&Path) -> Result<(), String>,
}

/// Why a fix cannot start, resume or record its outcome. The user's to fix (exit 2) unless
/// said otherwise.
#[derive(Debug, thiserror::Error)]
pub enum FixError {
    /// The starting check could not be prepared or run.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// `--max-runs` leaves no room for a baseline and a verification.
    #[error("--max-runs must be at least 2 (a baseline and a verification run)")]
    MaxRuns,
    /// A `--candidate` the catalogue does not allow.
    #[error(transparent)]
    Candidate(#[from] CandidateRefused),
    /// `--from` names no run directory.
    #[error("--from {}: no {PLAN_FILE}: not a gpuprobe run directory", visible_line(&from.display().to_string()))]
    FromNotARun {
        /// The directory as given.
        from: PathBuf,
    },
    /// `--from` names a run that has not finished.
    #[error(
        "--from {}: no {REPORT_FILE}: an unfinished run (finish it with `gpuprobe \
         check --resume {}`)",
        visible_line(&from.display().to_string()),
        visible_line(&from.display().to_string())
    )]
    FromUnfinished {
        /// The directory as given.
        from: PathBuf,
    },
    /// `--profile-out` cannot be written.
    #[error("--profile-out: {}", visible_line(reason))]
    ProfileOut {
        /// Why.
        reason: String,
    },
    /// The fix directory holds a finished fix.
    #[error("{} already holds a finished fix; choose another --run-dir", dir.display())]
    AlreadyFinished {
        /// The directory.
        dir: PathBuf,
    },
    /// The fix directory holds an unfinished fix.
    #[error(
        "{} already holds an unfinished fix; finish it with `gpuprobe fix --resume {}` \
         or choose another --run-dir",
        dir.display(),
        dir.display()
    )]
    Unfinished {
        /// The directory.
        dir: PathBuf,
    },
    /// The fix directory cannot be made.
    #[error("cannot create run directory {}: {source}", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The fix directory cannot be written.
    #[error(transparent)]
    RunDir(RunnerError),
    /// The trial journal cannot be made or read.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// `--resume` names a directory without recorded options.
    #[error("{} is not a resumable fix run directory: cannot read {}: {source}", dir.display(), path.display())]
    NotResumable {
        /// The directory.
        dir: PathBuf,
        /// Its options file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The recorded options are not what a fix writes.
    #[error("{} is not a fix options file: {source}", path.display())]
    BadOptionsFile {
        /// The file.
        path: PathBuf,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// The recorded options are of another version.
    #[error("{} is of version {version} (this gpuprobe resumes version {RECORDED_VERSION})", path.display())]
    OptionsVersion {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
    /// `--resume` names a fix that has finished.
    #[error("the fix in {} has finished: its account is {}", dir.display(), RunFiles::at(dir).file(FIX_ACCOUNT_FILE).display())]
    Finished {
        /// The directory.
        dir: PathBuf,
    },
    /// The recorded tier is none this gpuprobe knows.
    #[error("{}: unknown tier {tier:?}", path.display())]
    UnknownTier {
        /// The options file.
        path: PathBuf,
        /// The tier as recorded.
        tier: String,
    },
    /// The starting run ended with a usage error (a GPU that does not exist): why.
    #[error("{why}")]
    StartingRun {
        /// Its note on the absent GPUs, or a general sentence.
        why: String,
    },
    /// The starting run's report cannot be read.
    #[error(
        "cannot read {}: {source} (an unfinished run: finish it with `gpuprobe check --resume {}`)",
        path.display(),
        dir.display()
    )]
    ReportUnreadable {
        /// The report.
        path: PathBuf,
        /// The run directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The starting run's report is not one.
    #[error("{} is not a gpuprobe report: {source}", path.display())]
    NotAReport {
        /// The report.
        path: PathBuf,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// The account cannot be serialized (exit 3).
    #[error(transparent)]
    Serialize(serde_json::Error),
    /// The account cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    WriteAccount {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A signal stopped the fix (in its starting check or a trial); the trials finished are
    /// journaled and `--resume` finishes it. The caller decides what is printed and leaves
    /// with 128 + the signal (never an [`ExitStatus`]).
    #[error("{0}")]
    Interrupted(#[source] Interrupted),
}

impl FixError {
    /// An interruption anywhere in the fix in `fix_dir` (its starting check included),
    /// said as the fix's; any other error as it is.
    fn in_fix(self, fix_dir: &Path) -> FixError {
        match self {
            FixError::Session(SessionError::Interrupted(interrupted))
            | FixError::Interrupted(interrupted) => {
                FixError::Interrupted(interrupted.in_fix(fix_dir.to_path_buf()))
            }
            other => other,
        }
    }
}

impl ClassifiedError for FixError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            FixError::Session(err) => err.exit_status(),
            FixError::Serialize(_) => ExitStatus::InternalFailure,
            // Not an exit status at all: the binary leaves with 128 + the signal first.
            FixError::Interrupted(_) => ExitStatus::InternalFailure,
            _ => ExitStatus::UsageError,
        }
    }
}

/// What a finished fix leaves: its account (also in `fix.json`) and that file's text.
#[derive(Debug)]
pub struct Finished {
    /// The account.
    pub account: FixAccount,
    /// `fix.json` as written (pretty JSON, without the final newline).
    pub json: String,
    /// The options a `gpuprobe run --profile` of its profile needs to be compared with the
    /// stack the search ran on (the search's `--python`).
    pub run_options: StackOptions,
}

impl Finished {
    /// With the options of `options` that a suggested `run` must repeat.
    fn suggesting_for(mut self, options: &FixOptions) -> Finished {
        self.run_options.python = options.session.python.as_ref().map(|path| {
            std::path::absolute(path)
                .unwrap_or_else(|_| path.clone())
                .display()
                .to_string()
        });
        self
    }
}

/// Starts a fix in `options.session.run_dir`: checks the options and the directory,
/// records the options, makes the starting point, searches, writes the account and the
/// profile.
pub fn start(options: &FixOptions, host: &mut FixHost<'_>) -> Result<Finished, FixError> {
    let explicit = validate(options, host)?;
    let started = Instant::now();
    let started_at = (host.now)();
    let fix_dir = options.session.run_dir.clone();
    if RunFiles::at(&fix_dir).has_fix_account() {
        return Err(FixError::AlreadyFinished { dir: fix_dir });
    }
    if [FIX_TRIALS_DIR, FIX_OPTIONS_FILE, FIX_JOURNAL_FILE]
        .iter()
        .any(|name| fix_dir.join(name).exists())
    {
        return Err(FixError::Unfinished { dir: fix_dir });
    }
    let created_here = !fix_dir.exists();
    std::fs::create_dir_all(&fix_dir).map_err(|source| FixError::CreateDir {
        dir: fix_dir.clone(),
        source,
    })?;
    let work = RunDir::create(&fix_dir).map_err(FixError::RunDir)?;
    work.write_json(FIX_OPTIONS_FILE, &Recorded::of(options, &started_at))
        .map_err(FixError::RunDir)?;
    let journal = Journal::create(&fix_dir.join(FIX_JOURNAL_FILE))?;
    let start = match &options.from {
        Some(dir) => start_from(dir, options, &work, host),
        None => start_with_check(options, &fix_dir, host, &started_at),
    };
    let start = match start {
        Ok(start) => start,
        Err(err) => {
            abandon_unstarted(&fix_dir, created_here, &err);
            return Err(err.in_fix(&fix_dir));
        }
    };
    let resumed = Resumed {
        journal,
        records: Vec::new(),
        resuming: false,
    };
    search_from(
        start,
        options,
        explicit,
        &fix_dir,
        host,
        Began {
            clock: started,
            at: started_at,
        },
        resumed,
    )
    .map(|finished| finished.suggesting_for(options))
    .map_err(|err| err.in_fix(&fix_dir))
}

/// After a usage error (exit 2) that came before the starting check was planned (an
/// `--only` that matches nothing, a `--from` run that cannot be read), nothing was tested
/// and nothing can be resumed: the fix's directory is removed when this fix made it, so
/// that `runs list` does not show a run that never was "in progress" and `runs prune`
/// does not keep it for ever (docs/hostile-input.md). A directory that was there before
/// loses only the files that made it a fix's.
fn abandon_unstarted(fix_dir: &Path, created_here: bool, err: &FixError) {
    let planned = RunFiles::at(fix_dir).check_subrun().has_plan();
    if err.exit_status() != ExitStatus::UsageError || planned {
        return;
    }
    if created_here {
        let _ = std::fs::remove_dir_all(fix_dir);
    } else {
        for name in [FIX_OPTIONS_FILE, FIX_JOURNAL_FILE] {
            let _ = std::fs::remove_file(fix_dir.join(name));
        }
    }
}

/// The journal a search records into, and what it held when resuming.
struct Resumed {
    journal: Journal,
    records: Vec<TrialRecord>,
    resuming: bool,
}

/// `fix --resume DIR`: the recorded options, the starting point (its check finished if it
/// was interrupted), then the search with the journal's trials replayed.
pub fn resume(
    dir: &Path,
    resume: &ResumeOptions,
    host: &mut FixHost<'_>,
) -> Result<Finished, FixError> {
    let options_path = dir.join(FIX_OPTIONS_FILE);
    let text = std::fs::read_to_string(&options_path).map_err(|source| FixError::NotResumable {
        dir: dir.to_path_buf(),
        path: options_path.clone(),
        source,
    })?;
    let recorded: Recorded =
        serde_json::from_str(&text).map_err(|source| FixError::BadOptionsFile {
            path: options_path.clone(),
            source,
        })?;
    if recorded.version != RECORDED_VERSION {
        return Err(FixError::OptionsVersion {
            path: options_path,
            version: recorded.version,
        });
    }
    if RunFiles::at(dir).has_fix_account() {
        return Err(FixError::Finished {
            dir: dir.to_path_buf(),
        });
    }
    let started_at = recorded.started_at.clone();
    let options = recorded.into_options(resume, dir)?;
    let explicit = validate(&options, host)?;
    let started = Instant::now();
    let work = RunDir::create(dir).map_err(FixError::RunDir)?;
    let journal_path = dir.join(FIX_JOURNAL_FILE);
    let (journal, loaded) = if journal_path.exists() {
        Journal::resume(&journal_path)?
    } else {
        // Interrupted before its journal was made: nothing was recorded.
        let journal = Journal::create(&journal_path)?;
        (journal, Default::default())
    };
    (host.say)(&format!(
        "resuming the fix started {started_at} in {}: {} finished trial(s) recorded{}",
        dir.display(),
        loaded.records.len(),
        if loaded.dropped_lines > 0 {
            format!(" ({} unfinished line(s) dropped)", loaded.dropped_lines)
        } else {
            String::new()
        }
    ));
    // The trial that was running when the fix stopped left a partial directory: it runs
    // again from scratch.
    remove_trial_dirs_after(&dir.join(FIX_TRIALS_DIR), loaded.records.len() as u32);
    let start = match &options.from {
        Some(from) => start_from(from, &options, &work, host),
        None => resume_check(&options, dir, &work, host, &started_at),
    }
    .map_err(|err| err.in_fix(dir))?;
    let resumed = Resumed {
        journal,
        records: loaded.records,
        resuming: true,
    };
    search_from(
        start,
        &options,
        explicit,
        dir,
        host,
        Began {
            clock: started,
            at: started_at,
        },
        resumed,
    )
    .map(|finished| finished.suggesting_for(&options))
    .map_err(|err| err.in_fix(dir))
}

/// When a fix began: the clock its wall time is measured from, and the time its account
/// records (a resumed fix keeps the time it first started).
struct Began {
    clock: Instant,
    at: String,
}

/// The search from a starting point, recorded in (and, when resuming, replayed from) the
/// journal; then the account and the profile.
fn search_from(
    start: Start,
    options: &FixOptions,
    explicit: Option<Vec<Candidate>>,
    fix_dir: &Path,
    host: &mut FixHost<'_>,
    began: Began,
    mut resumed: Resumed,
) -> Result<Finished, FixError> {
    let say = host.say;
    let env = &host.session.env;
    let catalogue = gpuprobe_kb::embedded_catalogue();
    say(&format!(
        "starting point: {} probe run(s) in {}",
        start.report.results.len(),
        start.source_run.display()
    ));

    if start.report.exit_status == ExitStatus::UsageError {
        // The starting run named a GPU that does not exist (its note says which): no trial
        // on the devices that do exist would answer what was asked.
        let why = session::absent_gpus_note(&start.report.notes)
            .unwrap_or("the starting run ended with a usage error (see its report)");
        return Err(FixError::StartingRun {
            why: why.to_string(),
        });
    }
    let failures: Vec<ProbeResult> = start
        .report
        .results
        .iter()
        .filter(|r| candidates::is_target(r))
        .cloned()
        .collect();
    let stack_key = crate::stack::live_key(start.python.as_deref(), env);
    let simulation = start.report.simulation.as_ref().map(|s| s.source.clone());
    let mut header = AccountHeader {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: began.at.clone(),
        wall_s: 0.0,
        simulation,
        run_dir: Some(fix_dir.display().to_string()),
        source_run: Some(start.source_run.display().to_string()),
        stack: stack_key,
        max_runs: options.max_runs,
        cost_method: String::new(),
        notes: Vec::new(),
    };

    if failures.is_empty() {
        // The report's own exit 4 also counts: a GPU named with `--device` that got no
        // verdict leaves nothing to fix there, but nothing proven either.
        let nothing_tested = start.report.exit_status == ExitStatus::NothingTested
            || session::exit_status_for(&start.report.results, &[]) == ExitStatus::NothingTested;
        header.wall_s = began.clock.elapsed().as_secs_f64();
        let mut account = account::nothing_to_fix(header);
        if nothing_tested {
            account.outcome = FixOutcome::NothingTestable;
            account.exit_status = ExitStatus::NothingTested;
            account.exit_code = ExitStatus::NothingTested.code();
            account.notes.push(
                "nothing could be tested in the starting run (see its report for why)".into(),
            );
            if let Some(untested) = session::untested_gpus_note(&start.report.notes) {
                account.notes.push(untested.to_string());
            }
        }
        return finish(account, fix_dir);
    }

    // What to try.
    let mut candidate_set = candidates::gather(&CandidateContext {
        matches: &start.matches,
        catalogue: &catalogue,
        fingerprint: &start.report.fingerprint,
        failures: &failures,
        env,
    });
    if let Some(explicit) = explicit {
        candidate_set.notes.push(format!(
            "candidates restricted by --candidate to {}",
            explicit
                .iter()
                .map(|c| c.change.describe())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        candidate_set.testable = explicit;
        candidate_set.not_tried.clear();
    }

    // Sentinels and throughput probes.
    let pool = plan::select(&start.catalog, start.tier, &[]);
    let targets: Vec<ProbeRef> = failures
        .iter()
        .map(|r| ProbeRef {
            probe: r.probe.clone(),
            device: r.device,
        })
        .collect();
    let quota = SentinelQuota {
        per_family: options.sentinels,
        per_failing_family: options.sentinels + 2,
    };
    let sentinel_refs = sentinels::choose(
        &pool,
        &session::applies_to,
        &start.report.results,
        &targets,
        quota,
    );
    let measure = throughput_probes(&pool, &targets);
    header.cost_method = cost_method(&measure, header.simulation.is_some());

    if candidate_set.testable.is_empty() {
        say("no testable candidate applies to these failures");
        let result = super::search::nothing_to_try(&failures);
        header.wall_s = began.clock.elapsed().as_secs_f64();
        return write_up(header, &candidate_set, result, options, fix_dir, host);
    }

    say(&format!(
        "{} failing probe run(s), {} sentinel slot(s), {} candidate(s){}, at most {} trial(s)",
        failures.len(),
        sentinel_refs.len(),
        candidate_set.testable.len(),
        if measure.is_empty() {
            String::new()
        } else {
            format!(", {} throughput probe(s)", measure.len())
        },
        options.max_runs
    ));
    let mut specs: HashMap<ProbeId, ProbeSpec> = HashMap::new();
    for spec in start.catalog.iter().cloned() {
        specs.insert(spec.id.clone(), spec);
    }
    let mut engine_trials = EngineTrials {
        base: start.config.clone(),
        specs,
        trials_dir: fix_dir.join(FIX_TRIALS_DIR),
        timeout_scale: options.session.timeout_scale,
        startup_timeout: options.session.startup_timeout,
        say,
    };
    let mut runner = Journaled::new(
        &mut engine_trials,
        &mut resumed.journal,
        std::mem::take(&mut resumed.records),
    );
    let failing = failures.len();
    let mut on_trial = |summary: &TrialSummary| say(&trial_line(summary, failing));
    let result = super::search(
        &SearchInput {
            failures: &failures,
            sentinels: &sentinel_refs,
            measure: &measure,
            candidates: &candidate_set.testable,
            max_runs: options.max_runs,
        },
        &mut runner,
        &mut on_trial,
    )
    .map_err(FixError::Interrupted)?;
    if let Some(err) = runner.write_error() {
        let line = format!(
            "{err}: trials from there on were not recorded, and a resumed fix would run them again"
        );
        say(&format!("warning: {line}"));
        header.notes.push(line);
    }
    if resumed.resuming {
        header.notes.push(format!(
            "resumed: {} of the {} trial(s) were read back from {FIX_JOURNAL_FILE} of the \
             interrupted run, not run again",
            runner.replayed(),
            result.budget.trials
        ));
    }
    if let Some(at) = runner.diverged_at() {
        let line = format!(
            "the search left the recorded trials at trial {at} (the candidates or sentinels \
             differ from the interrupted run's, e.g. because the environment changed); the \
             recorded trials from there on were discarded and run anew"
        );
        say(&line);
        header.notes.push(line);
        remove_trial_dirs_after(&fix_dir.join(FIX_TRIALS_DIR), result.budget.trials);
    }
    if result.budget.exhausted {
        say(&format!(
            "the run budget ran out after {} trial(s) (--max-runs {}); raise it to try everything",
            result.budget.trials, options.max_runs
        ));
    }
    header.wall_s = began.clock.elapsed().as_secs_f64();
    write_up(header, &candidate_set, result, options, fix_dir, host)
}

/// Builds the account and profile, writes them and the account.
fn write_up(
    header: AccountHeader,
    candidate_set: &CandidateSet,
    result: super::SearchResult,
    options: &FixOptions,
    fix_dir: &Path,
    host: &FixHost<'_>,
) -> Result<Finished, FixError> {
    let created_at = (host.now)();
    let search = result.clone();
    let mut account = account::build(header, candidate_set, result);
    let profile = account::profile(&account, &search, &created_at);
    let profile_path = options
        .profile_out
        .clone()
        .unwrap_or_else(|| RunFiles::at(fix_dir).file(PROFILE_FILE));
    match profile::write(&profile_path, &profile) {
        Ok(()) => account.profile = Some(profile_path.display().to_string()),
        Err(err) => {
            // The path was checked before the search; if it still fails (a full disk), the
            // account of the search is kept and printed, and the exit code says the
            // profile is missing.
            let line = format!("the profile could not be written: {err}");
            (host.say)(&format!("error: {line}"));
            account.notes.push(line);
            account.exit_status = ExitStatus::UsageError;
            account.exit_code = ExitStatus::UsageError.code();
        }
    }
    finish(account, fix_dir)
}

/// Writes `fix.json`.
fn finish(account: FixAccount, fix_dir: &Path) -> Result<Finished, FixError> {
    let json = serde_json::to_string_pretty(&account).map_err(FixError::Serialize)?;
    let path = RunFiles::at(fix_dir).file(FIX_ACCOUNT_FILE);
    std::fs::write(&path, format!("{json}\n"))
        .map_err(|source| FixError::WriteAccount { path, source })?;
    Ok(Finished {
        account,
        json,
        run_options: StackOptions::default(),
    })
}

/// Throughput probes (measure rule, Python, not a start-up check) for the devices with
/// failures, one per device.
fn throughput_probes(pool: &[ProbeSpec], targets: &[ProbeRef]) -> Vec<ProbeRef> {
    let mut devices: Vec<DeviceRef> = Vec::new();
    for target in targets {
        if !devices.contains(&target.device) {
            devices.push(target.device);
        }
    }
    let mut out = Vec::new();
    for device in devices {
        if let Some(spec) = pool.iter().find(|spec| {
            spec.rule == Rule::Measure
                && spec.backend == Backend::Python
                && !spec.isolated
                && session::applies_to(spec, device)
        }) {
            out.push(ProbeRef {
                probe: spec.id.clone(),
                device,
            });
        }
    }
    out
}

/// How the cost is measured, in words, honestly.
fn cost_method(measure: &[ProbeRef], simulated: bool) -> String {
    let mut method = if measure.is_empty() {
        "the catalog has no throughput (measure-rule) probe, so the sentinel probes were \
         timed with and without the settings, with any bandwidth they report; single runs, \
         so differences of a few percent are noise"
            .to_string()
    } else {
        format!(
            "throughput probe(s) {} and the sentinels were run with and without the settings; \
             single runs, so differences of a few percent are noise",
            measure
                .iter()
                .map(|m| m.probe.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if simulated {
        method.push_str("; SIMULATED: these are CPU timings, not a GPU stack's cost");
    }
    method
}

/// One progress line per trial.
fn trial_line(summary: &TrialSummary, failing: usize) -> String {
    let settings = if summary.settings.is_empty() {
        "no settings".to_string()
    } else {
        summary
            .settings
            .iter()
            .map(|s| s.describe())
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let outcome = match summary.phase {
        Phase::Baseline => format!(
            "{} of {failing} failure(s) reproduce",
            summary.targets - summary.cured
        ),
        _ => format!(
            "cures {}/{}{}",
            summary.cured,
            summary.targets,
            if summary.broke > 0 {
                format!(", BREAKS {} sentinel(s)", summary.broke)
            } else {
                ", breaks nothing".to_string()
            }
        ),
    };
    format!(
        "trial {} ({}): {settings}: {outcome} ({:.1} s{})",
        summary.number,
        summary.phase.name(),
        summary.elapsed_s,
        if summary.replayed {
            ", recorded by the interrupted run"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fix_errors_say_what_the_binary_said_and_classify_themselves() {
        let from = FixError::FromUnfinished {
            from: PathBuf::from("/runs/check-1"),
        };
        assert_eq!(
            from.to_string(),
            "--from /runs/check-1: no report.json: an unfinished run (finish it with `gpuprobe check --resume /runs/check-1`)"
        );
        assert_eq!(from.exit_status(), ExitStatus::UsageError);
        assert_eq!(
            FixError::Unfinished {
                dir: PathBuf::from("/f")
            }
            .to_string(),
            "/f already holds an unfinished fix; finish it with `gpuprobe fix --resume /f` or choose another --run-dir"
        );
        // A session's own classification carries through.
        let internal = FixError::from(SessionError::ExtractPackage(RunnerError::io(
            "cannot write",
            "/f/python",
            std::io::Error::other("disk full"),
        )));
        assert_eq!(internal.exit_status(), ExitStatus::InternalFailure);
        assert_eq!(
            FixError::from(SessionError::NoDevice).exit_status(),
            ExitStatus::UsageError
        );
    }
}
