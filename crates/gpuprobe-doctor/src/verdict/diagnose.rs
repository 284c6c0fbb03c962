//! Diagnosis: failures placed on the layer of the stack where they first appear, with the
//! evidence that places them there.
//!
//! The same data movement is probed at several layers (native runtime copies, PyTorch
//! copies, pipeline code), so the lowest failing layer is where the bug lives: if the
//! native round trip is bit-exact but PyTorch's is not, the driver moves data correctly and
//! the framework is at fault. Within a layer, sibling probes that differ in one condition
//! (pinned vs pageable, blocking vs non-blocking, device vs host) tell which condition the
//! failure needs. Known-issue matching is the knowledge base's job; this module only says
//! what the results themselves show.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gpuprobe_model::Fingerprint;
use gpuprobe_model::Measurement;
use gpuprobe_model::{Confidence, Evidence, Finding, FindingLayer, Severity};
use gpuprobe_model::{DeviceRef, Layer, ProbeSpec};
use gpuprobe_model::{FailClass, ProbeResult, Verdict};

/// Pairs of id segments whose swap gives a probe that differs in one condition.
const SIBLING_SWAPS: &[(&str, &str)] = &[
    ("pageable", "pinned"),
    ("nonblocking", "blocking"),
    ("device", "host"),
    ("threads", "single"),
    ("fork", "spawn"),
];

fn layer_of(layer: Layer) -> FindingLayer {
    match layer {
        Layer::System => FindingLayer::System,
        Layer::Runtime => FindingLayer::Runtime,
        Layer::Framework => FindingLayer::Framework,
        Layer::Pipeline => FindingLayer::Pipeline,
        Layer::Job => FindingLayer::Job,
    }
}

/// Which native probes cover the same operation as a framework family (family → native id
/// prefix), for placing framework failures above or at the runtime. Each family declares
/// its counterpart in the catalog its worker publishes (`ProbeSpec::native_counterpart`);
/// this only collects them.
pub(crate) type NativeCounterparts = BTreeMap<String, String>;

/// The native counterparts the catalog declares, by family.
pub(crate) fn native_counterparts(catalog: &[ProbeSpec]) -> NativeCounterparts {
    catalog
        .iter()
        .filter_map(|spec| {
            let prefix = spec.native_counterpart.as_ref()?;
            Some((spec.id.family().to_string(), prefix.clone()))
        })
        .collect()
}

/// Findings from the results alone, each family's failures placed against the native
/// counterpart the catalog declares for it.
pub(crate) fn diagnose(
    results: &[ProbeResult],
    fingerprint: &Fingerprint,
    counterparts: &NativeCounterparts,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let by_id: HashMap<(&str, DeviceRef), &ProbeResult> = results
        .iter()
        .map(|r| ((r.probe.as_str(), r.device), r))
        .collect();

    // Failures (wrong results) grouped by family.
    let mut failing: BTreeMap<String, Vec<&ProbeResult>> = BTreeMap::new();
    let mut aborted: Vec<&ProbeResult> = Vec::new();
    for result in results {
        match result.verdict {
            Verdict::Fail { .. } => failing
                .entry(result.probe.family().to_string())
                .or_default()
                .push(result),
            Verdict::Crash { .. } | Verdict::Hang { .. } | Verdict::Error { .. } => {
                aborted.push(result)
            }
            _ => {}
        }
    }
    for (family, failed) in &failing {
        findings.push(wrong_results_finding(
            family,
            failed,
            results,
            &by_id,
            counterparts.get(family).map(String::as_str),
        ));
    }
    for result in aborted {
        findings.push(aborted_finding(result));
    }
    if let Some(finding) = nothing_tested_finding(results, fingerprint) {
        findings.push(finding);
    }
    if let Some(finding) = nonfinite_swallowed_finding(results) {
        findings.push(finding);
    }
    findings
}

/// Sweep probes whose NaN or infinity in a decomposition's input came back as finite
/// numbers, listed at most this many in the finding's evidence.
const SWALLOWED_LISTED: usize = 6;

