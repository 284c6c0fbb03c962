//! Matching on synthetic fingerprints and probe results.

use gpuprobe_kb::{KbMatch, KnowledgeBase, MatchStatus, match_all};
use gpuprobe_model::{Confidence, FailClass, Fingerprint, ProbeResult, Severity, Verdict};
use gpuprobe_model::{DriverSource, KernelEvent, Unreadable};

use crate::fixtures::{amd_gpu, amd_host, env, fail, h100_host, result, strix_halo_mes_0x83};

fn matched<'a>(matches: &'a [KbMatch], id: &str) -> Option<&'a KbMatch> {
    matches.iter().find(|m| m.entry.id == id)
}

fn run(fp: &Fingerprint, results: &[ProbeResult]) -> Vec<KbMatch> {
    match_all(&KnowledgeBase::embedded(), fp, results)
}

#[test]
fn strix_halo_with_mes_0x83_matches_rkb005_with_its_facts() {
    let matches = run(&strix_halo_mes_0x83(), &[]);
    let m = matched(&matches, "RKB-005").expect("RKB-005 should match");
    assert_eq!(
        m.status,
        MatchStatus::Suspected,
        "no result or log confirms it yet"
    );
    assert!(
        m.unchecked.is_empty(),
        "all facts are known: {:?}",
        m.unchecked
    );
    assert!(
        m.held
            .iter()
            .any(|h| h == "GPU 0 native ISA gfx1151 matches gfx1151"),
        "{:?}",
        m.held
    );
    assert!(
        m.held
            .iter()
            .any(|h| h.contains("MES firmware 0x00000083 matches ==0x83")),
        "{:?}",
        m.held
    );
    assert!(m.held.iter().any(|h| h.contains("vendor amd is amd")));
    assert_eq!(m.gpus, vec![0]);
    let finding = m.to_finding();
    assert_eq!(finding.source, "kb");
    assert_eq!(finding.confidence, Confidence::Suspected);
    assert_eq!(finding.severity, Severity::Warning);
    assert!(finding.title.starts_with("Suspected: "));
    assert!(finding.explanation.contains("Suspected only"));
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.kind == "condition" && e.text.contains("0x00000083"))
    );
    assert!(
        finding
            .citations
            .iter()
            .any(|c| c.starts_with("ROCm/ROCm#5724"))
    );
}

#[test]
fn a_cpf_page_fault_confirms_rkb005() {
    let mut fp = strix_halo_mes_0x83();
    fp.kernel_events.push(KernelEvent {
        kind: "page_fault".into(),
        time: Some("1234.5".into()),
        pci_bus: Some("0000:c5:00.0".into()),
        client: Some("CPF".into()),
        process: Some("python3".into()),
        pid: Some(4242),
        library: None,
        details: Default::default(),
        line: "amdgpu 0000:c5:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:32770)".into(),
    });
    let m = run(&fp, &[])
        .into_iter()
        .find(|m| m.entry.id == "RKB-005")
        .unwrap();
    assert_eq!(m.status, MatchStatus::Confirmed);
    assert!(m.logs[0].contains("[gfxhub] page fault"));
    let finding = m.to_finding();
    assert_eq!(finding.confidence, Confidence::Confirmed);
    assert_eq!(finding.severity, Severity::Error);
    assert!(finding.evidence.iter().any(|e| e.kind == "log"));
}

#[test]
fn unreadable_mes_version_leaves_rkb005_suspected_and_says_why() {
    let mut fp = strix_halo_mes_0x83();
    fp.gpus[0].firmware.clear();
    fp.unreadable.push(Unreadable {
        what: "MES firmware version".into(),
        reason: "needs root: /sys/kernel/debug".into(),
    });
    let m = run(&fp, &[])
        .into_iter()
        .find(|m| m.entry.id == "RKB-005")
        .unwrap();
    assert_eq!(m.status, MatchStatus::Suspected);
    assert!(
        m.unchecked.iter().any(|u| u.contains("needs root")),
        "{:?}",
        m.unchecked
    );
    let finding = m.to_finding();
    assert!(finding.evidence.iter().any(|e| e.kind == "absent"));
    assert!(finding.explanation.contains("Could not check"));
}

#[test]
fn other_mes_versions_do_not_match_rkb005() {
    let mut fp = strix_halo_mes_0x83();
    fp.gpus[0].firmware[0].version = "0x00000080".into();
    assert!(matched(&run(&fp, &[]), "RKB-005").is_none());
}

