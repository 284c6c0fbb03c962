//! `gpuprobe check`: fingerprint, lint, probes on every GPU, diagnosis, report. The session
//! is `gpuprobe_doctor::session`'s; this adapter maps the options, draws the progress bar,
//! stops between phases on a signal (returning the interruption, which
//! [`crate::interrupt::leave`] reports) and renders the report; under `--health`, one line
//! and the health exit code instead (`gpuprobe_report::health_of_report`).

use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

use gpuprobe_doctor::session::{self as doctor, SessionError};
use gpuprobe_doctor::session::{Interrupted, Stopped};
use gpuprobe_model::ExitStatus;
use gpuprobe_report::TerminalOptions;
use gpuprobe_report::{HealthFormat, NoReport, health_of_no_report, health_of_report};

use crate::cli::{CheckArgs, HealthFormatArg};
use crate::errors::{Internal, Result};
use crate::progress::TerminalProgress;
use crate::session::{self, session_options};
use crate::{interrupt, time};

use super::process_env;

/// Prints the simulation presets (`--simulate list`).
pub(super) fn print_presets() {
    let mut out =
        String::from("simulation presets (use --simulate NAME[,NAME...] or a TOML file):\n");
    for preset in gpuprobe_runner::simulation_presets() {
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
    let checked = session(&args)?;
    let report = &checked.completed.report;
    // The report quotes worker output and exception text: behind the terminal guard (a
    // JSON document holds no control characters, so it passes unchanged).
    let mut stdout = crate::output::stdout();
    if shared.json {
        writeln!(stdout, "{}", gpuprobe_report::render_json(report)).internal()?;
    } else {
        let options = TerminalOptions {
            all: args.all,
            matrix: args.matrix,
            timings: args.timings,
            ..gpuprobe_report::current_console().terminal_options()
        };
        let text = gpuprobe_report::render_terminal(report, options);
        write!(stdout, "{text}").internal()?;
    }
    super::report::write_html(args.html.as_deref(), report, None)?;
    checked.finish(&args)?;
    Ok(report.exit_status)
}

/// Runs `check --health`: the check, then one line on stdout (`OK: ...`, `FAIL: ...`,
/// `UNKNOWN: ...`) and the health-check exit code (0, 1, 2), whatever happened: an error or
/// a signal is UNKNOWN, never an error of its own (`gpuprobe_report::health_of_no_report`); an
/// error's message is still printed on stderr.
pub(super) fn run_health(args: CheckArgs) -> Result<u8> {
    let format = health_format(args.health_format);
    let outcome = session(&args).and_then(|checked| {
        checked.finish(&args)?;
        Ok(checked)
    });
    let verdict = match outcome {
        Ok(checked) => health_of_report(&checked.completed.report, checked.budget_spent, format),
        Err(err) => {
            let why = match interrupt::interruption(&err) {
                Some(interrupted) => NoReport::Interrupted(interrupted.signal),
                None => {
                    // The line names the kind of error only; the message, which may quote
                    // a path, goes to stderr for whoever reads the log.
                    let (status, message) = crate::errors::exit_status_and_message(&err);
                    crate::output::eprint_line(&format!("gpuprobe: error: {message}"));
                    NoReport::Error(status)
                }
            };
            health_of_no_report(why, args.session.simulate.is_some(), format)
        }
    };
    writeln!(crate::output::stdout(), "{}", verdict.line).internal()?;
    Ok(verdict.code())
}

/// Whether a command line that did not parse asked for `check --health`.
pub(crate) fn wants_health(args: &[std::ffi::OsString]) -> bool {
    args.iter().any(|a| a == "check") && args.iter().any(|a| a == "--health")
}

/// The health line of a command line that did not parse (its usage message is on stderr):
/// UNKNOWN, in the format it asked for when that much can be read.
pub(crate) fn print_health_usage_error(args: &[std::ffi::OsString]) {
    let npd = args
        .windows(2)
        .any(|pair| pair[0] == "--health-format" && pair[1] == "npd")
        || args.iter().any(|a| a == "--health-format=npd");
    let format = if npd {
        HealthFormat::Npd
    } else {
        HealthFormat::Slurm
    };
    let verdict = health_of_no_report(NoReport::Error(ExitStatus::UsageError), false, format);
    let _ = writeln!(crate::output::stdout(), "{}", verdict.line);
}

fn health_format(arg: HealthFormatArg) -> HealthFormat {
    match arg {
        HealthFormatArg::Slurm => HealthFormat::Slurm,
        HealthFormatArg::Npd => HealthFormat::Npd,
    }
}

/// A check's session, done: its report, and what is left to do after it is shown.
struct Checked {
    completed: doctor::Completed,
    env: std::collections::BTreeMap<String, String>,
    /// `--budget` stopped the probes.
    budget_spent: bool,
}

impl Checked {
    /// The exports, then the run directories' retention.
    fn finish(&self, args: &CheckArgs) -> Result<()> {
        exports(args).write(&self.completed.report)?;
        super::runs::after_check(&self.env, self.completed.run_dir.path());
        Ok(())
    }
}

fn exports(args: &CheckArgs) -> super::report::Exports<'_> {
    super::report::Exports {
        prometheus: args.prometheus.as_deref(),
        junit: args.junit.as_deref(),
    }
}

/// Plans and runs the check's probes and makes its report (written to the run
/// directory); stops with the interruption when a signal comes, and, with `--budget`,
/// cancels the probes when the budget is spent (the one stop path a signal takes, without
/// the signal: what did not run is NOT-TESTED in the report).
fn session(args: &CheckArgs) -> Result<Checked> {
    let shared = &args.session;
    // First, while gpuprobe has one thread: Ctrl-C then stops the workers and says how to
    // finish the run instead of cutting gpuprobe off mid-line.
    let signals = interrupt::install();
    let started = Instant::now();
    if let Some(seconds) = args.budget {
        let cancel = signals.cancel_token();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(seconds));
            cancel.cancel();
        });
    }
    let env = process_env();
    let mut options = session_options(
        shared,
        "check",
        &env,
        [(
            "soak_seconds".to_string(),
            serde_json::json!(args.soak_seconds),
        )]
        .into(),
    );
    options.spread = !args.no_spread;
    options.validate()?;
    gpuprobe_report::check_html_writable(args.html.as_deref())?;
    exports(args).check_writable()?;
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
    // Cancelled with no signal: only the budget cancels so.
    let budget_spent = host.cancel.is_cancelled() && host.cancel.signal().is_none();
    // A signal while the report was made: every probe is done and the report written; a
    // resume prints it.
    let planned = completed.plan.tasks.len();
    stop_if_interrupted(
        &host,
        || completed.report.results.len(),
        planned,
        completed.run_dir.path(),
    )?;
    Ok(Checked {
        completed,
        env,
        budget_spent,
    })
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
