//! A session or fix that a signal cut short, as this library reports it to its caller.
//!
//! The signal itself is received by `gpuprobe_runner::signals`, which cancels the
//! supervisors' [`gpuprobe_runner::Cancel`] flag (remembering the signal): each
//! supervisor kills its workers' process groups and records nothing more, so every result
//! already written stays and the run directory remains resumable. The session and the
//! fix's trials then see the flag, make no report and record no cut-short trial, and return
//! [`Interrupted`]: how far they got and where to finish. What is printed and the exit
//! code (128 + the signal) are the caller's to decide; this library neither prints nor
//! leaves the process.

use std::path::PathBuf;

use gpuprobe_runner::Cancel;

/// A command stopped by a signal: its workers are gone and what it finished is recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by signal {signal}")]
pub struct Interrupted {
    /// The first signal received (SIGINT 2, SIGTERM 15).
    pub signal: i32,
    /// Where it stopped.
    pub stopped: Stopped,
}

/// Where an interrupted command stopped, and so how it is finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// In a session's probes or between its phases: `done` of the `planned` probe runs are
    /// recorded in `run_dir` (`check --resume` finishes a check's).
    Session {
        /// The command the session ran for (`check`, `fix`).
        command: String,
        /// Probe runs recorded.
        done: usize,
        /// Probe runs planned.
        planned: usize,
        /// The run directory.
        run_dir: PathBuf,
    },
    /// In a fix, resumable from `fix_dir` (the trials journaled are kept); `trial` is the
    /// trial cut short, when one was running.
    Fix {
        /// The fix's directory.
        fix_dir: PathBuf,
        /// The trial cut short, if any.
        trial: Option<u32>,
    },
}

impl Interrupted {
    /// The interruption `cancel` records, if a signal cancelled it, stopped at `stopped`.
    pub fn of(cancel: &Cancel, stopped: impl FnOnce() -> Stopped) -> Option<Interrupted> {
        cancel.signal().map(|signal| Interrupted {
            signal,
            stopped: stopped(),
        })
    }

    /// The same interruption, said of the fix in `fix_dir` (a trial already named stays).
    pub fn in_fix(self, fix_dir: PathBuf) -> Interrupted {
        let trial = match self.stopped {
            Stopped::Fix { trial, .. } => trial,
            Stopped::Session { .. } => None,
        };
        Interrupted {
            signal: self.signal,
            stopped: Stopped::Fix { fix_dir, trial },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_signal_interrupts_and_a_fix_keeps_the_trial_it_names() {
        let cancel = Cancel::new();
        let session = || Stopped::Session {
            command: "fix".into(),
            done: 1,
            planned: 2,
            run_dir: PathBuf::from("/f/check"),
        };
        cancel.cancel();
        assert_eq!(Interrupted::of(&cancel, session), None);
        cancel.cancel_by_signal(2);
        let interrupted = Interrupted::of(&cancel, session).unwrap();
        assert_eq!(
            interrupted.clone().in_fix(PathBuf::from("/f")).stopped,
            Stopped::Fix {
                fix_dir: PathBuf::from("/f"),
                trial: None
            }
        );
        let in_trial = Interrupted {
            signal: 15,
            stopped: Stopped::Fix {
                fix_dir: PathBuf::from("/f"),
                trial: Some(3),
            },
        };
        assert_eq!(in_trial.clone().in_fix(PathBuf::from("/f")), in_trial);
    }
}
