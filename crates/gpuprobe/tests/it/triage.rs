//! `triage` end to end: pasted collect_env output through the knowledge base and the lint.
//! A Windows paste must reach the Windows entries and rules; a Linux paste must not; a paste
//! from a machine without CUDA must not grow a GPU.

use std::path::{Path, PathBuf};

use gpuprobe_detect::{TriageInput, triage};
use gpuprobe_kb::{KnowledgeBase, MatchStatus, lint, match_all};
use gpuprobe_model::Fingerprint;

use crate::support::gpuprobe;

fn fixture_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(relative)
}

fn triaged(relative: &str) -> Fingerprint {
    let text = std::fs::read_to_string(fixture_path(relative)).expect("fixture");
    triage(&[TriageInput {
        name: relative.to_owned(),
        text,
    }])
    .fingerprint
}

const WINDOWS_GFX1201: &str = "collect_env/windows-rx9070xt-gfx1201-hip6.4-rocm-issue5441.txt";
const LINUX_GFX1151: &str = "collect_env/gfx1151-therock-nightly-rocm-issue5890.txt";
const CPU_ONLY: &str = "collect_env/cpu-only-cu121-no-gpu-vllm-issue4858.txt";

/// The RX 9070 XT (gfx1201) on Windows: RKB-004 (Windows, gfx1201) and RKB-023 (Windows
/// TheRock/HIP crashes) are listed with the OS condition checked, not merely unknown; the
/// Linux-only entries for the same GPU (RKB-003, kernel RKB-008, Secure Boot RKB-036) are not.
#[test]
fn windows_paste_lists_the_windows_kb_entries() {
    let fp = triaged(WINDOWS_GFX1201);
    let kb = KnowledgeBase::load_embedded().kb;
    let matches = match_all(&kb, &fp, &[]);
    let ids: Vec<&str> = matches.iter().map(|m| m.entry.id.as_str()).collect();
    for id in ["RKB-004", "RKB-023"] {
        let m = matches
            .iter()
            .find(|m| m.entry.id == id)
            .unwrap_or_else(|| panic!("{id} not listed: {ids:?}"));
        assert_eq!(m.status, MatchStatus::Suspected, "{id}");
        assert!(
            m.held.iter().any(|h| h == "OS is windows"),
            "{id}: {:?}",
            m.held
        );
        assert!(
            !m.unchecked.iter().any(|u| u.contains("operating system")),
            "{id}: {:?}",
            m.unchecked
        );
        assert_eq!(m.gpus, vec![0], "{id}");
    }
    for id in ["RKB-003", "RKB-008", "RKB-036"] {
        assert!(!ids.contains(&id), "{id} is Linux-only: {ids:?}");
    }
}

/// The Windows-only lint rules fire on the Windows paste once a ROCr variable is set, and
/// not on a Linux paste with the same setting.
#[test]
fn windows_only_lint_rules_fire_on_a_windows_paste_not_on_a_linux_one() {
    let with_env = |relative: &str| {
        let mut fp = triaged(relative);
        fp.env
            .insert("HSA_OVERRIDE_GFX_VERSION".to_owned(), "12.0.1".to_owned());
        fp.env.insert("HSA_ENABLE_SDMA".to_owned(), "0".to_owned());
        lint(&fp).into_iter().map(|f| f.id).collect::<Vec<String>>()
    };
    let windows = with_env(WINDOWS_GFX1201);
    for id in ["LINT-OVERRIDE-WINDOWS", "LINT-ENV-IGNORED-WINDOWS"] {
        assert!(windows.iter().any(|f| f == id), "{id}: {windows:?}");
    }
    let linux = with_env(LINUX_GFX1151);
    assert!(
        !linux.iter().any(|f| f.ends_with("-WINDOWS")),
        "Windows rules on a Linux paste: {linux:?}"
    );
}

/// `gpuprobe triage` on the Windows paste prints Windows and the two Windows entries.
#[test]
fn triage_command_on_a_windows_paste() {
    let output = gpuprobe()
        .arg("triage")
        .arg(fixture_path(WINDOWS_GFX1201))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("Microsoft Windows 11 Pro"), "{text}");
    assert!(text.contains("RKB-004"), "{text}");
    assert!(text.contains("RKB-023"), "{text}");
    assert!(!text.contains("RKB-008"), "{text}");
}

/// `gpuprobe triage` on a paste from a machine without CUDA: no `No CUDA` GPU or driver.
#[test]
fn triage_command_on_a_cpu_only_paste_shows_no_gpu() {
    let output = gpuprobe()
        .arg("triage")
        .arg("--json")
        .arg(fixture_path(CPU_ONLY))
        .output()
        .expect("runs");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let fp = &report["fingerprint"];
    assert_eq!(fp["gpus"], serde_json::json!([]), "{fp}");
    assert!(fp["nvidia"].is_null(), "{fp}");
    assert!(!fp.to_string().contains("No CUDA"), "{fp}");
}
