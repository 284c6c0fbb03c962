//! What `gpuprobe triage` shows: the text view (recognised blocks, skipped ranges,
//! truncated inputs, the fingerprint, kernel-log events per class, the lines the knowledge
//! base matched, findings), the `--json` document, the stderr line for an input cut by the
//! cap, and where in the inputs the knowledge base's matched kernel-log lines are.
//!
//! Every piece of pasted text is shown through `gpuprobe_model::visible_line`.

use std::borrow::Cow;
use std::io::Write;

use gpuprobe_detect::Truncation;
use gpuprobe_detect::{KernelLogSummary, Recognized, Skipped, TriageOutcome};
use gpuprobe_kb::KbMatch;
use gpuprobe_model::Finding;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::visible_line;
use serde::Serialize;

use crate::style::Style;

/// Recognised blocks and skipped ranges listed in the text view, each; the JSON lists up
/// to 1000 (the outcome's own bound).
const TEXT_LISTED: usize = 100;
/// Event classes shown in the text view; the JSON has them all.
const TEXT_CLASSES: usize = 30;
/// Characters of a quoted log line in the text view.
const TEXT_LINE_CHARS: usize = 240;
/// Matched lines shown per knowledge-base entry.
const MATCHED_PER_ENTRY: usize = 10;

/// A kernel-log line a knowledge-base entry matched, with where it is.
#[derive(Debug, Serialize)]
pub struct MatchedLine {
    /// The entry's id.
    pub entry: String,
    /// Whether the line carries the entry's signature (confirms) or only its kind (a hint).
    pub signature: bool,
    /// The input it is in.
    pub input: String,
    /// Its line number there.
    pub line: usize,
    /// The line.
    pub text: String,
}

/// The JSON shape of `triage --json`.
#[derive(Serialize)]
struct TriageReport<'a> {
    recognized: &'a [Recognized],
    /// Recognised blocks beyond those listed.
    recognized_left_out: usize,
    skipped: &'a [Skipped],
    /// Skipped ranges beyond those listed.
    skipped_left_out: usize,
    /// Inputs larger than their share of `--max-bytes`, and what was left out of them.
    truncated: &'a [Truncation],
    /// Kernel-log events per class; `fingerprint.kernel_events` holds samples of them.
    kernel_log: &'a KernelLogSummary,
    /// The kernel-log lines the knowledge base matched.
    kb_matched_lines: &'a [MatchedLine],
    fingerprint: &'a Fingerprint,
    findings: &'a [Finding],
}

/// The `triage --json` document (pretty-printed, no trailing newline).
pub fn render_json(
    outcome: &TriageOutcome,
    truncated: &[Truncation],
    matched: &[MatchedLine],
    findings: &[Finding],
) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&TriageReport {
        recognized: &outcome.recognized,
        recognized_left_out: outcome.recognized_left_out,
        skipped: &outcome.skipped,
        skipped_left_out: outcome.skipped_left_out,
        truncated,
        kernel_log: &outcome.kernel_log,
        kb_matched_lines: matched,
        fingerprint: &outcome.fingerprint,
        findings,
    })
}

/// A size as `--max-bytes` takes it, rounded up to whole MiB or GiB.
fn size_argument(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if bytes >= 4 * GIB {
        format!("{}G", bytes.div_ceil(GIB))
    } else {
        format!("{}M", bytes.div_ceil(MIB).max(1))
    }
}

/// The stderr line for an input cut by the cap.
pub fn truncation_message(t: &Truncation, cap: u64) -> String {
    let suggested = match t.size_bytes {
        // Enough for the whole file on top of what the others took.
        Some(size) => (cap - t.share_bytes).saturating_add(size),
        None => cap.saturating_mul(4),
    };
    format!(
        "gpuprobe: triage: {}: {}. The cap is {} for all inputs together; raise it with \
         --max-bytes (e.g. --max-bytes {}).",
        visible_line(&t.input),
        t.describe(),
        gpuprobe_detect::human_bytes(cap),
        size_argument(suggested)
    )
}

/// A pasted line for one row of the text view: escaped and shortened.
fn shown(text: &str) -> Cow<'_, str> {
    let text = match text.char_indices().nth(TEXT_LINE_CHARS) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &text[..cut])),
        None => Cow::Borrowed(text),
    };
    match visible_line(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(escaped) => Cow::Owned(escaped),
    }
}

/// The lines each match names (the matcher writes `kernel log: <line>`), found among the
/// events the fingerprint kept (the only ones the knowledge base saw), with where they are.
pub fn matched_lines(matches: &[KbMatch], outcome: &TriageOutcome) -> Vec<MatchedLine> {
    let events = &outcome.fingerprint.kernel_events;
    let kept = &outcome.kernel_log.kept;
    let mut out = Vec::new();
    for m in matches {
        let lines = m
            .logs
            .iter()
            .map(|l| (true, l))
            .chain(m.hint_logs.iter().map(|l| (false, l)));
        let mut listed = 0;
        for (signature, evidence) in lines {
            let Some(text) = evidence.strip_prefix("kernel log: ") else {
                continue;
            };
            for (event, at) in events.iter().zip(kept) {
                if listed >= MATCHED_PER_ENTRY {
                    break;
                }
                if event.line.trim() == text {
                    out.push(MatchedLine {
                        entry: m.entry.id.clone(),
                        signature,
                        input: at.input.clone(),
                        line: at.line,
                        text: text.to_owned(),
                    });
                    listed += 1;
                }
            }
        }
    }
    // The matcher lists a line once per pattern it meets; one row each is enough.
    out.dedup_by(|a, b| a.entry == b.entry && a.input == b.input && a.line == b.line);
    out
}

