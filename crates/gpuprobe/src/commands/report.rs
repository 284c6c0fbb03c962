//! `gpuprobe report`: renders a finished run's `report.json` again, as terminal text, as
//! JSON or as one offline HTML file; `check --html` writes its HTML through here too. The
//! run directory is read and the HTML made by `gpuprobe_report::html`.

use std::io::Write;

use anyhow::Result;
use gpuprobe_model::{ExitStatus, Report, profile::FixAccount};
use gpuprobe_report::html;

use crate::cli::ReportArgs;

/// Writes the HTML report to `path`, when one is named (atomically), and says where on
/// stderr (behind the guard: the path is the user's).
pub(super) fn write_html(
    path: Option<&std::path::Path>,
    report: &Report,
    fix: Option<&FixAccount>,
) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    html::write_report(path, report, fix, &html::issue_texts(report, fix))?;
    crate::output::eprint_line(&format!("HTML report: {}", path.display()));
    Ok(())
}

/// Runs `report`; exits with the run's own exit status, as its `check` did.
pub(super) fn run(args: ReportArgs) -> Result<ExitStatus> {
    // An unwritable output is refused before anything is read.
    html::check_writable(args.html.as_deref())?;
    let run = gpuprobe_runner::rundir::read_finished(&args.run_dir)?;
    write_html(args.html.as_deref(), &run.report, run.fix.as_ref())?;
    if args.json || args.html.is_none() {
        let options = gpuprobe_report::console::current().terminal_options();
        let text = html::text(&run.report, args.json, options);
        write!(crate::output::stdout(), "{text}")?;
    }
    Ok(run.report.exit_status)
}
