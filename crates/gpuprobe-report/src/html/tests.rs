//! The HTML report: well-formed, offline, escaped, SIMULATED where it must be, failures
//! before passes, and each section fed from the report.

use std::collections::BTreeMap;

use gpuprobe_model::{DeviceRef, Layer, ProbeId};
use gpuprobe_model::{ExitStatus, Report};
use gpuprobe_model::{FailClass, ProbeResult, Verdict};
use gpuprobe_model::{FaultSpec, SimulationSpec};
use gpuprobe_model::{Fingerprint, GpuInfo, Vendor};
use gpuprobe_model::{Measurement, Observation};
use serde_json::json;

use super::*;

const HOSTILE: &str = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>";

fn result(id: &str, device: DeviceRef, verdict: Verdict) -> ProbeResult {
    ProbeResult::new(ProbeId::new(id), device, Layer::Framework, verdict)
}

fn with_metrics(mut r: ProbeResult, metrics: &[(&str, serde_json::Value)]) -> ProbeResult {
    r.observation = Some(Observation {
        probe: r.probe.clone(),
        device: r.device,
        measurement: Measurement::Metrics,
        metrics: metrics
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        notes: Vec::new(),
        output_digest: None,
    });
    r
}

fn report(results: Vec<ProbeResult>) -> Report {
    Report {
        run_dir: Some("/tmp/run".into()),
        started_at: "2026-11-25T00:00:00Z".into(),
        wall_s: 12.5,
        ..crate::test_support::report(Fingerprint::default(), results, Vec::new())
    }
}

fn failing() -> Report {
    let mut fail = result(
        "copy.d2h.pageable",
        DeviceRef::Gpu(0),
        Verdict::Fail {
            class: FailClass::AllZeros,
            detail: format!("detail {HOSTILE}"),
        },
    );
    fail.stderr_tail = vec![format!("stderr {HOSTILE}")];
    fail.kernel_log = vec!["amdgpu: page fault <b>".into()];
    let fail = with_metrics(fail, &[("bytes", json!(4096)), ("label", json!(HOSTILE))]);
    report(vec![
        result("copy.h2d.pageable", DeviceRef::Gpu(0), Verdict::Pass),
        fail,
        result(
            "ops.matmul.fp32",
            DeviceRef::Gpu(0),
            Verdict::Skip {
                reason: "needs <two> GPUs".into(),
            },
        ),
    ])
}

/// The text with minijinja's HTML escapes decoded, for assertions on wording.
fn text(html: &str) -> String {
    html.replace("&#x2f;", "/")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn render_plain(report: &Report) -> String {
    render(report, None, &[]).expect("renders")
}

/// The element names of every tag, open and close, in order, with void elements and
/// self-closed SVG elements left out: enough to check nesting.
fn tags(html: &str) -> Vec<(bool, String)> {
    const VOID: [&str; 8] = [
        "meta", "br", "img", "link", "input", "hr", "!doctype", "wbr",
    ];
    let mut out = Vec::new();
    let mut rest = html;
    // The style element's text is CSS, never markup.
    while let Some(start) = rest.find('<') {
        rest = &rest[start + 1..];
        let end = rest.find('>').expect("every tag is closed");
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '/')
            .collect::<String>()
            .to_lowercase();
        if VOID.contains(&name.as_str()) || tag.ends_with('/') {
            continue;
        }
        if name == "style" && !closing {
            let close = rest.find("</style>").expect("style closes");
            rest = &rest[close..];
        }
        out.push((closing, name));
    }
    out
}