#[test]
fn gfx1100_with_dkms_on_kernel_6_18_3_matches_rkb008() {
    let mut fp = amd_host("gfx1100", false, "6.18.3-arch1-1", "2.10.0+rocm7.1");
    if let Some(driver) = fp.amdgpu.as_mut() {
        driver.source = DriverSource::Dkms;
        driver.version = Some("6.16.13".into());
    }
    let matches = run(&fp, &[]);
    let m = matched(&matches, "RKB-008").expect("RKB-008 should match");
    assert!(
        m.held
            .iter()
            .any(|h| h == "kernel 6.18.3-arch1-1 is in >=6.18.2"),
        "{:?}",
        m.held
    );
    assert!(m.held.iter().any(|h| h.contains("gfx1100 matches gfx11*")));
    assert_eq!(m.status, MatchStatus::Suspected);

    // Reported still faulting on later 6.18 releases and on 7.0.x (ROCm/amdgpu#225).
    for later in ["6.18.9", "7.0.4"] {
        let mut still = fp.clone();
        still.host.kernel_release = Some(later.into());
        assert!(
            matched(&run(&still, &[]), "RKB-008").is_some(),
            "RKB-008 should match kernel {later}"
        );
    }

    let mut good = fp.clone();
    good.host.kernel_release = Some("6.17.9".into());
    assert!(matched(&run(&good, &[]), "RKB-008").is_none());
}

/// The runtime's "Memory access fault" names no client: every GPU memory fault prints it, so
/// under RKB-008's catch-all pattern it raises suspicion; the SDMA0 or TCP fault in the
/// kernel log is the entry's signature.
#[test]
fn a_bare_memory_access_fault_only_raises_suspicion_of_rkb008() {
    let fp = amd_host("gfx1100", false, "6.18.3", "2.10.0+rocm7.1");
    let crash = result(
        "nn.vae.encode.bf16",
        0,
        Verdict::Crash {
            signal: Some(6),
            exit_code: None,
            message: "Memory access fault by GPU node-1 (Agent handle: 0x55) on address 0x7f00. Reason: Page not present or supervisor privilege.".into(),
        },
    );
    let m = run(&fp, std::slice::from_ref(&crash))
        .into_iter()
        .find(|m| m.entry.id == "RKB-008")
        .unwrap();
    assert_eq!(m.status, MatchStatus::Suspected);
    assert!(m.confirming.is_empty());
    assert_eq!(m.hints.len(), 1);

    let mut with_log = fp.clone();
    with_log.kernel_events.push(KernelEvent {
        kind: "page_fault".into(),
        time: None,
        pci_bus: None,
        client: Some("SDMA0".into()),
        process: None,
        pid: None,
        library: None,
        details: Default::default(),
        line: "[gfxhub] page fault".into(),
    });
    let m = run(&with_log, &[crash])
        .into_iter()
        .find(|m| m.entry.id == "RKB-008")
        .unwrap();
    assert_eq!(m.status, MatchStatus::Confirmed);
}

fn with_torch_version(mut fp: Fingerprint, version: &str) -> Fingerprint {
    if let Some(torch) = fp.python.as_mut().and_then(|p| p.torch.as_mut()) {
        torch.version = version.to_string();
    }
    fp
}

fn summary(matches: &[KbMatch]) -> Vec<(&String, MatchStatus, &Vec<String>)> {
    matches
        .iter()
        .map(|m| (&m.entry.id, m.status, &m.held))
        .collect()
}

/// The healthy H100 host: nothing is confirmed, and the only suspicion is an entry whose
/// torch range this stack is in (information, with the probes that would settle it); on an
/// older torch nothing matches at all, and the vendor alone never makes an entry suspected.
#[test]
fn nvidia_h100_host_is_suspected_of_nothing_but_its_torch_versions_reports() {
    let matches = run(&h100_host(), &[]);
    assert!(
        matches
            .iter()
            .all(|m| m.status == MatchStatus::Suspected && m.severity() == Severity::Info),
        "{:?}",
        summary(&matches)
    );
    assert_eq!(
        matches
            .iter()
            .map(|m| m.entry.id.as_str())
            .collect::<Vec<_>>(),
        ["RKB-056", "RKB-060", "RKB-061"],
        "{:?}",
        summary(&matches)
    );
    // Below every torch range of the knowledge base (the compile caches' entries reach back
    // to torch 2.3).
    let older = run(&with_torch_version(h100_host(), "2.2.0+cu121"), &[]);
    assert!(older.is_empty(), "{:?}", summary(&older));

    let passing: Vec<ProbeResult> = [
        "copy.h2d.pageable.tiny.nonblocking",
        "copy.h2d.pinned.tiny.nonblocking",
        "dist.p2p.0-1",
        "nn.sdpa.bf16.flash",
        "nn.sdpa.matrix.mask.l192.cudnn.bwd",
    ]
    .iter()
    .map(|p| result(p, 0, Verdict::Pass))
    .chain(std::iter::once(result("compile.ambient", 0, Verdict::Pass)))
    .collect();
    let with_passing = run(&h100_host(), &passing);
    assert!(
        with_passing
            .iter()
            .all(|m| m.status == MatchStatus::NotObserved),
        "{:?}",
        summary(&with_passing)
    );
}

