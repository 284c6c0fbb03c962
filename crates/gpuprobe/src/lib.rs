//! The gpuprobe command line: parses arguments, runs one command, maps the outcome to an
//! exit code.

use std::ffi::OsString;
use std::process::ExitCode;

/// Runs gpuprobe with the given arguments (the first is the program name).
pub fn main(_args: impl IntoIterator<Item = OsString>) -> ExitCode {
    ExitCode::from(gpuprobe_model::ExitStatus::InternalFailure.code())
}
