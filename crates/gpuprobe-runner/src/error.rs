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
