//! `gpuprobe check`: fingerprint, lint, probes on every GPU, diagnosis, report. The session
//! is `gpuprobe_doctor::session`'s; this adapter maps the options, draws the progress bar,
//! stops between phases on a signal (returning the interruption, which
//! [`crate::interrupt::leave`] reports) and renders the report.

use std::io::Write;
use std::time::{Instant, SystemTime};

use anyhow::Result;
use gpuprobe_doctor::session::interrupt::{Interrupted, Stopped};
use gpuprobe_doctor::session::{self as doctor, SessionError};
use gpuprobe_model::ExitStatus;
use gpuprobe_report::terminal::TerminalOptions;
use gpuprobe_runner::simulation;

use crate::cli::CheckArgs;
use crate::progress::TerminalProgress;
use crate::session::{self, session_options};
use crate::{interrupt, time};

use super::process_env;

/// Prints the simulation presets (`--simulate list`).
pub(super) fn print_presets() {
    let mut out =
        String::from("simulation presets (use --simulate NAME[,NAME...] or a TOML file):\n");
    for preset in simulation::presets() {
        out.push_str(&format!("  {:<20} {}\n", preset.name, preset.description));
    }
    let _ = crate::output::stdout().write_all(out.as_bytes());
}

/// Runs `check`.
pub(super) fn run(args: CheckArgs) -> Result<ExitStatus> {
    let shared = &args.session;
    if shared.simulate.as_deref() == Some("list") {
        print_presets();
        return Ok(ExitStatus::AllPassed);
    }
    // First, while gpuprobe has one thread: Ctrl-C then stops the workers and says how to
    // finish the run instead of cutting gpuprobe off mid-line.
    let signals = interrupt::install();
    let env = process_env();
    let options = session_options(
        shared,
        "check",
        &env,
        [(
            "soak_seconds".to_string(),
            serde_json::json!(args.soak_seconds),
        )]
        .into(),
    );
    options.validate()?;
    gpuprobe_report::html::check_writable(args.html.as_deref())?;
    let exports = super::report::Exports {
        prometheus: args.prometheus.as_deref(),
        junit: args.junit.as_deref(),
    };
    exports.check_writable()?;
    let started = Instant::now();
    let started_at = time::rfc3339(SystemTime::now());
    let host = session::host(&env, signals.cancel_token());
    // The machine's fingerprint is gathered while the probes run.
    let collector = doctor::spawn_collector(&env);
    let prepared = doctor::prepare_check(
        &options,
        args.resume.as_deref(),
        args.replan,
        &host,
        &started_at,
    )?;
    // A signal while preparing: the plan is written, no probe of this session has run.
    let (run_dir, planned) = (prepared.run_dir.clone(), prepared.plan.tasks.len());
    let done = || run_dir.load_results().map_or(0, |(done, _)| done.len());
    stop_if_interrupted(&host, done, planned, run_dir.path())?;
    // A signal while the probes ran ends the session inside `execute`.
    let mut progress = TerminalProgress::new(shared.verbose);
    let completed = doctor::execute(
        prepared,
        shared.verbose,
        collector,
        &mut progress,
        started,
        &started_at,
    )?;
    let report = &completed.report;
    // A signal while the report was made: every probe is done and the report written; a
    // resume prints it.
    let planned = completed.plan.tasks.len();
    stop_if_interrupted(
        &host,
        || report.results.len(),
        planned,
        completed.run_dir.path(),
    )?;

    // The report quotes worker output and exception text: behind the terminal guard (a
    // JSON document holds no control characters, so it passes unchanged).
    let mut stdout = crate::output::stdout();
    if shared.json {
        writeln!(stdout, "{}", gpuprobe_report::json::render(report))?;
    } else {
        let options = TerminalOptions {
            all: args.all,
            matrix: args.matrix,
            timings: args.timings,
            ..gpuprobe_report::console::current().terminal_options()
        };
        let text = gpuprobe_report::terminal::render(report, options);
        write!(stdout, "{text}")?;
    }
    super::report::write_html(args.html.as_deref(), report, None)?;
    exports.write(report)?;
    super::runs::after_check(&env, completed.run_dir.path());
    Ok(report.exit_status)
}

/// Between a check's phases: the interruption when a signal has come (`done` of `planned`
/// probe runs recorded in `run_dir`), nothing otherwise.
fn stop_if_interrupted(
    host: &doctor::SessionHost,
    done: impl FnOnce() -> usize,
    planned: usize,
    run_dir: &std::path::Path,
) -> Result<(), SessionError> {
    match Interrupted::of(&host.cancel, || Stopped::Session {
        command: "check".to_string(),
        done: done(),
        planned,
        run_dir: run_dir.to_path_buf(),
    }) {
        Some(interrupted) => Err(SessionError::Interrupted(interrupted)),
        None => Ok(()),
    }
}
