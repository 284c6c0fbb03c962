//! Plain-text renderings for `kb list`, `kb show` and `kb match`.

use gpuprobe_kb::{KnowledgeBase, match_all, render_entry, render_list, render_matches};

use crate::fixtures::{amd_host, h100_host};

#[test]
fn the_list_names_every_entry() {
    let kb = KnowledgeBase::embedded();
    let text = render_list(&kb);
    for entry in kb.entries() {
        assert!(text.contains(&entry.id), "{} missing", entry.id);
    }
    assert!(text.contains(&format!("{} known issues", kb.len())));
}

#[test]
fn an_entry_shows_conditions_probes_workarounds_and_citations() {
    let kb = KnowledgeBase::embedded();
    let text = render_entry(kb.get("RKB-001").unwrap());
    assert!(text.starts_with("RKB-001  "));
    assert!(text.contains("arch (native ISA)     gfx11*") || text.contains("gfx11*"));
    assert!(text.contains("copy.h2d.pageable.tiny*"));
    assert!(text.contains("while (controls)"));
    assert!(text.contains("Pin host buffers"));
    assert!(text.contains("ROCm/rocm-systems PR #10639"));
    let rkb008 = render_entry(kb.get("RKB-008").unwrap());
    assert!(rkb008.contains("amdgpu.mcbp=0") && rkb008.contains("anecdotal"));
}

#[test]
fn matches_render_with_their_reasons() {
    let fp = amd_host("gfx1100", false, "6.18.3", "2.10.0+rocm7.1");
    let matches = match_all(&KnowledgeBase::embedded(), &fp, &[]);
    let text = render_matches(&matches);
    assert!(text.contains("RKB-008"));
    assert!(text.contains("✓ GPU 0 native ISA gfx1100 matches gfx11*"));
    assert!(text.contains("[SUSPECTED]"));
    assert!(text.contains("suspected only"));
    let mut older_torch = h100_host();
    if let Some(torch) = older_torch.python.as_mut().and_then(|p| p.torch.as_mut()) {
        // Below every torch range of the knowledge base.
        torch.version = "2.2.0+cu121".into();
    }
    assert_eq!(
        render_matches(&match_all(&KnowledgeBase::embedded(), &older_torch, &[])),
        "no known issue matches this stack\n"
    );
}
