//! Signals as events: the one place in gpuprobe that takes over the signals a command
//! handles itself (SIGINT and SIGTERM for `check` and `fix`; those and SIGHUP and SIGQUIT
//! for `gpuprobe run`, which passes them on to its job).
//!
//! It lives in the runner because what a signal acts on is the runner's: the [`Cancel`]
//! flag every probe supervisor watches, and the process group of the job `gpuprobe run`
//! supervises. The binary installs it once per command, while it still has a single thread,
//! and hears of every signal through its listener; what to print and which exit code to
//! leave with stay the binary's. No library prints or leaves the process because of a
//! signal: a session that a signal cut short returns an interruption
//! (`gpuprobe_doctor::session::interrupt`).
//!
//! [`Signals::install`] blocks the watched signals in the calling thread (every thread
//! started later inherits the mask; child processes start with an empty one, as the
//! standard library resets it) and waits for them in a thread of its own. For each signal,
//! in this order:
//!
//! 1. the [`Cancel`] flag is cancelled, remembering the first signal: every supervisor then
//!    kills its workers' process groups, records nothing more and returns;
//! 2. the signal is passed to the process group set with [`Signals::set_group`], if any;
//! 3. the listener hears a [`SignalEvent`] (whether it is the first lets the binary leave
//!    at once on a second Ctrl-C).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use nix::sys::signal::{SigSet, Signal, killpg};
use nix::unistd::Pid;

use crate::supervisor::Cancel;

/// A signal this process received, as [`Signals::install`]'s listener hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalEvent {
    /// The signal's number.
    pub signal: i32,
    /// Whether one of the watched signals came before it.
    pub repeated: bool,
}

/// What the signals received so far did, shared with the thread that waits for them.
#[derive(Debug, Default)]
pub struct Signals {
    /// Cancelled by the first signal, which it remembers.
    cancel: Cancel,
    /// Process group signals are passed to (0: none).
    group: AtomicI32,
    /// The last signal received, 0 before any.
    last: AtomicI32,
}

impl Signals {
    /// Takes over `watched` for the rest of the process, with `also_blocked` blocked but not
    /// waited for (`gpuprobe run` blocks SIGTTOU so that it can hand the terminal back
    /// from the background), and calls `listener` on every watched signal after it has
    /// been applied (see the module's description). Call it while the process has a single
    /// thread: a thread that does not block the signals would take their default action.
    ///
    /// A process has one mask and one thread that waits: a later call returns the handle
    /// the first made and drops its own listener. When the mask cannot be set or the thread
    /// cannot start, the signals keep their default action and the handle never fires.
    pub fn install(
        watched: &[Signal],
        also_blocked: &[Signal],
        listener: impl Fn(SignalEvent) + Send + 'static,
    ) -> Arc<Signals> {
        static INSTALLED: OnceLock<Arc<Signals>> = OnceLock::new();
        INSTALLED
            .get_or_init(|| {
                let signals = Arc::new(Signals::default());
                start_waiting(&signals, watched, also_blocked, Box::new(listener));
                signals
            })
            .clone()
    }

    /// The flag the first signal cancels: the one to give every supervisor of the command.
    pub fn cancel_token(&self) -> Cancel {
        self.cancel.clone()
    }

    /// The first signal received, if one came.
    pub fn interrupted(&self) -> Option<i32> {
        self.cancel.signal()
    }

    /// Passes the signals received from now on to `group` (0: to nobody).
    pub fn set_group(&self, group: i32) {
        self.group.store(group, Ordering::SeqCst);
    }

    /// The last signal received (and passed on, when a group was set), 0 when none.
    pub fn forwarded(&self) -> i32 {
        self.last.load(Ordering::SeqCst)
    }

    /// Whether any signal came (the user wants the work to stop).
    pub fn stopped(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Applies one received signal and says whether one came before it.
    fn receive(&self, signal: Signal) -> SignalEvent {
        let number = signal as i32;
        let first = self.cancel.cancel_by_signal(number);
        self.last.store(number, Ordering::SeqCst);
        let group = self.group.load(Ordering::SeqCst);
        if group > 0 {
            let _ = killpg(Pid::from_raw(group), signal);
        }
        SignalEvent {
            signal: number,
            repeated: !first,
        }
    }
}

/// Blocks the signals and starts the thread that waits for them.
fn start_waiting(
    signals: &Arc<Signals>,
    watched: &[Signal],
    also_blocked: &[Signal],
    listener: Box<dyn Fn(SignalEvent) + Send>,
) {
    let mut wanted = SigSet::empty();
    for signal in watched {
        wanted.add(*signal);
    }
    let mut blocked = wanted;
    for signal in also_blocked {
        blocked.add(*signal);
    }
    if blocked.thread_block().is_err() {
        return;
    }
    let shared = Arc::clone(signals);
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(signal) = wanted.wait() {
                listener(shared.receive(signal));
            }
        });
    if spawned.is_err() {
        // Without the thread nobody would see them: back to the default action.
        let _ = blocked.thread_unblock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_cancels_and_is_remembered_and_later_ones_are_repeats() {
        let signals = Signals::default();
        let token = signals.cancel_token();
        assert_eq!(signals.interrupted(), None);
        assert!(!signals.stopped() && !token.is_cancelled());
        let first = signals.receive(Signal::SIGTERM);
        assert_eq!(
            first,
            SignalEvent {
                signal: 15,
                repeated: false
            }
        );
        assert!(token.is_cancelled() && signals.stopped());
        let again = signals.receive(Signal::SIGINT);
        assert!(again.repeated);
        // The first decides the exit code; the last is what a job was sent last.
        assert_eq!(signals.interrupted(), Some(15));
        assert_eq!(token.signal(), Some(15));
        assert_eq!(signals.forwarded(), 2);
    }
}