/// An entry whose only conditions are the GPU vendor (here, every NVIDIA GPU) is listed when
/// a probe confirms it, never merely suspected.
#[test]
fn a_vendor_alone_never_makes_an_entry_suspected() {
    let fp = with_torch_version(h100_host(), "2.10.0+cu128");
    assert!(matched(&run(&fp, &[]), "RKB-058").is_none());
    let failing = result(
        "width.create.n32",
        0,
        fail(
            FailClass::PartialZeros,
            "arange past 2^32: zeros from element 4294967296",
        ),
    );
    let confirmed = run(&fp, &[failing]);
    let m = matched(&confirmed, "RKB-058").expect("confirmed by its probe");
    assert_eq!(
        m.status,
        MatchStatus::Confirmed,
        "{:?}",
        summary(&confirmed)
    );
}

fn rkb001(results: &[ProbeResult]) -> KbMatch {
    let fp = amd_host("gfx1100", false, "6.17.0-19-generic", "2.10.0+rocm7.1");
    run(&fp, results)
        .into_iter()
        .find(|m| m.entry.id == "RKB-001")
        .expect("RKB-001 should match gfx1100")
}

#[test]
fn rkb001_is_only_suspected_without_results() {
    let m = rkb001(&[]);
    assert_eq!(m.status, MatchStatus::Suspected);
    let finding = m.to_finding();
    assert_eq!(finding.confidence, Confidence::Suspected);
    assert!(finding.title.starts_with("Suspected: "));
    assert!(finding.next_steps.iter().any(|s| s == "gpuprobe check"));
}

#[test]
fn rkb001_is_confirmed_by_failing_pageable_tiny_copies_with_passing_pinned() {
    let results = [
        result(
            "copy.h2d.pageable.tiny.nonblocking",
            0,
            fail(
                FailClass::AllZeros,
                "all zeros in 212 of 50000 copies (≤ 64 B)",
            ),
        ),
        result("copy.h2d.pinned.tiny.nonblocking", 0, Verdict::Pass),
        result("copy.h2d.pinned.tiny.threads", 0, Verdict::Pass),
        result("rng.randn.fp32", 0, Verdict::Pass),
    ];
    let m = rkb001(&results);
    assert_eq!(m.status, MatchStatus::Confirmed);
    assert_eq!(m.confirming.len(), 1);
    assert_eq!(
        m.confirming[0].probe.as_str(),
        "copy.h2d.pageable.tiny.nonblocking"
    );
    assert_eq!(m.controls.len(), 2);
    assert!(m.controls.iter().all(|c| c.as_predicted));
    let finding = m.to_finding();
    assert_eq!(finding.confidence, Confidence::Confirmed);
    assert_eq!(finding.severity, Severity::Error);
    assert_eq!(finding.title, m.entry.title);
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.kind == "probe" && e.text.contains("all zeros in 212 of 50000"))
    );
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.text.starts_with("control as predicted"))
    );
    assert!(
        finding
            .next_steps
            .iter()
            .any(|s| s == "gpuprobe check --only copy.h2d.pageable.tiny.nonblocking")
    );
    assert!(
        finding
            .remedies
            .iter()
            .any(|r| r.description.contains("Pin host buffers"))
    );
}

#[test]
fn rkb001_pinned_failing_too_keeps_it_suspected() {
    let results = [
        result(
            "copy.h2d.pageable.tiny.nonblocking",
            0,
            fail(FailClass::AllZeros, "zeros"),
        ),
        result(
            "copy.h2d.pinned.tiny.nonblocking",
            0,
            fail(FailClass::AllZeros, "zeros"),
        ),
    ];
    let m = rkb001(&results);
    assert_eq!(m.status, MatchStatus::Suspected);
    assert!(m.controls.iter().any(|c| !c.as_predicted));
    assert!(
        m.to_finding()
            .explanation
            .contains("broader than this issue explains")
    );
}

#[test]
fn rkb001_passing_pageable_copies_mean_not_observed() {
    let results = [result(
        "copy.h2d.pageable.tiny.nonblocking",
        0,
        Verdict::Pass,
    )];
    let m = rkb001(&results);
    assert_eq!(m.status, MatchStatus::NotObserved);
    assert_eq!(m.contradicting.len(), 1);
    let finding = m.to_finding();
    assert_eq!(finding.severity, Severity::Info);
    assert!(finding.title.starts_with("Not observed here: "));
    assert!(finding.remedies.is_empty());
}

