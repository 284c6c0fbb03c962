//! `gpuprobe triage`: what pasted logs reveal, run through the knowledge base and the lint.

use std::io::{Read, Write};

use anyhow::Result;
use gpuprobe_detect::{Recognized, Skipped, TriageInput};
use gpuprobe_model::ExitStatus;
use gpuprobe_model::finding::Finding;
use gpuprobe_model::fingerprint::Fingerprint;
use gpuprobe_report::style::Style;
use serde::Serialize;

use crate::cli::TriageArgs;
use crate::user_error;

/// The JSON shape of `triage --json`.
#[derive(Serialize)]
struct TriageReport<'a> {
    recognized: &'a [Recognized],
    skipped: &'a [Skipped],
    fingerprint: &'a Fingerprint,
    findings: &'a [Finding],
}

/// Runs `triage`.
pub fn run(args: TriageArgs) -> Result<ExitStatus> {
    let mut inputs = Vec::new();
    for path in &args.files {
        let (name, bytes) = if path.as_os_str() == "-" {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| user_error(format!("cannot read stdin: {e}")))?;
            ("stdin".to_string(), bytes)
        } else {
            let bytes = std::fs::read(path)
                .map_err(|e| user_error(format!("cannot read {}: {e}", path.display())))?;
            (path.display().to_string(), bytes)
        };
        // Pastes are often not clean UTF-8 (terminal junk): keep what can be read.
        inputs.push(TriageInput {
            name,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        });
    }
    let outcome = gpuprobe_detect::triage(&inputs);
    let loaded = super::kb::load(None)?;
    let mut findings = gpuprobe_kb::lint(&outcome.fingerprint);
    findings.extend(
        gpuprobe_kb::match_all(&loaded.kb, &outcome.fingerprint, &[])
            .iter()
            .map(|m| m.to_finding()),
    );
    let mut out = std::io::stdout().lock();
    if args.json {
        let report = TriageReport {
            recognized: &outcome.recognized,
            skipped: &outcome.skipped,
            fingerprint: &outcome.fingerprint,
            findings: &findings,
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        writeln!(out, "recognized:")?;
        for block in &outcome.recognized {
            let command = block
                .command
                .as_deref()
                .map(|c| format!(" (`{c}`)"))
                .unwrap_or_default();
            writeln!(
                out,
                "  {} {}: {}{command}: {}",
                block.input, block.lines, block.tool, block.summary
            )?;
            for note in &block.notes {
                writeln!(out, "      note: {note}")?;
            }
        }
        if outcome.recognized.is_empty() {
            writeln!(out, "  nothing: no known tool output found")?;
        }
        if !outcome.skipped.is_empty() {
            writeln!(out, "skipped:")?;
            for skipped in &outcome.skipped {
                writeln!(
                    out,
                    "  {} {}: {}",
                    skipped.input, skipped.lines, skipped.reason
                )?;
            }
        }
        writeln!(out)?;
        write!(
            out,
            "{}",
            gpuprobe_detect::render_text(&outcome.fingerprint)
        )?;
        if !findings.is_empty() {
            writeln!(out)?;
            write!(
                out,
                "{}",
                gpuprobe_report::terminal::render_findings(&findings, Style::PLAIN)
            )?;
        }
    }
    if outcome.recognized.is_empty() {
        return Err(user_error(
            "no known tool output was recognized in the input",
        ));
    }
    Ok(super::findings_status(&findings))
}
