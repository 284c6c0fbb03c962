//! Only evidence with an entry's own signature confirms it: a page fault of any client, a
//! catch-all "Memory access fault", or a hang of any probe has many causes and only raises
//! suspicion. Workarounds whose sources do not show a cure never read as one.

use gpuprobe_kb::{KbMatch, KnowledgeBase, MatchStatus, match_all, render_entry, render_matches};
use gpuprobe_model::KernelEvent;
use gpuprobe_model::{Confidence, Fingerprint, ProbeResult, Verdict};

use crate::fixtures::{amd_host, result};

/// A gfx1201 entry with a `logs` pattern of each kind: an event kind alone, and a faulting
/// client.
const KIND_ONLY: &str = r#"
id = "RKB-901"
title = "Any page fault on gfx1201"
kind = "crash"
severity = "error"
layer = "system"
summary = "A test entry whose log pattern names no client."
citations = ["test"]

[conditions]
vendor = "amd"
arch = ["gfx1201"]
os = ["linux"]

[[logs]]
kind = "page_fault"

[[workarounds]]
description = "Disable the thing"
kind = "other"

[[workarounds]]
description = "Install the fixed firmware"
kind = "firmware"
evidence = "documented"
"#;

const WITH_CLIENT: &str = r#"
id = "RKB-902"
title = "SDMA0 page faults on gfx1201"
kind = "crash"
severity = "error"
layer = "system"
summary = "A test entry whose log pattern names the faulting client."
citations = ["test"]

[conditions]
vendor = "amd"
arch = ["gfx1201"]
os = ["linux"]

[[logs]]
kind = "page_fault"
client = "SDMA0"
"#;

const CATCH_ALL: &str = r#"
id = "RKB-903"
title = "MES hang on gfx1201"
kind = "crash"
severity = "error"
layer = "system"
summary = "A test entry with a catch-all probe pattern."
citations = ["test"]

[conditions]
vendor = "amd"
arch = ["gfx1201"]
os = ["linux"]

[[confirm]]
probes = ["*"]
verdicts = ["crash", "error"]
message_contains = ["MES failed to respond", "Memory access fault"]
"#;

fn kb() -> KnowledgeBase {
    let loaded = KnowledgeBase::from_sources([
        ("RKB-901-kind-only.toml", KIND_ONLY),
        ("RKB-902-with-client.toml", WITH_CLIENT),
        ("RKB-903-catch-all.toml", CATCH_ALL),
    ]);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    loaded.kb
}

fn page_fault(client: &str) -> KernelEvent {
    KernelEvent {
        kind: "page_fault".into(),
        time: Some("18:55:45".into()),
        pci_bus: Some("0000:0b:00.0".into()),
        client: Some(client.into()),
        process: Some("python".into()),
        pid: Some(91762),
        library: None,
        details: Default::default(),
        line:
            "amdgpu 0000:0b:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32792)"
                .into(),
    }
}

fn gfx1201_with(events: Vec<KernelEvent>) -> Fingerprint {
    let mut fp = amd_host("gfx1201", false, "6.18.3", "2.10.0+rocm7.1");
    fp.kernel_events = events;
    fp
}

fn find<'a>(matches: &'a [KbMatch], id: &str) -> &'a KbMatch {
    matches
        .iter()
        .find(|m| m.entry.id == id)
        .unwrap_or_else(|| panic!("{id} should match"))
}

#[test]
fn a_page_fault_without_the_entrys_signature_does_not_confirm() {
    let matches = match_all(&kb(), &gfx1201_with(vec![page_fault("SDMA0")]), &[]);

    let kind_only = find(&matches, "RKB-901");
    assert_eq!(kind_only.status, MatchStatus::Suspected, "{kind_only:?}");
    assert!(kind_only.logs.is_empty(), "{:?}", kind_only.logs);
    let finding = kind_only.to_finding();
    assert_eq!(finding.confidence, Confidence::Suspected);
    assert!(
        finding
            .explanation
            .contains("without the issue's own signature"),
        "{}",
        finding.explanation
    );
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.kind == "log" && e.text.starts_with("seen, without this issue's signature")),
        "{:?}",
        finding.evidence
    );
    assert!(!finding.next_steps.iter().any(|s| s == "gpuprobe fix"));

    // The entry that names the faulting client is confirmed by the same event.
    let with_client = find(&matches, "RKB-902");
    assert_eq!(
        with_client.status,
        MatchStatus::Confirmed,
        "{with_client:?}"
    );
    assert_eq!(with_client.logs.len(), 1);

    // Another client's fault does not confirm it either.
    let matches = match_all(&kb(), &gfx1201_with(vec![page_fault("CPF")]), &[]);
    assert_eq!(find(&matches, "RKB-902").status, MatchStatus::Suspected);
}

