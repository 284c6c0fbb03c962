//! `triage` through the knowledge base: a fault confirms an entry only with the entry's own
//! signature, and a paste lists only the entries its facts allow, each saying which of its
//! conditions matched and which the paste does not show.

use std::path::{Path, PathBuf};

use gpuprobe_detect::{TriageInput, triage};
use gpuprobe_kb::{KnowledgeBase, MatchStatus, match_all};
use gpuprobe_model::Fingerprint;

use crate::support::gpuprobe;

fn fixture_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(relative)
}

const ROCMINFO_GFX1100: &str = "rocminfo/gfx1100-rx7900xtx-rocm-issue3949.txt";
const JOURNAL_SDMA0: &str = "journalctl/gfx1100-pagefault-SDMA0-kernel6.18-rocm-issue5051.txt";

/// The kernel 6.18 SDMA0 fault of the journal fixture on a gfx1201 (the rocminfo paste with
/// its ISA renamed, the fault moved onto that GPU) with ROCm 7.1.1, which the paste does
/// not show and the test sets; `client` replaces the faulting client.
fn gfx1201_fault_paste(client: &str) -> Fingerprint {
    let read = |relative: &str| std::fs::read_to_string(fixture_path(relative)).expect("fixture");
    // The chip id and name move to an RX 9070 XT (0x7550) too: a gfx1201 agent on a
    // gfx1100 chip would be an override at work, which triage reports as such.
    let rocminfo = read(ROCMINFO_GFX1100)
        .replace("gfx1100", "gfx1201")
        .replace("29772(0x744c)", "30032(0x7550)")
        .replace("Radeon RX 7900 XTX", "Radeon RX 9070 XT");
    let journal = read(JOURNAL_SDMA0)
        .replace("0000:0b:00.0", "0000:03:00.0")
        .replace("SDMA0 (0xd)", client);
    let mut fp = triage(&[
        TriageInput {
            name: "rocminfo".to_owned(),
            text: rocminfo,
        },
        TriageInput {
            name: "journal".to_owned(),
            text: journal,
        },
    ])
    .fingerprint;
    fp.rocm.get_or_insert_with(Default::default).version = Some("7.1.1".to_owned());
    fp
}

/// A page fault of another client (SDMA0, the kernel regression of RKB-008) on gfx1201 is
/// not RKB-022, whose source names the TCP client: the entry stays suspected. Its own TCP
/// fault confirms it.
#[test]
fn a_gfx1201_sdma0_page_fault_paste_does_not_confirm_rkb022() {
    let kb = KnowledgeBase::load_embedded().kb;
    let fp = gfx1201_fault_paste("SDMA0 (0xd)");
    assert!(
        fp.kernel_events
            .iter()
            .any(|e| e.client.as_deref() == Some("SDMA0")),
        "{:?}",
        fp.kernel_events
    );
    let matches = match_all(&kb, &fp, &[]);
    let rkb022 = matches
        .iter()
        .find(|m| m.entry.id == "RKB-022")
        .expect("gfx1201 with ROCm 7.1.1 matches RKB-022's conditions");
    assert!(rkb022.unchecked.is_empty(), "{:?}", rkb022.unchecked);
    assert_eq!(rkb022.status, MatchStatus::Suspected, "{rkb022:?}");
    assert!(rkb022.logs.is_empty(), "{:?}", rkb022.logs);

    let tcp = gfx1201_fault_paste("TCP (0x8)");
    let matches = match_all(&kb, &tcp, &[]);
    let rkb022 = matches.iter().find(|m| m.entry.id == "RKB-022").unwrap();
    assert_eq!(rkb022.status, MatchStatus::Confirmed, "{rkb022:?}");
}

/// Whether an arch glob of an entry (`gfx1100`, `gfx11*`) covers an ISA.
fn arch_covers(pattern: &str, isa: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => isa.starts_with(prefix),
        None => pattern == isa,
    }
}

