//! The HTML report: one self-contained, offline file made from a finished [`Report`], the
//! `fix` account when the run has one, and the issue texts of its failures.
//!
//! The page is rendered by minijinja from `templates/report.html` (embedded) with HTML
//! autoescaping on, so every piece of text that came from outside (worker output, probe
//! details, paths, KB text) is escaped by the template engine, never by hand. The view
//! model below holds only plain strings and numbers; the charts are inline SVG whose
//! geometry is computed here. Nothing on the page is loaded from anywhere: the CSS is
//! inline, there is no script, and the only outward references are `<a href>` links to
//! KB citations, which a reader may follow and a browser never loads by itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use gpuprobe_model::DeviceRef;
use gpuprobe_model::Finding;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::FixAccount;
use gpuprobe_model::{ExitStatus, Report};
use gpuprobe_model::{ProbeResult, Verdict};
use minijinja::{AutoEscape, Environment};
use serde::Serialize;

use crate::matrix;

const TEMPLATE: &str = include_str!("../templates/report.html");
const TEMPLATE_NAME: &str = "report.html";
/// The report's stylesheet: inline in the file a run writes, a linked stylesheet where a
/// server hands the report out under a policy that allows no inline style (`gpuprobe ui`).
pub const STYLESHEET: &str = include_str!("../templates/report.css");

/// Where a served report links to instead of carrying its own style ([`render_linked`]).
#[derive(Debug, Clone, Serialize)]
pub struct Linked {
    /// The URL of [`STYLESHEET`].
    pub stylesheet: String,
    /// The URL a "back" link on top of the page leads to.
    pub home: String,
}

/// The ISSUE.md text of one failure: which probe on which device, and the Markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueText {
    /// The probe id.
    pub probe: String,
    /// The device, as the report names it (`0`, `cpu`).
    pub device: String,
    /// The issue body.
    pub markdown: String,
}

impl From<(String, String, String)> for IssueText {
    fn from((probe, device, markdown): (String, String, String)) -> Self {
        IssueText {
            probe,
            device,
            markdown,
        }
    }
}

/// Why an HTML report could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    /// The template failed to render (a defect of gpuprobe's own).
    #[error("cannot render the HTML report")]
    Render(#[source] minijinja::Error),
    /// The output file cannot be written where the user asked.
    #[error("cannot write the HTML report to {}", gpuprobe_model::visible_line(&.path.display().to_string()))]
    Unwritable {
        /// The path the user named.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl gpuprobe_model::ClassifiedError for HtmlError {
    fn exit_status(&self) -> ExitStatus {
        match self {
            HtmlError::Render(_) => ExitStatus::InternalFailure,
            HtmlError::Unwritable { .. } => ExitStatus::UsageError,
        }
    }
}

/// Renders the report as one HTML document.
pub(crate) fn render(
    report: &Report,
    fix: Option<&FixAccount>,
    issues: &[IssueText],
) -> Result<String, HtmlError> {
    render_view(view(report, fix, issues, None))
}

/// Renders the report as a page of a server: the same document, its style linked from
/// `linked.stylesheet` instead of inline, and a link back to `linked.home` on top.
pub fn render_linked(
    report: &Report,
    fix: Option<&FixAccount>,
    issues: &[IssueText],
    linked: Linked,
) -> Result<String, HtmlError> {
    render_view(view(report, fix, issues, Some(linked)))
}

fn render_view(view: View) -> Result<String, HtmlError> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    env.add_template(TEMPLATE_NAME, TEMPLATE)
        .map_err(HtmlError::Render)?;
    let template = env.get_template(TEMPLATE_NAME).map_err(HtmlError::Render)?;
    template.render(view).map_err(HtmlError::Render)
}

/// Renders the report and writes it to `path` (`render`, then `write`).
pub fn write_report(
    path: &Path,
    report: &Report,
    fix: Option<&FixAccount>,
    issues: &[IssueText],
) -> Result<(), HtmlError> {
    write(path, &render(report, fix, issues)?)
}

