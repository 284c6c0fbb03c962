//! The exports of report fixtures: their structure, hostile text kept escaped, bounded
//! series, and the real tools' verdict on them (`promtool check metrics`, `xmllint
//! --schema` against the JUnit schema), which must be installed in CI.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpuprobe_model::Report;
use gpuprobe_model::{Confidence, Finding, FindingLayer, Severity};
use gpuprobe_model::{DeviceRef, Layer, ProbeId};
use gpuprobe_model::{FailClass, ProbeResult, Verdict};
use gpuprobe_model::{FaultSpec, SimulationSpec};
use gpuprobe_model::{Fingerprint, PythonEnv, TorchInfo};

use super::{junit, prometheus};

/// Text a probe detail may hold: quotes, newlines, markup that would end an element or a
/// CDATA section, a NUL, an ESC (a terminal sequence), a backslash.
const HOSTILE: &str =
    "a \"quoted\" 'x'\nsecond line </failure> ]]> <![CDATA[ & \0 nul \u{1b}[31m esc \\ end";

fn result(id: &str, device: DeviceRef, verdict: Verdict) -> ProbeResult {
    let mut r = ProbeResult::new(ProbeId::new(id), device, Layer::Framework, verdict);
    r.elapsed_s = Some(0.25);
    r
}

fn finding(id: &str, severity: Severity) -> Finding {
    Finding {
        id: id.into(),
        source: "kb".into(),
        severity,
        layer: FindingLayer::Runtime,
        title: format!("title {HOSTILE}"),
        explanation: String::new(),
        confidence: Confidence::Confirmed,
        evidence: Vec::new(),
        remedies: Vec::new(),
        citations: Vec::new(),
        next_steps: Vec::new(),
        related: Vec::new(),
    }
}

fn fingerprint() -> Fingerprint {
    let mut fp = Fingerprint::default();
    fp.host.hostname = Some("node-7".into());
    fp.host.kernel_release = Some("6.8.0".into());
    fp.nvidia = Some(serde_json::from_value(serde_json::json!({"version": "580.65.06"})).unwrap());
    fp.python = Some(PythonEnv {
        version: Some("3.12.3".into()),
        torch: Some(TorchInfo {
            version: "2.11.0+cu130".into(),
            ..serde_json::from_value(serde_json::json!({"version": ""})).unwrap()
        }),
        ..serde_json::from_value(
            serde_json::json!({"executable": "/usr/bin/python3", "chosen_by": "PATH"}),
        )
        .unwrap()
    });
    fp
}

/// One result of every verdict on two devices, a hostile detail, two findings.
fn mixed() -> Report {
    let mut fail = result(
        "copy.h2d.pageable",
        DeviceRef::Gpu(0),
        Verdict::Fail {
            class: FailClass::AllZeros,
            detail: format!("all zeros: {HOSTILE}"),
        },
    );
    fail.stderr_tail = vec![format!("stderr {HOSTILE}")];
    let results = vec![
        result("copy.h2d.pinned", DeviceRef::Gpu(0), Verdict::Pass),
        fail,
        result(
            "copy.d2h.pinned",
            DeviceRef::Gpu(1),
            Verdict::Crash {
                signal: Some(11),
                exit_code: None,
                message: HOSTILE.into(),
            },
        ),
        result(
            "ops.matmul.fp32",
            DeviceRef::Gpu(0),
            Verdict::Hang { timeout_s: 30.0 },
        ),
        result(
            "ops.matmul.bf16",
            DeviceRef::Gpu(1),
            Verdict::Error {
                message: HOSTILE.into(),
            },
        ),
        result(
            "dist.allreduce",
            DeviceRef::Gpu(0),
            Verdict::Skip {
                reason: format!("needs two GPUs {HOSTILE}"),
            },
        ),
        result(
            "rng.randn",
            DeviceRef::Gpu(1),
            Verdict::NotTested {
                reason: "an earlier failure".into(),
            },
        ),
    ];
    let findings = vec![
        finding("RKB-001", Severity::Error),
        finding("LINT-X", Severity::Warning),
    ];
    let mut report = crate::test_support::report(fingerprint(), results, findings);
    report.started_at = "2026-11-29T10:00:00Z".into();
    report.wall_s = 42.5;
    report
}

