//! The terminal view of a report: who was tested with what, the probe table (problems
//! first, passes summarized), the findings, and the exit status.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use comfy_table::presets::NOTHING;
use comfy_table::{ColumnConstraint, ContentArrangement, Table};
use gpuprobe_model::Report;
use gpuprobe_model::{Finding, WITHOUT_SIGNATURE};
use gpuprobe_model::{Fingerprint, GpuInfo};
use gpuprobe_model::{ProbeResult, Verdict};
use gpuprobe_model::{terminal_safe, visible_line};

use crate::fit;
use crate::style::Style;

/// Options for the terminal view.
#[derive(Debug, Clone, Copy)]
pub struct TerminalOptions {
    /// List passing probes too.
    pub all: bool,
    /// Colours.
    pub style: Style,
    /// Terminal width, when known: the probe table is fitted to it.
    pub width: Option<u16>,
    /// Width the findings are wrapped to (`None`: each line whole; see
    /// [`crate::console::Console::text_width`]).
    pub text_width: Option<u16>,
    /// Append the measured dtype-conversion matrix (the `matrix` module).
    pub matrix: bool,
    /// Append where the run's time went (the `timings` module), when the report has it.
    pub timings: bool,
    /// `--quiet`: only the verdict line, with the counts (and SIMULATED, when it is).
    pub quiet: bool,
}

impl Default for TerminalOptions {
    fn default() -> Self {
        TerminalOptions {
            all: false,
            style: Style::PLAIN,
            width: None,
            text_width: None,
            matrix: false,
            timings: false,
            quiet: false,
        }
    }
}

/// Renders the whole report.
pub fn render(report: &Report, options: TerminalOptions) -> String {
    let style = options.style;
    let mut out = String::new();
    if report.simulation.is_some() {
        let _ = writeln!(out, "{}", style.banner(" SIMULATED "));
    }
    if options.quiet {
        out.push_str(&exit_line(report, style, Some(&counts(&report.results))));
        return terminal_safe(&out).into_owned();
    }
    out.push_str(&header(report, style));
    out.push('\n');
    out.push_str(&results_table(&report.results, options));
    if !report.findings.is_empty() {
        out.push('\n');
        out.push_str(&render_findings_within(
            &report.findings,
            style,
            options.text_width,
        ));
    }
    for note in &report.notes {
        let _ = writeln!(
            out,
            "{}",
            style.dim(&format!("note: {}", visible_line(note)))
        );
    }
    out.push_str(&exit_line(report, style, None));
    if options.matrix {
        out.push_str(&crate::matrix::render(&report.results, style));
    }
    if options.timings
        && let Some(timings) = &report.timings
    {
        out.push_str(&crate::timings::render(timings, report.wall_s));
    }
    // The last guard: whatever external text a piece above did not escape cannot reach
    // the terminal as a command.
    terminal_safe(&out).into_owned()
}