fn assert_balanced(html: &str) {
    let mut stack: Vec<String> = Vec::new();
    for (closing, name) in tags(html) {
        if closing {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(open, name, "<{open}> closed by </{name}>");
        } else {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "left open: {stack:?}");
}

#[test]
fn the_page_is_balanced_for_healthy_failing_and_fix_reports() {
    let healthy = report(vec![result(
        "copy.h2d.pageable",
        DeviceRef::Cpu,
        Verdict::Pass,
    )]);
    assert_balanced(&render_plain(&healthy));
    assert_balanced(&render_plain(&failing()));
    let issues = [IssueText::from((
        "copy.d2h.pageable".to_string(),
        "0".to_string(),
        format!("# title\n\n```\n{HOSTILE}\n```\n"),
    ))];
    assert_balanced(&render(&failing(), Some(&fix_account()), &issues).expect("renders"));
    assert_balanced(&render_plain(&report(Vec::new())));
}

#[test]
fn the_balance_check_itself_catches_a_stray_tag() {
    let caught = std::panic::catch_unwind(|| assert_balanced("<div><p></div></p>"));
    assert!(caught.is_err());
}

/// Every `src=`/`href=` value and `url(` in the page, with the element it belongs to.
fn references(html: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut element = String::new();
    let mut i = 0;
    while i < html.len() {
        let rest = &html[i..];
        if let Some(tag) = rest.strip_prefix('<') {
            element = tag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
                .to_lowercase();
        }
        for attr in ["src=\"", "href=\"", "url(", "srcset=\"", "@import"] {
            if let Some(after) = rest.strip_prefix(attr) {
                let value: String = after
                    .chars()
                    .take_while(|c| *c != '"' && *c != ')')
                    .collect();
                out.push((element.clone(), text(&value)));
            }
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    out
}

#[test]
fn nothing_but_plain_links_points_out_of_the_file() {
    let mut r = failing();
    r.findings.push(finding(
        "RKB-001",
        vec![
            "ROCm/ROCm#1".into(),
            "https://github.com/ROCm/ROCm/issues/1".into(),
            "javascript:alert(1)".into(),
        ],
    ));
    let html = render(&r, Some(&fix_account()), &[]).expect("renders");
    let refs = references(&html);
    assert!(
        refs.iter()
            .any(|(el, v)| el == "a" && v == "https://github.com/ROCm/ROCm/issues/1"),
        "{refs:?}"
    );
    for (element, value) in &refs {
        if value.contains("://") || value.starts_with("//") {
            assert_eq!(element, "a", "{element} loads {value}");
        } else {
            assert!(value.starts_with('#'), "{element} refers to {value}");
        }
        assert!(!value.starts_with("javascript:"), "{value}");
    }
    for loader in [
        "<link",
        "<script",
        "<img",
        "<iframe",
        "@font-face",
        "<object",
        "<embed",
    ] {
        assert!(!html.contains(loader), "{loader}");
    }
}

#[test]
fn hostile_text_is_escaped_everywhere() {
    let mut r = failing();
    r.findings.push(finding("RKB-002", vec![HOSTILE.into()]));
    r.notes.push(HOSTILE.into());
    r.fingerprint.host.hostname = Some(HOSTILE.into());
    let issues = [IssueText::from((
        HOSTILE.to_string(),
        "0".to_string(),
        HOSTILE.to_string(),
    ))];
    let html = render(&r, None, &issues).expect("renders");
    assert!(!html.contains("<script"), "an unescaped script tag");
    assert!(!html.contains("<img"), "an unescaped img tag");
    assert!(!html.contains("<b>"), "kernel log markup must be escaped");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));
    assert!(html.contains("detail &lt;script&gt;"), "the verdict detail");
    assert!(html.contains("stderr &lt;script&gt;"), "the stderr tail");
    assert_balanced(&html);
}

#[test]
fn a_simulated_run_says_simulated() {
    let mut r = failing();
    assert!(!render_plain(&r).contains("SIMULATED"));
    r.simulation = Some(SimulationSpec {
        source: "large-copy-bitflip".into(),
        faults: vec![FaultSpec {
            name: "bitflip".into(),
            ..FaultSpec::default()
        }],
    });
    let html = render_plain(&r);
    assert!(html.contains("id=\"simulated\""));
    assert!(html.contains("<title>SIMULATED"));
    assert!(html.contains("large-copy-bitflip (bitflip)"));
    // A fix account under simulation is labelled too, even beside a plain report.
    let mut account = fix_account();
    account.simulated = true;
    let html = render(&report(Vec::new()), Some(&account), &[]).expect("renders");
    assert!(html.contains("id=\"simulated\""));
}

#[test]
fn failures_come_before_passes() {
    let html = render_plain(&failing());
    let fail = html.find("copy.d2h.pageable").expect("failure shown");
    let pass = html.find("copy.h2d.pageable").expect("pass listed");
    assert!(fail < pass, "the failure is shown first");
    let failures = html.find("id=\"failures\"").expect("section");
    assert!(failures < html.find("id=\"passes\"").expect("passes"));
    // The family summary puts families with problems first.
    let mut r = failing();
    r.results
        .push(result("alloc.basic", DeviceRef::Gpu(0), Verdict::Pass));
    let html = render_plain(&r);
    let summary =
        &html[html.find("id=\"summary\"").unwrap()..html.find("id=\"failures\"").unwrap()];
    assert!(summary.find(">copy<").unwrap() < summary.find(">alloc<").unwrap());
}

#[test]
fn the_summary_groups_by_the_group_the_catalog_published_else_the_family() {
    let grouped = |id: &str, group: Option<&str>| ProbeResult {
        report_group: group.map(str::to_string),
        ..result(id, DeviceRef::Gpu(0), Verdict::Pass)
    };
    let summary_of = |results: Vec<ProbeResult>| {
        let html = render_plain(&report(results));
        html[html.find("id=\"summary\"").unwrap()..html.find("id=\"failures\"").unwrap()]
            .to_string()
    };
    // Two families that publish one group are one row, named by the group, not by an id.
    let summary = summary_of(vec![
        grouped("width.index.a", Some("memory")),
        grouped("alloc.basic", Some("memory")),
        grouped("copy.h2d", None),
    ]);
    assert!(summary.contains(">memory<"), "{summary}");
    assert!(!summary.contains(">width<") && !summary.contains(">alloc<"));
    assert!(summary.contains(">copy<"), "{summary}");
    // A report written before groups were published has none: its families are the groups.
    let old: ProbeResult = serde_json::from_value(json!({
        "probe": "alloc.basic",
        "device": "cuda:0",
        "layer": "framework",
        "verdict": {"verdict": "pass"},
    }))
    .unwrap();
    assert_eq!(old.report_group, None);
    assert!(summary_of(vec![old]).contains(">alloc<"));
}

#[test]
fn the_failure_carries_its_evidence() {
    let html = render_plain(&failing());
    let section =
        &html[html.find("id=\"failures\"").unwrap()..html.find("id=\"findings\"").unwrap()];
    for evidence in [
        "all zeros",
        "worker stderr",
        "kernel log",
        ">bytes<",
        ">4096<",
    ] {
        assert!(section.contains(evidence), "{evidence}");
    }
    assert!(
        html.contains("needs &lt;two&gt; GPUs"),
        "skips grouped by reason"
    );
}

#[test]
fn the_issue_section_shows_texts_or_says_there_is_nothing() {
    let healthy = report(vec![result(
        "copy.h2d.pageable",
        DeviceRef::Cpu,
        Verdict::Pass,
    )]);
    assert!(render_plain(&healthy).contains("Nothing to report"));
    let issues = [IssueText::from((
        "copy.d2h.pageable".to_string(),
        "0".to_string(),
        "# copy.d2h.pageable returns zeros\n\nsteps".to_string(),
    ))];
    let html = render(&failing(), None, &issues).expect("renders");
    let section = &html[html.find("id=\"issues\"").unwrap()..];
    assert!(section.contains("<pre># copy.d2h.pageable returns zeros\n\nsteps</pre>"));
    assert!(!section.contains("<button"));
    assert!(render_plain(&failing()).contains("No issue text was made"));
}

#[test]
fn the_dtype_matrix_is_a_heat_map_by_source_and_target() {
    let r = report(vec![
        result(
            "dtype.bf16.fp32.to.device",
            DeviceRef::Gpu(0),
            Verdict::Pass,
        ),
        result(
            "dtype.bf16.fp32.copy_.device",
            DeviceRef::Gpu(0),
            Verdict::Pass,
        ),
        result(
            "dtype.fp32.fp16.to.device",
            DeviceRef::Gpu(0),
            Verdict::Fail {
                class: FailClass::Mismatch,
                detail: "x".into(),
            },
        ),
    ]);
    let html = text(&render_plain(&r));
    assert!(
        html.contains(
            "<td class=\"cell ok\" title=\"bf16 → fp32: 2 ok, 0 broken, 0 skipped\">2/2 ok</td>"
        ),
        "{html}"
    );
    assert!(html.contains(">1/1 broken</td>"));
    assert!(html.contains("fp32 → fp16, to device: mismatch"));
    assert!(render_plain(&failing()).contains("No dtype conversion probe ran"));
}

#[test]
fn bandwidths_are_set_against_the_pcie_link_and_the_device_copy_ceiling() {
    let mut r = report(vec![
        with_metrics(
            result("copy.h2d.pinned.large", DeviceRef::Gpu(0), Verdict::Pass),
            &[("gb_per_s", json!(25.0))],
        ),
        with_metrics(
            result("native.copy.d2d", DeviceRef::Gpu(0), Verdict::Pass),
            &[
                ("d2d_gbps", json!(2000.0)),
                ("d2d_memcpy_gbps", json!(1900.0)),
            ],
        ),
        with_metrics(
            result("copy.d2d.large", DeviceRef::Gpu(0), Verdict::Pass),
            &[("gb_per_s", json!(1500.0))],
        ),
    ]);
    let mut gpu = GpuInfo::new(Vendor::Nvidia);
    gpu.index = Some(0);
    gpu.pci_bus = Some("0000:01:00.0".into());
    r.fingerprint.gpus.push(gpu);
    r.fingerprint.extra = BTreeMap::from([
        (
            "gpu.0000:01:00.0.pcie_link_speed".into(),
            "32.0 GT/s PCIe".into(),
        ),
        ("gpu.0000:01:00.0.pcie_link_width".into(), "16".into()),
    ]);
    let html = text(&render_plain(&r));
    // 32 GT/s × 16 lanes × 128/130 / 8 = 63.0 GB/s per direction.
    assert!(
        html.contains("PCIe 32 GT/s x16 → 63.0 GB/s per direction"),
        "{html}"
    );
    assert!(html.contains("<td class=\"num\">25.0</td><td class=\"num\">63.0</td>"));
    assert!(html.contains("</svg> 40%"));
    assert!(html.contains("<td class=\"num\">1500.0</td><td class=\"num\">2000.0</td>"));
    assert!(html.contains("</svg> 75%"));
    assert!(
        html.contains("</svg> 95%"),
        "the native memcpy against the ceiling"
    );
    // No link recorded: the limit says so rather than guessing.
    r.fingerprint.extra.clear();
    assert!(render_plain(&r).contains("PCIe link not recorded"));
    // A CPU self-test has no host link at all.
    let cpu = report(vec![with_metrics(
        result(
            "copy.h2d.pageable.medium.blocking",
            DeviceRef::Cpu,
            Verdict::Pass,
        ),
        &[("gb_per_s", json!(15.6))],
    )]);
    let html = render_plain(&cpu);
    assert!(html.contains("none: the device is the CPU"));
    assert!(!html.contains("class=\"track\""), "no bar without a limit");
}

#[test]
fn pcie_generations_use_their_line_code() {
    let gen2 = PcieLink {
        gt_per_s: 5.0,
        width: 16,
    };
    assert!((gen2.gb_per_s() - 8.0).abs() < 1e-9);
    let gen4 = PcieLink {
        gt_per_s: 16.0,
        width: 16,
    };
    assert!((gen4.gb_per_s() - 31.5077).abs() < 1e-3);
}

#[test]
fn the_fix_search_table_is_shown_when_there_is_an_account() {
    let html = render(&failing(), Some(&fix_account()), &[]).expect("renders");
    assert!(html.contains("id=\"fix\""));
    assert!(html.contains("HSA_ENABLE_SDMA=0"));
    assert!(!render_plain(&failing()).contains("id=\"fix\""));
}

#[test]
fn the_file_is_written_atomically_and_an_unwritable_path_is_a_usage_error() {
    use gpuprobe_model::ClassifiedError;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/report.html");
    write(&path, "<html></html>").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "<html></html>");
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec!["report.html"], "no temporary file left");
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let err = write(&file.join("x.html"), "x").unwrap_err();
    assert_eq!(err.exit_status(), ExitStatus::UsageError);
    assert!(check_writable(Some(&file.join("x.html"))).is_err());
    assert!(check_writable(Some(&dir.path().join("new.html"))).is_ok());
    assert!(check_writable(None).is_ok());
}

