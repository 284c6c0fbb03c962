//! The knowledge base names native probes by id patterns, and the native probes live in
//! gpuprobe-gpu, which the knowledge base's own crate cannot see. Here both are in reach:
//! every `native.*` pattern of a shipped entry must name a native probe this build has, or
//! the entry could never be confirmed, controlled or contradicted through it.

use gpuprobe_kb::KnowledgeBase;
use gpuprobe_kb::wildcard_matches;

#[test]
fn every_native_pattern_in_the_knowledge_base_names_a_native_probe() {
    let ids: Vec<String> = gpuprobe_gpu::native_catalog()
        .into_iter()
        .map(|spec| spec.id.to_string())
        .collect();
    assert!(!ids.is_empty());
    let mut dead = Vec::new();
    for entry in KnowledgeBase::embedded().entries() {
        let blocks = entry
            .confirm
            .iter()
            .chain(&entry.control)
            .chain(&entry.contradict);
        for pattern in blocks.flat_map(|block| &block.probes) {
            if pattern.starts_with("native.") && !ids.iter().any(|id| wildcard_matches(pattern, id))
            {
                dead.push(format!("{}: {pattern}", entry.id));
            }
        }
    }
    assert!(
        dead.is_empty(),
        "patterns that match no native probe (ids: {ids:?}): {dead:?}"
    );
}
