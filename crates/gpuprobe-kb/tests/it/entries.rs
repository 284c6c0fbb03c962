//! Every shipped entry validates, and the shipped set is exactly the `RKB-*.toml` files in kb/.

use std::collections::BTreeSet;

use gpuprobe_kb::KnowledgeBase;
use gpuprobe_kb::embedded_sources;

#[test]
fn every_embedded_entry_validates() {
    let loaded = KnowledgeBase::load_embedded();
    let problems: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
    assert!(
        problems.is_empty(),
        "invalid shipped entries:\n{}",
        problems.join("\n")
    );
    assert_eq!(loaded.kb.len(), embedded_sources().len());
}

#[test]
fn every_rkb_file_in_kb_is_shipped_once() {
    let kb_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kb");
    let files: BTreeSet<String> = std::fs::read_dir(&kb_dir)
        .unwrap()
        .map(|item| item.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("RKB-") && name.ends_with(".toml"))
        .collect();
    let kb = KnowledgeBase::embedded();
    assert_eq!(
        kb.len(),
        files.len(),
        "kb/ holds {} RKB-*.toml files but {} entries are embedded",
        files.len(),
        kb.len()
    );
    let ids: BTreeSet<&str> = kb.entries().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids.len(),
        kb.len(),
        "duplicate ids among the shipped entries"
    );
    for id in &ids {
        let number = id
            .strip_prefix("RKB-")
            .expect("shipped ids start with RKB-");
        assert!(
            number.len() >= 3 && number.chars().all(|c| c.is_ascii_digit()),
            "{id} is not RKB-NNN"
        );
        assert!(
            files
                .iter()
                .any(|f| f.starts_with(&format!("{id}-")) || *f == format!("{id}.toml")),
            "{id} has no file of its own in kb/"
        );
    }
}

#[test]
fn entries_carry_the_research_citations() {
    let kb = KnowledgeBase::embedded();
    let rkb005 = kb.get("RKB-005").unwrap();
    assert!(
        rkb005
            .citations
            .iter()
            .any(|c| c == "ROCm/ROCm#5724 (AMD TLDR comment 2025-12-11)")
    );
    assert!(
        rkb005
            .citations
            .iter()
            .any(|c| c == "https://github.com/ROCm/ROCm/issues/5724")
    );
    for entry in kb.entries() {
        assert!(!entry.citations.is_empty(), "{} has no citation", entry.id);
    }
}

#[test]
fn folklore_is_never_offered_as_a_workaround() {
    let forbidden = [
        "HIP_DISABLE_IPC",
        "PYTORCH_MAX_SPLIT_SIZE_MB",
        "gtt_size",
        "gttsize",
        "amd_iommu=pt",
        "mtype_local",
        "noretry=0",
        "vm_update_mode",
    ];
    for entry in KnowledgeBase::embedded().entries() {
        for workaround in &entry.workarounds {
            let setting = workaround.setting.as_deref().unwrap_or("");
            for word in forbidden {
                assert!(!setting.contains(word), "{} offers {setting}", entry.id);
            }
            if setting.starts_with("HSA_OVERRIDE_GFX_VERSION=11.0.0") {
                panic!("{} offers the 11.0.0 override", entry.id);
            }
        }
    }
}

#[test]
fn mcbp_workaround_is_marked_anecdotal() {
    let kb = KnowledgeBase::embedded();
    let workaround = kb
        .get("RKB-008")
        .unwrap()
        .workarounds
        .iter()
        .find(|w| w.setting.as_deref() == Some("amdgpu.mcbp=0"))
        .unwrap();
    assert_eq!(
        workaround.evidence,
        gpuprobe_kb::WorkaroundEvidence::Anecdotal
    );
}

#[test]
fn testable_workarounds_are_catalogue_settings() {
    for entry in KnowledgeBase::embedded().entries() {
        for workaround in entry.workarounds.iter().filter(|w| w.testable) {
            let setting = workaround.setting.as_deref().unwrap();
            assert!(
                gpuprobe_kb::is_allowed_setting(setting),
                "{}: {setting}",
                entry.id
            );
        }
    }
}

#[test]
fn the_entries_from_amd_trackers_carry_a_url_and_their_deciding_sentence() {
    let kb = KnowledgeBase::embedded();
    for id in [
        "RKB-040", "RKB-041", "RKB-042", "RKB-043", "RKB-044", "RKB-045", "RKB-047", "RKB-048",
    ] {
        let entry = kb.get(id).unwrap_or_else(|| panic!("{id} is shipped"));
        assert!(
            entry
                .citations
                .iter()
                .any(|c| c.starts_with("https://github.com/")),
            "{id} cites no URL"
        );
        assert!(
            entry.notes.is_some(),
            "{id} keeps the deciding sentence in notes"
        );
    }
}