#[test]
fn a_catch_all_memory_access_fault_does_not_confirm_but_the_entrys_own_message_does() {
    let crash = |message: &str| -> ProbeResult {
        result(
            "nn.vae.encode.bf16",
            0,
            Verdict::Crash {
                signal: Some(6),
                exit_code: None,
                message: message.into(),
            },
        )
    };
    let fp = gfx1201_with(Vec::new());
    let generic = crash(
        "Memory access fault by GPU node-1 (Agent handle: 0x55) on address 0x7f00. Reason: Page not present or supervisor privilege.",
    );
    let matches = match_all(&kb(), &fp, std::slice::from_ref(&generic));
    let m = find(&matches, "RKB-903");
    assert_eq!(m.status, MatchStatus::Suspected, "{m:?}");
    assert!(m.confirming.is_empty());
    assert!(
        m.to_finding()
            .evidence
            .iter()
            .any(|e| e.text.starts_with("seen, without this issue's signature")),
        "{m:?}"
    );

    let own = crash("amdgpu: MES failed to respond to msg=REMOVE_QUEUE");
    let matches = match_all(&kb(), &fp, &[own]);
    let m = find(&matches, "RKB-903");
    assert_eq!(m.status, MatchStatus::Confirmed, "{m:?}");
    assert_eq!(m.confirming.len(), 1);
}

/// The shipped entries that a page fault used to confirm: RKB-022 needs the TCP client of
/// its source, RKB-035 and RKB-036 have no signature at all.
#[test]
fn shipped_fault_entries_need_their_own_signature() {
    let kb = KnowledgeBase::embedded();
    let sdma = match_all(&kb, &gfx1201_with(vec![page_fault("SDMA0")]), &[]);
    let rkb022 = find(&sdma, "RKB-022");
    assert_eq!(rkb022.status, MatchStatus::Suspected, "{rkb022:?}");
    assert!(rkb022.logs.is_empty(), "{:?}", rkb022.logs);

    let tcp = match_all(&kb, &gfx1201_with(vec![page_fault("TCP")]), &[]);
    assert_eq!(find(&tcp, "RKB-022").status, MatchStatus::Confirmed);

    // RKB-035 and RKB-036: a memory access fault in a probe never confirms them.
    let mut fp = gfx1201_with(vec![page_fault("SDMA0")]);
    fp.host.container = Some("docker".into());
    fp.host.uid = Some(1001);
    fp.host.secure_boot = Some(true);
    if let Some(driver) = fp.amdgpu.as_mut() {
        driver.source = gpuprobe_model::DriverSource::Dkms;
    }
    let fault = result(
        "copy.h2d.pinned.small",
        0,
        Verdict::Crash {
            signal: Some(6),
            exit_code: None,
            message: "Memory access fault by GPU node-1 (Agent handle: 0x5de975b3cc80) on address 0x799bfc063000. Reason: Page not present or supervisor privilege.".into(),
        },
    );
    let matches = match_all(&kb, &fp, &[fault]);
    for id in ["RKB-022", "RKB-035", "RKB-036"] {
        let m = find(&matches, id);
        assert_eq!(m.status, MatchStatus::Suspected, "{id}: {m:?}");
        assert!(m.confirming.is_empty() && m.logs.is_empty(), "{id}: {m:?}");
    }
}

#[test]
fn unproven_workarounds_read_as_reported_never_as_a_cure() {
    let matches = match_all(&kb(), &gfx1201_with(vec![page_fault("SDMA0")]), &[]);
    let m = find(&matches, "RKB-901");
    let finding = m.to_finding();
    let descriptions: Vec<&str> = finding
        .remedies
        .iter()
        .map(|r| r.description.as_str())
        .collect();
    assert_eq!(
        descriptions,
        [
            "Disable the thing (reported to help, not verified)",
            "Install the fixed firmware",
        ]
    );
    assert_eq!(
        finding.remedies[0].action(),
        "Disable the thing (reported to help, not verified)"
    );

    let listing = render_matches(std::slice::from_ref(m));
    assert!(
        listing.contains("→ Disable the thing (reported to help, not verified)\n"),
        "{listing}"
    );
    assert!(
        listing.contains("→ Install the fixed firmware\n"),
        "{listing}"
    );

    let entry = render_entry(&m.entry);
    assert!(
        entry.contains("- Disable the thing (reported to help, not verified)\n"),
        "{entry}"
    );
    assert!(
        entry.contains("kernel log page_fault (no signature of its own: raises suspicion only)"),
        "{entry}"
    );
}
