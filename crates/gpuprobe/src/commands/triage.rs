//! `gpuprobe triage`: what pasted logs reveal, run through the knowledge base and the lint.
//!
//! Inputs are read under a byte cap (`--max-bytes`, shared by all inputs) one at a time,
//! each dropped once triaged (`gpuprobe_detect::triage_inputs`); an input cut by the cap is
//! said so on stderr, in the text and in the JSON (`truncated`). The views are
//! `gpuprobe_report::triage`'s.

use std::io::Write;

use gpuprobe_detect::DEFAULT_TRIAGE_MAX_BYTES;
use gpuprobe_detect::{TriagedInputs, triage_inputs};
use gpuprobe_model::ExitStatus;

use crate::cli::TriageArgs;
use crate::errors::CliError;
use crate::errors::{Internal, Result};

/// Runs `triage`.
pub(super) fn run(args: TriageArgs) -> Result<ExitStatus> {
    let cap = args.max_bytes.unwrap_or(DEFAULT_TRIAGE_MAX_BYTES);
    let TriagedInputs { outcome, truncated } = triage_inputs(&args.files, cap, &mut |t| {
        crate::output::eprint_line(&gpuprobe_report::triage_truncation_message(t, cap));
    })?;
    let loaded = super::kb::load(None)?;
    let matches = gpuprobe_kb::match_all(&loaded.kb, &outcome.fingerprint, &[]);
    let matched = gpuprobe_report::triage_matched_lines(&matches, &outcome);
    let mut findings = gpuprobe_kb::lint(&outcome.fingerprint);
    findings.extend(matches.iter().map(|m| m.to_finding()));
    let mut out = crate::output::stdout();
    if args.json {
        let json = gpuprobe_report::render_triage_json(&outcome, &truncated, &matched, &findings)
            .internal()?;
        writeln!(out, "{json}").internal()?;
    } else {
        let style = crate::output::stdout_style();
        gpuprobe_report::write_triage_text(
            &mut out, &outcome, &truncated, &matched, &findings, style,
        )
        .internal()?;
    }
    out.flush().internal()?;
    if outcome.recognized.is_empty() {
        return Err(CliError::NothingRecognized.into());
    }
    Ok(super::findings_status(&findings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_default_is_the_constant() {
        // `--max-bytes`'s help says 64M.
        assert_eq!(
            gpuprobe_detect::parse_byte_size("64M"),
            Ok(DEFAULT_TRIAGE_MAX_BYTES)
        );
    }
}