/// The probe runs counted by verdict, as `--quiet` prints them (`4 FAIL, 14 PASS`).
fn counts(results: &[ProbeResult]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for result in results {
        let label = result.verdict.label();
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    // Problems first, as in the table.
    counts.sort_by_key(|(label, _)| (matches!(*label, "PASS" | "SKIP" | "NOT-TESTED"), *label));
    let parts: Vec<String> = counts.iter().map(|(l, n)| format!("{n} {l}")).collect();
    if parts.is_empty() {
        "no probe ran".into()
    } else {
        parts.join(", ")
    }
}

/// The last line: the exit status and what it means, with `counts` when given.
fn exit_line(report: &Report, style: Style, counts: Option<&str>) -> String {
    let sim = if report.simulation.is_some() {
        " · SIMULATED results"
    } else {
        ""
    };
    let report_path = report
        .run_dir
        .as_deref()
        .map(|d| format!(" · full report: {d}/report.json"))
        .unwrap_or_default();
    // A run whose probes were mostly NOT-TESTED must not read as a clean result.
    let summary = &report.summary;
    let thin = summary.mostly_not_tested && summary.judged > 0;
    let coverage = if thin {
        format!(
            " · only {} of {} probe runs were judged ({} NOT-TESTED)",
            summary.judged, summary.total, summary.not_tested
        )
    } else {
        String::new()
    };
    // Exit 4 with some verdicts (too few, or a named GPU with none) tested something.
    let describe =
        if summary.judged > 0 && report.exit_status == gpuprobe_model::ExitStatus::NothingTested {
            "too little could be tested"
        } else {
            report.exit_status.describe()
        };
    let counts = counts.map(|c| format!(": {c}")).unwrap_or_default();
    let exit_line = format!(
        "exit {} ({describe}){counts}{coverage}{sim}{report_path}",
        report.exit_code
    );
    let line = if report.exit_code == 0 {
        style.good(&exit_line)
    } else {
        style.bold(&exit_line)
    };
    format!("{line}\n")
}

fn header(report: &Report, style: Style) -> String {
    let mut out = String::new();
    let fp = &report.fingerprint;
    let mut first = format!("gpuprobe {}", report.tool_version);
    if let Some(python) = &fp.python {
        let _ = write!(first, "  ·  python {}", visible_line(&python.executable));
        if !python.chosen_by.is_empty() {
            let _ = write!(first, " ({})", python.chosen_by);
        }
        match (&python.torch, &python.torch_error) {
            (Some(torch), _) => {
                let build = match (&torch.hip, &torch.cuda) {
                    (Some(hip), _) => format!(" (HIP {hip})"),
                    (None, Some(cuda)) => format!(" (CUDA {cuda})"),
                    _ => " (CPU only)".into(),
                };
                let _ = write!(first, "  ·  torch {}{build}", torch.version);
            }
            (None, Some(err)) => {
                let _ = write!(first, "  ·  torch unusable: {}", visible_line(err));
            }
            (None, None) => {}
        }
    }
    let _ = writeln!(out, "{}", style.bold(&first));
    for gpu in &fp.gpus {
        let _ = writeln!(out, "{}", gpu_line(gpu, fp));
    }
    if fp.gpus.is_empty() {
        let _ = writeln!(out, "{}", style.dim("no GPU found"));
    }
    if let Some(sim) = &report.simulation {
        let names: Vec<&str> = sim.faults.iter().map(|f| f.name.as_str()).collect();
        let _ = writeln!(
            out,
            "{}",
            style.banner(&format!(
                " SIMULATED faults ({}): {} ",
                sim.source,
                names.join(", ")
            ))
        );
    }
    let _ = writeln!(
        out,
        "{} tier  ·  {}  ·  {:.1} s",
        report.tier.name(),
        count_words(&report.results),
        report.wall_s
    );
    out
}

/// How many probe runs the report holds, and on how many devices. When none could run,
/// it says so: "on 1 device(s)" beside "no GPU found" would name a device that was only
/// planned.
fn count_words(results: &[gpuprobe_model::ProbeResult]) -> String {
    let ran = results
        .iter()
        .any(|r| r.verdict.is_judged() || r.verdict.is_problem());
    if !ran && !results.is_empty() {
        return format!("{} probe runs planned, none could run", results.len());
    }
    let devices: std::collections::BTreeSet<_> = results.iter().map(|r| r.device).collect();
    format!(
        "{} probe runs on {} device(s)",
        results.len(),
        devices.len()
    )
}

fn gpu_line(gpu: &GpuInfo, fp: &Fingerprint) -> String {
    let mut line = match gpu.index {
        Some(i) => format!("GPU {i}"),
        None => "GPU -".to_string(),
    };
    if let Some(name) = &gpu.name {
        let _ = write!(line, "  {name}");
    }
    match (&gpu.runtime_isa, &gpu.native_isa) {
        (Some(rt), Some(native)) if rt != native => {
            let _ = write!(line, "  {rt} (native {native})");
        }
        (_, Some(native)) => {
            let _ = write!(line, "  {native}");
        }
        (Some(rt), None) => {
            let _ = write!(line, "  {rt}");
        }
        (None, None) => {
            if let Some(cc) = &gpu.compute_capability {
                let _ = write!(line, "  sm_{}", cc.replace('.', ""));
            }
        }
    }
    if gpu.is_apu == Some(true) {
        line.push_str("  APU");
    }
    if let Some(vram) = gpu.vram_total_bytes {
        let _ = write!(line, "  {}", gpuprobe_detect::human_bytes(vram));
    }
    if let Some(kernel) = &fp.host.kernel_release {
        let _ = write!(line, "  kernel {kernel}");
    }
    if let Some(amd) = &fp.amdgpu
        && gpu.vendor == gpuprobe_model::Vendor::Amd
    {
        let source = match amd.source {
            gpuprobe_model::DriverSource::Inbox => "inbox amdgpu".to_string(),
            gpuprobe_model::DriverSource::Dkms => {
                format!("amdgpu-dkms {}", amd.version.clone().unwrap_or_default())
            }
            gpuprobe_model::DriverSource::Unknown => "amdgpu".to_string(),
        };
        let _ = write!(line, " {source}");
    }
    if let Some(nv) = &fp.nvidia
        && gpu.vendor == gpuprobe_model::Vendor::Nvidia
        && let Some(v) = &nv.version
    {
        let _ = write!(line, "  driver {v}");
    }
    line
}

/// Longest detail shown in a table cell; the JSON report keeps the whole text.
const DETAIL_WIDTH: usize = 180;

/// A detail cell: external text (exception messages, reasons) made visible, then cut.
fn clip(text: &str) -> String {
    let text = visible_line(text);
    if text.chars().count() <= DETAIL_WIDTH {
        return text.into_owned();
    }
    let kept: String = text.chars().take(DETAIL_WIDTH - 1).collect();
    format!("{kept}…")
}

fn verdict_cell(verdict: &Verdict, style: Style) -> String {
    let label = verdict.label();
    match verdict {
        Verdict::Pass => style.good("pass"),
        Verdict::Fail { .. }
        | Verdict::Crash { .. }
        | Verdict::Hang { .. }
        | Verdict::Error { .. } => style.bad(label),
        Verdict::Skip { .. } | Verdict::NotTested { .. } => style.warn(label),
    }
}

fn results_table(results: &[ProbeResult], options: TerminalOptions) -> String {
    let style = options.style;
    let mut table = Table::new();
    table
        .load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if let Some(width) = options.width {
        table.set_width(width);
    }
    table.set_header(vec!["probe", "device", "verdict", "detail"]);
    // A probe id is never split: it is what a user copies into `--only`. The detail wraps.
    table.set_constraints([ColumnConstraint::ContentWidth; 3]);
    let mut rows = 0;
    let mut sorted: Vec<&ProbeResult> = results.iter().collect();
    // Problems first, in the order they were found; passes after them.
    sorted.sort_by_key(|r| !r.verdict.is_problem());
    for result in &sorted {
        let show = result.verdict.is_problem()
            || (options.all
                && !matches!(
                    result.verdict,
                    Verdict::NotTested { .. } | Verdict::Skip { .. }
                ));
        if show {
            table.add_row(vec![
                result.probe.to_string(),
                result.device.to_string(),
                verdict_cell(&result.verdict, style),
                clip(&result.verdict.detail()),
            ]);
            rows += 1;
        }
    }
    // Skips and not-tested results are summarized by reason: one line per reason.
    let mut grouped: BTreeMap<(&'static str, String), usize> = BTreeMap::new();
    for result in results {
        match &result.verdict {
            Verdict::Skip { reason } => *grouped.entry(("SKIP", reason.clone())).or_default() += 1,
            Verdict::NotTested { reason } => {
                *grouped.entry(("NOT-TESTED", reason.clone())).or_default() += 1
            }
            _ => {}
        }
    }
    for ((label, reason), count) in &grouped {
        let verdict = if *label == "SKIP" {
            style.warn("SKIP")
        } else {
            style.warn("NOT-TESTED")
        };
        table.add_row(vec![
            format!("{count} probe run(s)"),
            String::new(),
            verdict,
            clip(reason),
        ]);
        rows += 1;
    }
    let passed = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Pass))
        .count();
    let mut out = String::new();
    if rows > 0 {
        let _ = writeln!(out, "{table}");
    }
    if passed > 0 && !options.all {
        let _ = writeln!(
            out,
            " {} {}",
            style.good(&format!("{passed} passed")),
            style.dim("(--all to list)")
        );
    }
    if results.is_empty() {
        let _ = writeln!(out, " no probe ran");
    }
    out
}

