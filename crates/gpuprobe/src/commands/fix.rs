//! `gpuprobe fix`: the workaround search. Starts from the failing probes of a check (run
//! here, or `--from` a run directory), tries each candidate setting in fresh workers on the
//! failures plus passing sentinels, narrows combinations for what no single setting cures,
//! verifies the chosen set once more, measures its cost, and writes the account
//! (`fix.json`) and a profile.
//!
//! Layout of the fix's run directory: `fix-options.json` (what it was started with),
//! `check/` (the starting check, when run here), `trials/NN-<phase>/` (each trial's results
//! and worker logs), `trials.jsonl` (every finished trial, appended and synced as it ends),
//! `fix.json`, `profile.toml`.
//!
//! `--resume RUN_DIR` finishes an interrupted fix: it reads the options back, finishes the
//! starting check if that was interrupted, and replays the journal's trials into the same
//! search, so only the trials not yet finished run (see `gpuprobe_doctor::fix::journal`).
//!
//! Every output path is checked before any work: a profile path that cannot be written
//! must not cost the whole search.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::Result;
use clap::ValueEnum;
use gpuprobe_doctor::engine::{self, EngineConfig};
use gpuprobe_doctor::fix::account::{self, AccountHeader};
use gpuprobe_doctor::fix::candidates::{self, Candidate, CandidateContext, CandidateSet};
use gpuprobe_doctor::fix::journal::{Journal, Journaled, TrialRecord};
use gpuprobe_doctor::fix::search::{Phase, TrialSummary};
use gpuprobe_doctor::fix::sentinels::{self, SentinelQuota};
use gpuprobe_doctor::fix::{SearchInput, TrialOutcome, TrialRequest, TrialRunner};
use gpuprobe_kb::KbMatch;
use gpuprobe_model::ExitStatus;
use gpuprobe_model::probe::{Backend, DeviceRef, ProbeId, ProbeSpec, Rule};
use gpuprobe_model::profile::{FixAccount, FixOutcome, ProbeRef};
use gpuprobe_model::report::Report;
use gpuprobe_model::text::visible_line;
use gpuprobe_model::verdict::ProbeResult;
use gpuprobe_report::style::Style;
use gpuprobe_runner::rundir::{PLAN_FILE, REPORT_FILE};
use gpuprobe_runner::{RunDir, Task};
use serde::{Deserialize, Serialize};

use crate::cli::{FixArgs, TierArg};
use crate::session::{self, SessionOptions};
use crate::{output, paths, profiles, stack, time, user_error};

use super::process_env;

/// The file holding the account in the fix's run directory.
pub const ACCOUNT_FILE: &str = "fix.json";
/// The options a fix was started with, for `--resume`.
pub const OPTIONS_FILE: &str = "fix-options.json";
/// The trial journal.
pub const JOURNAL_FILE: &str = "trials.jsonl";

/// What a fix was started with: every option that decides what it searches, so that
/// `--resume` goes on with the same search.
#[derive(Debug, Serialize, Deserialize)]
struct Recorded {
    version: u32,
    started_at: String,
    from: Option<PathBuf>,
    tier: String,
    device: String,
    only: Vec<String>,
    python: Option<PathBuf>,
    simulate: Option<String>,
    no_native: bool,
    max_runs: u32,
    candidate: Vec<String>,
    sentinels: usize,
    profile_out: Option<PathBuf>,
    timeout_scale: f64,
    startup_timeout: f64,
    seed: u64,
}

const RECORDED_VERSION: u32 = 1;