/// What `gpuprobe report` prints for a run without `--html`, or with `--json`: the JSON
/// report (one line) or the terminal text under `options`.
pub fn text(report: &Report, json: bool, options: crate::terminal::TerminalOptions) -> String {
    if json {
        return format!("{}\n", crate::json::render(report));
    }
    crate::terminal::render(report, options)
}

/// Checks up front that `path`, when one is named, can be written, so that a long run does
/// not end in an unwritable output.
pub fn check_writable(path: Option<&Path>) -> Result<(), HtmlError> {
    let Some(path) = path else { return Ok(()) };
    gpuprobe_fs::check_writable_file(path).map_err(|reason| HtmlError::Unwritable {
        path: path.to_path_buf(),
        source: std::io::Error::other(reason),
    })
}

/// Writes `html` to `path` atomically: a temporary file beside it, then a rename, so a
/// reader never sees half a report. Missing parent directories are created.
pub(crate) fn write(path: &Path, html: &str) -> Result<(), HtmlError> {
    let fail = |source| HtmlError::Unwritable {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    gpuprobe_fs::write_atomically(path, |file| {
        std::io::Write::write_all(file, html.as_bytes())
    })
    .map_err(fail)
}

/// The most of a `repro`-written ISSUE.md shown on the page.
const MAX_ISSUE_BYTES: u64 = 1 << 20;

/// The issue text of each result that did not pass: the ISSUE.md that `gpuprobe repro`
/// wrote for it in the run directory when there is one for that device (it holds the script
/// and its observed run), else the body made from the report alone.
pub fn issue_texts(report: &Report, fix: Option<&FixAccount>) -> Vec<IssueText> {
    report
        .results
        .iter()
        .filter(|r| r.verdict.is_problem())
        .map(|result| {
            let markdown = report
                .run_dir
                .as_deref()
                .and_then(|dir| written_issue(Path::new(dir), result))
                .unwrap_or_else(|| {
                    crate::issue::render(&crate::issue::IssueInput {
                        report,
                        result,
                        manifest: None,
                        script: None,
                        run: None,
                        fix,
                    })
                });
            IssueText {
                probe: result.probe.to_string(),
                device: result.device.to_string(),
                markdown,
            }
        })
        .collect()
}

/// The ISSUE.md `repro` wrote for `result`, when its RESULT.json names the same device.
fn written_issue(run_dir: &Path, result: &ProbeResult) -> Option<String> {
    use gpuprobe_model::{ISSUE_FILE, REPRO_DIR, RESULT_INPUT};
    use std::io::Read;
    let dir = run_dir.join(REPRO_DIR).join(result.probe.as_str());
    let input: ProbeResult =
        serde_json::from_str(&std::fs::read_to_string(dir.join(RESULT_INPUT)).ok()?).ok()?;
    if input.device != result.device {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(dir.join(ISSUE_FILE))
        .ok()?
        .take(MAX_ISSUE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

// ---------------------------------------------------------------------------------------
// The view model: what the template shows, already worded.

#[derive(Serialize)]
struct View {
    linked: Option<Linked>,
    /// [`STYLESHEET`], inlined when the page is not [`Linked`] (a constant of gpuprobe's
    /// own, so the template takes it unescaped).
    inline_style: &'static str,
    simulated: bool,
    simulation: String,
    tool_version: String,
    command: String,
    tier: String,
    started_at: String,
    wall: String,
    run_dir: String,
    exit_code: u8,
    exit_text: String,
    exit_ok: bool,
    devices: Vec<String>,
    torch: String,
    totals: Vec<Count>,
    families: Vec<FamilyRow>,
    problems: Vec<ResultView>,
    passes: Vec<ResultView>,
    set_aside: Vec<GroupedReason>,
    findings: Vec<FindingView>,
    matrices: Vec<MatrixView>,
    bandwidth: Vec<BandwidthRow>,
    links: Vec<String>,
    fix: Option<FixView>,
    fingerprint: String,
    issues: Vec<IssueView>,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct Count {
    label: &'static str,
    class: &'static str,
    n: usize,
}

/// The verdict kinds in the order a summary shows them, with their CSS class.
const KINDS: [(&str, &str); 7] = [
    ("FAIL", "bad"),
    ("CRASH", "bad"),
    ("HANG", "bad"),
    ("ERROR", "bad"),
    ("PASS", "ok"),
    ("SKIP", "skip"),
    ("NOT-TESTED", "skip"),
];

fn kind_class(verdict: &Verdict) -> &'static str {
    KINDS
        .iter()
        .find(|(label, _)| *label == verdict.label())
        .map_or("skip", |(_, class)| class)
}

#[derive(Serialize)]
struct FamilyRow {
    family: String,
    device: String,
    counts: Vec<Count>,
    total: usize,
    bar: Vec<Segment>,
}

/// One piece of a stacked bar, in a 0..100 wide SVG.
#[derive(Serialize)]
struct Segment {
    x: String,
    width: String,
    class: &'static str,
    title: String,
}

#[derive(Serialize)]
struct ResultView {
    probe: String,
    device: String,
    label: &'static str,
    class: &'static str,
    detail: String,
    layer: String,
    elapsed: String,
    metrics: Vec<(String, String)>,
    notes: Vec<String>,
    settings: Vec<String>,
    stderr_tail: Vec<String>,
    kernel_log: Vec<String>,
    simulated: bool,
}

#[derive(Serialize)]
struct GroupedReason {
    label: &'static str,
    count: usize,
    reason: String,
}

#[derive(Serialize)]
struct FindingView {
    id: String,
    severity: String,
    class: &'static str,
    layer: String,
    title: String,
    suspected: bool,
    explanation: String,
    evidence: Vec<String>,
    remedies: Vec<String>,
    next_steps: Vec<String>,
    citations: Vec<Citation>,
}

#[derive(Serialize)]
struct Citation {
    text: String,
    /// Only for `https://` and `http://` citations: a link the reader may follow.
    href: Option<String>,
}

#[derive(Serialize)]
struct MatrixView {
    device: String,
    targets: Vec<String>,
    rows: Vec<MatrixRow>,
    broken: Vec<String>,
}

#[derive(Serialize)]
struct MatrixRow {
    from: String,
    cells: Vec<MatrixCell>,
}

#[derive(Serialize)]
struct MatrixCell {
    text: String,
    class: &'static str,
    title: String,
}

#[derive(Serialize)]
struct BandwidthRow {
    probe: String,
    device: String,
    metric: String,
    value: String,
    limit: String,
    limit_kind: String,
    percent: String,
    /// Bar width in a 0..100 SVG, capped at 100.
    bar: String,
    over: bool,
}

#[derive(Serialize)]
struct FixView {
    simulated: bool,
    outcome: String,
    stack: String,
    targets: Vec<Vec<String>>,
    candidates: Vec<CandidateRow>,
    chosen: Vec<String>,
    verification: String,
    reported: Vec<String>,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct CandidateRow {
    setting: String,
    title: String,
    result: String,
    class: &'static str,
    cost: String,
    elapsed: String,
}

#[derive(Serialize)]
struct IssueView {
    probe: String,
    device: String,
    markdown: String,
}

fn view(
    report: &Report,
    fix: Option<&FixAccount>,
    issues: &[IssueText],
    linked: Option<Linked>,
) -> View {
    let fp = &report.fingerprint;
    let simulation = report
        .simulation
        .as_ref()
        .map(|sim| {
            let names: Vec<&str> = sim.faults.iter().map(|f| f.name.as_str()).collect();
            format!("{} ({})", sim.source, names.join(", "))
        })
        .unwrap_or_default();
    let torch = fp
        .python
        .as_ref()
        .map(|py| match (&py.torch, &py.torch_error) {
            (Some(t), _) => {
                let build = match (&t.hip, &t.cuda) {
                    (Some(hip), _) => format!("HIP {hip}"),
                    (None, Some(cuda)) => format!("CUDA {cuda}"),
                    _ => "CPU only".into(),
                };
                format!("python {} · torch {} ({build})", py.executable, t.version)
            }
            (None, Some(err)) => format!("python {} · torch unusable: {err}", py.executable),
            (None, None) => format!("python {}", py.executable),
        })
        .unwrap_or_default();
    let mut problems: Vec<&ProbeResult> = Vec::new();
    let mut passes: Vec<&ProbeResult> = Vec::new();
    let mut set_aside: BTreeMap<(&'static str, &str), usize> = BTreeMap::new();
    for result in &report.results {
        match &result.verdict {
            v if v.is_problem() => problems.push(result),
            Verdict::Pass => passes.push(result),
            Verdict::Skip { reason } => *set_aside.entry(("SKIP", reason)).or_default() += 1,
            Verdict::NotTested { reason } => {
                *set_aside.entry(("NOT-TESTED", reason)).or_default() += 1
            }
            _ => {}
        }
    }
    View {
        inline_style: if linked.is_some() { "" } else { STYLESHEET },
        linked,
        simulated: report.simulation.is_some()
            || report.results.iter().any(|r| r.simulated)
            || fix.is_some_and(|f| f.simulated),
        simulation,
        // The commit and knowledge-base revision, as `--version` prints them.
        tool_version: match &report.build {
            Some(build) => format!(
                "{} (commit {}, kb {})",
                report.tool_version, build.commit, build.kb_revision
            ),
            None => report.tool_version.clone(),
        },
        command: report.command.clone(),
        tier: report.tier.name().to_string(),
        started_at: report.started_at.clone(),
        wall: format!("{:.1} s", report.wall_s),
        run_dir: report.run_dir.clone().unwrap_or_default(),
        exit_code: report.exit_code,
        exit_text: report.exit_status.describe().to_string(),
        exit_ok: report.exit_code == 0,
        devices: device_lines(report),
        torch,
        totals: counts(report.results.iter()),
        families: families(&report.results),
        problems: problems.into_iter().map(result_view).collect(),
        passes: passes.into_iter().map(result_view).collect(),
        set_aside: set_aside
            .into_iter()
            .map(|((label, reason), count)| GroupedReason {
                label,
                count,
                reason: reason.to_string(),
            })
            .collect(),
        findings: report.findings.iter().map(finding_view).collect(),
        matrices: matrices(&report.results),
        bandwidth: bandwidth(&report.results, fp),
        links: pcie_links(fp)
            .iter()
            .map(|(bus, link)| {
                format!(
                    "{bus}: PCIe {} GT/s x{} → {:.1} GB/s per direction",
                    link.gt_per_s,
                    link.width,
                    link.gb_per_s()
                )
            })
            .collect(),
        fix: fix.map(fix_view),
        fingerprint: gpuprobe_detect::render_text(fp),
        issues: issues
            .iter()
            .map(|i| IssueView {
                probe: i.probe.clone(),
                device: i.device.clone(),
                markdown: i.markdown.clone(),
            })
            .collect(),
        notes: report.notes.clone(),
    }
}

fn device_lines(report: &Report) -> Vec<String> {
    let fp = &report.fingerprint;
    let mut lines: Vec<String> = fp
        .gpus
        .iter()
        .map(|gpu| {
            let mut parts = vec![match gpu.index {
                Some(i) => format!("GPU {i}"),
                None => "GPU".to_string(),
            }];
            parts.extend(gpu.name.clone());
            parts.extend(gpu.effective_isa().map(str::to_string));
            if gpu.effective_isa().is_none() {
                parts.extend(gpu.compute_capability.as_ref().map(|cc| format!("cc {cc}")));
            }
            parts.extend(gpu.vram_total_bytes.map(gpuprobe_detect::human_bytes));
            parts.join(" · ")
        })
        .collect();
    if report.results.iter().any(|r| r.device == DeviceRef::Cpu) {
        lines.push("cpu (the CPU as the device under test)".into());
    }
    if lines.is_empty() {
        lines.push("no GPU found".into());
    }
    lines
}

fn counts<'a>(results: impl Iterator<Item = &'a ProbeResult>) -> Vec<Count> {
    let mut by_label: BTreeMap<&'static str, usize> = BTreeMap::new();
    for r in results {
        *by_label.entry(r.verdict.label()).or_default() += 1;
    }
    KINDS
        .iter()
        .filter_map(|(label, class)| {
            by_label.get(label).map(|&n| Count {
                label,
                class: if *label == "NOT-TESTED" { "nt" } else { class },
                n,
            })
        })
        .collect()
}

fn families(results: &[ProbeResult]) -> Vec<FamilyRow> {
    let mut groups: BTreeMap<(String, DeviceRef), Vec<&ProbeResult>> = BTreeMap::new();
    for r in results {
        groups
            .entry((r.group().to_string(), r.device))
            .or_default()
            .push(r);
    }
    let mut rows: Vec<FamilyRow> = groups
        .into_iter()
        .map(|((family, device), members)| {
            let counts = counts(members.iter().copied());
            let total = members.len();
            let mut x = 0.0;
            let bar = counts
                .iter()
                .map(|c| {
                    let width = 100.0 * c.n as f64 / total as f64;
                    let segment = Segment {
                        x: format!("{x:.2}"),
                        width: format!("{width:.2}"),
                        class: c.class,
                        title: format!("{} {}", c.n, c.label),
                    };
                    x += width;
                    segment
                })
                .collect();
            FamilyRow {
                family,
                device: device.to_string(),
                counts,
                total,
                bar,
            }
        })
        .collect();
    // Families with problems first, then by name.
    rows.sort_by_key(|row| !row.counts.iter().any(|c| c.class == "bad"));
    rows
}

fn metric_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn result_view(r: &ProbeResult) -> ResultView {
    let (metrics, notes) = match &r.observation {
        Some(obs) => (
            obs.metrics
                .iter()
                .map(|(k, v)| (k.clone(), metric_text(v)))
                .collect(),
            obs.notes.clone(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    ResultView {
        probe: r.probe.to_string(),
        device: r.device.to_string(),
        label: r.verdict.label(),
        class: kind_class(&r.verdict),
        detail: r.verdict.detail(),
        layer: r.layer.name().to_string(),
        elapsed: r.elapsed_s.map(|s| format!("{s:.2} s")).unwrap_or_default(),
        metrics,
        notes,
        settings: r.settings.clone(),
        stderr_tail: r.stderr_tail.clone(),
        kernel_log: r.kernel_log.clone(),
        simulated: r.simulated,
    }
}

fn finding_view(f: &Finding) -> FindingView {
    let class = match f.severity {
        gpuprobe_model::Severity::Error => "bad",
        gpuprobe_model::Severity::Warning => "warn",
        gpuprobe_model::Severity::Info => "skip",
    };
    FindingView {
        id: f.id.clone(),
        severity: format!("{:?}", f.severity).to_lowercase(),
        class,
        layer: f.layer.name().to_string(),
        title: f.title.clone(),
        suspected: f.confidence == gpuprobe_model::Confidence::Suspected,
        explanation: f.explanation.clone(),
        evidence: f
            .evidence
            .iter()
            .map(|e| format!("{}: {}", e.kind, e.text))
            .collect(),
        remedies: f.remedies.iter().map(|r| r.described()).collect(),
        next_steps: f.next_steps.clone(),
        citations: f.citations.iter().map(|c| citation(c)).collect(),
    }
}

/// A citation links out only when it is a plain web address: no other scheme (never
/// `javascript:`), no whitespace or quotes inside.
fn citation(text: &str) -> Citation {
    let is_url = (text.starts_with("https://") || text.starts_with("http://"))
        && !text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '<' | '>'));
    Citation {
        text: text.to_string(),
        href: is_url.then(|| text.to_string()),
    }
}

/// One heat map per device: source dtype × target dtype; each cell counts the conversion
/// methods and places measured, coloured by the worst of them.
fn matrices(results: &[ProbeResult]) -> Vec<MatrixView> {
    #[derive(Default)]
    struct Tally {
        ok: usize,
        broken: Vec<String>,
        other: Vec<String>,
        skipped: usize,
    }
    let mut by_device: BTreeMap<DeviceRef, BTreeMap<(String, String), Tally>> = BTreeMap::new();
    for r in results {
        let Some(cell) = matrix::parse(r.probe.as_str()) else {
            continue;
        };
        let tally = by_device
            .entry(r.device)
            .or_default()
            .entry((cell.from.to_string(), cell.to.to_string()))
            .or_default();
        let what = format!("{} {}", cell.method, cell.place);
        match &r.verdict {
            Verdict::Pass => tally.ok += 1,
            Verdict::Fail { class, .. } => {
                tally.broken.push(format!("{what}: {}", class.describe()))
            }
            Verdict::Skip { .. } | Verdict::NotTested { .. } => tally.skipped += 1,
            other => tally.other.push(format!("{what}: {}", other.label())),
        }
    }
    by_device
        .into_iter()
        .map(|(device, cells)| {
            let froms: BTreeSet<&String> = cells.keys().map(|(f, _)| f).collect();
            let targets: BTreeSet<&String> = cells.keys().map(|(_, t)| t).collect();
            let mut broken = Vec::new();
            let rows = froms
                .iter()
                .map(|from| MatrixRow {
                    from: from.to_string(),
                    cells: targets
                        .iter()
                        .map(|to| {
                            let Some(t) = cells.get(&(from.to_string(), to.to_string())) else {
                                return MatrixCell {
                                    text: String::new(),
                                    class: "none",
                                    title: "not measured".into(),
                                };
                            };
                            for b in t.broken.iter().chain(&t.other) {
                                broken.push(format!("{from} → {to}, {b}"));
                            }
                            let bad = t.broken.len() + t.other.len();
                            let measured = t.ok + bad;
                            let (text, class) = if bad > 0 {
                                (format!("{bad}/{measured} broken"), "bad")
                            } else if t.ok > 0 {
                                (format!("{}/{measured} ok", t.ok), "ok")
                            } else {
                                ("skip".into(), "skip")
                            };
                            MatrixCell {
                                title: format!(
                                    "{from} → {to}: {} ok, {bad} broken, {} skipped",
                                    t.ok, t.skipped
                                ),
                                text,
                                class,
                            }
                        })
                        .collect(),
                })
                .collect();
            MatrixView {
                device: device.to_string(),
                targets: targets.into_iter().cloned().collect(),
                rows,
                broken,
            }
        })
        .collect()
}

/// A PCIe link as the fingerprint records it (`extra`: `gpu.<bus>.pcie_link_speed`,
/// `gpu.<bus>.pcie_link_width`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PcieLink {
    gt_per_s: f64,
    width: u32,
}

impl PcieLink {
    /// Theoretical bandwidth per direction, GB/s (1e9 B/s): transfers × lanes × the line
    /// code's efficiency (8b/10b up to 5 GT/s, 128b/130b from 8 GT/s on) / 8 bits.
    fn gb_per_s(self) -> f64 {
        let efficiency = if self.gt_per_s < 8.0 {
            0.8
        } else {
            128.0 / 130.0
        };
        self.gt_per_s * f64::from(self.width) * efficiency / 8.0
    }
}

fn pcie_links(fp: &Fingerprint) -> BTreeMap<String, PcieLink> {
    let mut links = BTreeMap::new();
    for (key, speed) in &fp.extra {
        let Some(bus) = key
            .strip_prefix("gpu.")
            .and_then(|k| k.strip_suffix(".pcie_link_speed"))
        else {
            continue;
        };
        let gt = speed
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<f64>().ok());
        let width = fp
            .extra
            .get(&format!("gpu.{bus}.pcie_link_width"))
            .and_then(|w| w.trim().trim_start_matches('x').parse::<u32>().ok());
        if let (Some(gt_per_s), Some(width)) = (gt, width)
            && gt_per_s > 0.0
            && width > 0
        {
            links.insert(bus.to_string(), PcieLink { gt_per_s, width });
        }
    }
    links
}

/// The PCIe link of a device: its GPU's bus when the fingerprint names the GPU by index,
/// else the only link recorded.
fn link_of(
    fp: &Fingerprint,
    links: &BTreeMap<String, PcieLink>,
    device: DeviceRef,
) -> Option<PcieLink> {
    let DeviceRef::Gpu(index) = device else {
        return None;
    };
    let by_index = fp
        .gpus
        .iter()
        .find(|g| g.index == Some(index))
        .and_then(|g| g.pci_bus.as_ref())
        .and_then(|bus| links.get(bus).copied());
    by_index.or_else(|| {
        (links.len() == 1)
            .then(|| links.values().next().copied())
            .flatten()
    })
}

fn is_bandwidth(metric: &str) -> bool {
    metric.ends_with("gb_per_s") || metric.ends_with("gbps") || metric.contains("gb_per_s.")
}

/// Whether a bandwidth crosses the host link (PCIe) rather than staying on the device.
fn crosses_host_link(probe: &str, metric: &str) -> bool {
    let text = format!("{probe} {metric}");
    ["h2d", "d2h", "roundtrip", "pageable", "pinned"]
        .iter()
        .any(|k| text.contains(k))
}

/// Copies on the device, and the VRAM test's throughput (bytes written + read, as the
/// copy ceiling counts them).
fn stays_on_device(probe: &str, metric: &str) -> bool {
    metric.contains("d2d") || probe.contains(".d2d") || probe.contains("memtest")
}

/// Every measured bandwidth, each against its physical limit: host↔device copies against
/// the PCIe link's theoretical bandwidth, device copies against the device copy ceiling
/// the native copy probe measured in the same run (bytes read + written).
fn bandwidth(results: &[ProbeResult], fp: &Fingerprint) -> Vec<BandwidthRow> {
    let links = pcie_links(fp);
    // The device copy ceiling: the native probe's `d2d_gbps` (memcpy or copy kernel,
    // whichever is faster), per device.
    let mut ceiling: BTreeMap<DeviceRef, f64> = BTreeMap::new();
    for r in results {
        if let Some(v) = r
            .observation
            .as_ref()
            .and_then(|o| o.metrics.get("d2d_gbps"))
            .and_then(serde_json::Value::as_f64)
        {
            let entry = ceiling.entry(r.device).or_insert(0.0);
            *entry = entry.max(v);
        }
    }
    let mut rows = Vec::new();
    for r in results {
        let Some(obs) = &r.observation else { continue };
        for (metric, value) in &obs.metrics {
            let Some(value) = value.as_f64().filter(|v| v.is_finite() && *v > 0.0) else {
                continue;
            };
            if !is_bandwidth(metric) || metric == "d2d_gbps" {
                continue;
            }
            let probe = r.probe.as_str();
            let (limit, limit_kind) = if crosses_host_link(probe, metric) {
                match link_of(fp, &links, r.device) {
                    Some(link) => (
                        Some(link.gb_per_s()),
                        format!("PCIe {} GT/s x{}, theoretical", link.gt_per_s, link.width),
                    ),
                    None if r.device == DeviceRef::Cpu => {
                        (None, "none: the device is the CPU".to_string())
                    }
                    None => (None, "PCIe link not recorded".to_string()),
                }
            } else if stays_on_device(probe, metric) {
                match ceiling.get(&r.device) {
                    Some(&c) => (Some(c), "device copy ceiling, measured".to_string()),
                    None => (None, "no device copy ceiling measured".to_string()),
                }
            } else {
                (None, String::new())
            };
            let fraction = limit.map(|l| value / l);
            rows.push(BandwidthRow {
                probe: probe.to_string(),
                device: r.device.to_string(),
                metric: metric.clone(),
                value: format!("{value:.1}"),
                limit: limit.map(|l| format!("{l:.1}")).unwrap_or_default(),
                limit_kind,
                percent: fraction
                    .map(|f| format!("{:.0}%", 100.0 * f))
                    .unwrap_or_default(),
                bar: fraction
                    .map(|f| format!("{:.1}", (100.0 * f).min(100.0)))
                    .unwrap_or_default(),
                over: fraction.is_some_and(|f| f > 1.0),
            });
        }
    }
    rows
}

fn fix_view(account: &FixAccount) -> FixView {
    // As the terminal counts them: a failure that did not reproduce cannot be cured.
    let failures = account
        .targets
        .iter()
        .filter(|t| t.status != gpuprobe_model::TargetStatus::Flaky)
        .count();
    let candidates = account
        .candidates
        .iter()
        .map(|t| {
            let (result, class) = if !t.tried {
                (
                    format!(
                        "not tried: {}",
                        t.not_tried_because.as_deref().unwrap_or("")
                    ),
                    "skip",
                )
            } else if let Some(first) = t.broke.first() {
                (
                    format!(
                        "breaks {} ({}: {}) → rejected",
                        first.at, first.verdict, first.detail
                    ),
                    "bad",
                )
            } else if t.cured.is_empty() {
                ("cures nothing".to_string(), "skip")
            } else {
                (
                    format!("cures {}/{failures}, breaks nothing", t.cured.len()),
                    "ok",
                )
            };
            let mut cost: Vec<String> = t.cost.tags().iter().map(|s| s.to_string()).collect();
            cost.extend(t.cost.note.clone());
            CandidateRow {
                setting: t.setting.to_string(),
                title: t.title.clone(),
                result,
                class,
                cost: cost.join("; "),
                elapsed: t.elapsed_s.map(|s| format!("{s:.1} s")).unwrap_or_default(),
            }
        })
        .collect();
    FixView {
        simulated: account.simulated,
        outcome: account.outcome_words().to_string(),
        stack: account.stack.describe(),
        targets: account
            .targets
            .iter()
            .map(|t| {
                vec![
                    t.failure.at.to_string(),
                    t.failure.verdict.clone(),
                    t.status.describe().to_string(),
                ]
            })
            .collect(),
        candidates,
        chosen: account.chosen.iter().map(ToString::to_string).collect(),
        verification: account
            .verification
            .as_ref()
            .map(|v| {
                let mut line = if v.passed {
                    format!("verified: {} cured", v.cured.len())
                } else {
                    format!(
                        "not verified: {} cured, {} still failing, {} broken",
                        v.cured.len(),
                        v.still_failing.len(),
                        v.broke.len()
                    )
                };
                if let Some(cost) = &account.cost {
                    line.push_str(&format!(" · {}", cost.summary()));
                }
                line
            })
            .unwrap_or_default(),
        reported: account
            .reported
            .iter()
            .map(|r| r.description.clone())
            .collect(),
        notes: account.notes.clone(),
    }
}

#[cfg(test)]
mod tests;
