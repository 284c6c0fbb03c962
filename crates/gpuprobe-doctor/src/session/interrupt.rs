//! Ctrl-C and SIGTERM during a probe session.
//!
//! Left to the default action, a signal ends gpuprobe in the middle of a line: the progress
//! bar stays on screen, nothing says that the run can be finished, and the workers die only
//! because the kernel kills them with their parent. Instead, [`install`] blocks SIGINT and
//! SIGTERM in every thread and waits for them in a thread of its own:
//!
//! - the first one cancels the run ([`cancel_token`]): each supervisor kills its workers'
//!   process groups and records nothing more, so every result already written stays and the
//!   run directory remains resumable. With [`Mode::Finish`] (`check`) the session then says
//!   how far it got and how to finish ([`leave`]); with [`Mode::Leave`] (`fix`, whose
//!   journal must never record a cut-short trial) gpuprobe leaves as soon as the workers are
//!   gone, with the line the command set ([`set_leave_line`]: how to resume it);
//! - a second one leaves at once.
//!
//! Either way the exit code is 128 + the signal (130 for SIGINT, 143 for SIGTERM), as
//! shells report a process the signal ended (docs/exit-codes.md). What is on the screen is
//! the caller's: [`install`] takes the function that clears it (the binary's progress bar)
//! before the last line is printed.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Duration;

use gpuprobe_model::text::visible_line;
use gpuprobe_runner::supervisor::Cancel;
use nix::sys::signal::{SigSet, Signal};

/// What the first signal does once the workers are stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The session goes on to say how far it got, then leaves ([`leave`]).
    Finish,
    /// gpuprobe leaves at once.
    Leave,
}

/// How long [`Mode::Leave`] waits for the supervisors to end their workers; they look at
/// the flag every few tens of milliseconds, so this is only reached when one is stuck.
const STOP_WAIT: Duration = Duration::from_secs(5);

struct State {
    cancel: Cancel,
    /// The first signal received, 0 before any.
    signal: AtomicI32,
    /// What [`Mode::Leave`] prints, once the command knows how it can be resumed.
    leave_line: Mutex<Option<String>>,
    /// Clears the screen's transient output before gpuprobe leaves ([`install`]).
    clear_screen: OnceLock<fn()>,
}

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(|| State {
        cancel: Cancel::new(),
        signal: AtomicI32::new(0),
        leave_line: Mutex::new(None),
        clear_screen: OnceLock::new(),
    })
}

/// The line [`Mode::Leave`] prints when a signal ends the command from now on (e.g. `fix`:
/// how to resume from its directory).
pub fn set_leave_line(line: String) {
    if let Ok(mut slot) = state().leave_line.lock() {
        *slot = Some(line);
    }
}

/// The flag every supervisor of this process watches: cancelled by the first signal once
/// [`install`] ran, never otherwise.
pub fn cancel_token() -> Cancel {
    state().cancel.clone()
}

/// The signal that interrupted the session, if one did.
pub fn interrupted() -> Option<i32> {
    match state().signal.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Takes over SIGINT and SIGTERM for the rest of the process. Must run before any other
/// thread starts: a thread that does not block them would take the default action (the
/// mask is inherited by threads; child processes start with an empty one, as the standard
/// library resets it). `clear_screen` removes what the caller draws (a progress bar) before
/// gpuprobe leaves. Later calls do nothing.
pub fn install(mode: Mode, clear_screen: fn()) {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let _ = state().clear_screen.set(clear_screen);
        let mut wanted = SigSet::empty();
        wanted.add(Signal::SIGINT);
        wanted.add(Signal::SIGTERM);
        if wanted.thread_block().is_err() {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || wait_for_signals(wanted, mode));
        if spawned.is_err() {
            // Without the thread nobody would see them: back to the default action.
            let _ = wanted.thread_unblock();
        }
    });
}

fn wait_for_signals(wanted: SigSet, mode: Mode) {
    let state = state();
    while let Ok(signal) = wanted.wait() {
        let signal = signal as i32;
        if state
            .signal
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            leave(signal, "gpuprobe: interrupted again: stopping at once");
        }
        state.cancel.cancel();
        if mode == Mode::Leave {
            state.cancel.wait_idle(STOP_WAIT);
            let line = state
                .leave_line
                .lock()
                .ok()
                .and_then(|slot| slot.clone())
                .unwrap_or_else(|| "gpuprobe: interrupted; the workers are stopped".into());
            leave(signal, &line);
        }
    }
}

/// Leaves gpuprobe after a signal: clears the screen's progress output, prints `line` on stderr and
/// exits with 128 + `signal`. The first caller wins; any other (the signal thread and the
/// session may both get here) waits for the process to end.
pub fn leave(signal: i32, line: &str) -> ! {
    static LEAVING: Mutex<()> = Mutex::new(());
    // Held until the exit: a second caller blocks here.
    std::mem::forget(LEAVING.lock());
    if let Some(clear_screen) = state().clear_screen.get() {
        clear_screen();
    }
    eprintln!("{}", visible_line(line));
    std::process::exit(128 + signal)
}

/// The line a `check` ended by a signal prints: how far it got and how to finish.
pub fn resume_line(done: usize, planned: usize, run_dir: &std::path::Path) -> String {
    format!(
        "interrupted: {done} of {planned} probes done; finish with: gpuprobe check --resume {}",
        shell_word(&run_dir.display().to_string())
    )
}

/// Leaves gpuprobe with [`resume_line`] when a signal has come (a no-op otherwise): for a
/// `check` between its phases, with `done` of `planned` probes recorded in `run_dir`.
pub fn leave_if_interrupted(
    done: impl FnOnce() -> usize,
    planned: usize,
    run_dir: &std::path::Path,
) {
    if let Some(signal) = interrupted() {
        leave(signal, &resume_line(done(), planned, run_dir));
    }
}

/// How an interrupted `fix` is finished from its directory.
pub fn fix_resume_hint(fix_dir: &std::path::Path) -> String {
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
    use super::*;

    #[test]
    fn the_resume_line_names_a_directory_a_shell_can_take() {
        assert_eq!(
            resume_line(3, 10, std::path::Path::new("/runs/check-1")),
            "interrupted: 3 of 10 probes done; finish with: gpuprobe check --resume /runs/check-1"
        );
        assert_eq!(shell_word("/my runs/it's"), r"'/my runs/it'\''s'");
    }
}