/// A finding of its own, below a wrong value, for the sweep's `nonfinite_swallowed` class: a
/// decomposition or solver given a NaN or infinity returned only finite numbers. Nothing
/// promises NaN propagation there (LAPACK, cuSOLVER, MAGMA), so the probes pass; but a job
/// that relies on a NaN showing up downstream would not see it, which is worth knowing.
fn nonfinite_swallowed_finding(results: &[ProbeResult]) -> Option<Finding> {
    let swallowing: Vec<(&ProbeResult, u64)> = results
        .iter()
        .filter_map(|result| match &result.observation.as_ref()?.measurement {
            Measurement::Sweep(stats) if stats.nonfinite_swallowed > 0 => {
                Some((result, stats.nonfinite_swallowed))
            }
            _ => None,
        })
        .collect();
    let first = swallowing.first()?;
    let cases: u64 = swallowing.iter().map(|(_, n)| n).sum();
    let mut evidence: Vec<Evidence> = swallowing
        .iter()
        .take(SWALLOWED_LISTED)
        .map(|(result, n)| {
            let example = result
                .observation
                .as_ref()
                .and_then(|o| o.notes.iter().find(|note| note.contains("looks valid")))
                .map(|note| format!(": {note}"))
                .unwrap_or_default();
            Evidence::new(
                "probe",
                format!(
                    "{} on {}: {n} case(s){example}",
                    result.probe, result.device
                ),
            )
        })
        .collect();
    if swallowing.len() > SWALLOWED_LISTED {
        evidence.push(Evidence::new(
            "probe",
            format!("and {} more probe(s)", swallowing.len() - SWALLOWED_LISTED),
        ));
    }
    Some(Finding {
        id: "DIAG-NONFINITE-SWALLOWED".into(),
        source: "diagnosis".into(),
        severity: Severity::Info,
        layer: layer_of(first.0.layer),
        title: format!(
            "a NaN or infinity given to a decomposition or solver came back as finite numbers ({cases} case(s) in {} probe(s))",
            swallowing.len()
        ),
        explanation: "Given a matrix that holds a NaN or an infinity, these decompositions or solvers returned only finite numbers: the result looks valid but is meaningless. No linear-algebra library (LAPACK, cuSOLVER, MAGMA) promises to propagate NaN, so this is not counted as a wrong result; a job that counts on a NaN in its inputs showing up downstream should check its inputs (torch.isfinite) before such calls.".into(),
        confidence: Confidence::Observed,
        evidence,
        remedies: Vec::new(),
        citations: Vec::new(),
        next_steps: Vec::new(),
        related: Vec::new(),
    })
}

