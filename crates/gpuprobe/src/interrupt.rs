//! Ctrl-C and SIGTERM during `check` and `fix`: what gpuprobe says and the exit code it
//! leaves with. The one place in gpuprobe that leaves the process because of a signal.
//!
//! Left to the default action, a signal ends gpuprobe in the middle of a line: the progress
//! bar stays on screen, nothing says that the run can be finished, and the workers die only
//! because the kernel kills them with their parent. Instead [`install`] hands SIGINT and
//! SIGTERM to `gpuprobe_runner::signals` (the one installer of signal handling, shared with
//! `gpuprobe run`):
//!
//! - the first signal cancels the session's flag: each supervisor kills its workers'
//!   process groups and records nothing more, so every result already written stays and
//!   the run directory remains resumable. The library then returns an interruption
//!   (`gpuprobe_doctor::session::interrupt::Interrupted`, inside its error) that
//!   [`leave`] turns into the line saying how far the command got and how to finish it;
//! - a second one leaves at once from the signal thread ([`leave_at_once`]), for a session
//!   that does not stop (a supervisor stuck on a worker that does not die).
//!
//! Either way the exit code is 128 + the signal (130 for SIGINT, 143 for SIGTERM), as
//! shells report a process the signal ended (docs/exit-codes.md), and the progress bar is
//! cleared before the last line is printed.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use gpuprobe_doctor::session::{Interrupted, Stopped};
use gpuprobe_model::visible_line;
use gpuprobe_runner::{SignalEvent, Signals};
use nix::sys::signal::Signal;

/// Takes over SIGINT and SIGTERM for the rest of the process. Must run while gpuprobe has
/// one thread (see `gpuprobe_runner::signals`). Its cancel flag goes to the session
/// (`SessionHost::cancel`).
pub(crate) fn install() -> Arc<Signals> {
    Signals::install(
        &[Signal::SIGINT, Signal::SIGTERM],
        &[],
        |event: SignalEvent| {
            if event.repeated {
                leave_at_once(event.signal);
            }
        },
    )
}

/// The interruption an error carries, if a signal stopped the command.
pub(crate) fn interruption(err: &crate::errors::Failure) -> Option<&Interrupted> {
    err.chain()
        .find_map(|cause| cause.downcast_ref::<Interrupted>())
}

/// Says how far an interrupted command got and how to finish it (clearing the progress bar
/// first), and returns the exit code to leave with: 128 + the signal.
pub(crate) fn leave(interrupted: &Interrupted) -> u8 {
    say_last(&leave_line(interrupted));
    exit_code(interrupted.signal)
}

/// Leaves gpuprobe now, from the signal thread: the second signal when the first has not
/// stopped the command yet.
fn leave_at_once(signal: i32) -> ! {
    say_last("gpuprobe: interrupted again: stopping at once");
    std::process::exit(i32::from(exit_code(signal)))
}

/// 128 + `signal`, as shells report a process a signal ended.
fn exit_code(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(u8::MAX)
}

/// Clears the progress bar and prints `line` on stderr, once: the main thread ([`leave`])
/// and the signal thread ([`leave_at_once`]) may both get here, and the first one wins;
/// the other waits for the process to end.
fn say_last(line: &str) {
    static LEAVING: Mutex<()> = Mutex::new(());
    // Held until the process ends: a second caller blocks here.
    std::mem::forget(LEAVING.lock());
    crate::progress::clear_active();
    let _ = writeln!(std::io::stderr(), "{}", visible_line(line));
}

/// The line an interrupted command prints.
fn leave_line(interrupted: &Interrupted) -> String {
    match &interrupted.stopped {
        Stopped::Session {
            command,
            done,
            planned,
            run_dir,
        } if command == "check" => resume_line(*done, *planned, run_dir),
        Stopped::Session { .. } => "gpuprobe: interrupted; the workers are stopped".to_string(),
        Stopped::Fix {
            fix_dir,
            trial: Some(trial),
        } => format!(
            "gpuprobe: fix: interrupted in trial {trial}; {}",
            fix_resume_hint(fix_dir)
        ),
        Stopped::Fix {
            fix_dir,
            trial: None,
        } => format!(
            "gpuprobe: fix: interrupted; the trials done are kept; {}",
            fix_resume_hint(fix_dir)
        ),
    }
}

/// The line a `check` ended by a signal prints: how far it got and how to finish.
fn resume_line(done: usize, planned: usize, run_dir: &Path) -> String {
    format!(
        "interrupted: {done} of {planned} probes done; finish with: gpuprobe check --resume {}",
        shell_word(&run_dir.display().to_string())
    )
}

/// How an interrupted `fix` is finished from its directory.
fn fix_resume_hint(fix_dir: &Path) -> String {
    format!(
        "finish with: gpuprobe fix --resume {}",
        shell_word(&fix_dir.display().to_string())
    )
}

/// `text` as one shell word: as it is when it holds nothing a shell would split or expand,
/// else in single quotes.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn the_resume_line_names_a_directory_a_shell_can_take() {
        assert_eq!(
            resume_line(3, 10, Path::new("/runs/check-1")),
            "interrupted: 3 of 10 probes done; finish with: gpuprobe check --resume /runs/check-1"
        );
        assert_eq!(shell_word("/my runs/it's"), r"'/my runs/it'\''s'");
    }

    #[test]
    fn each_interruption_says_how_to_finish_and_leaves_with_128_plus_the_signal() {
        let interrupted = |signal, stopped| Interrupted { signal, stopped };
        let check = interrupted(
            2,
            Stopped::Session {
                command: "check".into(),
                done: 1,
                planned: 4,
                run_dir: PathBuf::from("/runs/c"),
            },
        );
        assert_eq!(
            leave_line(&check),
            "interrupted: 1 of 4 probes done; finish with: gpuprobe check --resume /runs/c"
        );
        assert_eq!(exit_code(check.signal), 130);
        let trial = interrupted(
            15,
            Stopped::Fix {
                fix_dir: PathBuf::from("/runs/f"),
                trial: Some(3),
            },
        );
        assert_eq!(
            leave_line(&trial),
            "gpuprobe: fix: interrupted in trial 3; finish with: gpuprobe fix --resume /runs/f"
        );
        assert_eq!(exit_code(trial.signal), 143);
        let fix = interrupted(
            2,
            Stopped::Fix {
                fix_dir: PathBuf::from("/runs/f"),
                trial: None,
            },
        );
        assert_eq!(
            leave_line(&fix),
            "gpuprobe: fix: interrupted; the trials done are kept; finish with: gpuprobe fix --resume /runs/f"
        );
        // Found however deep the library wrapped it.
        let wrapped = crate::errors::Failure::from(gpuprobe_doctor::fix::FixError::Session(
            gpuprobe_doctor::session::SessionError::Interrupted(check.clone()),
        ))
        .context("fix".to_string());
        assert_eq!(interruption(&wrapped), Some(&check));
        let other = crate::errors::Failure::internal_message("other");
        assert_eq!(interruption(&other), None);
    }
}
