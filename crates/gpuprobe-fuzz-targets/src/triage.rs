//! The `triage` target: what `gpuprobe triage FILE` does with a paste. Segmenting the paste
//! and every tool parser behind it (rocminfo, amd-smi, rocm-smi, nvidia-smi, collect_env,
//! dmesg/journalctl, amdgpu_firmware_info, dkms, mokutil, os-release, uname, cmdline,
//! module parameters), then the config lint and the knowledge-base matcher over the
//! fingerprint, as the command runs them.

use std::sync::OnceLock;

use gpuprobe_detect::{LineRange, TriageInput};
use gpuprobe_kb::KnowledgeBase;
use gpuprobe_model::{Finding, Fingerprint};

/// The shipped knowledge base, validated once: loading it per input would cost more than
/// the triage being fuzzed.
fn knowledge_base() -> &'static KnowledgeBase {
    static KB: OnceLock<KnowledgeBase> = OnceLock::new();
    KB.get_or_init(KnowledgeBase::embedded)
}

/// Triage of one paste, then lint and match over its fingerprint.
///
/// Invariants: every reported line range lies inside the paste and runs forwards; the
/// fingerprint says `source = "triage"`, serialises to JSON and reads back unchanged (what
/// `triage --json` and a report carry); the readable render, the lint, the matcher and the
/// findings' JSON do not fail.
pub fn triage(data: &[u8]) {
    // Pastes are read lossily, as `gpuprobe triage` does.
    let text = String::from_utf8_lossy(data).into_owned();
    // Triage numbers lines after dropping a byte-order mark, splitting on `\n` only.
    let line_count = text
        .strip_prefix('\u{feff}')
        .unwrap_or(&text)
        .split('\n')
        .count();
    let outcome = gpuprobe_detect::triage(&[TriageInput {
        name: "fuzz".to_owned(),
        text,
    }]);

    let check_range = |range: LineRange, what: &str| {
        assert!(
            1 <= range.first && range.first <= range.last && range.last <= line_count,
            "{what} range {range:?} outside the paste's {line_count} lines"
        );
    };
    for block in &outcome.recognized {
        check_range(block.lines, "recognized");
    }
    for skipped in &outcome.skipped {
        check_range(skipped.lines, "skipped");
    }

    let fp = &outcome.fingerprint;
    assert_eq!(fp.source, "triage");
    let json = serde_json::to_string(fp).expect("a triage fingerprint serialises to JSON");
    let back: Fingerprint =
        serde_json::from_str(&json).expect("a triage fingerprint's JSON reads back");
    assert_eq!(&back, fp, "a triage fingerprint changes through JSON");
    serde_json::to_string(&outcome.recognized).expect("recognized blocks serialise");
    serde_json::to_string(&outcome.skipped).expect("skipped ranges serialise");
    gpuprobe_detect::render_text(fp);

    let mut findings: Vec<Finding> = gpuprobe_kb::lint(fp);
    let matches = gpuprobe_kb::match_all(knowledge_base(), fp, &[]);
    findings.extend(matches.iter().map(|m| m.to_finding()));
    gpuprobe_kb::render_matches(&matches);
    serde_json::to_string(&findings).expect("findings serialise to JSON");
}
