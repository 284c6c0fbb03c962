//! `gpuprobe fix`: the workaround search. Starts from the failing probes of a check (run
//! here, or `--from` a run directory), tries each candidate setting in fresh workers on the
//! failures plus passing sentinels, narrows combinations for what no single setting cures,
//! verifies the chosen set once more, measures its cost, and writes the account
//! (`fix.json`) and a profile.
//!
//! Layout of the fix's run directory: `check/` (the starting check, when run here),
//! `trials/NN-<phase>/` (each trial's results and worker logs), `fix.json`, `profile.toml`.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::Result;
use gpuprobe_doctor::engine::{self, EngineConfig};
use gpuprobe_doctor::fix::account::{self, AccountHeader};
use gpuprobe_doctor::fix::candidates::{self, CandidateContext, CandidateSet};
use gpuprobe_doctor::fix::search::{Phase, TrialSummary};
use gpuprobe_doctor::fix::sentinels::{self, SentinelQuota};
use gpuprobe_doctor::fix::{SearchInput, TrialOutcome, TrialRequest, TrialRunner};
use gpuprobe_kb::KbMatch;
use gpuprobe_model::ExitStatus;
use gpuprobe_model::probe::{Backend, DeviceRef, ProbeId, ProbeSpec, Rule};
use gpuprobe_model::profile::{FixAccount, FixOutcome, ProbeRef};
use gpuprobe_model::report::Report;
use gpuprobe_model::verdict::ProbeResult;
use gpuprobe_report::style::Style;
use gpuprobe_runner::rundir::REPORT_FILE;
use gpuprobe_runner::{RunDir, Task};

use crate::cli::FixArgs;
use crate::session::{self, SessionOptions};
use crate::{paths, profiles, stack, time, user_error};

use super::process_env;

/// The file holding the account in the fix's run directory.
pub const ACCOUNT_FILE: &str = "fix.json";

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

/// Runs `fix`.
pub fn run(args: FixArgs) -> Result<ExitStatus> {
    if args.simulate.as_deref() == Some("list") {
        super::check::print_presets();
        return Ok(ExitStatus::AllPassed);
    }
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
    let started = Instant::now();
    let started_at = time::rfc3339(SystemTime::now());
    let env = process_env();
    let fix_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| paths::new_run_dir(&env, "fix"));
    if fix_dir.join(ACCOUNT_FILE).exists() || fix_dir.join("trials").exists() {
        return Err(user_error(format!(
            "{} already holds a fix run; choose another --run-dir",
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

    let start = match &args.from {
        Some(dir) => start_from(dir, &args, &work, &env)?,
        None => start_with_check(&args, &fix_dir, &env, &started_at)?,
    };
    say(&format!(
        "starting point: {} probe run(s) in {}",
        start.report.results.len(),
        start.source_run.display()
    ));

    let failures: Vec<ProbeResult> = start
        .report
        .results
        .iter()
        .filter(|r| candidates::is_target(r))
        .cloned()
        .collect();
    let stack_key = stack::live_key(start.python.as_deref(), &env);
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
        return finish(account, &args, &fix_dir, &env);
    }

    // What to try.
    let mut candidate_set = candidates::gather(&CandidateContext {
        matches: &start.matches,
        catalogue: &catalogue,
        fingerprint: &start.report.fingerprint,
        failures: &failures,
        env: &env,
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
        return write_up(header, &candidate_set, result, &args, &fix_dir, &env);
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
    let mut runner = EngineTrials {
        base: start.config.clone(),
        specs,
        trials_dir: fix_dir.join("trials"),
        timeout_scale: args.timeout_scale,
        startup_timeout: args.startup_timeout,
    };
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
    if result.budget.exhausted {
        say(&format!(
            "the run budget ran out after {} trial(s) (--max-runs {}); raise it to try everything",
            result.budget.trials, args.max_runs
        ));
    }
    header.wall_s = started.elapsed().as_secs_f64();
    write_up(header, &candidate_set, result, &args, &fix_dir, &env)
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
    profiles::write(&profile_path, &profile).map_err(|e| user_error(e.to_string()))?;
    account.profile = Some(profile_path.display().to_string());
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
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{text}")?;
    } else {
        let style = Style::for_output(
            std::io::stdout().is_terminal(),
            env.get("NO_COLOR").map(String::as_str),
        );
        write!(stdout, "{}", gpuprobe_report::fix::render(&account, style))?;
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
    Ok(Start {
        tier: completed.plan.tier,
        python: completed.python.as_ref().map(|p| p.executable.clone()),
        source_run: completed.run_dir.path().to_path_buf(),
        report: completed.report,
        catalog: completed.catalog,
        config: completed.config,
        matches: completed.matches,
    })
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
        "trial {} ({}): {settings}: {outcome} ({:.1} s)",
        summary.number,
        summary.phase.name(),
        summary.elapsed_s
    )
}

fn say(line: &str) {
    eprintln!("gpuprobe: fix: {line}");
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
        let Ok(run_dir) = RunDir::create(&dir) else {
            return TrialOutcome::default();
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
        TrialOutcome {
            workers: execution.hellos.len() as u32,
            results: execution.results,
            elapsed_s: started.elapsed().as_secs_f64(),
        }
    }
}
