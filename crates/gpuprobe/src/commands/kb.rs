//! `gpuprobe kb`: list, show, validate and match the knowledge base.

use std::io::Write;
use std::path::Path;

use gpuprobe_kb::{KnowledgeBase, Loaded};
use gpuprobe_model::ExitStatus;

use crate::cli::{KbAction, KbArgs};
use crate::errors::CliError;
use crate::errors::{Internal, Result};

/// Loads the built-in entries plus `--kb DIR`; problems are printed, never fatal to the
/// entries that did load.
pub(crate) fn load(dir: Option<&Path>) -> Result<Loaded> {
    match dir {
        None => Ok(KnowledgeBase::load_embedded()),
        Some(dir) => Ok(KnowledgeBase::load_with_dir(dir)?),
    }
}

fn print_diagnostics(loaded: &Loaded) {
    for diagnostic in &loaded.diagnostics {
        crate::output::eprint_line(&format!("gpuprobe: kb: {diagnostic}"));
    }
}

/// Runs `kb`.
pub(crate) fn run(args: KbArgs) -> Result<ExitStatus> {
    let loaded = load(args.kb.as_deref())?;
    print_diagnostics(&loaded);
    let broken = if loaded.diagnostics.is_empty() {
        ExitStatus::AllPassed
    } else {
        ExitStatus::UsageError
    };
    let (mut out, style) = (crate::output::stdout(), crate::output::stdout_style());
    match args.action {
        KbAction::List => {
            // Fitted to a terminal; piped, each entry stays one line for grep and awk.
            let width = gpuprobe_report::current_console().text_width;
            write!(
                out,
                "{}",
                gpuprobe_report::render_kb_list(&loaded.kb, style, width)
            )
            .internal()?;
            Ok(broken)
        }
        KbAction::Show { id } => {
            let entry = loaded
                .kb
                .get(&id)
                .or_else(|| loaded.kb.get(&id.to_ascii_uppercase()))
                .ok_or_else(|| CliError::NoSuchKnownIssue { id: id.clone() })?;
            write!(out, "{}", gpuprobe_report::render_kb_entry(entry, style)).internal()?;
            Ok(broken)
        }
        KbAction::Validate => {
            writeln!(
                out,
                "{} entries valid, {} problem(s){}",
                loaded.kb.len(),
                loaded.diagnostics.len(),
                if loaded.diagnostics.is_empty() {
                    ""
                } else {
                    " (listed on stderr)"
                }
            )
            .internal()?;
            Ok(broken)
        }
        KbAction::Match { report } => {
            let (fingerprint, results) = match report {
                Some(path) => {
                    let report = gpuprobe_runner::read_report_file(&path)?;
                    (report.fingerprint, report.results)
                }
                None => (
                    gpuprobe_doctor::live_fingerprint(None, true, &super::process_env()),
                    Vec::new(),
                ),
            };
            let matches = gpuprobe_kb::match_all(&loaded.kb, &fingerprint, &results);
            write!(
                out,
                "{}",
                gpuprobe_report::render_kb_matches(&matches, style)
            )
            .internal()?;
            Ok(broken)
        }
    }
}
