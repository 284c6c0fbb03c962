//! Where a fix starts: a check run in its directory (finished first when a resumed fix
//! finds it interrupted), or a finished run named with `--from`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use gpuprobe_kb::KbMatch;
use gpuprobe_model::Report;
use gpuprobe_model::{ProbeSpec, Tier};
use gpuprobe_runner::{FIX_CHECK_DIR, RunDir, RunFileError, RunFiles, WORKERS_DIR};

use super::options::FixOptions;
use super::run::{FixError, FixHost};
use crate::exec::EngineConfig;
use crate::session::{self, Completed};

/// What the search starts from.
pub(crate) struct Start {
    pub(crate) report: Report,
    pub(crate) catalog: Vec<ProbeSpec>,
    pub(crate) config: EngineConfig,
    pub(crate) matches: Vec<KbMatch>,
    pub(crate) tier: Tier,
    pub(crate) python: Option<PathBuf>,
    pub(crate) source_run: PathBuf,
}

impl From<Completed> for Start {
    fn from(completed: Completed) -> Start {
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

/// The starting check of a resumed fix: read when it finished, finished (as `check
/// --resume` would) when it was interrupted, run when it never started.
pub(crate) fn resume_check(
    options: &FixOptions,
    fix_dir: &Path,
    work: &RunDir,
    host: &mut FixHost<'_>,
    started_at: &str,
) -> Result<Start, FixError> {
    let check = RunFiles::at(fix_dir).check_subrun();
    let check_dir = check.path().to_path_buf();
    if check.has_report() {
        return start_from(&check_dir, options, work, host);
    }
    if !check.has_plan() {
        return start_with_check(options, fix_dir, host, started_at);
    }
    (host.say)("the starting check was interrupted: finishing it first");
    let supervisor = session::supervisor_config(
        options.session.timeout_scale,
        options.session.startup_timeout,
        check_dir.join(WORKERS_DIR),
        &host.session.cancel,
    );
    let collector = session::spawn_collector(&host.session.env);
    let prepared = session::prepare_existing(
        &check_dir,
        None,
        options.session.python.as_deref(),
        supervisor,
        &host.session,
    )?;
    run_starting_check(prepared, collector, options, host, started_at)
}

/// Runs a check in `fix_dir/check` and returns its outcome as the starting point.
pub(crate) fn start_with_check(
    options: &FixOptions,
    fix_dir: &Path,
    host: &mut FixHost<'_>,
    started_at: &str,
) -> Result<Start, FixError> {
    let mut check = options.session.clone();
    check.command = "fix";
    check.run_dir = fix_dir.join(FIX_CHECK_DIR);
    check.probe_options = Default::default();
    check.validate()?;
    let collector = session::spawn_collector(&host.session.env);
    let prepared = session::prepare_new(&check, &host.session, started_at)?;
    (host.say)(&format!(
        "checking first: {} probe run(s) planned ({} tier)",
        prepared.plan.tasks.len(),
        prepared.plan.tier.name()
    ));
    run_starting_check(prepared, collector, options, host, started_at)
}

/// Runs a prepared starting check (new, or interrupted and reopened) to its end.
fn run_starting_check(
    prepared: session::Prepared,
    collector: session::Collector,
    options: &FixOptions,
    host: &mut FixHost<'_>,
    started_at: &str,
) -> Result<Start, FixError> {
    let completed = session::execute(
        prepared,
        options.verbose,
        collector,
        &mut *host.progress,
        Instant::now(),
        started_at,
    )?;
    Ok(Start::from(completed))
}

/// The report of the finished run in `dir` (a `--from` run, or a resumed fix's check).
pub(crate) fn read_report_of(dir: &Path) -> Result<Report, FixError> {
    RunFiles::at(dir)
        .read_report()
        .map_err(|error| match error {
            RunFileError::Unreadable { path, source } => FixError::ReportUnreadable {
                path,
                dir: dir.to_path_buf(),
                source,
            },
            RunFileError::Invalid { path, source, .. } => FixError::NotAReport { path, source },
        })
}

/// Reads a finished run (`--from`) as the starting point.
pub(crate) fn start_from(
    dir: &Path,
    options: &FixOptions,
    work: &RunDir,
    host: &FixHost<'_>,
) -> Result<Start, FixError> {
    let supervisor = session::supervisor_config(
        options.session.timeout_scale,
        options.session.startup_timeout,
        work.workers_dir(),
        &host.session.cancel,
    );
    let prepared = session::prepare_existing(
        dir,
        Some(work),
        options.session.python.as_deref(),
        supervisor,
        &host.session,
    )?;
    let report = read_report_of(dir)?;
    let knowledge = gpuprobe_kb::KnowledgeBase::load_embedded();
    let matches = gpuprobe_kb::match_all(&knowledge.kb, &report.fingerprint, &report.results);
    // Probes of the old run that today's catalog lacks keep their recorded specs.
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
