//! The binary's own errors and the one place that turns any error into an exit status.
//!
//! Library errors say which exit status they earn (`gpuprobe_model::ClassifiedError`); the
//! binary only needs to recognise them. [`exit_status_and_message`] walks a chain outermost
//! first and the first error that answers decides. The message is the chain joined by `: `
//! (what anyhow's `{:#}` shows), less any cause whose text the message already quotes: many
//! errors name their cause in their own text (a path and why it could not be read), and a
//! user should not read it twice.

use std::path::PathBuf;

use gpuprobe_model::text::visible_line;
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
        source: gpuprobe_doctor::profile_file::ProfileError,
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

/// The exit status an error of any library earns, if it is one gpuprobe knows.
fn classify(err: &(dyn std::error::Error + 'static)) -> Option<ExitStatus> {
    macro_rules! first_of {
        ($($error:ty),* $(,)?) => {
            $(if let Some(known) = err.downcast_ref::<$error>() {
                return Some(known.exit_status());
            })*
        };
    }
    first_of!(
        CliError,
        gpuprobe_doctor::session::SessionError,
        gpuprobe_doctor::fix::run::FixError,
        gpuprobe_doctor::profile_file::ProfileError,
        gpuprobe_doctor::repro::ReproError,
        gpuprobe_runner::job::JobError,
        gpuprobe_runner::RunnerError,
        gpuprobe_report::html::HtmlError,
        gpuprobe_report::export::ExportError,
        gpuprobe_kb::KbError,
        gpuprobe_runner::rundir::RunFileError,
        gpuprobe_gpu::memtest::InjectionArgError,
        gpuprobe_detect::triage::read::TriageReadError,
        gpuprobe_report::bundle::BundleError,
        gpuprobe_ui::UiError,
    );
    None
}

/// The exit status an error ends gpuprobe with, and the text to show for it.
pub(crate) fn exit_status_and_message(err: &anyhow::Error) -> (ExitStatus, String) {
    let status = err
        .chain()
        .find_map(classify)
        .unwrap_or(ExitStatus::InternalFailure);
    let mut message = String::new();
    for cause in err.chain() {
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
    (status, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_error_deep_in_a_chain_decides_and_is_shown_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let err = anyhow::Error::new(gpuprobe_runner::rundir::RunFileError::Unreadable {
            path: PathBuf::from("/r.json"),
            source: io,
        })
        .context("kb match");
        let (status, text) = exit_status_and_message(&err);
        assert_eq!(status, ExitStatus::UsageError);
        assert_eq!(text, "kb match: cannot read /r.json: gone");
    }

    #[test]
    fn a_cause_shown_on_one_line_is_not_shown_again() {
        let path = std::env::temp_dir().join(format!("gpuprobe-bad-{}.toml", std::process::id()));
        std::fs::write(&path, "profile_version = 1\n[env\nX=1\n").unwrap();
        let source = crate::profiles::load(&path).unwrap_err();
        let _ = std::fs::remove_file(&path);
        let err = anyhow::Error::new(CliError::Profile { source });
        let (status, text) = exit_status_and_message(&err);
        assert_eq!(status, ExitStatus::UsageError);
        assert_eq!(text.matches("is not a valid profile").count(), 1, "{text}");
        assert!(!text.contains('\n'), "{text}");
    }

    #[test]
    fn an_unknown_error_is_an_internal_failure_with_every_cause() {
        let err = anyhow::anyhow!("inner").context("outer");
        let (status, text) = exit_status_and_message(&err);
        assert_eq!(status, ExitStatus::InternalFailure);
        assert_eq!(text, "outer: inner");
    }

    #[test]
    fn a_cause_the_message_does_not_quote_is_shown() {
        let err = anyhow::Error::new(CliError::NothingRecognized).context("triage");
        let (status, text) = exit_status_and_message(&err);
        assert_eq!(status, ExitStatus::UsageError);
        assert_eq!(
            text,
            "triage: no known tool output was recognized in the input"
        );
    }
}