/// Renders findings: symbol, layer, title, evidence, what to do; every line whole (a file,
/// a bundle, a view that fits nothing to a width).
pub(crate) fn render_findings(findings: &[Finding], style: Style) -> String {
    render_findings_within(findings, style, None)
}

/// Where a finding's lines start: under its title, after the symbol and the layer.
const FINDING_TEXT: usize = 13;

/// Renders findings fitted to `width` columns: a line that does not fit wraps, its
/// continuation indented under its text (two columns deeper for a piece of evidence, a
/// remedy or a step, so that each still reads as one item); `None` keeps every line whole.
pub(crate) fn render_findings_within(
    findings: &[Finding],
    style: Style,
    width: Option<u16>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", style.bold("findings"));
    let lead = " ".repeat(FINDING_TEXT);
    let item = FINDING_TEXT + 2;
    let plain = |text: &str| text.to_string();
    let dim = |text: &str| style.dim(text);
    for finding in findings {
        let symbol = match finding.severity {
            gpuprobe_model::Severity::Error => style.bad(finding.severity.symbol()),
            gpuprobe_model::Severity::Warning => style.warn(finding.severity.symbol()),
            gpuprobe_model::Severity::Info => style.dim(finding.severity.symbol()),
        };
        let confidence = match finding.confidence {
            gpuprobe_model::Confidence::Suspected => " (suspected)",
            _ => "",
        };
        out.push_str(&fit::hanging(
            &format!(" {symbol} {:<9} ", finding.layer.name()),
            FINDING_TEXT,
            &format!(
                "{} [{}]{confidence}",
                visible_line(&finding.title),
                visible_line(&finding.id)
            ),
            width,
            plain,
        ));
        if finding.confidence == gpuprobe_model::Confidence::Suspected && finding.source == "kb" {
            // A suspicion is short: which of its conditions the facts matched, which could
            // not be checked, and where to read more.
            for line in suspicion_lines(finding) {
                out.push_str(&fit::hanging(&lead, item, &line, width, dim));
            }
            continue;
        }
        for evidence in finding.evidence.iter().take(4) {
            let text = format!("{}: {}", evidence.kind, shorten_evidence(&evidence.text));
            out.push_str(&fit::hanging(&lead, item, &text, width, dim));
        }
        if finding.evidence.len() > 4 {
            let more = finding.evidence.len() - 4;
            let pieces = if more == 1 { "piece" } else { "pieces" };
            let text = format!("… {more} more {pieces} of evidence in the JSON report");
            out.push_str(&fit::hanging(&lead, item, &text, width, dim));
        }
        if !finding.remedies.is_empty() {
            let remedies: Vec<String> = finding
                .remedies
                .iter()
                .take(4)
                // The whole text: an action may quote an entry's own words.
                .map(|r| visible_line(&r.described()).into_owned())
                .collect();
            let text = format!("to try: {}", remedies.join(" · "));
            out.push_str(&fit::hanging(&lead, item, &text, width, plain));
        }
        for step in &finding.next_steps {
            let text = format!("→ {}", visible_line(step));
            out.push_str(&fit::hanging(&lead, item, &text, width, plain));
        }
        if !finding.citations.is_empty() {
            let text = format!("source: {}", visible_line(&finding.citations.join("; ")));
            out.push_str(&fit::hanging(&lead, item, &text, width, dim));
        }
    }
    terminal_safe(&out).into_owned()
}