fn finding(id: &str, citations: Vec<String>) -> Finding {
    Finding {
        id: id.into(),
        source: "kb".into(),
        severity: gpuprobe_model::Severity::Error,
        layer: gpuprobe_model::FindingLayer::Runtime,
        title: format!("title {HOSTILE}"),
        explanation: "why".into(),
        confidence: gpuprobe_model::Confidence::Confirmed,
        evidence: vec![gpuprobe_model::Evidence::new("probe", HOSTILE)],
        remedies: Vec::new(),
        citations,
        next_steps: Vec::new(),
        related: Vec::new(),
    }
}

fn fix_account() -> FixAccount {
    serde_json::from_value(json!({
        "tool_version": "0.1.0",
        "started_at": "2026-11-25T00:00:00Z",
        "wall_s": 3.0,
        "simulated": false,
        "stack": {"gpus": ["gfx1100"]},
        "targets": [],
        "sentinels": [],
        "candidates": [{
            "setting": {"variable": "HSA_ENABLE_SDMA", "value": "0"},
            "title": "copies without SDMA <engine>",
            "sources": [],
            "cost": {},
            "tried": true,
            "cured": [],
            "broke": [],
            "worsened": []
        }],
        "chosen": [],
        "budget": {"max_runs": 10, "trials": 1, "workers": 1, "exhausted": false},
        "outcome": "none_cured",
        "exit_status": "problems_found",
        "exit_code": 1
    }))
    .expect("a fix account")
}