/// A path the way a resumed run finds it again from another working directory. A bare
/// interpreter name (`python3`, looked up on PATH) stays as it is.
fn absolute(path: &Path) -> PathBuf {
    if path.components().count() <= 1 && !path.is_absolute() && !path.exists() {
        return path.to_path_buf();
    }
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Recorded {
    fn of(args: &FixArgs, started_at: &str) -> Recorded {
        Recorded {
            version: RECORDED_VERSION,
            started_at: started_at.to_string(),
            from: args.from.as_deref().map(absolute),
            tier: args
                .tier
                .to_possible_value()
                .map(|v| v.get_name().to_string())
                .unwrap_or_default(),
            device: args.device.clone(),
            only: args.only.clone(),
            python: args.python.as_deref().map(absolute),
            simulate: args.simulate.clone().map(|spec| {
                // A simulation file named by a relative path must still be found.
                spec.split(',')
                    .map(|part| {
                        let path = Path::new(part);
                        if path.is_file() {
                            absolute(path).display().to_string()
                        } else {
                            part.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            no_native: args.no_native,
            max_runs: args.max_runs,
            candidate: args.candidate.clone(),
            sentinels: args.sentinels,
            profile_out: args.profile_out.as_deref().map(absolute),
            timeout_scale: args.timeout_scale,
            startup_timeout: args.startup_timeout,
            seed: args.seed,
        }
    }

    /// The options to go on with: the recorded ones, with what `--resume` allows besides
    /// (output format, verbosity, another interpreter).
    fn into_args(self, resume: &FixArgs, dir: &Path) -> Result<FixArgs> {
        let tier = TierArg::from_str(&self.tier, true).map_err(|_| {
            user_error(format!(
                "{}: unknown tier {:?}",
                dir.join(OPTIONS_FILE).display(),
                self.tier
            ))
        })?;
        Ok(FixArgs {
            from: self.from,
            tier,
            device: self.device,
            only: self.only,
            python: resume.python.clone().or(self.python),
            simulate: self.simulate,
            no_native: self.no_native,
            run_dir: Some(dir.to_path_buf()),
            resume: None,
            max_runs: self.max_runs,
            candidate: self.candidate,
            sentinels: self.sentinels,
            profile_out: self.profile_out,
            json: resume.json,
            timeout_scale: self.timeout_scale,
            startup_timeout: self.startup_timeout,
            seed: self.seed,
            verbose: resume.verbose,
        })
    }
}

/// What the search starts from.
struct Start {
    report: Report,
    catalog: Vec<ProbeSpec>,
    config: EngineConfig,
    matches: Vec<KbMatch>,
    tier: gpuprobe_model::probe::Tier,
    python: Option<PathBuf>,
    source_run: PathBuf,
}

impl From<session::Completed> for Start {
    fn from(completed: session::Completed) -> Start {
        Start {
            tier: completed.plan.tier,
            python: completed.python.as_ref().map(|p| p.executable.clone()),
            source_run: completed.run_dir.path().to_path_buf(),
            report: completed.report,
            catalog: completed.catalog,
            config: completed.config,
            matches: completed.matches,
        }
    }
}

/// Runs `fix`.
pub fn run(args: FixArgs) -> Result<ExitStatus> {
    // First, while gpuprobe has one thread: Ctrl-C stops the workers and clears the bar.
    session::interrupt::install(session::interrupt::Mode::Leave);
    session::validate_python(args.python.as_deref(), &process_env())?;
    if args.simulate.as_deref() == Some("list") {
        super::check::print_presets();
        return Ok(ExitStatus::AllPassed);
    }
    if let Some(dir) = &args.resume {
        return resume(dir, &args);
    }
    let explicit = validate(&args)?;
    let started = Instant::now();
    let started_at = time::rfc3339(SystemTime::now());
    let env = process_env();
    let fix_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| paths::new_run_dir(&env, "fix"));
    if fix_dir.join(ACCOUNT_FILE).exists() {
        return Err(user_error(format!(
            "{} already holds a finished fix; choose another --run-dir",
            fix_dir.display()
        )));
    }
    if ["trials", OPTIONS_FILE, JOURNAL_FILE]
        .iter()
        .any(|name| fix_dir.join(name).exists())
    {
        return Err(user_error(format!(
            "{} already holds an unfinished fix; finish it with `gpuprobe fix --resume {}` \
             or choose another --run-dir",
            fix_dir.display(),
            fix_dir.display()
        )));
    }
    std::fs::create_dir_all(&fix_dir).map_err(|e| {
        user_error(format!(
            "cannot create run directory {}: {e}",
            fix_dir.display()
        ))
    })?;
    let work = RunDir::create(&fix_dir).map_err(|e| user_error(e.to_string()))?;
    session::interrupt::set_leave_line(format!(
        "gpuprobe: fix: interrupted; the trials done are kept; {}",
        session::interrupt::fix_resume_hint(&fix_dir)
    ));
    work.write_json(OPTIONS_FILE, &Recorded::of(&args, &started_at))
        .map_err(|e| user_error(e.to_string()))?;
    let journal =
        Journal::create(&fix_dir.join(JOURNAL_FILE)).map_err(|e| user_error(e.to_string()))?;
    let start = match &args.from {
        Some(dir) => start_from(dir, &args, &work, &env)?,
        None => start_with_check(&args, &fix_dir, &env, &started_at)?,
    };
    let resumed = Resumed {
        journal,
        records: Vec::new(),
        resuming: false,
    };
    search_from(
        start, &args, explicit, &fix_dir, &env, started, started_at, resumed,
    )
}

/// Rejects options no search can run with, before anything is created or run: the run
/// budget, the candidates, and an unwritable profile path. Returns the explicit candidates.
fn validate(args: &FixArgs) -> Result<Option<Vec<Candidate>>> {
    if args.max_runs < 2 {
        return Err(user_error(
            "--max-runs must be at least 2 (a baseline and a verification run)",
        ));
    }
    let catalogue = gpuprobe_kb::catalogue::embedded();
    let explicit = if args.candidate.is_empty() {
        None
    } else {
        Some(
            candidates::explicit(&args.candidate, &catalogue)
                .map_err(|e| user_error(e.to_string()))?,
        )
    };
    // The starting run is only read, but a missing one must not cost a run directory.
    if let Some(from) = &args.from {
        if !from.join(PLAN_FILE).is_file() {
            return Err(user_error(format!(
                "--from {}: no {PLAN_FILE}: not a gpuprobe run directory",
                visible_line(&from.display().to_string())
            )));
        }
        if !from.join(REPORT_FILE).is_file() {
            return Err(user_error(format!(
                "--from {}: no {REPORT_FILE}: an unfinished run (finish it with `gpuprobe \
                 check --resume {}`)",
                visible_line(&from.display().to_string()),
                visible_line(&from.display().to_string())
            )));
        }
    }
    if let Some(path) = &args.profile_out {
        paths::check_writable_file(path)
            .map_err(|e| user_error(format!("--profile-out: {}", visible_line(&e))))?;
    }
    Ok(explicit)
}

/// The journal a search records into, and what it held when resuming.
struct Resumed {
    journal: Journal,
    records: Vec<TrialRecord>,
    resuming: bool,
}

/// `fix --resume DIR`: the recorded options, the starting point (its check finished if it
/// was interrupted), then the search with the journal's trials replayed.
fn resume(dir: &Path, cli: &FixArgs) -> Result<ExitStatus> {
    let options_path = dir.join(OPTIONS_FILE);
    let text = std::fs::read_to_string(&options_path).map_err(|e| {
        user_error(format!(
            "{} is not a resumable fix run directory: cannot read {}: {e}",
            dir.display(),
            options_path.display()
        ))
    })?;
    let recorded: Recorded = serde_json::from_str(&text).map_err(|e| {
        user_error(format!(
            "{} is not a fix options file: {e}",
            options_path.display()
        ))
    })?;
    if recorded.version != RECORDED_VERSION {
        return Err(user_error(format!(
            "{} is of version {} (this gpuprobe resumes version {RECORDED_VERSION})",
            options_path.display(),
            recorded.version
        )));
    }
    if dir.join(ACCOUNT_FILE).exists() {
        return Err(user_error(format!(
            "the fix in {} has finished: its account is {}",
            dir.display(),
            dir.join(ACCOUNT_FILE).display()
        )));
    }
    let started_at = recorded.started_at.clone();
    let args = recorded.into_args(cli, dir)?;
    session::interrupt::set_leave_line(format!(
        "gpuprobe: fix: interrupted; the trials done are kept; {}",
        session::interrupt::fix_resume_hint(dir)
    ));
    let explicit = validate(&args)?;
    let started = Instant::now();
    let env = process_env();
    let work = RunDir::create(dir).map_err(|e| user_error(e.to_string()))?;
    let journal_path = dir.join(JOURNAL_FILE);
    let (journal, loaded) = if journal_path.exists() {
        Journal::resume(&journal_path).map_err(|e| user_error(e.to_string()))?
    } else {
        // Interrupted before its journal was made: nothing was recorded.
        let journal = Journal::create(&journal_path).map_err(|e| user_error(e.to_string()))?;
        (journal, Default::default())
    };
    say(&format!(
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
    remove_trial_dirs_after(&dir.join("trials"), loaded.records.len() as u32);
    let start = match &args.from {
        Some(from) => start_from(from, &args, &work, &env)?,
        None => resume_check(&args, dir, &work, &env, &started_at)?,
    };
    let resumed = Resumed {
        journal,
        records: loaded.records,
        resuming: true,
    };
    search_from(
        start, &args, explicit, dir, &env, started, started_at, resumed,
    )
}

/// The starting check of a resumed fix: read when it finished, finished (as `check
/// --resume` would) when it was interrupted, run when it never started.
fn resume_check(
    args: &FixArgs,
    fix_dir: &Path,
    work: &RunDir,
    env: &std::collections::BTreeMap<String, String>,
    started_at: &str,
) -> Result<Start> {
    let check_dir = fix_dir.join("check");
    if check_dir.join(REPORT_FILE).is_file() {
        return start_from(&check_dir, args, work, env);
    }
    if !check_dir.join(PLAN_FILE).is_file() {
        return start_with_check(args, fix_dir, env, started_at);
    }
    say("the starting check was interrupted: finishing it first");
    let supervisor = session::supervisor_config(
        args.timeout_scale,
        args.startup_timeout,
        check_dir.join("workers"),
    );
    let collector = session::spawn_collector(env);
    let prepared =
        session::prepare_existing(&check_dir, None, args.python.as_deref(), supervisor, env)?;
    let completed = session::execute(
        prepared,
        args.verbose,
        collector,
        Instant::now(),
        started_at,
    )?;
    Ok(Start::from(completed))
}

/// The number a trial directory (`NN-<phase>`) carries.
fn trial_number(name: &str) -> Option<u32> {
    name.split_once('-')?.0.parse().ok()
}

/// Removes the trial directories numbered above `last`: what an interrupted trial left,
/// or trials of a journal that no longer applies.
fn remove_trial_dirs_after(trials: &Path, last: u32) {
    let Ok(entries) = std::fs::read_dir(trials) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if trial_number(&name).is_some_and(|n| n > last) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The search from a starting point, recorded in (and, when resuming, replayed from) the
/// journal; then the account and the profile.
#[allow(clippy::too_many_arguments)]
fn search_from(
    start: Start,
    args: &FixArgs,
    explicit: Option<Vec<Candidate>>,
    fix_dir: &Path,
    env: &std::collections::BTreeMap<String, String>,
    started: Instant,
    started_at: String,
    mut resumed: Resumed,
) -> Result<ExitStatus> {
    let catalogue = gpuprobe_kb::catalogue::embedded();
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
        return Err(user_error(why));
    }
    let failures: Vec<ProbeResult> = start
        .report
        .results
        .iter()
        .filter(|r| candidates::is_target(r))
        .cloned()
        .collect();
    let stack_key = stack::live_key(start.python.as_deref(), env);
    let simulation = start.report.simulation.as_ref().map(|s| s.source.clone());
    let mut header = AccountHeader {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: started_at.clone(),
        wall_s: 0.0,
        simulation,
        run_dir: Some(fix_dir.display().to_string()),
        source_run: Some(start.source_run.display().to_string()),
        stack: stack_key,
        max_runs: args.max_runs,
        cost_method: String::new(),
        notes: Vec::new(),
    };

    if failures.is_empty() {
        let nothing_tested =
            session::exit_status_for(&start.report.results, &[]) == ExitStatus::NothingTested;
        header.wall_s = started.elapsed().as_secs_f64();
        let mut account = account::nothing_to_fix(header);
        if nothing_tested {
            account.outcome = FixOutcome::NothingTestable;
            account.exit_status = ExitStatus::NothingTested;
            account.exit_code = ExitStatus::NothingTested.code();
            account.notes.push(
                "nothing could be tested in the starting run (see its report for why)".into(),
            );
        }
        return finish(account, args, fix_dir, env);
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
    let pool = engine::select(&start.catalog, start.tier, &[]);
    let targets: Vec<ProbeRef> = failures
        .iter()
        .map(|r| ProbeRef {
            probe: r.probe.clone(),
            device: r.device,
        })
        .collect();
    let quota = SentinelQuota {
        per_family: args.sentinels,
        per_failing_family: args.sentinels + 2,
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
        let result = gpuprobe_doctor::fix::search::nothing_to_try(&failures);
        header.wall_s = started.elapsed().as_secs_f64();
        return write_up(header, &candidate_set, result, args, fix_dir, env);
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
        args.max_runs
    ));
    let mut specs: HashMap<ProbeId, ProbeSpec> = HashMap::new();
    for spec in start.catalog.iter().cloned() {
        specs.insert(spec.id.clone(), spec);
    }
    let mut engine_trials = EngineTrials {
        base: start.config.clone(),
        specs,
        trials_dir: fix_dir.join("trials"),
        timeout_scale: args.timeout_scale,
        startup_timeout: args.startup_timeout,
    };
    let mut runner = Journaled::new(
        &mut engine_trials,
        &mut resumed.journal,
        std::mem::take(&mut resumed.records),
    );
    let failing = failures.len();
    let mut on_trial = |summary: &TrialSummary| say(&trial_line(summary, failing));
    let result = gpuprobe_doctor::fix::search(
        &SearchInput {
            failures: &failures,
            sentinels: &sentinel_refs,
            measure: &measure,
            candidates: &candidate_set.testable,
            max_runs: args.max_runs,
        },
        &mut runner,
        &mut on_trial,
    );
    if let Some(err) = runner.write_error() {
        let line = format!(
            "{err}: trials from there on were not recorded, and a resumed fix would run them again"
        );
        say(&format!("warning: {line}"));
        header.notes.push(line);
    }
    if resumed.resuming {
        header.notes.push(format!(
            "resumed: {} of the {} trial(s) were read back from {JOURNAL_FILE} of the \
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
        remove_trial_dirs_after(&fix_dir.join("trials"), result.budget.trials);
    }
    if result.budget.exhausted {
        say(&format!(
            "the run budget ran out after {} trial(s) (--max-runs {}); raise it to try everything",
            result.budget.trials, args.max_runs
        ));
    }
    header.wall_s = started.elapsed().as_secs_f64();
    write_up(header, &candidate_set, result, args, fix_dir, env)
}

/// Builds the account and profile, writes them, prints the account.
fn write_up(
    header: AccountHeader,
    candidate_set: &CandidateSet,
    result: gpuprobe_doctor::fix::SearchResult,
    args: &FixArgs,
    fix_dir: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<ExitStatus> {
    let created_at = time::rfc3339(SystemTime::now());
    let search = result.clone();
    let mut account = account::build(header, candidate_set, result);
    let profile = account::profile(&account, &search, &created_at);
    let profile_path = args
        .profile_out
        .clone()
        .unwrap_or_else(|| fix_dir.join("profile.toml"));
    match profiles::write(&profile_path, &profile) {
        Ok(()) => account.profile = Some(profile_path.display().to_string()),
        Err(err) => {
            // The path was checked before the search; if it still fails (a full disk), the
            // account of the search is kept and printed, and the exit code says the
            // profile is missing.
            let line = format!("the profile could not be written: {err}");
            say(&format!("error: {line}"));
            account.notes.push(line);
            account.exit_status = ExitStatus::UsageError;
            account.exit_code = ExitStatus::UsageError.code();
        }
    }
    finish(account, args, fix_dir, env)
}

/// Writes `fix.json` and prints the account.
fn finish(
    account: FixAccount,
    args: &FixArgs,
    fix_dir: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<ExitStatus> {
    let text = serde_json::to_string_pretty(&account)?;
    std::fs::write(fix_dir.join(ACCOUNT_FILE), format!("{text}\n")).map_err(|e| {
        user_error(format!(
            "cannot write {}: {e}",
            fix_dir.join(ACCOUNT_FILE).display()
        ))
    })?;
    if args.json {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{text}")?;
    } else {
        let style = Style::for_output(
            std::io::stdout().is_terminal(),
            env.get("NO_COLOR").map(String::as_str),
        );
        // The account quotes probe details and paths: behind the terminal guard.
        let mut stdout = output::stdout();
        write!(stdout, "{}", gpuprobe_report::fix::render(&account, style))?;
        stdout.flush()?;
    }
    Ok(account.exit_status)
}

/// Runs a check in `fix_dir/check` and returns its outcome as the starting point.
fn start_with_check(
    args: &FixArgs,
    fix_dir: &Path,
    env: &std::collections::BTreeMap<String, String>,
    started_at: &str,
) -> Result<Start> {
    let options = SessionOptions {
        command: "fix",
        tier: session::tier_of(args.tier),
        device: args.device.clone(),
        only: args.only.clone(),
        python: args.python.clone(),
        simulate: args.simulate.clone(),
        run_dir: Some(fix_dir.join("check")),
        no_native: args.no_native,
        timeout_scale: args.timeout_scale,
        startup_timeout: args.startup_timeout,
        seed: args.seed,
        probe_options: Default::default(),
    };
    options.validate()?;
    let collector = session::spawn_collector(env);
    let prepared = session::prepare_new(&options, env, started_at)?;
    say(&format!(
        "checking first: {} probe run(s) planned ({} tier)",
        prepared.plan.tasks.len(),
        prepared.plan.tier.name()
    ));
    let completed = session::execute(
        prepared,
        args.verbose,
        collector,
        Instant::now(),
        started_at,
    )?;
    Ok(Start::from(completed))
}

/// Reads a finished run (`--from`) as the starting point.
fn start_from(
    dir: &Path,
    args: &FixArgs,
    work: &RunDir,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Start> {
    let supervisor =
        session::supervisor_config(args.timeout_scale, args.startup_timeout, work.workers_dir());
    let prepared =
        session::prepare_existing(dir, Some(work), args.python.as_deref(), supervisor, env)?;
    let report_path = dir.join(REPORT_FILE);
    let text = std::fs::read_to_string(&report_path).map_err(|e| {
        user_error(format!(
            "cannot read {}: {e} (an unfinished run: finish it with `gpuprobe check --resume {}`)",
            report_path.display(),
            dir.display()
        ))
    })?;
    let report: Report = serde_json::from_str(&text).map_err(|e| {
        user_error(format!(
            "{} is not a gpuprobe report: {e}",
            report_path.display()
        ))
    })?;
    let knowledge = super::kb::load(None)?;
    let matches = gpuprobe_kb::match_all(&knowledge.kb, &report.fingerprint, &report.results);
    // Probes of the old run that today's catalogue lacks keep their recorded specs.
    let mut catalog = prepared.catalog;
    for task in &prepared.plan.tasks {
        if !catalog.iter().any(|s| s.id == task.spec.id) {
            catalog.push(task.spec.clone());
        }
    }
    Ok(Start {
        tier: prepared.plan.tier,
        python: prepared.python.as_ref().map(|p| p.executable.clone()),
        source_run: dir.to_path_buf(),
        report,
        catalog,
        config: prepared.config,
        matches,
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
        "the catalogue has no throughput (measure-rule) probe, so the sentinel probes were \
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

/// A progress line on stderr. It can quote paths and probe details: made visible.
fn say(line: &str) {
    eprintln!("gpuprobe: fix: {}", visible_line(line));
}

/// Runs trials in fresh workers through the engine, each in its own directory.
struct EngineTrials {
    base: EngineConfig,
    specs: HashMap<ProbeId, ProbeSpec>,
    trials_dir: PathBuf,
    timeout_scale: f64,
    startup_timeout: f64,
}

impl TrialRunner for EngineTrials {
    fn run(&mut self, request: &TrialRequest<'_>) -> TrialOutcome {
        let started = Instant::now();
        let dir = self
            .trials_dir
            .join(format!("{:02}-{}", request.number, request.phase.name()));
        // Left by a trial that was running when the fix was interrupted: it runs again
        // from scratch (its partial results must not mix with the new ones).
        if dir.exists() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let run_dir = match RunDir::create(&dir) {
            Ok(run_dir) => run_dir,
            Err(err) => {
                // Every probe of the trial counts as not passing (no result came back).
                say(&format!("trial {}: {err}", request.number));
                return TrialOutcome::default();
            }
        };
        let _ = run_dir.write_json(
            "settings.json",
            &request
                .settings
                .iter()
                .map(|s| s.describe())
                .collect::<Vec<_>>(),
        );
        let mut config = self.base.clone();
        let trial = gpuprobe_doctor::fix::settings_of(request.settings);
        config.settings.set.extend(trial.set);
        for name in trial.unset {
            config.settings.set.remove(&name);
            if !config.settings.unset.contains(&name) {
                config.settings.unset.push(name);
            }
        }
        config.supervisor = session::supervisor_config(
            self.timeout_scale,
            self.startup_timeout,
            run_dir.workers_dir(),
        );
        let tasks: Vec<Task> = request
            .probes
            .iter()
            .filter_map(|p| {
                self.specs.get(&p.probe).map(|spec| Task {
                    spec: spec.clone(),
                    device: p.device,
                })
            })
            .collect();
        let execution = engine::execute(
            engine::lanes_for(tasks),
            &config,
            &run_dir,
            &mut |_, _, _| Vec::new(),
            &mut |_| {},
        );
        if let Some(signal) = session::interrupt::interrupted() {
            // Cut short by Ctrl-C or SIGTERM: these results are no outcome of the trial and
            // must not reach the journal, where a resume would replay them. Leave before the
            // search sees them; the trials already recorded stay.
            let fix_dir = self.trials_dir.parent().unwrap_or(&self.trials_dir);
            session::interrupt::leave(
                signal,
                &format!(
                    "gpuprobe: fix: interrupted in trial {}; {}",
                    request.number,
                    session::interrupt::fix_resume_hint(fix_dir)
                ),
            );
        }
        TrialOutcome {
            workers: execution.hellos.len() as u32,
            results: execution.results,
            elapsed_s: started.elapsed().as_secs_f64(),
            replayed: false,
        }
    }
}
