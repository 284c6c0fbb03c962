//! The Prometheus text exposition of a run, for node_exporter's textfile collector
//! (`docs/fleet.md`): counts by probe family, device and verdict, the failing probes as
//! labelled series, the findings by id and severity, the run's times, gpuprobe's and its
//! knowledge base's version, and whether the run was SIMULATED.
//!
//! Every metric is a gauge named `gpuprobe_*` with its unit in the name. Series are bounded
//! whatever the run holds: at most [`MAX_LABELLED_SERIES`] failing-probe series and as many
//! finding series, with the rest counted in `gpuprobe_failing_probes_omitted` and
//! `gpuprobe_findings_omitted`; a probe's detail text never becomes a label. Label values
//! are escaped as the exposition format says (backslash, double quote, newline), other
//! control characters are replaced and long values cut, so no text from a report can end a
//! line or forge a series.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpuprobe_model::DeviceRef;
use gpuprobe_model::Report;
use gpuprobe_model::Severity;
use gpuprobe_model::{ProbeResult, Verdict};

use super::{Stack, unix_seconds};

/// The most failing-probe series, and the most finding series, one exposition holds.
pub(crate) const MAX_LABELLED_SERIES: usize = 50;

/// The longest label value, in characters; longer ones are cut and end in `…`.
const MAX_LABEL_CHARS: usize = 200;

/// Each verdict's label value, in the order the counts are written.
const VERDICTS: [&str; 7] = [
    "pass",
    "fail",
    "crash",
    "hang",
    "error",
    "skip",
    "not_tested",
];

/// The label value of a verdict.
pub(crate) fn verdict_label(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "pass",
        Verdict::Fail { .. } => "fail",
        Verdict::Crash { .. } => "crash",
        Verdict::Hang { .. } => "hang",
        Verdict::Error { .. } => "error",
        Verdict::Skip { .. } => "skip",
        Verdict::NotTested { .. } => "not_tested",
    }
}

fn severity_label(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// Renders the report as a Prometheus text exposition (format 0.0.4), ending in a newline.
pub fn render(report: &Report) -> String {
    let mut out = Exposition::default();
    let stack = Stack::of(report);
    out.comment(&format!(
        "gpuprobe {} {} of the {} tier, started {}",
        report.tool_version,
        report.command,
        report.tier.name(),
        report.started_at
    ));
    if let Some(sim) = &report.simulation {
        out.comment(&format!(
            "SIMULATED run ({}): every result comes from fault simulation; no device was tested",
            sim.source
        ));
    }

    out.family(
        "gpuprobe_info",
        "The gpuprobe that made the run and the stack it tested; always 1.",
    );
    out.sample(
        "gpuprobe_info",
        &[
            ("version", &report.tool_version),
            ("commit", &stack.commit),
            ("kb_version", &stack.kb_version),
            ("torch", &stack.torch),
            ("driver", &stack.driver),
            ("command", &report.command),
            ("tier", report.tier.name()),
            (
                "simulated",
                if report.simulation.is_some() {
                    "true"
                } else {
                    "false"
                },
            ),
        ],
        1.0,
    );
    out.family(
        "gpuprobe_simulated",
        "1 when the run was SIMULATED: its results come from fault simulation and say nothing about the device.",
    );
    out.sample(
        "gpuprobe_simulated",
        &[],
        f64::from(u8::from(report.simulation.is_some())),
    );

    if let Some(start) = unix_seconds(&report.started_at) {
        out.family(
            "gpuprobe_run_start_timestamp_seconds",
            "When the run started, in seconds since the Unix epoch.",
        );
        out.sample("gpuprobe_run_start_timestamp_seconds", &[], start);
        out.family(
            "gpuprobe_run_end_timestamp_seconds",
            "When the run ended, in seconds since the Unix epoch.",
        );
        out.sample(
            "gpuprobe_run_end_timestamp_seconds",
            &[],
            start + finite_or_zero(report.wall_s),
        );
    }
    out.family(
        "gpuprobe_run_duration_seconds",
        "Wall time of the run in seconds.",
    );
    out.sample(
        "gpuprobe_run_duration_seconds",
        &[],
        finite_or_zero(report.wall_s),
    );
    out.family(
        "gpuprobe_exit_code",
        "The run's exit code (docs/exit-codes.md): 0 all passed, 1 problems found, 4 too little could be tested.",
    );
    out.sample("gpuprobe_exit_code", &[], f64::from(report.exit_code));
    out.family(
        "gpuprobe_problems",
        "Probe runs with a problem: FAIL, CRASH, HANG or ERROR.",
    );
    out.sample(
        "gpuprobe_problems",
        &[],
        f64::from(report.summary.problems()),
    );
    out.family(
        "gpuprobe_mostly_not_tested",
        "1 when fewer than half of the probe runs that apply got a verdict.",
    );
    out.sample(
        "gpuprobe_mostly_not_tested",
        &[],
        f64::from(u8::from(report.summary.mostly_not_tested)),
    );

    probe_runs(&mut out, &report.results);
    failing_probes(&mut out, &report.results);
    findings(&mut out, report);
    out.text
}

/// Counts by family, device and verdict: every verdict of each family and device that ran,
/// zeros included, so that a rule sees a FAIL count go back to 0.
fn probe_runs(out: &mut Exposition, results: &[ProbeResult]) {
    let mut counts: BTreeMap<(&str, DeviceRef), [u32; VERDICTS.len()]> = BTreeMap::new();
    for result in results {
        let slot = VERDICTS
            .iter()
            .position(|v| *v == verdict_label(&result.verdict))
            .unwrap_or_default();
        counts
            .entry((result.probe.family(), result.device))
            .or_default()[slot] += 1;
    }
    const NAME: &str = "gpuprobe_probe_runs";
    out.family(
        NAME,
        "Probe runs by probe family, device and verdict (pass, fail, crash, hang, error, skip, not_tested).",
    );
    for ((family, device), by_verdict) in &counts {
        let device = device.torch_name();
        for (verdict, count) in VERDICTS.iter().zip(by_verdict) {
            out.sample(
                NAME,
                &[
                    ("family", family),
                    ("device", &device),
                    ("verdict", verdict),
                ],
                f64::from(*count),
            );
        }
    }
}

/// One series per failing probe run (FAIL, CRASH, HANG, ERROR), at most
/// [`MAX_LABELLED_SERIES`], in probe and device order; the rest counted.
fn failing_probes(out: &mut Exposition, results: &[ProbeResult]) {
    let mut failing: Vec<&ProbeResult> =
        results.iter().filter(|r| r.verdict.is_problem()).collect();
    failing.sort_by(|a, b| (a.probe.as_str(), a.device).cmp(&(b.probe.as_str(), b.device)));
    const NAME: &str = "gpuprobe_failing_probe";
    out.family(
        NAME,
        "1 for each probe run with a problem, by probe id, device and verdict (at most 50 series; see gpuprobe_failing_probes_omitted).",
    );
    for result in failing.iter().take(MAX_LABELLED_SERIES) {
        let class = result
            .verdict
            .fail_class()
            .map_or("", |c| fail_class_label(c));
        out.sample(
            NAME,
            &[
                ("probe", result.probe.as_str()),
                ("family", result.probe.family()),
                ("device", &result.device.torch_name()),
                ("verdict", verdict_label(&result.verdict)),
                ("class", class),
            ],
            1.0,
        );
    }
    const OMITTED: &str = "gpuprobe_failing_probes_omitted";
    out.family(
        OMITTED,
        "Probe runs with a problem left out of gpuprobe_failing_probe to bound its series.",
    );
    out.sample(
        OMITTED,
        &[],
        failing.len().saturating_sub(MAX_LABELLED_SERIES) as f64,
    );
}

fn fail_class_label(class: gpuprobe_model::FailClass) -> &'static str {
    use gpuprobe_model::FailClass;
    match class {
        FailClass::AllZeros => "all_zeros",
        FailClass::PartialZeros => "partial_zeros",
        FailClass::NanInf => "nan_inf",
        FailClass::Unchanged => "unchanged",
        FailClass::Mismatch => "mismatch",
    }
}

