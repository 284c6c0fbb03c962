//! Reading a triage run's inputs (files and `-` for standard input) into a [`Triager`],
//! each within its share of the byte cap ([`super::input`]), one at a time and dropped once
//! triaged, and the error when one cannot be read.

use std::io;
use std::path::{Path, PathBuf};

use gpuprobe_model::visible_line;
use gpuprobe_model::{ClassifiedError, ExitStatus};

use super::input::{Truncation, read_file, read_stream, regular_file_size, share_cap};
use super::{TriageOutcome, Triager};

/// An input that could not be read. The user named it, so it is theirs to fix.
#[derive(Debug, thiserror::Error)]
pub enum TriageReadError {
    /// Standard input (`-`) failed.
    #[error("cannot read stdin")]
    Stdin(#[source] io::Error),
    /// A file failed (its name as shown: escaped).
    #[error("cannot read {}", visible_line(.name))]
    File {
        /// The path as given.
        name: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

impl ClassifiedError for TriageReadError {
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::UsageError
    }
}

/// What the inputs gave: the triage, and the inputs cut by the cap.
#[derive(Debug)]
pub struct TriagedInputs {
    /// The triage of everything read.
    pub outcome: TriageOutcome,
    /// Inputs larger than their share of the cap, in input order.
    pub truncated: Vec<Truncation>,
}

/// Reads `files` (`-` is standard input), each within its share of `cap`, into the triage.
/// `on_truncated` hears about an input cut by the cap as soon as it is read.
pub fn triage_inputs(
    files: &[PathBuf],
    cap: u64,
    on_truncated: &mut dyn FnMut(&Truncation),
) -> Result<TriagedInputs, TriageReadError> {
    let is_stdin = |path: &Path| path.as_os_str() == "-";
    let sizes: Vec<Option<u64>> = files
        .iter()
        .map(|p| {
            if is_stdin(p) {
                None
            } else {
                regular_file_size(p)
            }
        })
        .collect();
    let shares = share_cap(cap, &sizes);
    let mut triager = Triager::new();
    let mut truncated = Vec::new();
    for (path, share) in files.iter().zip(shares) {
        let (name, read) = if is_stdin(path) {
            let read = read_stream(&mut io::stdin().lock(), "stdin", share)
                .map_err(TriageReadError::Stdin)?;
            ("stdin".to_owned(), read)
        } else {
            let name = path.display().to_string();
            let read = read_file(path, &name, share).map_err(|source| TriageReadError::File {
                name: name.clone(),
                source,
            })?;
            (name, read)
        };
        if let Some(t) = read.truncation {
            on_truncated(&t);
            truncated.push(t);
        }
        // Each text is triaged and dropped before the next is read.
        for part in read.parts {
            triager.add(&name, part.text, part.first_line);
        }
    }
    Ok(TriagedInputs {
        outcome: triager.finish(),
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_file_is_a_usage_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no\u{1b}such.log");
        let err = triage_inputs(std::slice::from_ref(&missing), 1 << 20, &mut |_| {}).unwrap_err();
        assert_eq!(err.exit_status(), ExitStatus::UsageError);
        let shown = err.to_string();
        assert!(shown.starts_with("cannot read "), "{shown}");
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(std::error::Error::source(&err).is_some());
    }
}
