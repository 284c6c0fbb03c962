//! `gpuprobe repro`: a standalone script and an ISSUE.md for one failing probe result.
//! Finding the run and the result, generating and running the script are
//! `gpuprobe_doctor::repro`'s; the issue body and the lines printed are
//! `gpuprobe_report::issue`'s.

use std::io::Write;

use gpuprobe_doctor::repro::{self, ReproOptions};

use crate::errors::Internal;

/// Runs `repro`.
pub(super) fn run(
    args: crate::cli::ReproArgs,
) -> crate::errors::Result<gpuprobe_model::ExitStatus> {
    let env = super::process_env();
    let options = ReproOptions {
        probe: args.probe,
        run_dir: args.run,
        out: args.out,
        device: args.device,
        python: args.python,
        no_run: args.no_run,
        timeout: args.timeout.map(std::time::Duration::from_secs),
    };
    let made = repro::make(&options, &env, &crate::paths::runs_root(&env))?;
    let issue_path = repro::write_issue(&made.out, &gpuprobe_report::render_repro(&made))?;
    write!(
        crate::output::stdout(),
        "{}",
        gpuprobe_report::issue_terminal_text(&made, &issue_path)
    )
    .internal()?;
    Ok(repro::exit_status(made.run.as_ref()))
}