/// The findings: a count per severity, and one series per finding id (a knowledge-base,
/// lint or diagnosis id), at most [`MAX_LABELLED_SERIES`], the most severe first.
fn findings(out: &mut Exposition, report: &Report) {
    const BY_SEVERITY: &str = "gpuprobe_findings_by_severity";
    out.family(
        BY_SEVERITY,
        "Findings (known issues, lint, diagnosis) by severity.",
    );
    for severity in [Severity::Error, Severity::Warning, Severity::Info] {
        let count = report
            .findings
            .iter()
            .filter(|f| f.severity == severity)
            .count();
        out.sample(
            BY_SEVERITY,
            &[("severity", severity_label(severity))],
            count as f64,
        );
    }
    // One series per id: a finding repeated under one id (another device) counts once.
    let mut by_id: BTreeMap<(Severity, &str), &gpuprobe_model::Finding> = BTreeMap::new();
    for finding in &report.findings {
        by_id
            .entry((finding.severity, &finding.id))
            .or_insert(finding);
    }
    const NAME: &str = "gpuprobe_finding";
    out.family(
        NAME,
        "1 for each finding, by id (a knowledge-base id such as RKB-001, a lint or a diagnosis id), source and severity (at most 50 series; see gpuprobe_findings_omitted).",
    );
    for finding in by_id.values().take(MAX_LABELLED_SERIES) {
        out.sample(
            NAME,
            &[
                ("id", &finding.id),
                ("source", &finding.source),
                ("severity", severity_label(finding.severity)),
                ("layer", finding.layer.name()),
            ],
            1.0,
        );
    }
    const OMITTED: &str = "gpuprobe_findings_omitted";
    out.family(
        OMITTED,
        "Findings left out of gpuprobe_finding to bound its series.",
    );
    out.sample(
        OMITTED,
        &[],
        by_id.len().saturating_sub(MAX_LABELLED_SERIES) as f64,
    );
}

fn finite_or_zero(value: f64) -> f64 {
    if value.is_finite() { value } else { 0.0 }
}

/// The exposition being written.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    /// A comment line; control characters in `text` are replaced, so it stays one line.
    fn comment(&mut self, text: &str) {
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
            .collect();
        let _ = writeln!(self.text, "# {text}");
    }

    /// The HELP and TYPE lines of a gauge (the HELP texts are this module's own, with no
    /// backslash or newline to escape).
    fn family(&mut self, name: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} gauge");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", label_value(value));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", number(value));
    }
}

/// A label value as the exposition format writes it: backslash, double quote and newline
/// escaped; other control characters replaced by U+FFFD; cut to [`MAX_LABEL_CHARS`].
pub(crate) fn label_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        if i == MAX_LABEL_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: integers without a fraction, other finite values as Rust writes them
/// (never in exponent form), the rest as the format spells them.
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{value}")
    }
}
