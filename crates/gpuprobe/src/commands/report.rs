//! `gpuprobe report`: renders a finished run's `report.json` again, as terminal text, as
//! JSON, as one offline HTML file, as Prometheus metrics or as JUnit XML; `check --html`,
//! `--prometheus` and `--junit` write theirs through here too. The run directory is read
//! by the runner, the HTML and the exports made by `gpuprobe_report`.

use std::io::Write;

use gpuprobe_model::{ExitStatus, FixAccount, Report};
use gpuprobe_report::{
    check_export_writable, check_html_writable, console_note, current_console, issue_texts,
    render_junit, render_prometheus, report_text, write_html_report,
};

use crate::cli::ReportArgs;
use crate::errors::{Internal, Result};

/// Writes the HTML report to `path`, when one is named (atomically), and says where on
/// stderr (behind the guard: the path is the user's).
pub(super) fn write_html(
    path: Option<&std::path::Path>,
    report: &Report,
    fix: Option<&FixAccount>,
) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    write_html_report(path, report, fix, &issue_texts(report, fix))?;
    crate::output::eprint_line(&format!("HTML report: {}", path.display()));
    Ok(())
}

/// Where a run's exports go: each `None` when not asked for.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Exports<'a> {
    /// `--prometheus FILE`.
    pub prometheus: Option<&'a std::path::Path>,
    /// `--junit FILE`.
    pub junit: Option<&'a std::path::Path>,
}

impl Exports<'_> {
    const PROMETHEUS: &'static str = "Prometheus metrics";
    const JUNIT: &'static str = "JUnit XML";

    /// Refuses an unwritable export path up front, before anything runs.
    pub(super) fn check_writable(self) -> Result<()> {
        check_export_writable(Self::PROMETHEUS, self.prometheus)?;
        check_export_writable(Self::JUNIT, self.junit)?;
        Ok(())
    }

    /// Writes each export asked for (atomically) and says where.
    pub(super) fn write(self, report: &Report) -> Result<()> {
        if let Some(path) = self.prometheus {
            write_export(Self::PROMETHEUS, path, &render_prometheus(report))?;
        }
        if let Some(path) = self.junit {
            write_export(Self::JUNIT, path, &render_junit(report))?;
        }
        Ok(())
    }
}

/// Writes one export and says where on stderr (behind the guard: the path is the user's),
/// unless `--quiet`: a cron job or an epilog that writes metrics wants no mail about it.
fn write_export(what: &'static str, path: &std::path::Path, text: &str) -> Result<()> {
    gpuprobe_report::write_export(what, path, text)?;
    console_note(&format!("{what}: {}", path.display()));
    Ok(())
}

/// Runs `report`; exits with the run's own exit status, as its `check` did.
pub(super) fn run(args: ReportArgs) -> Result<ExitStatus> {
    // An unwritable output is refused before anything is read.
    check_html_writable(args.html.as_deref())?;
    let exports = Exports {
        prometheus: args.prometheus.as_deref(),
        junit: args.junit.as_deref(),
    };
    exports.check_writable()?;
    let run = gpuprobe_runner::read_finished(&args.run_dir)?;
    write_html(args.html.as_deref(), &run.report, run.fix.as_ref())?;
    exports.write(&run.report)?;
    let asked_for_a_file = args.html.is_some() || args.prometheus.is_some() || args.junit.is_some();
    if args.json || !asked_for_a_file {
        let options = current_console().terminal_options();
        let text = report_text(&run.report, args.json, options);
        write!(crate::output::stdout(), "{text}").internal()?;
    }
    Ok(run.report.exit_status)
}
