//! `gpuprobe memtest`: the native VRAM pattern test, run in a supervised native worker so a
//! hung or crashing driver cannot take gpuprobe down with it. What it reports, text and the
//! one `--json` document every outcome has, is `gpuprobe_gpu::memtest::MemtestOutcome`'s.

use std::ffi::OsString;
use std::io::Write;

use gpuprobe_doctor::memtest::MemtestRequest;
use gpuprobe_gpu::memtest::{self as outcome, MemtestOutcome};
use gpuprobe_model::ExitStatus;
use gpuprobe_report::memtest_colour as colour;
use gpuprobe_runner::RunDir;

use crate::cli::MemtestArgs;
use crate::errors::{Failure, Internal, Result};
use crate::{output, paths};

use super::process_env;

/// Runs `memtest`.
pub(crate) fn run(args: MemtestArgs) -> Result<ExitStatus> {
    let tested = test(&args);
    if !args.json {
        let tested = tested?;
        let mut out = output::stdout();
        let text = colour(&tested.render_text(args.device), output::stdout_style());
        write!(out, "{text}").internal()?;
        out.flush().internal()?;
        return Ok(tested.exit_status());
    }
    match tested {
        Ok(tested) => {
            print_json(&tested.render_json(args.device).internal()?)?;
            Ok(tested.exit_status())
        }
        Err(err) => {
            // gpuprobe refused or failed before the test: still one JSON document on stdout
            // (and the usual error line on stderr for whoever watches it).
            let (status, message) = crate::errors::exit_status_and_message(&err);
            output::eprint_line(&format!("gpuprobe: error: {message}"));
            print_json(&outcome::render_refusal_json(status, message, args.device).internal()?)?;
            Ok(status)
        }
    }
}

/// Whether a command line that the argument parser refused was `memtest ... --json`.
pub(crate) fn wants_json(args: &[OsString]) -> bool {
    outcome::wants_json(args)
}

/// Prints the `usage_error` document for arguments the parser refused (`message` is its
/// explanation).
pub(crate) fn print_usage_error(message: &str, args: &[OsString]) -> Result<()> {
    print_json(&outcome::render_usage_error_json(message, args).internal()?)
}

fn print_json(document: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{document}").internal()?;
    out.flush().internal()?;
    Ok(())
}

/// Runs the test in a supervised native worker.
fn test(args: &MemtestArgs) -> Result<MemtestOutcome> {
    // --fraction and --passes are range-checked by the command line parser.
    let options = outcome::probe_options(args.fraction, args.passes, args.inject_error.as_deref())?;
    let run_path = args
        .run_dir
        .clone()
        .unwrap_or_else(|| paths::new_run_dir(&process_env(), "memtest"));
    let run_dir = RunDir::create(&run_path)?;
    let spec = outcome::probe_spec()
        .ok_or_else(|| Failure::internal_message("this build has no memtest probe"))?;
    let request = MemtestRequest {
        spec,
        device: args.device,
        options,
        passes: args.passes,
        native_program: std::env::current_exe().ok(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let result = gpuprobe_doctor::memtest::run(request, &run_dir)?;
    Ok(MemtestOutcome::from_result(
        result,
        run_dir.path().to_path_buf(),
    ))
}
