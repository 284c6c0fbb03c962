//! The binary's own errors and the one place that turns any error into an exit status.
//!
//! Library errors say which exit status they earn (`gpuprobe_model::ClassifiedError`), and
//! the type system carries it: a command returns a [`Failure`], into which such an error
//! converts with its status, while an error that says none must be marked internal by name
//! ([`Internal`]). No list of error types is kept, so none can be left out of one.
//! [`exit_status_and_message`] gives the status and the text. The message is the chain
//! joined by `: ` (what anyhow's `{:#}` shows), less any cause whose text the message
//! already quotes: many errors name their cause in their own text (a path and why it could
//! not be read), and a user should not read it twice.

use std::path::PathBuf;

use gpuprobe_model::visible_line;
use gpuprobe_model::{ClassifiedError, ExitStatus};

/// What the binary itself refuses: wrong arguments and inputs its adapters check.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// `run` without a command.
    #[error("no command given: gpuprobe run [OPTIONS] -- CMD ...")]
    NoCommand,
    /// `run --summary FILE` that cannot be written.
    #[error("--summary: {}", visible_line(.reason))]
    SummaryNotWritable {
        /// Why the file cannot be written.
        reason: String,
    },
    /// A profile file that could not be loaded, shown on one line (its text is the user's).
    #[error("{}", visible_line(&.source.to_string()))]
    Profile {
        /// The loader's error.
        #[source]
        source: gpuprobe_doctor::profile::ProfileError,
    },
    /// The start-up hook that applies a profile's framework switches could not be placed.
    #[error("cannot place the start-up hook for the profile's framework switches: {}", visible_line(&.source.to_string()))]
    StartupHook {
        /// The runner's error.
        #[source]
        source: gpuprobe_runner::RunnerError,
    },
    /// `run --profile` proven on another stack, without `--force`.
    #[error(
        "profile {} was proven on a different stack ({}); its settings are not proven here: \
         run `gpuprobe fix` on this machine, or pass --force to apply them anyway",
        visible_line(&.path.display().to_string()),
        visible_line(.differences)
    )]
    ProfileNotProvenHere {
        /// The profile file.
        path: PathBuf,
        /// The differences, `; `-separated.
        differences: String,
    },
    /// `profile check` / `profile export --check-stack` on another stack.
    #[error("profile {} was proven on a different stack ({differences})", .path.display())]
    ProfileProvenElsewhere {
        /// The profile file.
        path: PathBuf,
        /// The differences, `; `-separated.
        differences: String,
    },
    /// `kb show` of an unknown id.
    #[error("no known issue {id:?}; `gpuprobe kb list` shows them all")]
    NoSuchKnownIssue {
        /// The id asked for.
        id: String,
    },
    /// The runs directory cannot be listed.
    #[error("cannot read the runs directory {}: {source}", visible_line(&.root.display().to_string()))]
    UnreadableRunsDir {
        /// The directory.
        root: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `runs prune` value (`--older-than`, `GPUPROBE_KEEP_RUNS`) that does not parse; the
    /// parser's explanation names the option.
    #[error("{0}")]
    BadRetention(String),
    /// `runs prune` could not remove some runs.
    #[error("could not remove {} run(s): {}", .failures.len(), .failures.join("; "))]
    PruneFailed {
        /// One line per run that stayed.
        failures: Vec<String>,
    },
    /// `fleet` paths under which no report file was found at all.
    #[error("no gpuprobe report found under {}", visible_line(.paths))]
    NoFleetReports {
        /// The paths given, `, `-separated.
        paths: String,
    },
    /// `triage` input in which no known tool output was found.
    #[error("no known tool output was recognized in the input")]
    NothingRecognized,
    /// An output file or directory the user named cannot be written.
    #[error("cannot write {}: {source}", visible_line(&.path.display().to_string()))]
    Unwritable {
        /// The path.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl ClassifiedError for CliError {
    /// Each is a wrong argument or input, or (prune) files the user's permissions keep.
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::UsageError
    }
}

/// A command's failure: the error, and the exit status it earns, fixed when the error
/// became a failure.
///
/// There are two ways in, and no other: a library error that says its own status
/// (`ClassifiedError`) converts by `From`, which the commands' `?` goes through, and an
/// error that says none (writing to stdout, serializing) is marked with
/// [`Internal::internal`], which only the [`Unclassified`] types offer. A new library error
/// type therefore cannot be forgotten: until it implements `ClassifiedError`, the `?` that
/// hands it to the binary does not compile.
pub(crate) struct Failure {
    status: ExitStatus,
    error: anyhow::Error,
}