/// The lines under a suspected known issue: the conditions the facts matched, those that
/// could not be checked, the failures seen without the signature, and the command
/// that shows the entry.
fn suspicion_lines(finding: &Finding) -> Vec<String> {
    let texts = |kind: &str, prefix: Option<&str>| -> Vec<String> {
        finding
            .evidence
            .iter()
            .filter(|e| e.kind == kind)
            .filter_map(|e| match prefix {
                Some(prefix) => e.text.strip_prefix(prefix).map(str::to_string),
                None => Some(e.text.clone()),
            })
            .collect()
    };
    let mut lines = Vec::new();
    let matched = texts("condition", None);
    if !matched.is_empty() {
        lines.push(shorten_evidence(&format!("matched: {}", matched.join("; "))).into_owned());
    }
    let unchecked = texts("absent", None);
    if !unchecked.is_empty() {
        lines
            .push(shorten_evidence(&format!("not checked: {}", unchecked.join("; "))).into_owned());
    }
    let hints: Vec<String> = texts("log", Some(WITHOUT_SIGNATURE))
        .into_iter()
        .chain(texts("probe", Some(WITHOUT_SIGNATURE)))
        .collect();
    if let Some(first) = hints.first() {
        let more = match hints.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        lines.push(
            shorten_evidence(&format!(
                "{WITHOUT_SIGNATURE}{first}{more}; it does not confirm this issue"
            ))
            .into_owned(),
        );
    }
    lines.push(format!(
        "nothing here confirms it; gpuprobe kb show {}",
        finding.id
    ));
    lines
}

