//! The gpuprobe command line: parses arguments, runs one command, maps the outcome to a
//! documented exit code (`docs/exit-codes.md`).
//!
//! Errors that are the user's to fix (a bad argument, an unreadable input, an unwritable
//! directory) exit 2 with a one-line explanation; anything else that stops gpuprobe itself
//! exits 3. Probe failures are results, not errors: they flow through the report. A command
//! a signal stopped returns its interruption like an error, and leaves with 128 + the
//! signal and the line that says how to finish it (the `interrupt` module).

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use gpuprobe_model::ExitStatus;

pub mod cli;
mod commands;
mod errors;
mod interrupt;
mod output;
mod paths;
mod progress;
mod session;
mod time;

/// Runs gpuprobe with the given arguments (the first is the program name).
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() {
                ExitStatus::UsageError.code()
            } else {
                0
            };
            let _ = err.print();
            // `check --health` promises one line on stdout whatever happens.
            if err.use_stderr() && commands::check::wants_health(&args) {
                commands::check::print_health_usage_error(&args);
            }
            // `memtest --json` promises one JSON document on stdout whatever happens, and a
            // script that passed a bad option needs it most.
            if err.use_stderr() && commands::memtest::wants_json(&args) {
                let message = err.render().to_string();
                let _ = commands::memtest::print_usage_error(&message, &args);
            }
            return ExitCode::from(code);
        }
    };
    // A health check prints its one line and nothing else: no progress, no colour.
    let health = matches!(&cli.command, cli::Command::Check(args) if args.health);
    if health {
        gpuprobe_report::setup_console("never", true);
    } else {
        gpuprobe_report::setup_console(&cli.color, cli.quiet);
    }
    match commands::dispatch(cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            // Stopped by a signal: no error, but how to finish, and 128 + the signal.
            if let Some(interrupted) = interrupt::interruption(&err) {
                return ExitCode::from(interrupt::leave(interrupted));
            }
            let (status, message) = errors::exit_status_and_message(&err);
            // Errors quote paths, interpreter output and exception text.
            output::eprint_line(&format!("gpuprobe: error: {message}"));
            ExitCode::from(status.code())
        }
    }
}

fn is_broken_pipe(err: &errors::Failure) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
