//! Process exit codes: chosen once, documented in `docs/exit-codes.md`, never renumbered.

use serde::{Deserialize, Serialize};

/// What a gpuprobe command tells its caller through the process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// Everything that was tested passed (0).
    AllPassed,
    /// At least one probe failed, crashed or hung, or a finding of error severity was raised (1).
    ProblemsFound,
    /// The command line or an input file was wrong (2).
    UsageError,
    /// gpuprobe itself failed (3).
    InternalFailure,
    /// Nothing could be tested: no GPU, no framework, no runtime (4).
    NothingTested,
}

impl ExitStatus {
    /// The numeric process exit code.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::AllPassed => 0,
            ExitStatus::ProblemsFound => 1,
            ExitStatus::UsageError => 2,
            ExitStatus::InternalFailure => 3,
            ExitStatus::NothingTested => 4,
        }
    }

    /// A few words for the end of a terminal report.
    pub fn describe(self) -> &'static str {
        match self {
            ExitStatus::AllPassed => "all passed",
            ExitStatus::ProblemsFound => "problems found",
            ExitStatus::UsageError => "usage or input error",
            ExitStatus::InternalFailure => "internal failure",
            ExitStatus::NothingTested => "nothing could be tested",
        }
    }
}

/// An error that knows the exit status it earns: [`ExitStatus::UsageError`] when the user
/// can fix it (a wrong argument, an unreadable or malformed input, an unwritable path),
/// [`ExitStatus::InternalFailure`] when gpuprobe itself failed.
///
/// Each library's error enum implements it, so the decision is made where the error is
/// made, with the variant in hand. The binary's `?` converts such an error into a failure
/// that carries its status (a type that does not implement this trait does not convert), so
/// an error that wraps another answers for both: the outermost one decides.
pub trait ClassifiedError: std::error::Error + Send + Sync + 'static {
    /// The exit status this error ends the command with.
    fn exit_status(&self) -> ExitStatus;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable() {
        let all = [
            (ExitStatus::AllPassed, 0),
            (ExitStatus::ProblemsFound, 1),
            (ExitStatus::UsageError, 2),
            (ExitStatus::InternalFailure, 3),
            (ExitStatus::NothingTested, 4),
        ];
        for (status, code) in all {
            assert_eq!(status.code(), code, "{status:?}");
        }
    }
}
