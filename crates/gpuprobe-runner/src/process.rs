//! Process groups and signals, for every process this crate supervises (probe workers and
//! `gpuprobe run`'s job): killing a whole group, sending a signal to a group, handing it
//! the terminal, and naming signals in messages. Signals this process receives are
//! [`crate::signals`]'.
//!
//! Every child runs in a process group of its own, so whatever it starts (a compiler, a
//! data loader) ends with it.

use std::io::IsTerminal;
use std::thread;

use nix::sys::signal::{SigSet, Signal, killpg};
use nix::unistd::Pid;

/// Signals that mean a process crashed: SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGKILL
/// (when the supervisor did not send it: the out-of-memory killer), SIGSEGV, SIGSYS.
pub(crate) const CRASH_SIGNALS: &[i32] = &[4, 5, 6, 7, 8, 9, 11, 31];

/// Signals a supervisor passes on to its child's process group (`gpuprobe run` watches
/// them with [`crate::signals::Signals`]).
pub const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// `SIGSEGV (signal 11)`: a signal as `gpuprobe run` names it.
pub(crate) fn signal_words(sig: i32) -> String {
    match Signal::try_from(sig) {
        Ok(signal) => format!("{} (signal {sig})", signal.as_str()),
        Err(_) => format!("signal {sig}"),
    }
}

/// The name of a signal number as the probe supervisor's messages give it (`signal` for the
/// ones a probe worker is not expected to die of).
pub(crate) fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// Sends `signal` to the process group led by `leader` (a child spawned with
/// `process_group(0)`, whose pid is its group's id). A group already gone is no error: there
/// is nothing left to signal.
pub(crate) fn signal_group(leader: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(leader) else {
        return;
    };
    let _ = killpg(Pid::from_raw(raw), signal);
}

/// Kills the process group led by `leader` at once.
pub(crate) fn kill_group(leader: u32) {
    signal_group(leader, Signal::SIGKILL);
}

/// Unblocks every signal of the calling thread: what a re-executed child does before it
/// becomes the user's program, which must start with the mask a shell would give it.
pub(crate) fn unblock_all_signals() {
    let _ = SigSet::all().thread_unblock();
}

/// Hands the terminal's foreground to a child's group when this process holds it, so a
/// child that reads the terminal is not stopped; gives it back on drop.
#[derive(Debug)]
pub(crate) struct Foreground {
    ours: Option<Pid>,
}

impl Foreground {
    /// Gives the terminal to `group` when stdin is a terminal whose foreground is ours.
    pub(crate) fn give(group: i32) -> Foreground {
        let group = Pid::from_raw(group);
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Foreground { ours: None };
        }
        let ours = nix::unistd::getpgrp();
        match nix::unistd::tcgetpgrp(&stdin) {
            Ok(foreground) if foreground == ours => {
                if nix::unistd::tcsetpgrp(&stdin, group).is_ok() {
                    // The child may have tried to read before it owned the terminal.
                    let _ = killpg(group, Signal::SIGCONT);
                    return Foreground { ours: Some(ours) };
                }
                Foreground { ours: None }
            }
            _ => Foreground { ours: None },
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        if let Some(ours) = self.ours {
            let _ = nix::unistd::tcsetpgrp(std::io::stdin(), ours);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_both_ways() {
        assert_eq!(signal_words(11), "SIGSEGV (signal 11)");
        assert_eq!(signal_words(999), "signal 999");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(1), "signal");
    }
}

/// How a command run by [`run_to_files`] ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ended {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did (SIGKILL after the timeout).
    pub signal: Option<i32>,
    /// Whether it ran past the limit and its group was killed.
    pub timed_out: bool,
    /// Seconds it ran.
    pub elapsed_s: f64,
}

/// Runs `command` in a process group of its own, stdin closed, stdout and stderr into the
/// two files, and kills the whole group when it runs past `timeout`. For short
/// non-interactive helpers (`gpuprobe repro`'s generator and script): files rather than
/// pipes, so a child that writes a lot never blocks on a reader.
pub fn run_to_files(
    mut command: std::process::Command,
    stdout: &std::path::Path,
    stderr: &std::path::Path,
    timeout: std::time::Duration,
) -> std::io::Result<Ended> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let start = std::time::Instant::now();
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(stdout)?)
        .stderr(std::fs::File::create(stderr)?)
        .process_group(0);
    let mut child = command.spawn()?;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() >= timeout {
            timed_out = true;
            kill_group(child.id());
            break child.wait()?;
        }
        thread::sleep(std::time::Duration::from_millis(20));
    };
    // Whatever the group left behind goes with it.
    kill_group(child.id());
    Ok(Ended {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        elapsed_s: start.elapsed().as_secs_f64(),
    })
}
