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

use gpuprobe_model::finding::{Confidence, Evidence, Finding, FindingLayer, Severity};
use gpuprobe_model::fingerprint::Fingerprint;
use gpuprobe_model::probe::{DeviceRef, Layer};
use gpuprobe_model::verdict::{FailClass, ProbeResult, Verdict};

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

/// Which native family covers the same operation as a framework family, for placing
/// framework failures above or at the runtime.
fn native_counterpart(family: &str) -> Option<&'static str> {
    match family {
        "copy" | "pipeline" => Some("native.copy"),
        "alloc" => Some("native.memtest"),
        _ => None,
    }
}

/// Findings from the results alone.
pub fn diagnose(results: &[ProbeResult], fingerprint: &Fingerprint) -> Vec<Finding> {
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
        findings.push(wrong_results_finding(family, failed, results, &by_id));
    }
    for result in aborted {
        findings.push(aborted_finding(result));
    }
    if let Some(finding) = nothing_tested_finding(results, fingerprint) {
        findings.push(finding);
    }
    findings
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
        && let Some(prefix) = native_counterpart(family)
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
        && let Some(line) = result
            .stderr_tail
            .iter()
            .rev()
            .find(|l| l.trim_start().starts_with("File "))
    {
        evidence.push(Evidence::new("stack", line.trim().to_string()));
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
        explanation: "No probe produced a result; the reasons below say what is missing (a GPU visible to the framework, a working PyTorch with GPU support, a runtime library).".into(),
        confidence: Confidence::Observed,
        evidence,
        remedies: Vec::new(),
        citations: Vec::new(),
        next_steps: vec!["gpuprobe env   (what gpuprobe can see of this machine)".into()],
        related: Vec::new(),
    })
}

/// Puts the findings of the three sources into one list: a lint finding that is the
/// configuration-side face of a known issue that also matched is folded into that issue's
/// finding (its evidence kept), and the list is ordered by severity, then by how sure each
/// finding is (confirmed and observed before suspected).
pub fn assemble(diagnosis: Vec<Finding>, kb: Vec<Finding>, lint: Vec<Finding>) -> Vec<Finding> {
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
    use gpuprobe_model::probe::ProbeId;

    fn result(id: &str, layer: Layer, verdict: Verdict) -> ProbeResult {
        ProbeResult::new(ProbeId::new(id), DeviceRef::Gpu(0), layer, verdict)
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
}