fn class_summary(failed: &[&ProbeResult]) -> String {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for result in failed {
        if let Some(class) = result.verdict.fail_class() {
            *counts.entry(class.describe()).or_default() += 1;
        }
    }
    counts
        .iter()
        .map(|(class, n)| format!("{class} in {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn sibling_id(id: &str, from: &str, to: &str) -> Option<String> {
    let segments: Vec<&str> = id.split('.').collect();
    if !segments.contains(&from) {
        return None;
    }
    Some(
        segments
            .iter()
            .map(|s| if *s == from { to } else { s })
            .collect::<Vec<_>>()
            .join("."),
    )
}

fn wrong_results_finding(
    family: &str,
    failed: &[&ProbeResult],
    all: &[ProbeResult],
    by_id: &HashMap<(&str, DeviceRef), &ProbeResult>,
    native_counterpart: Option<&str>,
) -> Finding {
    let devices: BTreeSet<DeviceRef> = failed.iter().map(|r| r.device).collect();
    let device_text = devices
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let mut evidence: Vec<Evidence> = failed
        .iter()
        .take(6)
        .map(|r| {
            Evidence::from_probe(
                r.probe.clone(),
                format!("{} on {}: {}", r.probe, r.device, r.verdict.detail()),
            )
        })
        .collect();
    if failed.len() > 6 {
        evidence.push(Evidence::new(
            "probe",
            format!("{} more failing {family} probes", failed.len() - 6),
        ));
    }

    // Which single condition does the failure need? A sibling that passes answers it.
    let mut conditions: BTreeSet<String> = BTreeSet::new();
    for result in failed {
        for (a, b) in SIBLING_SWAPS.iter().flat_map(|(a, b)| [(*a, *b), (*b, *a)]) {
            let Some(sibling) = sibling_id(result.probe.as_str(), a, b) else {
                continue;
            };
            if let Some(other) = by_id.get(&(sibling.as_str(), result.device))
                && matches!(other.verdict, Verdict::Pass)
                && conditions.insert(format!("{a} (the {b} variant passes)"))
            {
                evidence.push(Evidence::from_probe(
                    other.probe.clone(),
                    format!("{} passes: the failure needs `{a}`", other.probe),
                ));
            }
        }
    }

    // Place it: the lowest layer that fails, using the native counterpart where there is one.
    let declared = failed
        .iter()
        .map(|r| r.layer)
        .min()
        .unwrap_or(Layer::Framework);
    let mut layer = layer_of(declared);
    let mut confidence = Confidence::Observed;
    let mut placement = String::new();
    if declared > Layer::Runtime
        && let Some(prefix) = native_counterpart
    {
        let native: Vec<&ProbeResult> = all
            .iter()
            .filter(|r| r.probe.as_str().starts_with(prefix) && devices.contains(&r.device))
            .collect();
        let native_failed = native.iter().filter(|r| r.verdict.is_problem()).count();
        let native_passed = native
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Pass))
            .count();
        if native.is_empty() || native_passed + native_failed == 0 {
            placement = format!(
                "native {prefix}.* probes did not run, so the runtime below PyTorch is not cleared"
            );
            confidence = Confidence::Suspected;
        } else if native_failed > 0 {
            layer = FindingLayer::Runtime;
            placement = format!(
                "{native_failed} native {prefix}.* probe(s) fail too: the runtime/driver itself moves data wrongly"
            );
        } else {
            placement = format!(
                "all {native_passed} native {prefix}.* probes pass bit-exact: the driver and runtime move data correctly; the failure is above them"
            );
        }
        evidence.push(Evidence::new("layer", placement.clone()));
    }

    let classes = class_summary(failed);
    let mut title = format!(
        "{} {family} probe(s) give wrong results on device {device_text} ({classes})",
        failed.len()
    );
    if !conditions.is_empty() {
        title.push_str(&format!(
            "; needs {}",
            conditions
                .iter()
                .map(|c| c.split(' ').next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join(" + ")
        ));
    }
    let all_zero = failed.iter().all(|r| {
        matches!(
            r.verdict.fail_class(),
            Some(FailClass::AllZeros | FailClass::PartialZeros)
        )
    });
    let explanation = format!(
        "{}{}{}",
        if all_zero {
            "Data comes back as zeros: the classic sign of a copy or kernel that silently did not run or read stale memory. "
        } else {
            ""
        },
        if placement.is_empty() {
            String::new()
        } else {
            format!("Placement: {placement}. ")
        },
        "Every failing probe is listed in the report with its numbers."
    );
    Finding {
        id: format!("DIAG-{}", family.to_ascii_uppercase()),
        source: "diagnosis".into(),
        severity: Severity::Error,
        layer,
        title,
        explanation,
        confidence,
        evidence,
        remedies: Vec::new(),
        citations: Vec::new(),
        next_steps: vec![format!(
            "gpuprobe check --only '{family}' --all   (re-run this family alone)"
        )],
        related: Vec::new(),
    }
}

fn aborted_finding(result: &ProbeResult) -> Finding {
    let (kind, title, layer) = match &result.verdict {
        Verdict::Crash { .. } => (
            "CRASH",
            format!(
                "the worker died in {} on device {}",
                result.probe, result.device
            ),
            if result.kernel_log.is_empty() {
                layer_of(result.layer).min(FindingLayer::Runtime)
            } else {
                FindingLayer::System
            },
        ),
        Verdict::Hang { .. } => (
            "HANG",
            format!(
                "{} did not finish on device {}",
                result.probe, result.device
            ),
            layer_of(result.layer).min(FindingLayer::Runtime),
        ),
        _ => (
            "ERROR",
            format!(
                "{} raised an error on device {}",
                result.probe, result.device
            ),
            layer_of(result.layer),
        ),
    };
    let mut evidence = vec![Evidence::from_probe(
        result.probe.clone(),
        result.verdict.detail(),
    )];
    for line in result.kernel_log.iter().take(4) {
        evidence.push(Evidence::new("kernel log", line.clone()));
    }
    // For a hang, the worker's stack dump (taken before it was killed) says where it
    // stopped; for a crash the verdict already carries the most telling line.
    if matches!(result.verdict, Verdict::Hang { .. })
        && let Some(location) = stopped_at(&result.stderr_tail)
    {
        evidence.push(Evidence::new("stack", location));
    }
    Finding {
        id: format!("DIAG-{kind}"),
        source: "diagnosis".into(),
        severity: Severity::Error,
        layer,
        title,
        explanation: match kind {
            "CRASH" => "The probe's worker process was killed; gpuprobe recorded the signal and the last output and continued with a fresh worker.".into(),
            "HANG" => "The probe exceeded its time limit; its worker's process group was killed and the run continued.".into(),
            _ => "The probe raised instead of producing a result.".into(),
        },
        confidence: Confidence::Observed,
        evidence,
        remedies: Vec::new(),
        citations: Vec::new(),
        next_steps: vec![format!("gpuprobe check --only '{}' --verbose", result.probe)],
        related: Vec::new(),
    }
}

/// Files of the worker's own plumbing: the bootstrap (`-c "..."`), the worker's main loop
/// and the fault simulator. A frame there says nothing about where a probe stopped.
const PLUMBING_FILES: &[&str] = &[
    "gpuprobe/worker/main.py",
    "gpuprobe/worker/__main__.py",
    "gpuprobe/worker/simulate.py",
];

/// Where the probes' own code lives.
const PROBE_DIR: &str = "gpuprobe/worker/probes/";

/// One `File "...", line N in f` line of a Python stack dump.
struct Frame<'a> {
    file: &'a str,
    /// The line, trimmed.
    text: &'a str,
}

/// A stack dump's frames, and whether the dump was of the thread that was running when it
/// was taken.
struct Dump<'a> {
    /// Innermost (most recent) frame first.
    frames: Vec<Frame<'a>>,
    /// faulthandler output (most recent call first), as opposed to an exception's traceback.
    faulthandler: bool,
    /// faulthandler's `Current thread ...` or `Stack` (the thread that took the dump).
    current: bool,
}

/// The frame a line names, and whether it is written as in a traceback (`line N, in f`,
/// most recent call last) rather than as faulthandler writes it (`line N in f`, most recent
/// call first).
fn frame_of(line: &str) -> Option<(Frame<'_>, bool)> {
    let text = line.trim();
    let rest = text.strip_prefix("File \"")?;
    let (file, after) = rest.split_once('"')?;
    let after = after.trim_start();
    if !after.starts_with(", line ") {
        return None;
    }
    Some((Frame { file, text }, after.contains(", in ")))
}

