//! The `__exec-job` re-exec: how a job starts with a clean signal mask.
//!
//! The job supervisor blocks the signals it forwards (so a thread can wait for them), and a
//! blocked mask is inherited across `exec`. So the job is not spawned directly: the
//! supervisor spawns its own executable with the hidden subcommand [`EXEC_JOB`], which
//! clears the mask and then becomes the job ([`exec_job`]). The binary keeps only the thin
//! entry that parses the subcommand and calls [`exec_job`] (as cargo-nextest's
//! `double_spawn` does).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use super::JobError;
use crate::process::unblock_all_signals;

/// The hidden subcommand that starts a job (see [`exec_job`]).
pub(super) const EXEC_JOB: &str = "__exec-job";

/// Becomes the job: clears the signal mask inherited from `gpuprobe run`, then replaces
/// this process with `command`. Returns only when that fails; [`JobError::exec_exit_code`]
/// gives the code to leave with (127: not found, 126: not executable, as shells report).
pub fn exec_job(command: &[OsString]) -> JobError {
    unblock_all_signals();
    let Some(program) = command.first() else {
        return JobError::NoCommand;
    };
    let source = Command::new(program).args(&command[1..]).exec();
    JobError::Exec {
        program: PathBuf::from(program),
        source,
    }
}

/// The command that starts `command` through [`EXEC_JOB`] (the job itself when this
/// executable cannot be found). The job starts with no signal blocked, and with the
/// dispositions the supervisor inherited (a job run under nohup still ignores SIGHUP).
pub(crate) fn launcher(command: &[OsString]) -> Command {
    match std::env::current_exe() {
        Ok(program) => {
            let mut launcher = Command::new(program);
            launcher.arg(EXEC_JOB).arg("--").args(command);
            launcher
        }
        Err(_) => {
            let mut launcher = Command::new(&command[0]);
            launcher.args(&command[1..]);
            launcher
        }
    }
}