/// A rocminfo paste of a gfx1100 lists no entry whose arch condition excludes gfx1100, and
/// every suspected entry says, in the JSON and on the terminal, which conditions matched and
/// which the paste does not show.
#[test]
fn a_rocminfo_paste_lists_only_its_arch_and_says_what_matched_and_what_is_unknown() {
    let kb = KnowledgeBase::load_embedded().kb;
    let output = gpuprobe()
        .args(["triage", "--json"])
        .arg(fixture_path(ROCMINFO_GFX1100))
        .output()
        .expect("runs");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let findings: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["source"] == "kb")
        .collect();
    assert!(!findings.is_empty(), "{report}");
    for finding in &findings {
        let id = finding["id"].as_str().unwrap();
        let entry = kb.get(id).unwrap();
        assert!(
            entry.conditions.arch.is_empty()
                || entry
                    .conditions
                    .arch
                    .iter()
                    .any(|p| arch_covers(p, "gfx1100")),
            "{id} is for {:?}, not gfx1100",
            entry.conditions.arch
        );
        if finding["confidence"] != "suspected" {
            continue;
        }
        let evidence = finding["evidence"].as_array().unwrap();
        let of_kind = |kind: &str| -> Vec<&str> {
            evidence
                .iter()
                .filter(|e| e["kind"] == kind)
                .filter_map(|e| e["text"].as_str())
                .collect()
        };
        let explanation = finding["explanation"].as_str().unwrap();
        assert!(!of_kind("condition").is_empty(), "{id}: {finding}");
        assert!(explanation.contains("Matched: "), "{id}: {explanation}");
        // Facts a rocminfo paste never shows: versions, Secure Boot.
        let needs_more = entry.conditions.kernel.is_some()
            || entry.conditions.rocm.is_some()
            || entry.conditions.torch.is_some()
            || entry.conditions.secure_boot.is_some();
        if needs_more {
            let unknown = of_kind("absent");
            assert!(
                !unknown.is_empty() && unknown.iter().all(|u| u.contains("not shown in the logs")),
                "{id}: {unknown:?}"
            );
            assert!(
                explanation.contains("Could not check: "),
                "{id}: {explanation}"
            );
        }
    }

    let output = gpuprobe()
        .arg("triage")
        .arg(fixture_path(ROCMINFO_GFX1100))
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let findings_text = text.split("\nfindings\n").nth(1).expect("findings");
    let rkb008: Vec<&str> = findings_text
        .lines()
        .skip_while(|l| !l.contains("[RKB-008]"))
        .take(4)
        .collect();
    assert!(rkb008.len() == 4, "{findings_text}");
    assert!(
        rkb008[1].trim_start().starts_with("matched: ")
            && rkb008[1].contains("native ISA gfx1100 matches gfx11*"),
        "{rkb008:?}"
    );
    assert!(
        rkb008[2].trim_start().starts_with("not checked: ")
            && rkb008[2].contains("kernel release not shown in the logs"),
        "{rkb008:?}"
    );
    assert!(
        !text.contains("conditions hold but no probe result confirms it"),
        "{text}"
    );
}

/// An amd-smi dashboard names its GPUs but not their ISA: the ISA its marketing name belongs
/// to (RX 9070 XT → gfx1201) is taken, said so in `extra`, and the entries of other
/// architectures (Strix Halo, Krackan Point, RDNA3) are no longer suspected.
#[test]
fn an_amd_smi_paste_without_isa_suspects_only_its_own_architectures_issues() {
    let text = std::fs::read_to_string(fixture_path(
        "amd-smi/2x-rx9070xt-gfx1201-dkms-rocm-issue5812.txt",
    ))
    .expect("fixture");
    let fp = triage(&[TriageInput {
        name: "amd-smi".to_owned(),
        text,
    }])
    .fingerprint;
    assert!(!fp.gpus.is_empty());
    for gpu in &fp.gpus {
        assert_eq!(gpu.native_isa.as_deref(), Some("gfx1201"), "{gpu:?}");
    }
    assert!(
        fp.extra
            .iter()
            .any(|(k, v)| k.ends_with(".native_isa_from") && v.contains("RX 9070 XT")),
        "{:?}",
        fp.extra
    );
    let kb = KnowledgeBase::load_embedded().kb;
    for m in match_all(&kb, &fp, &[]) {
        let arch = &m.entry.conditions.arch;
        assert!(
            arch.is_empty() || gpuprobe_kb::first_match(arch, "gfx1201").is_some(),
            "{} ({arch:?}) listed for a gfx1201 paste",
            m.entry.id
        );
    }
}
