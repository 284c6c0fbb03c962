//! Broken knowledge-base files give errors that point at the file, line and column, and a
//! broken user file costs nothing else.

use gpuprobe_kb::KnowledgeBase;
use gpuprobe_kb::{Strictness, parse_entry};

const GOOD: &str = r#"id = "RKB-900"
title = "A test entry"
kind = "crash"
severity = "error"
layer = "runtime"
summary = "Something crashes."
citations = ["ROCm/ROCm#1"]

[conditions]
vendor = "amd"
arch = ["gfx1100"]
kernel = ">=6.18.2, <6.18.7"

[[confirm]]
probes = ["copy.h2d.pageable.tiny*"]
verdicts = ["fail"]
fail_classes = ["all_zeros"]

[[workarounds]]
description = "Copy through blit kernels"
kind = "env"
setting = "HSA_ENABLE_SDMA=0"
testable = true
"#;

/// Replaces `from` (which must occur once) and returns (text, 1-based line of the change).
fn broken(from: &str, to: &str) -> (String, usize) {
    assert_eq!(GOOD.matches(from).count(), 1, "{from}");
    let offset = GOOD.find(from).unwrap();
    let line = GOOD[..offset].matches('\n').count() + 1;
    (GOOD.replacen(from, to, 1), line)
}

fn errors(text: &str) -> Vec<gpuprobe_kb::Diagnostic> {
    parse_entry("kb/RKB-900-test.toml", text, Strictness::Shipped).expect_err("should not validate")
}

fn assert_error_at(text: &str, line: usize, words: &str) -> gpuprobe_kb::Diagnostic {
    let all = errors(text);
    let found = all
        .iter()
        .find(|d| d.line == line && d.message.contains(words))
        .unwrap_or_else(|| panic!("no error at line {line} mentioning {words:?}: {all:#?}"));
    assert_eq!(found.file, "kb/RKB-900-test.toml");
    assert!(found.column >= 1);
    assert!(
        found
            .to_string()
            .starts_with(&format!("kb/RKB-900-test.toml:{line}:"))
    );
    found.clone()
}

#[test]
fn the_good_entry_validates() {
    parse_entry("kb/RKB-900-test.toml", GOOD, Strictness::Shipped).unwrap();
}

#[test]
fn a_syntax_error_points_at_its_line() {
    let (text, line) = broken("title = \"A test entry\"", "title = \"A test entry");
    let found = errors(&text);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].line, line);
}

#[test]
fn an_unknown_field_is_reported_where_it_is() {
    let (text, line) = broken("severity = \"error\"", "sevrity = \"error\"");
    assert_error_at(&text, line, "sevrity");
}

#[test]
fn an_unknown_cost_key_is_reported_where_it_is() {
    // The cost is the model's `Cost`, which reads reports leniently; in an entry a typo
    // must still be an error, not a cost silently dropped.
    let (good, _) = broken(
        "testable = true",
        "cost = { needs_root = true, note = \"x\" }\ntestable = true",
    );
    let entry = parse_entry("kb/RKB-900-test.toml", &good, Strictness::Shipped).unwrap();
    let cost = &entry.workarounds[0].cost;
    assert!(cost.needs_root && !cost.needs_reboot);
    assert_eq!(cost.note.as_deref(), Some("x"));

    let (text, line) = broken(
        "testable = true",
        "cost = { needs_rot = true }\ntestable = true",
    );
    assert_error_at(&text, line, "needs_rot");
}

#[test]
fn an_unknown_kind_is_reported() {
    let (text, line) = broken("kind = \"crash\"", "kind = \"crashes\"");
    assert_error_at(&text, line, "crashes");
}

#[test]
fn an_unknown_verdict_is_reported() {
    let (text, line) = broken("verdicts = [\"fail\"]", "verdicts = [\"failed\"]");
    assert_error_at(&text, line, "failed");
}

#[test]
fn an_invalid_version_range_points_at_the_value() {
    let (text, line) = broken(
        "kernel = \">=6.18.2, <6.18.7\"",
        "kernel = \">=6.18.7, <6.18.2\"",
    );
    let found = assert_error_at(&text, line, "can never hold");
    assert_eq!(found.column, "kernel = ".len() + 1);
}