#[test]
fn each_failure_gets_an_issue_text_and_a_written_issue_md_is_preferred() {
    let dir = tempfile::tempdir().unwrap();
    let mut report = failing();
    report.run_dir = Some(dir.path().display().to_string());
    let texts = issue_texts(&report, None);
    assert_eq!(texts.len(), 1, "one failure, one text");
    assert_eq!(texts[0].probe, "copy.d2h.pageable");
    assert!(
        texts[0]
            .markdown
            .contains("gpuprobe repro copy.d2h.pageable"),
        "{}",
        texts[0].markdown
    );
    // What `repro` wrote for that probe and device replaces the report-only body ...
    let repro = dir.path().join("repro").join("copy.d2h.pageable");
    std::fs::create_dir_all(&repro).unwrap();
    let failed = report.results[1].clone();
    std::fs::write(
        repro.join("RESULT.json"),
        serde_json::to_string(&failed).unwrap(),
    )
    .unwrap();
    std::fs::write(repro.join("ISSUE.md"), "# written by repro\n").unwrap();
    assert_eq!(
        issue_texts(&report, None)[0].markdown,
        "# written by repro\n"
    );
    // ... but not one made for another device.
    let mut elsewhere = failed;
    elsewhere.device = DeviceRef::Gpu(1);
    std::fs::write(
        repro.join("RESULT.json"),
        serde_json::to_string(&elsewhere).unwrap(),
    )
    .unwrap();
    assert_ne!(
        issue_texts(&report, None)[0].markdown,
        "# written by repro\n"
    );
}

#[test]
fn the_page_names_the_commit_and_the_kb_revision() {
    let mut r = report(Vec::new());
    r.build = Some(gpuprobe_model::BuildInfo {
        commit: "0123456789ab".into(),
        kb_revision: "53.f9ef3575aa15".into(),
    });
    let html = render_plain(&r);
    assert!(html.contains("gpuprobe 0.1.0 (commit 0123456789ab, kb 53.f9ef3575aa15)"));
}