/// What every command returns.
pub(crate) type Result<T, E = Failure> = std::result::Result<T, E>;

impl<E: ClassifiedError> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure {
            status: error.exit_status(),
            error: anyhow::Error::new(error),
        }
    }
}

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {:?}", self.status, self.error)
    }
}

impl Failure {
    /// gpuprobe itself failed, and `message` says how.
    pub(crate) fn internal_message(message: &'static str) -> Self {
        Failure {
            status: ExitStatus::InternalFailure,
            error: anyhow::Error::msg(message),
        }
    }

    /// The same failure, with `context` shown before it; its exit status stays.
    pub(crate) fn context(self, context: String) -> Self {
        Failure {
            status: self.status,
            error: self.error.context(context),
        }
    }

    /// The errors it is made of, outermost first.
    pub(crate) fn chain(&self) -> anyhow::Chain<'_> {
        self.error.chain()
    }
}

/// Errors that say no exit status and mean that gpuprobe itself failed: those of the
/// standard library and of the libraries gpuprobe uses for output. A closed list on
/// purpose: a gpuprobe library error does not belong here but implements
/// `ClassifiedError`, and then [`Internal::internal`] does not compile on it.
pub(crate) trait Unclassified: std::error::Error + Send + Sync + 'static {}

impl Unclassified for std::io::Error {}
impl Unclassified for serde_json::Error {}
impl Unclassified for toml::ser::Error {}

/// `.internal()`: an [`Unclassified`] error as a failure of gpuprobe itself (exit 3).
pub(crate) trait Internal<T> {
    /// The error as an internal failure.
    fn internal(self) -> Result<T>;
}

impl<T, E: Unclassified> Internal<T> for std::result::Result<T, E> {
    fn internal(self) -> Result<T> {
        self.map_err(|error| Failure {
            status: ExitStatus::InternalFailure,
            error: anyhow::Error::new(error),
        })
    }
}

/// The exit status a failure ends gpuprobe with, and the text to show for it.
pub(crate) fn exit_status_and_message(failure: &Failure) -> (ExitStatus, String) {
    let mut message = String::new();
    for cause in failure.chain() {
        let text = cause.to_string();
        // A message that shows its cause on one line (`visible_line`) holds the cause's
        // line breaks as escapes: the cause is there all the same.
        let already_shown = message.contains(&text) || message.contains(&*visible_line(&text));
        if message.is_empty() {
            message = text;
        } else if !already_shown {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    (failure.status, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_error_keeps_its_status_under_context_and_is_shown_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let err = Failure::from(gpuprobe_runner::RunFileError::Unreadable {
            path: PathBuf::from("/r.json"),
            source: io,
        })
        .context("kb match".to_string());
        let (status, text) = exit_status_and_message(&err);
        assert_eq!(status, ExitStatus::UsageError);
        assert_eq!(text, "kb match: cannot read /r.json: gone");
    }

    #[test]
    fn a_cause_shown_on_one_line_is_not_shown_again() {
        let path = std::env::temp_dir().join(format!("gpuprobe-bad-{}.toml", std::process::id()));
        std::fs::write(&path, "profile_version = 1\n[env\nX=1\n").unwrap();
        let source = gpuprobe_doctor::profile::load(&path).unwrap_err();
        let _ = std::fs::remove_file(&path);
        let err = Failure::from(CliError::Profile { source });
        let (status, text) = exit_status_and_message(&err);
        assert_eq!(status, ExitStatus::UsageError);
        assert_eq!(text.matches("is not a valid profile").count(), 1, "{text}");
        assert!(!text.contains('\n'), "{text}");
    }

    #[test]
    fn an_unknown_error_is_an_internal_failure_with_every_cause() {
        let inner: std::result::Result<(), _> = Err(std::io::Error::other("inner"));
        let err = inner.internal().unwrap_err().context("outer".to_string());
        let (status, text) = exit_status_and_message(&err);
        assert_eq!(status, ExitStatus::InternalFailure);
        assert_eq!(text, "outer: inner");
    }

    #[test]
    fn a_cause_the_message_does_not_quote_is_shown() {
        let err = Failure::from(CliError::NothingRecognized).context("triage".to_string());
        let (status, text) = exit_status_and_message(&err);
        assert_eq!(status, ExitStatus::UsageError);
        assert_eq!(
            text,
            "triage: no known tool output was recognized in the input"
        );
    }
}