#[test]
fn a_bad_glob_points_at_the_pattern() {
    let (text, line) = broken(
        "probes = [\"copy.h2d.pageable.tiny*\"]",
        "probes = [\"copy.h2d.[pageable]\"]",
    );
    let found = assert_error_at(&text, line, "invalid probe pattern");
    assert_eq!(found.column, "probes = [".len() + 1);
}

#[test]
fn an_id_that_does_not_match_the_file_name_is_reported() {
    let (text, line) = broken("id = \"RKB-900\"", "id = \"RKB-901\"");
    assert_error_at(&text, line, "does not match the file name");
}

#[test]
fn empty_citations_are_refused() {
    let (text, line) = broken("citations = [\"ROCm/ROCm#1\"]", "citations = []");
    assert_error_at(&text, line, "citations must not be empty");
}

#[test]
fn folklore_workarounds_are_refused() {
    let (text, line) = broken(
        "setting = \"HSA_ENABLE_SDMA=0\"",
        "setting = \"HIP_DISABLE_IPC=1\"",
    );
    assert_error_at(&text, line, "does not exist");
    let (text, line) = broken(
        "setting = \"HSA_ENABLE_SDMA=0\"",
        "setting = \"HSA_OVERRIDE_GFX_VERSION=10.3.0\"",
    );
    assert_error_at(&text, line, "not an ISA-compatible sibling");
}

#[test]
fn testable_settings_must_be_in_the_catalogue() {
    let (text, line) = broken(
        "setting = \"HSA_ENABLE_SDMA=0\"",
        "setting = \"LD_PRELOAD=/tmp/x.so\"",
    );
    assert_error_at(&text, line, "not in kb/catalogue.toml");
}

#[test]
fn several_problems_are_all_reported() {
    let text = GOOD
        .replace("kernel = \">=6.18.2, <6.18.7\"", "kernel = \">=x\"")
        .replace("arch = [\"gfx1100\"]", "arch = [\"sm_90\"]");
    let found = errors(&text);
    assert!(found.len() >= 2, "{found:#?}");
    let lines: Vec<usize> = found.iter().map(|d| d.line).collect();
    assert!(lines.contains(&11) && lines.contains(&12), "{lines:?}");
}

#[test]
fn duplicate_ids_name_both_files() {
    let loaded = KnowledgeBase::from_sources([("RKB-900-a.toml", GOOD), ("RKB-900-b.toml", GOOD)]);
    assert_eq!(loaded.kb.len(), 1);
    assert_eq!(loaded.diagnostics.len(), 1);
    let message = loaded.diagnostics[0].to_string();
    assert!(message.starts_with("RKB-900-b.toml:1:"), "{message}");
    assert!(message.contains("RKB-900-a.toml"), "{message}");
}

#[test]
fn a_broken_user_file_loses_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let user = GOOD.replace("RKB-900", "SITE-001");
    std::fs::write(dir.path().join("SITE-001-ok.toml"), &user).unwrap();
    let bad = user
        .replace("SITE-001", "SITE-002")
        .replace("kind = \"crash\"", "kind = ");
    std::fs::write(dir.path().join("SITE-002-broken.toml"), &bad).unwrap();
    std::fs::write(dir.path().join("README.md"), "not an entry").unwrap();

    let loaded = KnowledgeBase::load_with_dir(dir.path()).unwrap();
    let embedded = KnowledgeBase::embedded().len();
    assert_eq!(loaded.kb.len(), embedded + 1);
    assert!(loaded.kb.get("SITE-001").is_some());
    assert_eq!(loaded.diagnostics.len(), 1, "{:#?}", loaded.diagnostics);
    let diagnostic = &loaded.diagnostics[0];
    assert!(diagnostic.file.ends_with("SITE-002-broken.toml"));
    assert_eq!(diagnostic.line, 3);
}

#[test]
fn a_missing_user_directory_is_an_error() {
    let missing = std::path::Path::new("/nonexistent/gpuprobe-kb-test");
    assert!(KnowledgeBase::load_with_dir(missing).is_err());
}