/// Splits a stderr tail into the stack dumps it holds: faulthandler's (`Current thread 0x..
/// (most recent call first):`, `Thread 0x.. (most recent call first):`, `Stack (most recent
/// call first):`, one block per thread) and tracebacks (`Traceback (most recent call
/// last):`). Frames are put innermost first whatever the order they were written in. A tail
/// that starts inside a dump (its header cut off) is read by the frames' own format.
fn dumps(lines: &[String]) -> Vec<Dump<'_>> {
    let mut out: Vec<Dump<'_>> = Vec::new();
    // The block being read: (dump, innermost last).
    let mut open: Option<(Dump<'_>, bool)> = None;
    fn close<'a>(open: &mut Option<(Dump<'a>, bool)>, out: &mut Vec<Dump<'a>>) {
        if let Some((mut dump, innermost_last)) = open.take() {
            if innermost_last {
                dump.frames.reverse();
            }
            if !dump.frames.is_empty() {
                out.push(dump);
            }
        }
    }
    for line in lines {
        let trimmed = line.trim();
        if trimmed.ends_with("(most recent call first):") {
            close(&mut open, &mut out);
            let current = trimmed.starts_with("Current thread") || trimmed.starts_with("Stack");
            open = Some((
                Dump {
                    frames: Vec::new(),
                    faulthandler: true,
                    current,
                },
                false,
            ));
        } else if trimmed.starts_with("Traceback (most recent call last)") {
            close(&mut open, &mut out);
            open = Some((
                Dump {
                    frames: Vec::new(),
                    faulthandler: false,
                    current: false,
                },
                true,
            ));
        } else if let Some((frame, traceback_style)) = frame_of(line) {
            if open.is_none() {
                open = Some((
                    Dump {
                        frames: Vec::new(),
                        faulthandler: !traceback_style,
                        current: false,
                    },
                    traceback_style,
                ));
            }
            if let Some((dump, _)) = open.as_mut() {
                dump.frames.push(frame);
            }
        } else if trimmed.is_empty() || !line.starts_with(char::is_whitespace) {
            // A blank line between threads, or the exception line ending a traceback.
            // (A traceback's indented source and `^^^` lines belong to its frames.)
            close(&mut open, &mut out);
        }
    }
    close(&mut open, &mut out);
    out
}

/// Where a hung probe stopped, from the stack dump its worker wrote before it was killed:
/// the innermost frame of the thread that was running (faulthandler dumps every thread, and
/// the innermost frame comes first there, while a traceback puts it last), skipping the
/// worker's plumbing; and when that frame is outside the probes' code (a framework or a
/// helper), the innermost frame in the probes' code as well.
fn stopped_at(stderr_tail: &[String]) -> Option<String> {
    let dumps = dumps(stderr_tail);
    let dump = dumps
        .iter()
        .rev()
        .find(|d| d.faulthandler && d.current)
        .or_else(|| dumps.iter().rev().find(|d| d.faulthandler))
        .or_else(|| dumps.last())?;
    let plumbing = |frame: &Frame<'_>| {
        frame.file.starts_with('<') || PLUMBING_FILES.iter().any(|p| frame.file.ends_with(p))
    };
    let innermost = dump
        .frames
        .iter()
        .find(|f| !plumbing(f))
        .or_else(|| dump.frames.first())?;
    let in_probe = dump.frames.iter().find(|f| f.file.contains(PROBE_DIR));
    Some(match in_probe {
        Some(probe) if !std::ptr::eq(probe, innermost) => {
            format!("{} (in the probe: {})", innermost.text, probe.text)
        }
        _ => innermost.text.to_string(),
    })
}

fn nothing_tested_finding(results: &[ProbeResult], fingerprint: &Fingerprint) -> Option<Finding> {
    if results
        .iter()
        .any(|r| r.verdict.is_judged() || r.verdict.is_problem())
    {
        return None;
    }
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for result in results {
        if let Verdict::NotTested { reason } | Verdict::Skip { reason } = &result.verdict {
            *reasons.entry(reason.as_str()).or_default() += 1;
        }
    }
    let mut evidence: Vec<Evidence> = reasons
        .iter()
        .map(|(reason, n)| Evidence::new("not tested", format!("{n} probe run(s): {reason}")))
        .collect();
    if let Some(python) = &fingerprint.python
        && let Some(err) = &python.torch_error
    {
        evidence.push(Evidence::new(
            "framework",
            format!("{}: {err}", python.executable),
        ));
    }
    Some(Finding {
        id: "DIAG-NOTHING-TESTED".into(),
        source: "diagnosis".into(),
        severity: Severity::Warning,
        layer: FindingLayer::Framework,
        title: "nothing could be tested".into(),
        explanation: "No probe produced a result; the reasons below say what is missing (a GPU visible to the framework, a working PyTorch with GPU support, a runtime library). Name a Python whose PyTorch to test with --python PATH; without a GPU, --device cpu runs the self-test (gpuprobe and PyTorch on the CPU).".into(),
        confidence: Confidence::Observed,
        evidence,
        remedies: Vec::new(),
        citations: Vec::new(),
        next_steps: first_run_steps(results, fingerprint),
        related: Vec::new(),
    })
}