#[test]
fn workarounds_the_sources_contradict_are_not_offered_as_cures() {
    use gpuprobe_kb::WorkaroundEvidence;
    let kb = KnowledgeBase::embedded();
    let settings = |id: &str| -> Vec<String> {
        kb.get(id)
            .unwrap()
            .workarounds
            .iter()
            .filter_map(|w| w.setting.clone())
            .collect()
    };
    // ROCm/ROCm#6595: both GEMM backends corrupt large-M fp32 GEMMs.
    assert!(
        !settings("RKB-014")
            .iter()
            .any(|s| s.starts_with("TORCH_BLAS_PREFER_HIPBLASLT")),
        "RKB-014 offers a backend switch"
    );
    // ROCm/MIOpen#3540: the implicit-GEMM solvers work; GEMM and direct solvers fault.
    assert!(
        !settings("RKB-025")
            .iter()
            .any(|s| s.starts_with("MIOPEN_DEBUG_CONV_IMPLICIT_GEMM")),
        "RKB-025 turns off solvers that work"
    );
    // unslothai/unsloth#3385: NaN even when forcing fp32.
    for w in &kb.get("RKB-019").unwrap().workarounds {
        assert!(!w.description.contains("fp16 or fp32"), "{}", w.description);
        if w.description.contains("force-fp32") {
            assert!(
                !matches!(
                    w.evidence,
                    WorkaroundEvidence::Documented | WorkaroundEvidence::Reported
                ),
                "RKB-019 offers fp32 as a cure: {}",
                w.description
            );
        }
    }
    // AMD's own A/B: HSA_ENABLE_SDMA=0 reduces the gfx942 hang, it does not remove it.
    let sdma = kb
        .get("RKB-045")
        .unwrap()
        .workarounds
        .iter()
        .find(|w| w.setting.as_deref() == Some("HSA_ENABLE_SDMA=0"))
        .unwrap();
    assert_eq!(sdma.evidence, WorkaroundEvidence::Debug);
}

#[test]
fn rkb005_dates_its_remove_the_dkms_firmware_advice() {
    let kb = KnowledgeBase::embedded();
    let remove = kb
        .get("RKB-005")
        .unwrap()
        .workarounds
        .iter()
        .find(|w| w.description.contains("amdgpu-dkms-firmware"))
        .unwrap();
    assert!(remove.description.contains("2025-10-24"));
    assert!(remove.description.contains("2025-12-01"));
}

#[test]
fn a_remove_queue_mes_failure_confirms_rkb044_on_gfx1103() {
    use gpuprobe_kb::{MatchStatus, match_all};
    use gpuprobe_model::KernelEvent;

    let mut fp = crate::fixtures::amd_host("gfx1103", true, "6.17.0-19-generic", "2.11.0+rocm7.2");
    let kb = KnowledgeBase::embedded();
    let suspected = match_all(&kb, &fp, &[]);
    let m = suspected.iter().find(|m| m.entry.id == "RKB-044").unwrap();
    assert_eq!(m.status, MatchStatus::Suspected);

    fp.kernel_events.push(KernelEvent {
        kind: "mes_failure".into(),
        time: Some("134827.522445".into()),
        pci_bus: Some("0000:c8:00.0".into()),
        client: None,
        process: None,
        pid: None,
        library: None,
        details: Default::default(),
        line: "amdgpu 0000:c8:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE".into(),
    });
    let matches = match_all(&kb, &fp, &[]);
    let m = matches.iter().find(|m| m.entry.id == "RKB-044").unwrap();
    assert_eq!(m.status, MatchStatus::Confirmed);

    let other = crate::fixtures::amd_host("gfx1100", false, "6.17.0-19-generic", "2.11.0+rocm7.2");
    assert!(
        !match_all(&kb, &other, &[])
            .iter()
            .any(|m| m.entry.id == "RKB-044")
    );
}

#[test]
fn rkb042_needs_expandable_segments_and_is_confirmed_by_the_expandable_probe_hanging() {
    use gpuprobe_kb::{MatchStatus, match_all};
    use gpuprobe_model::Verdict;

    let kb = KnowledgeBase::embedded();
    let mut fp = crate::fixtures::amd_host("gfx1201", false, "6.12.100", "2.12.0+rocm7.14.0");
    assert!(
        !match_all(&kb, &fp, &[])
            .iter()
            .any(|m| m.entry.id == "RKB-042")
    );

    fp.env = crate::fixtures::env(&[("PYTORCH_ALLOC_CONF", "expandable_segments:True")]);
    let hang =
        crate::fixtures::result("alloc.expandable.h2d", 0, Verdict::Hang { timeout_s: 60.0 });
    let matches = match_all(&kb, &fp, &[hang]);
    let m = matches.iter().find(|m| m.entry.id == "RKB-042").unwrap();
    assert_eq!(m.status, MatchStatus::Confirmed);
}

#[test]
fn rkb048_needs_a_rocm_7_15_torch_of_2_14_or_later() {
    use gpuprobe_kb::match_all;

    let kb = KnowledgeBase::embedded();
    let hit = |torch: &str| {
        let fp = crate::fixtures::amd_host("gfx1151", true, "6.17.0-40-generic", torch);
        match_all(&kb, &fp, &[])
            .iter()
            .any(|m| m.entry.id == "RKB-048")
    };
    assert!(hit("2.14.0a0+rocm7.15.0a20260713"));
    assert!(!hit("2.12.0+rocm7.15.0a20260626"));
    assert!(!hit("2.14.0a0+rocm7.13.0a20260411"));
}