fn simulated(mut report: Report) -> Report {
    report.simulation = Some(SimulationSpec {
        source: "h2d-zeros".into(),
        faults: vec![FaultSpec {
            name: "h2d-zeros".into(),
            ..FaultSpec::default()
        }],
    });
    for r in &mut report.results {
        r.simulated = true;
    }
    report
}

/// A report whose probe ids, finding ids and stack versions are hostile too.
fn hostile_everywhere() -> Report {
    let mut report = mixed();
    for r in &mut report.results {
        r.probe = ProbeId::new(format!("{}.{HOSTILE}", r.probe));
    }
    report.findings[0].id = HOSTILE.into();
    report.tool_version = HOSTILE.into();
    if let Some(torch) = report
        .fingerprint
        .python
        .as_mut()
        .and_then(|p| p.torch.as_mut())
    {
        torch.version = HOSTILE.into();
    }
    report.fingerprint.host.hostname = Some(HOSTILE.into());
    report
}

/// `failing` failing results and `findings` findings of distinct ids.
fn many(failing: usize, findings: usize) -> Report {
    let results = (0..failing)
        .map(|i| {
            result(
                &format!("ops.p{i:03}"),
                DeviceRef::Gpu(0),
                Verdict::Fail {
                    class: FailClass::Mismatch,
                    detail: "x".into(),
                },
            )
        })
        .collect();
    let findings = (0..findings)
        .map(|i| finding(&format!("RKB-{i:03}"), Severity::Warning))
        .collect();
    crate::test_support::report(fingerprint(), results, findings)
}