#[test]
fn results_from_other_devices_do_not_confirm() {
    let mut fp = amd_host("gfx1100", false, "6.17.0-19-generic", "2.10.0+rocm7.1");
    fp.gpus.push(amd_gpu(1, "gfx1030", false));
    let results = [result(
        "copy.h2d.pageable.tiny.nonblocking",
        1,
        fail(FailClass::AllZeros, "zeros"),
    )];
    let m = run(&fp, &results)
        .into_iter()
        .find(|m| m.entry.id == "RKB-001")
        .unwrap();
    assert_eq!(m.gpus, vec![0]);
    assert_eq!(m.status, MatchStatus::Suspected);
}

#[test]
fn failed_hard_conditions_do_not_match() {
    let fp = amd_host("gfx1030", false, "6.17.0-19-generic", "2.10.0+rocm7.1");
    let matches = run(
        &fp,
        &[result(
            "copy.h2d.pageable.tiny.nonblocking",
            0,
            fail(FailClass::AllZeros, "zeros"),
        )],
    );
    assert!(matched(&matches, "RKB-001").is_none());
    assert!(matched(&matches, "RKB-005").is_none());
}

#[test]
fn any_of_alternatives_pick_the_dkms_strix_halo_stack() {
    let mut fp = amd_host("gfx1151", true, "6.17.0-20-generic", "2.11.0+rocm7.2");
    assert!(
        matched(&run(&fp, &[]), "RKB-007").is_none(),
        "inbox driver on a supported kernel"
    );
    if let Some(driver) = fp.amdgpu.as_mut() {
        driver.source = DriverSource::Dkms;
    }
    let matches = run(&fp, &[]);
    let m = matched(&matches, "RKB-007").expect("DKMS on Strix Halo");
    assert!(m.held.iter().any(|h| h.contains("DKMS")), "{:?}", m.held);

    let wheel = amd_host("gfx1151", true, "6.17.0-20-generic", "2.9.1+rocm7.2.0.lw");
    let matches = run(&wheel, &[]);
    assert!(
        matched(&matches, "RKB-007").is_some(),
        "the radeon-docs wheel"
    );
}

#[test]
fn missing_gpu_facts_leave_matches_suspected() {
    let mut fp = amd_host("gfx1100", false, "6.17.0-19-generic", "2.9.0+rocm7.0.2");
    fp.gpus.clear();
    // On the live machine no GPU means no GPU: GPU-specific entries do not apply.
    fp.source = "live".into();
    assert!(matched(&run(&fp, &[]), "RKB-013").is_none());
    // In pasted logs it only means the logs did not show one.
    fp.source = "triage".into();
    let matches = run(&fp, &[]);
    let m = matched(&matches, "RKB-013").expect("ROCm 7.0.x matches on versions alone");
    assert_eq!(m.status, MatchStatus::Suspected);
    assert!(m.unchecked.iter().any(|u| u.contains("no GPU facts")));
}

#[test]
fn arch_override_entry_respects_sibling_mappings() {
    let mut sibling = amd_host("gfx1031", false, "6.17.0-19-generic", "2.10.0+rocm7.1");
    sibling.env = env(&[("HSA_OVERRIDE_GFX_VERSION", "10.3.0")]);
    sibling.gpus[0].runtime_isa = Some("gfx1030".into());
    if let Some(torch) = sibling.python.as_mut().and_then(|p| p.torch.as_mut()) {
        torch.arch_list = vec!["gfx1030".into(), "gfx1100".into()];
    }
    assert!(matched(&run(&sibling, &[]), "RKB-010").is_none());

    let mut harmful = amd_host("gfx1151", true, "6.17.0-19-generic", "2.11.0+rocm7.2");
    harmful.env = env(&[("HSA_OVERRIDE_GFX_VERSION", "11.0.0")]);
    let error = result(
        "copy.h2d.pinned.small",
        0,
        Verdict::Error {
            message: "RuntimeError: HSA_STATUS_ERROR_INVALID_ISA".into(),
        },
    );
    let m = run(&harmful, &[error])
        .into_iter()
        .find(|m| m.entry.id == "RKB-010")
        .unwrap();
    assert_eq!(m.status, MatchStatus::Confirmed);
    assert!(
        m.held.iter().any(
            |h| h.contains("decodes to gfx1100, which differs from GPU 0's native ISA gfx1151")
        )
    );
}

#[test]
fn matches_are_ordered_confirmed_first() {
    let mut fp = strix_halo_mes_0x83();
    fp.kernel_events.push(KernelEvent {
        kind: "page_fault".into(),
        time: None,
        pci_bus: None,
        client: Some("CPF".into()),
        process: None,
        pid: None,
        library: None,
        details: Default::default(),
        line: "[gfxhub] page fault".into(),
    });
    let matches = run(&fp, &[]);
    assert!(matches.len() >= 2);
    assert_eq!(matches[0].status, MatchStatus::Confirmed);
    for pair in matches.windows(2) {
        assert!(pair[0].status <= pair[1].status);
    }
}
