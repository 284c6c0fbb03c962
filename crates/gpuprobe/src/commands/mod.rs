//! One module per command; `dispatch` picks it.

use anyhow::Result;
use gpuprobe_model::ExitStatus;

use crate::cli::Command;

mod check;
mod env;
mod kb;
mod memtest;
mod native_worker;
mod triage;

/// Runs one command and returns the exit status it earned.
pub fn dispatch(command: Command) -> Result<ExitStatus> {
    match command {
        Command::Check(args) => check::run(args),
        Command::Env(args) => env::run(args),
        Command::Triage(args) => triage::run(args),
        Command::Kb(args) => kb::run(args),
        Command::Memtest(args) => memtest::run(args),
        Command::NativeWorker(args) => native_worker::run(args),
    }
}

/// The process environment as a map (tests pass their own maps to the pieces below).
pub fn process_env() -> std::collections::BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
