//! ISSUE.md rendering: the title, the project to file with, the SIMULATED label and hostile
//! text kept inert.

use gpuprobe_model::FailClass;
use gpuprobe_model::Report;
use gpuprobe_model::SimulationSpec;
use gpuprobe_model::{CandidateTrial, ProbeRef, SettingChange};
use gpuprobe_model::{Confidence, Evidence, Severity};
use gpuprobe_model::{DeviceRef, ProbeId};
use gpuprobe_model::{Fingerprint, GpuInfo};

use super::*;

fn report(vendor: Vendor, results: Vec<ProbeResult>, findings: Vec<Finding>) -> Report {
    let mut gpu = GpuInfo::new(vendor);
    gpu.name = Some(match vendor {
        Vendor::Amd => "AMD Radeon RX 7900 XTX".into(),
        _ => "NVIDIA H100 80GB HBM3".into(),
    });
    gpu.index = Some(0);
    let fingerprint = Fingerprint {
        gpus: vec![gpu],
        ..Fingerprint::default()
    };
    crate::test_support::report(fingerprint, results, findings)
}

fn fail(probe: &str, layer: Layer, detail: &str) -> ProbeResult {
    ProbeResult::new(
        ProbeId::new(probe),
        DeviceRef::Gpu(0),
        layer,
        Verdict::Fail {
            class: FailClass::AllZeros,
            detail: detail.into(),
        },
    )
}

fn finding(id: &str, layer: FindingLayer, probe: &str, citations: &[&str]) -> Finding {
    Finding {
        id: id.into(),
        source: "kb".into(),
        severity: Severity::Error,
        layer,
        title: "small pageable copies read back as zeros".into(),
        explanation: String::new(),
        confidence: Confidence::Confirmed,
        evidence: vec![Evidence::from_probe(ProbeId::new(probe), "all zeros")],
        remedies: vec![],
        citations: citations.iter().map(|c| c.to_string()).collect(),
        next_steps: vec![],
        related: vec![],
    }
}

fn input<'a>(report: &'a Report, result: &'a ProbeResult) -> IssueInput<'a> {
    IssueInput {
        report,
        result,
        manifest: None,
        script: None,
        run: None,
        fix: None,
    }
}

#[test]
fn the_title_is_one_line_naming_probe_failure_and_gpu() {
    let r = fail(
        "copy.h2d.pageable.tiny.blocking",
        Layer::Framework,
        "10 of 20",
    );
    let rep = report(Vendor::Nvidia, vec![r.clone()], vec![]);
    let t = title(&input(&rep, &r));
    assert_eq!(
        t,
        "copy.h2d.pageable.tiny.blocking gives wrong results (all zeros) on NVIDIA H100 80GB HBM3"
    );
    assert!(!t.contains('\n'));
    assert!(render(&input(&rep, &r)).starts_with(&format!("# {t}\n")));
}

#[test]
fn the_layer_names_the_project_to_file_with() {
    let cases = [
        (
            "ops.matmul.fp32.large_n",
            Layer::Framework,
            Vendor::Amd,
            "rocBLAS",
        ),
        (
            "ops.matmul.fp32.large_n",
            Layer::Framework,
            Vendor::Nvidia,
            "cuBLAS",
        ),
        ("nn.conv.fp16", Layer::Framework, Vendor::Amd, "MIOpen"),
        ("nn.conv.fp16", Layer::Framework, Vendor::Nvidia, "cuDNN"),
        (
            "ops.elementwise.add.fp16.huge",
            Layer::Framework,
            Vendor::Amd,
            "PyTorch",
        ),
        (
            "native.copy.roundtrip.pageable",
            Layer::Runtime,
            Vendor::Amd,
            "ROCm/HIP",
        ),
        (
            "native.copy.roundtrip.pageable",
            Layer::Runtime,
            Vendor::Nvidia,
            "CUDA driver",
        ),
        (
            "pipeline.accelerate.prepare",
            Layer::Pipeline,
            Vendor::Amd,
            "Accelerate",
        ),
        (
            "pipeline.safetensors.load",
            Layer::Pipeline,
            Vendor::Amd,
            "safetensors",
        ),
        (
            "native.memtest.quick",
            Layer::System,
            Vendor::Amd,
            "kernel driver",
        ),
    ];
    for (probe, layer, vendor, project) in cases {
        let r = fail(probe, layer, "x");
        let (named, why) = upstream(&r, &[], Some(vendor));
        assert!(named.contains(project), "{probe} on {vendor:?}: {named}");
        assert!(!why.is_empty());
    }
    // A diagnosis that places a framework probe's failure in the system layer moves it.
    let r = fail("copy.h2d.pageable.tiny.blocking", Layer::Framework, "x");
    let f = finding("RKB-001", FindingLayer::System, r.probe.as_str(), &[]);
    let (named, _) = upstream(&r, &[&f], Some(Vendor::Amd));
    assert!(named.contains("kernel driver"), "{named}");
}

#[test]
fn a_simulated_result_says_simulated_in_title_and_body() {
    let mut r = fail(
        "copy.h2d.pageable.tiny.blocking",
        Layer::Framework,
        "10 of 20",
    );
    r.simulated = true;
    let mut rep = report(Vendor::Nvidia, vec![r.clone()], vec![]);
    rep.simulation = Some(SimulationSpec {
        source: "h2d-zeros".into(),
        faults: vec![],
    });
    let md = render(&input(&rep, &r));
    assert!(title(&input(&rep, &r)).starts_with("[SIMULATED] "));
    assert!(md.contains("**SIMULATED.**"), "{md}");
    assert!(md.contains("h2d-zeros"));
    // A real failure says nothing of the kind.
    let real = fail(
        "copy.h2d.pageable.tiny.blocking",
        Layer::Framework,
        "10 of 20",
    );
    let rep = report(Vendor::Nvidia, vec![real.clone()], vec![]);
    assert!(!render(&input(&rep, &real)).contains("SIMULATED"));
}

