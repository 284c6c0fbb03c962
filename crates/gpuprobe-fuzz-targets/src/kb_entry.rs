//! The `kb_entry` target: one knowledge-base entry file as `--kb DIR` loads it
//! (`validate::parse_entry` with the rules for a user's entries), and, when it validates,
//! the matcher applying it to a few real stacks and its rendering (`gpuprobe kb show`).

use std::sync::OnceLock;

use gpuprobe_detect::TriageInput;
use gpuprobe_kb::{Strictness, parse_entry};
use gpuprobe_model::Fingerprint;

/// Stacks an entry is matched against: empty, and what the checked-in fixtures of an AMD
/// APU, an NVIDIA server and a Windows AMD desktop triage to. Built once; triage per input
/// would cost more than the entry being fuzzed.
fn stacks() -> &'static [Fingerprint] {
    static STACKS: OnceLock<Vec<Fingerprint>> = OnceLock::new();
    STACKS.get_or_init(|| {
        let paste = |texts: &[&str]| {
            let inputs: Vec<TriageInput> = texts
                .iter()
                .map(|text| TriageInput {
                    name: "fixture".to_owned(),
                    text: (*text).to_owned(),
                })
                .collect();
            gpuprobe_detect::triage(&inputs).fingerprint
        };
        vec![
            Fingerprint::default(),
            paste(&[
                include_str!("../../../fixtures/rocminfo/gfx1151-rocm-issue5817.txt"),
                include_str!(
                    "../../../fixtures/amd-smi/gfx1151-strix-halo-inbox-kernel-rocm-issue5553.txt"
                ),
                include_str!(
                    "../../../fixtures/dmesg/gfx1151-pagefault-CPF-mes0x83-rocm-issue5724.txt"
                ),
                include_str!(
                    "../../../fixtures/collect_env/gfx1151-therock-nightly-rocm-issue5890.txt"
                ),
            ]),
            paste(&[
                include_str!("../../../fixtures/nvidia-smi/h100-q.txt"),
                include_str!("../../../fixtures/collect_env/h100-torch2.11-cu130.txt"),
            ]),
            paste(&[include_str!(
                "../../../fixtures/collect_env/windows-rx9070xt-gfx1201-hip6.4-rocm-issue5441.txt"
            )]),
        ]
    })
}

/// The file name the entry is read under: a user's entry must be named after its id, so
/// the id (when the text has one) names the file, and the fuzzer reaches the rules after
/// that one instead of failing it every time.
fn file_name(text: &str) -> String {
    text.parse::<toml::Table>()
        .ok()
        .and_then(|table| match table.get("id") {
            Some(toml::Value::String(id)) => Some(format!("{id}.toml")),
            _ => None,
        })
        .unwrap_or_else(|| "entry.toml".to_owned())
}

/// Validates one entry file.
///
/// Invariants: a rejected file gets at least one diagnostic, each naming the file and a
/// line and column inside it; an accepted entry renders, serialises to JSON, and matches or
/// not against every stack without failing.
pub fn kb_entry(data: &[u8]) {
    let Some(text) = crate::utf8(data) else {
        return;
    };
    let file = file_name(text);
    match parse_entry(&file, text, Strictness::User) {
        Ok(entry) => {
            gpuprobe_kb::render_entry(&entry);
            serde_json::to_string(&entry).expect("a valid entry serialises to JSON");
            for fp in stacks() {
                if let Some(found) = gpuprobe_kb::match_entry(&entry, fp, &[]) {
                    serde_json::to_string(&found.to_finding()).expect("a finding serialises");
                }
            }
        }
        Err(diagnostics) => {
            assert!(!diagnostics.is_empty(), "rejected without a diagnostic");
            let lines: Vec<&str> = text.split('\n').collect();
            for d in &diagnostics {
                assert_eq!(d.file, file);
                assert!(
                    (1..=lines.len()).contains(&d.line),
                    "diagnostic line {} outside the file's {} lines: {d}",
                    d.line,
                    lines.len()
                );
                let width = lines[d.line - 1].chars().count();
                assert!(
                    (1..=width + 1).contains(&d.column),
                    "diagnostic column {} outside line {} ({width} characters): {d}",
                    d.column,
                    d.line
                );
            }
        }
    }
}