/// The text view.
pub fn write_text(
    out: &mut impl Write,
    outcome: &TriageOutcome,
    truncated: &[Truncation],
    matched: &[MatchedLine],
    findings: &[Finding],
    style: Style,
) -> std::io::Result<()> {
    let mut text = Vec::new();
    write_recognized(&mut text, outcome)?;
    write_skipped(&mut text, outcome)?;
    write_truncated(&mut text, truncated)?;
    writeln!(text)?;
    // The events are shown below with their true counts; the fingerprint holds samples.
    let mut shown_fp = outcome.fingerprint.clone();
    shown_fp.kernel_events.clear();
    write!(text, "{}", gpuprobe_detect::render_text(&shown_fp))?;
    write_events(&mut text, &outcome.kernel_log, matched)?;
    // Every line gpuprobe does not indent is a heading; quoted input is always indented.
    let text = crate::env::headings_in_bold(&String::from_utf8_lossy(&text), style);
    out.write_all(text.as_bytes())?;
    if !findings.is_empty() {
        writeln!(out)?;
        write!(out, "{}", crate::terminal::render_findings(findings, style))?;
    }
    Ok(())
}

fn write_recognized(out: &mut impl Write, outcome: &TriageOutcome) -> std::io::Result<()> {
    writeln!(out, "recognized:")?;
    for block in outcome.recognized.iter().take(TEXT_LISTED) {
        let command = block
            .command
            .as_deref()
            .map(|c| format!(" (`{}`)", visible_line(c)))
            .unwrap_or_default();
        writeln!(
            out,
            "  {} {}: {}{command}: {}",
            visible_line(&block.input),
            block.lines,
            block.tool,
            visible_line(&block.summary)
        )?;
        for note in &block.notes {
            writeln!(out, "      note: {}", visible_line(note))?;
        }
    }
    let more = outcome.recognized.len().saturating_sub(TEXT_LISTED) + outcome.recognized_left_out;
    if more > 0 {
        writeln!(
            out,
            "  ... and {more} more blocks (`--json` lists up to 1000)"
        )?;
    }
    if outcome.recognized.is_empty() {
        writeln!(out, "  nothing: no known tool output found")?;
    }
    Ok(())
}

fn write_skipped(out: &mut impl Write, outcome: &TriageOutcome) -> std::io::Result<()> {
    if outcome.skipped.is_empty() {
        return Ok(());
    }
    writeln!(out, "skipped:")?;
    for skipped in outcome.skipped.iter().take(TEXT_LISTED) {
        writeln!(
            out,
            "  {} {}: {}",
            visible_line(&skipped.input),
            skipped.lines,
            visible_line(&skipped.reason)
        )?;
    }
    let more = outcome.skipped.len().saturating_sub(TEXT_LISTED) + outcome.skipped_left_out;
    if more > 0 {
        writeln!(
            out,
            "  ... and {more} more ranges (`--json` lists up to 1000)"
        )?;
    }
    Ok(())
}

fn write_truncated(out: &mut impl Write, truncated: &[Truncation]) -> std::io::Result<()> {
    if !truncated.is_empty() {
        writeln!(out, "truncated (raise the cap with --max-bytes):")?;
        for t in truncated {
            writeln!(out, "  {}: {}", visible_line(&t.input), t.describe())?;
        }
    }
    Ok(())
}

fn write_events(
    out: &mut impl Write,
    summary: &KernelLogSummary,
    matched: &[MatchedLine],
) -> std::io::Result<()> {
    if summary.events == 0 {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "Kernel log events: {} in {} classes",
        summary.events,
        summary.classes.len()
    )?;
    for class in summary.classes.iter().take(TEXT_CLASSES) {
        writeln!(out, "  {} × {}", class.count, visible_line(&class.label))?;
        let first = &class.first;
        writeln!(
            out,
            "      first  {} line {}: {}",
            visible_line(&first.input),
            first.line,
            shown(&first.text)
        )?;
        if class.count > 1 {
            let last = &class.last;
            writeln!(
                out,
                "      last   {} line {}: {}",
                visible_line(&last.input),
                last.line,
                shown(&last.text)
            )?;
        }
    }
    if summary.classes.len() > TEXT_CLASSES {
        writeln!(
            out,
            "  ... and {} more classes (all in `--json`)",
            summary.classes.len() - TEXT_CLASSES
        )?;
    }
    if summary.left_out > 0 {
        writeln!(
            out,
            "  (counted, not listed: {} events; `--json` lists {} of them)",
            summary.left_out,
            summary.kept.len()
        )?;
    }
    if !matched.is_empty() {
        writeln!(out, "  lines the knowledge base matched:")?;
        for m in matched {
            writeln!(
                out,
                "      {}{} {} line {}: {}",
                visible_line(&m.entry),
                if m.signature { "" } else { " (hint)" },
                visible_line(&m.input),
                m.line,
                shown(&m.text)
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggested_sizes_round_up() {
        assert_eq!(size_argument(200_000_000), "191M");
        assert_eq!(size_argument(5 << 30), "5G");
        assert_eq!(size_argument(1), "1M");
    }

    #[test]
    fn long_pasted_lines_are_cut_and_escaped() {
        let long = "x".repeat(TEXT_LINE_CHARS + 5);
        assert_eq!(shown(&long).chars().count(), TEXT_LINE_CHARS + 1);
        assert!(!shown("a\u{1b}b").contains('\u{1b}'));
    }
}