#[test]
fn hostile_text_stays_inert_markdown() {
    let hostile = "zeros</details><script>alert(1)</script> [x](http://evil) \x1b]0;t\x07 ```\n# H";
    let mut r = fail("copy.h2d.pageable.tiny.blocking", Layer::Framework, hostile);
    r.stderr_tail = vec!["```".into(), "````</details>".into(), "\x1b[2J".into()];
    let rep = report(Vendor::Amd, vec![r.clone()], vec![]);
    let run = ScriptRun {
        command: "python repro.py".into(),
        exit_code: Some(1),
        signal: None,
        elapsed_s: 0.5,
        stdout: format!("{hostile}\n`````\nREPRODUCED: x"),
        stderr: String::new(),
        last_line: Some("REPRODUCED: x".into()),
        outcome: ScriptOutcome::Reproduced,
        simulated: false,
    };
    let manifest = ReproManifest {
        probe: r.probe.as_str().into(),
        summary: hostile.into(),
        kind: "python".into(),
        ..ReproManifest::default()
    };
    let script = "print('```')\n";
    let md = render(&IssueInput {
        manifest: Some(&manifest),
        script: Some(script),
        run: Some(&run),
        ..input(&rep, &r)
    });
    assert!(!md.contains('\x1b') && !md.contains('\x07'), "{md}");
    // Outside fenced blocks no raw HTML, link or heading from the text survives.
    let mut fence: Option<String> = None;
    for line in md.lines() {
        let ticks: String = line.chars().take_while(|&c| c == '`').collect();
        match &fence {
            Some(open) if ticks.len() >= open.len() && line.trim_end() == ticks => fence = None,
            Some(_) => {}
            None if ticks.len() >= 3 => fence = Some(ticks),
            None => {
                assert!(!line.contains("<script"), "{line}");
                assert!(
                    !line.contains("[x](") && line.contains("\\](") == line.contains("]("),
                    "{line}"
                );
                assert!(!line.contains("</details><script"), "{line}");
                if line.starts_with('#') {
                    assert!(["# ", "## "].iter().any(|h| line.starts_with(h)), "{line}");
                }
                assert!(!line.starts_with("# H"), "{line}");
            }
        }
    }
    assert!(fence.is_none(), "every fence is closed");
    // The fences are longer than the backtick runs inside them.
    assert!(md.contains("``````text\n"), "{md}");
}

#[test]
fn related_kb_entries_link_their_sources_and_fix_says_what_cured() {
    let r = fail("copy.h2d.pageable.tiny.blocking", Layer::Framework, "x");
    let f = finding(
        "RKB-001",
        FindingLayer::Runtime,
        r.probe.as_str(),
        &["ROCm/ROCm#5724", "https://github.com/ROCm/ROCm/issues/5724"],
    );
    let unrelated = finding("RKB-002", FindingLayer::Runtime, "rng.normal", &[]);
    let rep = report(Vendor::Amd, vec![r.clone()], vec![f, unrelated]);
    let trial = |setting: SettingChange, cured: bool| CandidateTrial {
        setting,
        title: String::new(),
        sources: vec![],
        cost: Default::default(),
        tried: true,
        not_tried_because: None,
        cured: if cured {
            vec![ProbeRef {
                probe: r.probe.clone(),
                device: r.device,
            }]
        } else {
            vec![]
        },
        broke: vec![],
        worsened: vec![],
        partly_cured: vec![],
        elapsed_s: None,
    };
    let account: FixAccount = serde_json::from_value(serde_json::json!({
        "tool_version": "0.1.0", "started_at": "x", "wall_s": 1.0, "simulated": false,
        "stack": {}, "budget": {"max_runs": 40, "trials": 3, "workers": 3, "exhausted": false},
        "outcome": "all_cured", "exit_status": "all_passed", "exit_code": 0
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let account = FixAccount {
        candidates: vec![
            trial(SettingChange::set("HSA_ENABLE_SDMA", "0"), true),
            trial(SettingChange::set("HSA_ENABLE_PEER_SDMA", "0"), false),
        ],
        ..account
    };
    let md = render(&IssueInput {
        fix: Some(&account),
        ..input(&rep, &r)
    });
    assert!(md.contains("**RKB-001**"), "{md}");
    assert!(
        md.contains("(<https://github.com/ROCm/ROCm/issues/5724>)"),
        "{md}"
    );
    assert!(!md.contains("RKB-002"));
    assert!(
        md.contains("proved to cure this failure: `HSA_ENABLE_SDMA=0`"),
        "{md}"
    );
    assert!(
        md.contains("did not cure it: `HSA_ENABLE_PEER_SDMA=0`"),
        "{md}"
    );
    assert!(md.contains("<details><summary>Full fingerprint</summary>"));
    assert!(md.contains("**RKB-001** (runtime, confirmed)"), "{md}");
}

#[test]
fn the_environment_names_the_commit_and_the_kb_revision() {
    let r = fail(
        "copy.h2d.pageable.tiny.blocking",
        Layer::Framework,
        "10 of 20",
    );
    let mut rep = report(Vendor::Nvidia, vec![r.clone()], vec![]);
    assert!(!render(&input(&rep, &r)).contains("(commit "));
    rep.build = Some(gpuprobe_model::BuildInfo {
        commit: "0123456789ab".into(),
        kb_revision: "53.f9ef3575aa15".into(),
    });
    assert!(
        render(&input(&rep, &r))
            .contains("gpuprobe: 0.1.0 (commit 0123456789ab, kb 53.f9ef3575aa15)")
    );
}
