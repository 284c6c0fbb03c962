//! Every shipped entry validates, and the set is what the research supports.

use std::collections::BTreeSet;

use gpuprobe_kb::KnowledgeBase;
use gpuprobe_kb::kb::embedded_sources;

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
fn at_least_25_distinct_research_entries_are_shipped() {
    let kb = KnowledgeBase::embedded();
    assert!(kb.len() >= 25, "only {} entries", kb.len());
    let ids: BTreeSet<&str> = kb.entries().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), kb.len());
    for id in &ids {
        let number: u32 = id.trim_start_matches("RKB-").parse().unwrap();
        assert!(
            (1..=37).contains(&number),
            "{id} is not from the research table"
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
        gpuprobe_kb::entry::WorkaroundEvidence::Anecdotal
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