/// One parsed sample line: its name, labels (unescaped) and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses an exposition as the text format defines it, checking every line on the way:
/// comments, HELP and TYPE before a family's samples, label values escaped.
fn parse(exposition: &str) -> Vec<Sample> {
    assert!(exposition.ends_with('\n'));
    let mut typed = Vec::<String>::new();
    let mut samples = Vec::new();
    for line in exposition.lines() {
        assert!(
            !line.chars().any(|c| c.is_control()),
            "a control character in {line:?}"
        );
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(kind, "gauge");
            assert!(!typed.contains(&name.to_string()), "{name} typed twice");
            typed.push(name.to_string());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap();
        let name = &line[..name_end];
        assert_eq!(typed.last().map(String::as_str), Some(name), "{line}");
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(inner) = rest.strip_prefix('{') {
            let mut chars = inner.char_indices().peekable();
            loop {
                let (start, _) = *chars.peek().unwrap();
                let eq = inner[start..].find('=').unwrap() + start;
                let label = inner[start..eq].to_string();
                while chars.next_if(|(i, _)| *i <= eq).is_some() {}
                assert_eq!(chars.next().map(|(_, c)| c), Some('"'));
                let mut value = String::new();
                loop {
                    match chars.next().unwrap().1 {
                        '\\' => match chars.next().unwrap().1 {
                            'n' => value.push('\n'),
                            c @ ('\\' | '"') => value.push(c),
                            c => panic!("bad escape \\{c} in {line}"),
                        },
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels.insert(label, value);
                match chars.next().unwrap() {
                    (_, ',') => continue,
                    (i, '}') => {
                        rest = &inner[i + 1..];
                        break;
                    }
                    (_, c) => panic!("unexpected {c} in {line}"),
                }
            }
        }
        let value = rest.strip_prefix(' ').unwrap().parse().unwrap();
        samples.push(Sample {
            name: name.into(),
            labels,
            value,
        });
    }
    samples
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<_> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0].value
}

#[test]
fn the_exposition_counts_each_family_device_and_verdict_and_names_the_stack() {
    let report = mixed();
    let text = prometheus::render(&report);
    let samples = parse(&text);
    assert!(samples.iter().all(|s| s.name.starts_with("gpuprobe_")));
    let info = samples.iter().find(|s| s.name == "gpuprobe_info").unwrap();
    assert_eq!(info.labels["torch"], "2.11.0+cu130");
    assert_eq!(info.labels["driver"], "580.65.06");
    assert_eq!(
        info.labels["kb_version"], "unknown",
        "the fixture has no build"
    );
    assert_eq!(info.labels["simulated"], "false");
    assert_eq!(value(&samples, "gpuprobe_simulated", &[]), 0.0);
    let start = 1_795_946_400.0; // 2026-11-29T10:00:00Z
    assert_eq!(
        value(&samples, "gpuprobe_run_start_timestamp_seconds", &[]),
        start
    );
    assert_eq!(
        value(&samples, "gpuprobe_run_end_timestamp_seconds", &[]),
        start + 42.5
    );
    assert_eq!(value(&samples, "gpuprobe_run_duration_seconds", &[]), 42.5);
    assert_eq!(value(&samples, "gpuprobe_problems", &[]), 4.0);
    assert_eq!(value(&samples, "gpuprobe_exit_code", &[]), 1.0);
    let runs = |family, device, verdict| {
        value(
            &samples,
            "gpuprobe_probe_runs",
            &[("family", family), ("device", device), ("verdict", verdict)],
        )
    };
    assert_eq!(runs("copy", "cuda:0", "pass"), 1.0);
    assert_eq!(runs("copy", "cuda:0", "fail"), 1.0);
    assert_eq!(runs("copy", "cuda:0", "crash"), 0.0, "zeros are written");
    assert_eq!(runs("copy", "cuda:1", "crash"), 1.0);
    assert_eq!(runs("ops", "cuda:0", "hang"), 1.0);
    assert_eq!(runs("ops", "cuda:1", "error"), 1.0);
    assert_eq!(runs("dist", "cuda:0", "skip"), 1.0);
    assert_eq!(runs("rng", "cuda:1", "not_tested"), 1.0);
    // (family, device) pairs that ran: copy×2, ops×2, dist, rng; 7 verdicts each.
    let count = |name: &str| samples.iter().filter(|s| s.name == name).count();
    assert_eq!(count("gpuprobe_probe_runs"), 6 * 7);
    assert_eq!(count("gpuprobe_failing_probe"), 4);
    let fail = value(
        &samples,
        "gpuprobe_failing_probe",
        &[
            ("probe", "copy.h2d.pageable"),
            ("verdict", "fail"),
            ("class", "all_zeros"),
        ],
    );
    assert_eq!(fail, 1.0);
    assert_eq!(value(&samples, "gpuprobe_failing_probes_omitted", &[]), 0.0);
    assert_eq!(
        value(
            &samples,
            "gpuprobe_finding",
            &[("id", "RKB-001"), ("severity", "error")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "gpuprobe_findings_by_severity",
            &[("severity", "warning")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "gpuprobe_findings_by_severity",
            &[("severity", "info")]
        ),
        0.0
    );
    // A probe's detail is never a label: it would make every run a new series.
    assert!(!text.contains("quoted"), "{text}");
    assert!(!text.contains("# SIMULATED run"));
}

#[test]
fn a_simulated_run_says_so_in_every_export() {
    let report = simulated(mixed());
    let text = prometheus::render(&report);
    assert!(text.contains("# SIMULATED run (h2d-zeros)"), "{text}");
    let samples = parse(&text);
    assert_eq!(value(&samples, "gpuprobe_simulated", &[]), 1.0);
    assert_eq!(
        value(&samples, "gpuprobe_info", &[("simulated", "true")]),
        1.0
    );
    let xml = junit::render(&report);
    assert!(xml.contains("<testsuites name=\"gpuprobe check (quick tier) SIMULATED\""));
    assert!(xml.contains("<property name=\"run.simulated\" value=\"true\"/>"));
    assert!(xml.contains("<property name=\"run.simulation\" value=\"h2d-zeros\"/>"));
    let problems = xml.matches("<failure ").count() + xml.matches("<error ").count();
    assert_eq!(problems, 4);
    assert_eq!(
        xml.matches("message=\"SIMULATED: ").count(),
        report.results.len() - 1,
        "every failure, error and skip (not the pass, which has no message)"
    );
}

#[test]
fn hostile_text_stays_escaped_in_the_exposition() {
    let report = hostile_everywhere();
    let text = prometheus::render(&report);
    // Every line still parses, and the hostile values come back whole but for the control
    // characters, which are replaced.
    let samples = parse(&text);
    let info = samples.iter().find(|s| s.name == "gpuprobe_info").unwrap();
    let expected = HOSTILE.replace(['\0', '\u{1b}'], "\u{FFFD}");
    assert_eq!(info.labels["version"], expected);
    assert_eq!(info.labels["torch"], expected);
    let finding = samples
        .iter()
        .find(|s| s.name == "gpuprobe_finding" && s.labels["severity"] == "error")
        .unwrap();
    assert_eq!(finding.labels["id"], expected);
    assert!(!text.contains('\0') && !text.contains('\u{1b}'));
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("gpuprobe_info"))
            .count(),
        1,
        "a newline in a value does not start a line"
    );
    // The header comment names the version: one line still.
    assert!(
        text.lines()
            .next()
            .unwrap()
            .starts_with("# gpuprobe a \"quoted\"")
    );
}

#[test]
fn long_label_values_are_cut() {
    let long = "x".repeat(1000);
    let cut = prometheus::label_value(&long);
    assert_eq!(cut.chars().count(), 201);
    assert!(cut.ends_with('…'));
    assert_eq!(
        prometheus::label_value("a\"b\\c\nd\re"),
        "a\\\"b\\\\c\\nd\u{FFFD}e"
    );
}

#[test]
fn failing_probe_and_finding_series_are_bounded() {
    let report = many(120, 60);
    let samples = parse(&prometheus::render(&report));
    let count = |name: &str| samples.iter().filter(|s| s.name == name).count();
    assert_eq!(
        count("gpuprobe_failing_probe"),
        prometheus::MAX_LABELLED_SERIES
    );
    assert_eq!(
        value(&samples, "gpuprobe_failing_probes_omitted", &[]),
        70.0
    );
    assert_eq!(count("gpuprobe_finding"), prometheus::MAX_LABELLED_SERIES);
    assert_eq!(value(&samples, "gpuprobe_findings_omitted", &[]), 10.0);
    // The counts still hold every result.
    assert_eq!(
        value(
            &samples,
            "gpuprobe_probe_runs",
            &[("family", "ops"), ("verdict", "fail")]
        ),
        120.0
    );
    // The first ones by probe id are kept, so the same run gives the same series.
    assert!(
        samples
            .iter()
            .any(|s| s.name == "gpuprobe_failing_probe" && s.labels["probe"] == "ops.p000")
    );
    assert!(
        !samples
            .iter()
            .any(|s| s.name == "gpuprobe_failing_probe" && s.labels["probe"] == "ops.p050")
    );
}

#[test]
fn the_junit_layout_has_a_suite_per_device_and_family_and_a_case_per_result() {
    let report = mixed();
    let xml = junit::render(&report);
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites "));
    assert!(
        xml.contains("tests=\"7\" failures=\"1\" errors=\"3\" time=\"1.750\">"),
        "{xml}"
    );
    // Suites: copy, dist, ops on cuda:0; copy, ops, rng on cuda:1.
    assert_eq!(xml.matches("<testsuite ").count(), 6);
    assert!(xml.contains("<testsuite name=\"copy [cuda:0]\" package=\"gpuprobe\" id=\"0\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"0.500\" timestamp=\"2026-11-29T10:00:00Z\" hostname=\"node-7\">"), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 7);
    assert!(xml.contains(
        "<testcase classname=\"copy\" name=\"copy.h2d.pinned [cuda:0]\" time=\"0.250\"/>"
    ));
    assert!(xml.contains("<failure message=\"all zeros: all zeros: a &quot;quoted&quot; &apos;x&apos;\" type=\"all zeros\">"), "{xml}");
    assert_eq!(xml.matches("<error ").count(), 3);
    assert!(xml.contains("type=\"CRASH\""));
    assert!(xml.contains("type=\"HANG\""));
    assert!(xml.contains("<error message=\"no result within 30 s; worker killed\" type=\"HANG\">"));
    assert_eq!(xml.matches("<skipped ").count(), 2);
    assert!(xml.contains("<skipped message=\"an earlier failure\" type=\"NOT-TESTED\"/>"));
    // The fingerprint's summary in every suite.
    assert_eq!(
        xml.matches("<property name=\"torch.version\" value=\"2.11.0+cu130\"/>")
            .count(),
        6
    );
    assert!(xml.contains("<property name=\"driver.version\" value=\"580.65.06\"/>"));
    // The failure keeps the worker's stderr.
    assert!(xml.contains("worker stderr:\nstderr a \"quoted\""));
}

#[test]
fn hostile_text_stays_escaped_in_junit() {
    let report = hostile_everywhere();
    let xml = junit::render(&report);
    assert!(
        !xml.contains('\0') && !xml.contains('\u{1b}'),
        "forbidden characters replaced"
    );
    assert!(!xml.contains("]]>"), "a CDATA end is escaped");
    assert!(!xml.contains("<![CDATA["));
    assert_eq!(xml.matches("</failure>").count(), 1, "only the closing tag");
    assert_eq!(xml.matches("<failure ").count(), 1);
    assert!(xml.contains(
        "&lt;/failure&gt; ]]&gt; &lt;![CDATA[ &amp; \u{FFFD} nul \u{FFFD}[31m esc \\ end"
    ));
    // Attribute values keep a newline as a reference, never a raw one.
    for line in xml.lines().filter(|l| l.contains("name=\"")) {
        assert_eq!(line.matches('"').count() % 2, 0, "{line}");
    }
    assert!(xml.contains("&#10;second line"));
}

/// An external tool: its path when installed. Missing, the test skips locally and says
/// why; in CI (`CI=true`, as CI systems set it) it fails, since the check must run there.
pub(crate) fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !ci,
            "{name} is missing in CI: scripts/python-test-env.sh installs Debian's `{package}`"
        );
        eprintln!("skipped: {name} is not installed (Debian's `{package}` provides it)");
    }
    found
}

