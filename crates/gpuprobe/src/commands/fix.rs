//! `gpuprobe fix`: the workaround search (`gpuprobe_doctor::fix::run`). This adapter maps
//! the options, says the search's progress on stderr, draws the starting check's progress
//! bar, and prints the account.

use std::io::Write;
use std::time::SystemTime;

use gpuprobe_doctor::fix::{self, FixError, FixHost, FixOptions, ResumeOptions};
use gpuprobe_doctor::session as doctor;
use gpuprobe_doctor::session::{Interrupted, Stopped};
use gpuprobe_model::ExitStatus;
use gpuprobe_model::visible_line;

use crate::cli::FixArgs;
use crate::errors::{Internal, Result};
use crate::progress::TerminalProgress;
use crate::session::{self, session_options};
use crate::{interrupt, output, paths, time};

use super::process_env;

/// Runs `fix`.
pub(super) fn run(args: FixArgs) -> Result<ExitStatus> {
    let shared = &args.session;
    // First, while gpuprobe has one thread: Ctrl-C stops the workers and clears the bar.
    let signals = interrupt::install();
    let env = process_env();
    doctor::validate_python(shared.python.as_deref(), &env)?;
    if shared.simulate.as_deref() == Some("list") {
        super::check::print_presets();
        return Ok(ExitStatus::AllPassed);
    }
    let mut progress = TerminalProgress::new(shared.verbose);
    let mut host = FixHost {
        session: session::host(&env, signals.cancel_token()),
        progress: &mut progress,
        say: &say,
        now: || time::rfc3339(SystemTime::now()),
        check_writable_file: paths::check_writable_file,
    };
    let (finished, fix_dir) = match &args.resume {
        Some(dir) => (
            fix::resume(
                dir,
                &ResumeOptions {
                    python: shared.python.clone(),
                    verbose: shared.verbose,
                },
                &mut host,
            ),
            dir.clone(),
        ),
        None => {
            let options = FixOptions {
                session: session_options(shared, "fix", &env, Default::default()),
                from: args.from.clone(),
                max_runs: args.max_runs,
                candidate: args.candidate.clone(),
                sentinels: args.sentinels,
                profile_out: args.profile_out.clone(),
                verbose: shared.verbose,
            };
            (fix::start(&options, &mut host), options.session.run_dir)
        }
    };
    let finished = finished?;
    // A signal that came once the last trial was over: the fix stops here as it would have
    // in a trial (the interruption, reported by `crate::interrupt::leave`).
    if let Some(interrupted) = Interrupted::of(&signals.cancel_token(), || Stopped::Fix {
        fix_dir,
        trial: None,
    }) {
        return Err(FixError::Interrupted(interrupted).into());
    }
    if shared.json {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{}", finished.json).internal()?;
    } else {
        let style = output::stdout_style();
        // The account quotes probe details and paths: behind the terminal guard.
        let mut stdout = output::stdout();
        write!(
            stdout,
            "{}",
            gpuprobe_report::render_fix_for(
                &finished.account,
                style,
                &finished.run_options,
                gpuprobe_report::current_console().text_width,
            )
        )
        .internal()?;
        stdout.flush().internal()?;
    }
    Ok(finished.account.exit_status)
}

/// A progress line on stderr. It can quote paths and probe details: made visible.
fn say(line: &str) {
    gpuprobe_report::console_note(&format!("gpuprobe: fix: {}", visible_line(line)));
}
