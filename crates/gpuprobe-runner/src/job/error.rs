//! What can go wrong around a user's job that is not the job's own failure (the job's
//! failures are outcomes, [`super::JobOutcome`]).

use std::path::PathBuf;

use gpuprobe_model::{ClassifiedError, ExitStatus};

/// Something the job runner could not do.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// `__exec-job` was started without a command.
    #[error("__exec-job: no command")]
    NoCommand,
    /// The job's program could not be started.
    #[error("cannot run {}: {source}", program.display())]
    Exec {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The directory for the `--summary` file could not be made.
    #[error("cannot create {}: {source}", gpuprobe_model::visible_line(&path.display().to_string()))]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The `--summary` file could not be written.
    #[error("cannot write {}: {source}", gpuprobe_model::visible_line(&path.display().to_string()))]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The summary could not be serialized.
    #[error(transparent)]
    Serialize(#[from] serde_json::Error),
}

impl JobError {
    /// The exit code a shell reports when a command cannot be run: 127 when it is not found,
    /// 126 otherwise (2 for a missing command, a usage error).
    pub fn exec_exit_code(&self) -> u8 {
        match self {
            JobError::NoCommand => 2,
            JobError::Exec { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 127,
            _ => 126,
        }
    }
}

impl ClassifiedError for JobError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            JobError::NoCommand
            | JobError::Exec { .. }
            | JobError::CreateDir { .. }
            | JobError::Write { .. } => ExitStatus::UsageError,
            JobError::Serialize(_) => ExitStatus::InternalFailure,
        }
    }
}
