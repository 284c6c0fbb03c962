//! A report to render in this crate's tests: the fields no renderer under test looks at
//! are fixed, the summary and the exit status follow from the results.

use gpuprobe_model::Finding;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::ProbeResult;
use gpuprobe_model::Summary;
use gpuprobe_model::Tier;
use gpuprobe_model::{ExitStatus, Report};

/// A quick-tier `check` report of `results` on the machine `fingerprint` describes.
pub(crate) fn report(
    fingerprint: Fingerprint,
    results: Vec<ProbeResult>,
    findings: Vec<Finding>,
) -> Report {
    let summary = Summary::of(&results);
    let exit_status = if summary.problems() > 0 {
        ExitStatus::ProblemsFound
    } else {
        ExitStatus::AllPassed
    };
    Report {
        schema_version: 1,
        tool_version: "0.1.0".into(),
        build: None,
        command: "check".into(),
        run_dir: None,
        started_at: "2026-01-01T00:00:00Z".into(),
        wall_s: 1.0,
        tier: Tier::Quick,
        simulation: None,
        fingerprint,
        results,
        findings,
        summary,
        exit_status,
        exit_code: exit_status.code(),
        notes: Vec::new(),
        timings: None,
    }
}

/// The widest line of `text`, in terminal columns (characters, colour sequences not
/// counted).
pub(crate) fn widest(text: &str) -> usize {
    text.lines()
        .map(gpuprobe_model::display_width)
        .max()
        .unwrap_or(0)
}

/// The words of `text` without its colour sequences, one space between each: what a
/// wrapped rendering must keep of the whole one.
pub(crate) fn words(text: &str) -> String {
    let plain = regex::Regex::new("\u{1b}\\[[0-9;]*m")
        .unwrap()
        .replace_all(text, " ")
        .into_owned();
    plain.split_whitespace().collect::<Vec<_>>().join(" ")
}