/// The most characters of one piece of evidence the terminal shows. Some evidence lists
/// every path a library search tried, which can run to thousands of characters; the JSON
/// report keeps the whole text.
const EVIDENCE_CHARS: usize = 300;

/// Evidence quotes logs and tool output: made visible, then cut.
fn shorten_evidence(text: &str) -> std::borrow::Cow<'_, str> {
    let text = visible_line(text);
    match text.char_indices().nth(EVIDENCE_CHARS) {
        None => text,
        Some((cut, _)) => format!("{}… (whole text in the JSON report)", &text[..cut]).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::{Confidence, Evidence, FindingLayer, Severity};

    fn finding_with(text: &str) -> Finding {
        Finding {
            id: "DIAG-NOTHING-TESTED".into(),
            source: "diagnosis".into(),
            severity: Severity::Warning,
            layer: FindingLayer::Framework,
            title: "nothing could be tested".into(),
            explanation: String::new(),
            confidence: Confidence::Confirmed,
            evidence: vec![Evidence::new("not tested", text)],
            remedies: Vec::new(),
            citations: Vec::new(),
            next_steps: Vec::new(),
            related: Vec::new(),
        }
    }

    #[test]
    fn the_count_line_names_no_device_when_nothing_ran() {
        use gpuprobe_model::{DeviceRef, Layer, ProbeId};
        use gpuprobe_model::{ProbeResult, Verdict};
        let with = |verdict: Verdict| {
            vec![
                ProbeResult::new(
                    ProbeId::new("copy.x"),
                    DeviceRef::Gpu(0),
                    Layer::Framework,
                    Verdict::NotTested {
                        reason: "no GPU".into(),
                    },
                ),
                ProbeResult::new(
                    ProbeId::new("copy.y"),
                    DeviceRef::Gpu(0),
                    Layer::Framework,
                    verdict,
                ),
            ]
        };
        let nothing = with(Verdict::NotTested {
            reason: "no GPU".into(),
        });
        assert_eq!(
            count_words(&nothing),
            "2 probe runs planned, none could run"
        );
        assert_eq!(
            count_words(&with(Verdict::Pass)),
            "2 probe runs on 1 device(s)"
        );
    }

    #[test]
    fn long_evidence_is_cut_on_a_character_boundary_and_points_to_the_json() {
        let long = format!(
            "tried: {}",
            "/opt/rocm/lib/libamdhip64.so.6, ü ".repeat(100)
        );
        let text = render_findings(&[finding_with(&long)], Style::PLAIN);
        let line = text.lines().find(|l| l.contains("tried:")).unwrap();
        assert!(
            line.ends_with("… (whole text in the JSON report)"),
            "{line}"
        );
        assert!(line.chars().count() < EVIDENCE_CHARS + 60, "{line}");
    }

    #[test]
    fn a_removal_is_printed_as_an_unset_not_as_the_setting() {
        let mut finding = finding_with("HIP_DISABLE_IPC=1");
        finding.remedies = vec![gpuprobe_model::Remedy {
            description: "Remove HIP_DISABLE_IPC (no effect)".into(),
            kind: "unset".into(),
            setting: Some("HIP_DISABLE_IPC".into()),
            cost: Default::default(),
        }];
        let text = render_findings(&[finding], Style::PLAIN);
        assert!(text.contains("to try: unset HIP_DISABLE_IPC\n"), "{text}");
    }

    /// A knowledge-base workaround without documented evidence keeps its qualifier on the
    /// "to try" line, before its cost, even when it is printed as `set NAME=VALUE`.
    #[test]
    fn an_unproven_remedy_is_printed_as_reported_never_as_a_cure() {
        let mut finding = finding_with("GPU 0 native ISA gfx1201 matches gfx1201");
        finding.remedies = vec![
            gpuprobe_model::Remedy {
                description: "Turn SDMA off (reported to help, not verified)".into(),
                kind: "env".into(),
                setting: Some("HSA_ENABLE_SDMA=0".into()),
                cost: gpuprobe_model::Cost {
                    slower: true,
                    ..Default::default()
                },
            },
            gpuprobe_model::Remedy {
                description: "Disable Secure Boot (reported to help, not verified)".into(),
                kind: "firmware".into(),
                setting: None,
                cost: Default::default(),
            },
            gpuprobe_model::Remedy {
                description: "Install linux-firmware 20251201".into(),
                kind: "firmware".into(),
                setting: None,
                cost: Default::default(),
            },
        ];
        let text = render_findings(&[finding], Style::PLAIN);
        assert!(
            text.contains(
                "to try: set HSA_ENABLE_SDMA=0 (reported to help, not verified; slower) · Disable Secure Boot (reported to help, not verified) · Install linux-firmware 20251201\n"
            ),
            "{text}"
        );
    }

    /// A finding with long lines of every kind: title, evidence, remedies, a step, sources.
    fn long_finding() -> Finding {
        let mut finding = finding_with(
            "copy.h2d.pageable.4x4.blocking on cuda:0: all zeros: the whole output (16 elements) came back zero in 3 of 3 trials",
        );
        finding.title =
            "4 copy probe(s) give wrong results on device cuda:0 (all zeros in 4 of 4 runs, every size)"
                .into();
        finding.evidence.push(Evidence::new(
            "library",
            format!(
                "tried: {}",
                "/opt/rocm-6.4.1/lib/libamdhip64.so.6.4.60401 ".repeat(3)
            ),
        ));
        finding.remedies = vec![gpuprobe_model::Remedy {
            description: "Turn the SDMA copy engine off for host-to-device copies (reported to help, not verified)".into(),
            kind: "env".into(),
            setting: Some("HSA_ENABLE_SDMA=0".into()),
            cost: Default::default(),
        }];
        finding.next_steps =
            vec!["gpuprobe check --only 'copy' --all   (re-run this family alone)".into()];
        finding.citations = vec![
            "ROCm/ROCm issue 5817 (host-to-device copies of pageable memory return zeros)".into(),
            "ROCm/rocm-systems PR #10639".into(),
        ];
        finding
    }

    #[test]
    fn findings_fit_80_columns_and_stay_whole_at_200() {
        use crate::test_support::{widest, words};
        let colour = Style { color: true };
        let findings = [long_finding()];
        let whole = render_findings(&findings, colour);
        assert!(widest(&whole) > 120, "{whole}");
        let narrow = render_findings_within(&findings, colour, Some(80));
        assert!(widest(&narrow) <= 80, "{narrow}");
        // Continuation lines sit under their item's text; nothing is lost but spaces.
        assert!(narrow.contains("\n               "), "{narrow}");
        assert_eq!(words(&narrow), words(&whole));
        assert_eq!(render_findings_within(&findings, colour, Some(200)), whole);
    }

    #[test]
    fn short_evidence_is_shown_whole() {
        let text = render_findings(&[finding_with("import torch failed")], Style::PLAIN);
        assert!(text.contains("not tested: import torch failed\n"), "{text}");
        assert!(!text.contains("JSON report"));
    }
}