/// What to run when nothing could be tested: another interpreter when this one has no
/// usable PyTorch, the CPU self-test when no GPU is there (unless the run was on the CPU
/// already), and `env` to see what gpuprobe sees.
fn first_run_steps(results: &[ProbeResult], fingerprint: &Fingerprint) -> Vec<String> {
    let torch_unusable = fingerprint
        .python
        .as_ref()
        .is_none_or(|python| python.torch.is_none());
    let torch_sees_no_gpu = fingerprint
        .python
        .as_ref()
        .and_then(|python| python.torch.as_ref())
        .is_some_and(|torch| !torch.gpu_available);
    let on_the_cpu_already =
        !results.is_empty() && results.iter().all(|r| r.device == DeviceRef::Cpu);
    let no_gpu = (fingerprint.gpus.is_empty() || torch_sees_no_gpu) && !on_the_cpu_already;
    let mut steps = Vec::new();
    match (torch_unusable, no_gpu) {
        (true, true) => steps.push(
            "gpuprobe check --python PATH --device cpu   (PATH: a Python with PyTorch; no GPU here, so the self-test on the CPU)".to_string(),
        ),
        (true, false) => steps.push(
            "gpuprobe check --python PATH   (PATH: a Python whose PyTorch to test)".to_string(),
        ),
        (false, true) => steps.push(
            "gpuprobe check --device cpu   (no GPU here: the self-test, gpuprobe and this PyTorch on the CPU)".to_string(),
        ),
        (false, false) => {}
    }
    steps.push("gpuprobe env   (what gpuprobe can see of this machine)".into());
    steps
}