/// `promtool check metrics` on the exposition: passes without a lint complaint.
fn promtool_passes(exposition: &str) {
    let Some(promtool) = tool("promtool", "prometheus") else {
        return;
    };
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), exposition.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool: {:?}\n{}{}\n{exposition}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The JUnit schema (`junit.xsd`: the layout CI systems read; its README says what it holds).
pub(crate) fn junit_schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit/junit.xsd")
}

/// `xmllint --schema junit.xsd` on the document: it validates.
fn xmllint_validates(xml: &str) {
    let Some(xmllint) = tool("xmllint", "libxml2-utils") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("junit.xml");
    std::fs::write(&file, xml).unwrap();
    let output = std::process::Command::new(xmllint)
        .arg("--noout")
        .arg("--schema")
        .arg(junit_schema())
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "xmllint: {}\n{xml}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The report `check --simulate h2d-zeros` made, kept as a fixture.
fn simulated_fixture() -> Report {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report-simulated-zeros.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn promtool_accepts_every_exposition() {
    for report in [
        mixed(),
        simulated(mixed()),
        hostile_everywhere(),
        many(120, 60),
        many(0, 0),
        simulated_fixture(),
    ] {
        promtool_passes(&prometheus::render(&report));
    }
}

#[test]
fn every_junit_document_validates_against_the_schema() {
    for report in [
        mixed(),
        simulated(mixed()),
        hostile_everywhere(),
        many(120, 60),
        many(0, 0),
        simulated_fixture(),
    ] {
        xmllint_validates(&junit::render(&report));
    }
}
