//! Errors of the runner itself (as opposed to probe failures, which are results).

use std::path::PathBuf;

/// Something the runner could not do.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// A file or directory could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("cannot create run directory").
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A worker process could not be started.
    #[error("cannot start worker {program}: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No usable Python interpreter was found.
    #[error("no Python interpreter found: {0}")]
    NoPython(String),
    /// A run directory's files are not what gpuprobe wrote.
    #[error("run directory {path} is not usable: {reason}")]
    BadRunDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A simulation spec could not be understood.
    #[error("simulation spec {spec:?}: {reason}")]
    Simulation {
        /// What the user gave.
        spec: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A worker answered with something other than the protocol.
    #[error("worker protocol: {0}")]
    Protocol(String),
}

impl RunnerError {
    /// An I/O error with its context.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RunnerError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

impl gpuprobe_model::ClassifiedError for RunnerError {
    /// What the user can fix (a run directory that cannot be made or is not a run, no
    /// usable Python, a malformed simulation spec) is a usage error, as the binary reports
    /// them today; a worker that cannot be spawned or breaks the protocol is gpuprobe's own
    /// failure.
    fn exit_status(&self) -> gpuprobe_model::ExitStatus {
        use gpuprobe_model::ExitStatus;
        match self {
            RunnerError::Io { .. }
            | RunnerError::NoPython(_)
            | RunnerError::BadRunDir { .. }
            | RunnerError::Simulation { .. } => ExitStatus::UsageError,
            RunnerError::Spawn { .. } | RunnerError::Protocol(_) => ExitStatus::InternalFailure,
        }
    }
}

#[cfg(test)]
mod tests {
    use gpuprobe_model::{ClassifiedError, ExitStatus};

    use super::RunnerError;
    use crate::job::JobError;

    #[test]
    fn what_the_user_can_fix_is_a_usage_error() {
        let denied = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let usage = [
            RunnerError::io("cannot create run directory", "/x", denied()).exit_status(),
            RunnerError::NoPython("none".into()).exit_status(),
            JobError::Write {
                path: "/x".into(),
                source: denied(),
            }
            .exit_status(),
            JobError::NoCommand.exit_status(),
        ];
        assert!(
            usage.iter().all(|s| *s == ExitStatus::UsageError),
            "{usage:?}"
        );
        assert_eq!(
            RunnerError::Protocol("x".into()).exit_status(),
            ExitStatus::InternalFailure
        );
    }
}