/// Puts the findings of the three sources into one list: a lint finding that is the
/// configuration-side face of a known issue that also matched is folded into that issue's
/// finding (its evidence kept), and the list is ordered by severity, then by how sure each
/// finding is (confirmed and observed before suspected).
pub(crate) fn assemble(
    diagnosis: Vec<Finding>,
    kb: Vec<Finding>,
    lint: Vec<Finding>,
) -> Vec<Finding> {
    let mut out: Vec<Finding> = diagnosis;
    out.extend(kb);
    for finding in lint {
        let target = finding
            .related
            .iter()
            .find_map(|id| out.iter().position(|f| &f.id == id));
        match target {
            Some(index) => {
                let host = &mut out[index];
                host.evidence
                    .extend(finding.evidence.into_iter().map(|mut e| {
                        e.text = format!("{} ({})", e.text, finding.id);
                        e
                    }));
                host.related.push(finding.id);
                // The lint observed the condition directly: the issue is at least that sure.
                if host.confidence == Confidence::Suspected
                    && finding.confidence == Confidence::Observed
                {
                    host.severity = host.severity.min(finding.severity);
                }
            }
            None => out.push(finding),
        }
    }
    let rank = |c: Confidence| match c {
        Confidence::Confirmed => 0,
        Confidence::Observed => 1,
        Confidence::Suspected => 2,
    };
    out.sort_by_key(|f| (f.severity, rank(f.confidence)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::ProbeId;

    fn result(id: &str, layer: Layer, verdict: Verdict) -> ProbeResult {
        ProbeResult::new(ProbeId::new(id), DeviceRef::Gpu(0), layer, verdict)
    }

    /// The counterparts the Python catalog declares today (its own test,
    /// `test_catalog.py`, checks the families' declarations).
    fn catalog_counterparts() -> NativeCounterparts {
        [
            ("copy", "native.copy"),
            ("pipeline", "native.copy"),
            ("alloc", "native.memtest"),
        ]
        .into_iter()
        .map(|(family, prefix)| (family.to_string(), prefix.to_string()))
        .collect()
    }

    fn diagnose(results: &[ProbeResult], fingerprint: &Fingerprint) -> Vec<Finding> {
        super::diagnose(results, fingerprint, &catalog_counterparts())
    }

    #[test]
    fn the_native_counterpart_is_the_one_the_catalog_declares() {
        let spec = |id: &str, counterpart: Option<&str>| ProbeSpec {
            native_counterpart: counterpart.map(str::to_string),
            ..crate::test_support::spec(id)
        };
        let catalog = [
            spec("copy.h2d.pageable", Some("native.copy")),
            spec("copy.d2h.pageable", Some("native.copy")),
            spec("newfam.case", Some("native.memtest")),
            spec("ops.matmul", None),
        ];
        let counterparts = native_counterparts(&catalog);
        assert_eq!(counterparts.len(), 2, "{counterparts:?}");
        assert_eq!(counterparts["newfam"], "native.memtest");
        let failing = vec![
            result("newfam.case", Layer::Framework, zeros()),
            result("native.memtest.quick", Layer::Runtime, Verdict::Pass),
        ];
        // A family placed by what it declares, not by a table here...
        let placed = super::diagnose(&failing, &Fingerprint::default(), &counterparts);
        assert!(
            placed[0]
                .evidence
                .iter()
                .any(|e| e.text.contains("native.memtest")),
            "{:?}",
            placed[0].evidence
        );
        // ...and a family that declares none is not placed, whatever its name.
        let copy = vec![
            result("copy.h2d.pageable", Layer::Framework, zeros()),
            result("native.copy.h2d.pageable.4b", Layer::Runtime, Verdict::Pass),
        ];
        let unplaced = super::diagnose(&copy, &Fingerprint::default(), &NativeCounterparts::new());
        assert!(
            unplaced[0].evidence.iter().all(|e| e.kind != "layer"),
            "{:?}",
            unplaced[0].evidence
        );
    }

    fn zeros() -> Verdict {
        Verdict::Fail {
            class: FailClass::AllZeros,
            detail: "all zeros in 3 of 100 trials".into(),
        }
    }

    #[test]
    fn framework_copy_failure_above_a_healthy_runtime() {
        let results = vec![
            result(
                "copy.h2d.pageable.tiny.nonblocking",
                Layer::Framework,
                zeros(),
            ),
            result(
                "copy.h2d.pinned.tiny.nonblocking",
                Layer::Framework,
                Verdict::Pass,
            ),
            result("native.copy.h2d.pageable.4b", Layer::Runtime, Verdict::Pass),
            result("native.copy.h2d.pinned.4b", Layer::Runtime, Verdict::Pass),
        ];
        let findings = diagnose(&results, &Fingerprint::default());
        assert_eq!(findings.len(), 1);
        let f = &findings[0];
        assert_eq!(f.layer, FindingLayer::Framework);
        assert!(f.title.contains("needs pageable"), "{}", f.title);
        assert!(
            f.evidence.iter().any(|e| e.text.contains("pass bit-exact")),
            "{:?}",
            f.evidence
        );
    }

    #[test]
    fn runtime_failure_when_native_fails_too() {
        let results = vec![
            result(
                "copy.h2d.pageable.tiny.nonblocking",
                Layer::Framework,
                zeros(),
            ),
            result("native.copy.h2d.pageable.4b", Layer::Runtime, zeros()),
        ];
        let findings = diagnose(&results, &Fingerprint::default());
        let copy = findings.iter().find(|f| f.id == "DIAG-COPY").unwrap();
        assert_eq!(copy.layer, FindingLayer::Runtime);
        assert!(
            findings
                .iter()
                .any(|f| f.id == "DIAG-NATIVE" && f.layer == FindingLayer::Runtime)
        );
    }

    #[test]
    fn without_native_results_the_placement_is_only_suspected() {
        let results = vec![result(
            "copy.h2d.pageable.tiny.nonblocking",
            Layer::Framework,
            zeros(),
        )];
        let findings = diagnose(&results, &Fingerprint::default());
        assert_eq!(findings[0].confidence, Confidence::Suspected);
    }

    fn finding(
        id: &str,
        source: &str,
        severity: Severity,
        confidence: Confidence,
        related: &[&str],
    ) -> Finding {
        Finding {
            id: id.into(),
            source: source.into(),
            severity,
            layer: FindingLayer::System,
            title: id.into(),
            explanation: String::new(),
            confidence,
            evidence: vec![Evidence::new("condition", format!("{id} held"))],
            remedies: vec![],
            citations: vec![],
            next_steps: vec![],
            related: related.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn lint_folds_into_its_known_issue_and_order_is_by_severity() {
        let kb = vec![finding(
            "RKB-005",
            "kb",
            Severity::Warning,
            Confidence::Suspected,
            &[],
        )];
        let lint = vec![
            finding(
                "LINT-FIRMWARE-MES-0X83",
                "lint",
                Severity::Error,
                Confidence::Observed,
                &["RKB-005"],
            ),
            finding(
                "LINT-ENV-NONEXISTENT",
                "lint",
                Severity::Warning,
                Confidence::Observed,
                &[],
            ),
        ];
        let diag = vec![finding(
            "DIAG-COPY",
            "diagnosis",
            Severity::Error,
            Confidence::Observed,
            &[],
        )];
        let all = assemble(diag, kb, lint);
        let ids: Vec<&str> = all.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["DIAG-COPY", "RKB-005", "LINT-ENV-NONEXISTENT"]);
        let rkb = &all[1];
        assert_eq!(rkb.severity, Severity::Error);
        assert_eq!(rkb.related, ["LINT-FIRMWARE-MES-0X83"]);
        assert!(
            rkb.evidence
                .iter()
                .any(|e| e.text.contains("LINT-FIRMWARE-MES-0X83"))
        );
    }

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    /// What a real worker wrote when `--simulate hang` stopped
    /// `copy.roundtrip.pageable.large.blocking` and the supervisor asked for a dump
    /// (SIGUSR1, faulthandler, most recent call first), captured from
    /// `gpuprobe check --simulate hang` with the CPU PyTorch.
    const WORKER_HANG_DUMP: &str = r#"Current thread 0x00007f389fc65b80 (most recent call first):
  File "/tmp/h1/python/gpuprobe/worker/simulate.py", line 613 in hang
  File "/tmp/h1/python/gpuprobe/worker/simulate.py", line 454 in apply
  File "/tmp/h1/python/gpuprobe/worker/simulate.py", line 438 in after_call
  File "/tmp/h1/python/gpuprobe/worker/ops.py", line 58 in _finish
  File "/tmp/h1/python/gpuprobe/worker/ops.py", line 143 in d2h
  File "/tmp/h1/python/gpuprobe/worker/probes/copy_run.py", line 289 in run_roundtrip
  File "/tmp/h1/python/gpuprobe/worker/main.py", line 341 in _run_probe
  File "/tmp/h1/python/gpuprobe/worker/main.py", line 279 in _run_mode
  File "/tmp/h1/python/gpuprobe/worker/main.py", line 165 in main
  File "/tmp/h1/python/gpuprobe/worker/main.py", line 179 in process_main
  File "<string>", line 1 in <module>"#;

    /// faulthandler with `all_threads=True` and a second thread, from Python 3.11: the other
    /// thread comes first, the current one last, each most recent call first.
    const TWO_THREAD_DUMP: &str = r#"Thread 0x00007f2c91d9c6c0 (most recent call first):
  File "/tmp/fh2/gpuprobe/worker/probes/dist_run.py", line 4 in _drain
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", line 982 in run
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f2c92ffeb80 (most recent call first):
  File "/tmp/fh2/gpuprobe/worker/probes/dist_run.py", line 6 in wait_for_peer
  File "/tmp/fh2/gpuprobe/worker/probes/dist_run.py", line 9 in run_allreduce
  File "/tmp/fh2/gpuprobe/worker/main.py", line 4 in _run_probe
  File "/tmp/fh2/gpuprobe/worker/main.py", line 8 in process_main
  File "<string>", line 1 in <module>"#;

    /// A real Python 3.11 traceback (most recent call last), with source and caret lines.
    const TRACEBACK: &str = r#"Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "/tmp/tb/gpuprobe/worker/main.py", line 3, in _run_probe
    copy_run.run_roundtrip()
  File "/tmp/tb/gpuprobe/worker/probes/copy_run.py", line 4, in run_roundtrip
    return d2h(0)
           ^^^^^^
  File "/tmp/tb/gpuprobe/worker/probes/copy_run.py", line 2, in d2h
    return 1 / x
           ~~^~~
ZeroDivisionError: division by zero"#;

    fn hang_stack(stderr: &str) -> Option<String> {
        let mut hung = result(
            "copy.roundtrip.pageable.large.blocking",
            Layer::Framework,
            Verdict::Hang { timeout_s: 3.0 },
        );
        hung.stderr_tail = lines(stderr);
        let findings = diagnose(&[hung], &Fingerprint::default());
        assert_eq!(findings[0].id, "DIAG-HANG");
        findings[0]
            .evidence
            .iter()
            .find(|e| e.kind == "stack")
            .map(|e| e.text.clone())
    }

    #[test]
    fn a_hang_points_at_the_innermost_frame_not_the_bootstrap() {
        let stack = hang_stack(WORKER_HANG_DUMP).expect("a stack line");
        assert!(!stack.contains("<string>"), "{stack}");
        assert!(
            stack
                .starts_with(r#"File "/tmp/h1/python/gpuprobe/worker/ops.py", line 58 in _finish"#),
            "{stack}"
        );
        assert!(
            stack.ends_with(
                r#"(in the probe: File "/tmp/h1/python/gpuprobe/worker/probes/copy_run.py", line 289 in run_roundtrip)"#
            ),
            "{stack}"
        );
    }

    #[test]
    fn a_hang_dump_of_every_thread_is_read_from_the_current_thread() {
        let stack = hang_stack(TWO_THREAD_DUMP).expect("a stack line");
        assert_eq!(
            stack,
            r#"File "/tmp/fh2/gpuprobe/worker/probes/dist_run.py", line 6 in wait_for_peer"#
        );
        // Whatever came before the dump in the tail does not matter.
        let stack = hang_stack(&format!("{TRACEBACK}\nsome warning\n{TWO_THREAD_DUMP}")).unwrap();
        assert!(stack.contains("wait_for_peer"), "{stack}");
    }

    #[test]
    fn a_traceback_is_read_most_recent_call_last() {
        assert_eq!(
            stopped_at(&lines(TRACEBACK)).unwrap(),
            r#"File "/tmp/tb/gpuprobe/worker/probes/copy_run.py", line 2, in d2h"#
        );
    }

    #[test]
    fn a_tail_that_cut_off_the_header_is_read_by_the_frame_format() {
        let cut: Vec<String> = lines(WORKER_HANG_DUMP).into_iter().skip(2).collect();
        let stack = stopped_at(&cut).unwrap();
        assert!(
            stack.starts_with(r#"File "/tmp/h1/python/gpuprobe/worker/ops.py""#),
            "{stack}"
        );
        let cut: Vec<String> = lines(TRACEBACK).into_iter().skip(3).collect();
        assert!(stopped_at(&cut).unwrap().ends_with("line 2, in d2h"));
        assert_eq!(stopped_at(&lines("no dump here\n  indented text")), None);
        // Only plumbing: the innermost frame is still better than nothing.
        assert_eq!(
            stopped_at(&lines(
                "Stack (most recent call first):\n  File \"<string>\", line 1 in <module>"
            ))
            .unwrap(),
            r#"File "<string>", line 1 in <module>"#
        );
    }

    #[test]
    fn crash_and_nothing_tested() {
        let crash = Verdict::Crash {
            signal: Some(6),
            exit_code: None,
            message: "Memory access fault by GPU node-1".into(),
        };
        let findings = diagnose(
            &[result("copy.h2d.pageable.large", Layer::Framework, crash)],
            &Fingerprint::default(),
        );
        assert_eq!(findings[0].id, "DIAG-CRASH");
        let none = vec![result(
            "copy.x",
            Layer::Framework,
            Verdict::NotTested {
                reason: "no GPU".into(),
            },
        )];
        let findings = diagnose(&none, &Fingerprint::default());
        assert_eq!(findings[0].id, "DIAG-NOTHING-TESTED");
        assert!(
            diagnose(
                &[result("copy.x", Layer::Framework, Verdict::Pass)],
                &Fingerprint::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn a_first_run_that_tested_nothing_says_which_option_to_pass() {
        use gpuprobe_model::{PythonEnv, TorchInfo};
        let not_tested = |device: DeviceRef| {
            vec![ProbeResult::new(
                ProbeId::new("copy.x"),
                device,
                Layer::Framework,
                Verdict::NotTested {
                    reason: "import torch failed".into(),
                },
            )]
        };
        let steps = |results: &[ProbeResult], fingerprint: &Fingerprint| {
            diagnose(results, fingerprint)
                .into_iter()
                .find(|f| f.id == "DIAG-NOTHING-TESTED")
                .unwrap()
                .next_steps
        };
        // No torch and no GPU: another interpreter, on the CPU.
        let no_torch = Fingerprint {
            python: Some(PythonEnv {
                executable: "/usr/bin/python3".into(),
                torch_error: Some("import torch failed".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let got = steps(&not_tested(DeviceRef::Gpu(0)), &no_torch);
        assert!(
            got[0].starts_with("gpuprobe check --python PATH --device cpu"),
            "{got:?}"
        );
        assert!(got[1].starts_with("gpuprobe env"), "{got:?}");
        // Already on the CPU: only the interpreter is wrong.
        let got = steps(&not_tested(DeviceRef::Cpu), &no_torch);
        assert!(
            got[0].starts_with("gpuprobe check --python PATH   "),
            "{got:?}"
        );
        // A PyTorch that sees no GPU: the self-test.
        let mut cpu_torch = no_torch.clone();
        cpu_torch.python.as_mut().unwrap().torch = Some(TorchInfo {
            version: "2.11.0+cpu".into(),
            ..Default::default()
        });
        let got = steps(&not_tested(DeviceRef::Gpu(0)), &cpu_torch);
        assert!(
            got[0].starts_with("gpuprobe check --device cpu   "),
            "{got:?}"
        );
        let finding = diagnose(&not_tested(DeviceRef::Gpu(0)), &cpu_torch).remove(0);
        assert!(
            finding.explanation.contains("--device cpu"),
            "{}",
            finding.explanation
        );
    }

    #[test]
    fn a_decomposition_that_swallowed_a_nan_is_an_info_finding_and_a_clean_run_has_none() {
        use gpuprobe_model::{Observation, SweepStats};

        let mut swallowing = result("sweep.linalg.svd.fp32", Layer::Framework, Verdict::Pass);
        swallowing.observation = Some(Observation {
            probe: ProbeId::new("sweep.linalg.svd.fp32"),
            device: DeviceRef::Gpu(0),
            measurement: Measurement::Sweep(Box::new(SweepStats {
                nonfinite_swallowed: 2,
                ..SweepStats::default()
            })),
            metrics: BTreeMap::new(),
            notes: vec![
                "nonfinite_swallowed: 2 case(s): the result looks valid but is meaningless".into(),
            ],
            output_digest: None,
        });
        let clean = result("sweep.add.fp32", Layer::Framework, Verdict::Pass);
        let fingerprint = Fingerprint::default();
        let findings = diagnose(&[swallowing, clean.clone()], &fingerprint);
        let found: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.id == "DIAG-NONFINITE-SWALLOWED")
            .collect();
        assert_eq!(found.len(), 1, "{findings:?}");
        assert_eq!(found[0].severity, Severity::Info);
        assert!(
            found[0].title.contains("2 case(s) in 1 probe(s)"),
            "{}",
            found[0].title
        );
        assert!(
            found[0].evidence[0].text.contains("looks valid"),
            "{:?}",
            found[0].evidence
        );
        assert!(
            diagnose(&[clean], &fingerprint)
                .iter()
                .all(|f| f.id != "DIAG-NONFINITE-SWALLOWED")
        );
    }
}
