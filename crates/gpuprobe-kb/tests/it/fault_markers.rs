//! Every `[[logs]]` signature of a shipped entry that is meant for kernel lines can still
//! match after the kernel log watcher's filter (`gpuprobe_runner::kmsg`, which keeps only
//! lines holding one of `gpuprobe_model::KERNEL_LOG_MARKERS`).
//!
//! The kernel lines recorded with a probe's result are the watcher's kept lines; the matcher
//! meets them twice: parsed into events (merged into the fingerprint by
//! `gpuprobe_detect::merge_watched_kernel_lines`, matched on kind, client and `contains`),
//! and as raw lines (matched on `contains` and client). A signature whose lines the filter
//! drops could never be confirmed from what a run saw. So for each signature this takes real
//! kernel logs that show it (the `fixtures/` excerpts, plus the MES lines quoted by the
//! entries that have no fixture), checks that the signature matches them unfiltered (else
//! the test would prove nothing), then filters them as the watcher does and checks it
//! still matches.
//!
//! `hsa_memory_fault` is the HSA runtime's own line on the job's stderr, not a kernel line:
//! it reaches the matcher through the stderr tail, never through the watcher, so it is
//! left out.

use gpuprobe_detect::merge_watched_kernel_lines;
use gpuprobe_detect::parse::kernel_log::kind;
use gpuprobe_kb::KnowledgeBase;
use gpuprobe_kb::LogSignature;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::KERNEL_LOG_MARKERS;
use gpuprobe_model::KernelEvent;

/// Kernel lines for signatures no fixture shows, as amdgpu prints them (DRM_ERROR from the
/// MES submit path): the messages RKB-006 and RKB-044 quote from ROCm/ROCm#5724, #6273 and
/// #6658.
const MES_LOG: &str = "\
[ 4021.118034] [drm:mes_v11_0_submit_pkt_and_poll_completion.constprop.0 [amdgpu]] *ERROR* MES failed to respond to msg=REMOVE_QUEUE
[ 4021.118120] [drm:amdgpu_mes_unmap_legacy_queue [amdgpu]] *ERROR* failed to unmap legacy queue
[ 4021.118190] amdgpu 0000:c4:00.0: amdgpu: failed to remove hardware queue from MES, doorbell=0x1002
[ 4021.118201] amdgpu 0000:c4:00.0: amdgpu: MES might be in unrecoverable state, issue a GPU reset
";

/// The example logs: (where from, lines).
fn example_logs() -> Vec<(String, Vec<String>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut logs = Vec::new();
    for dir in ["dmesg", "journalctl"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines = text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .map(str::to_string)
                .collect();
            logs.push((file.display().to_string(), lines));
        }
    }
    logs.push((
        "MES lines quoted by RKB-006/RKB-044".into(),
        MES_LOG.lines().map(str::to_string).collect(),
    ));
    logs
}

/// The watcher's filter (`KernelLogWatcher::new_lines`).
fn kept_by_watcher(line: &str) -> bool {
    KERNEL_LOG_MARKERS
        .iter()
        .any(|marker| line.contains(marker))
}

/// The events the matcher meets for kernel lines recorded with a result.
fn events(lines: &[&str]) -> Vec<KernelEvent> {
    let mut fp = Fingerprint::default();
    merge_watched_kernel_lines(&mut fp, lines.iter().copied());
    fp.kernel_events
}

/// The matcher's rule for an event (`matcher::matching_logs`): the kind, the client
/// (case-insensitive) and the `contains` text (case-insensitive) in the event's line.
fn event_matches(signature: &LogSignature, event: &KernelEvent) -> bool {
    event.kind == signature.kind
        && signature.client.as_ref().is_none_or(|client| {
            event
                .client
                .as_ref()
                .is_some_and(|c| c.eq_ignore_ascii_case(client))
        })
        && signature
            .contains
            .as_ref()
            .is_none_or(|text| event.line.to_lowercase().contains(&text.to_lowercase()))
}

/// The matcher's rule for a raw recorded line: it holds the `contains` text and the client.
fn raw_line_matches(signature: &LogSignature, line: &str) -> bool {
    let lower = line.to_lowercase();
    signature
        .contains
        .as_ref()
        .is_some_and(|text| lower.contains(&text.to_lowercase()))
        && signature
            .client
            .as_ref()
            .is_none_or(|client| lower.contains(&client.to_lowercase()))
}

#[test]
fn every_kernel_log_signature_survives_the_watchers_filter() {
    let kb = KnowledgeBase::embedded();
    let logs = example_logs();
    let mut checked = 0;
    let mut problems = Vec::new();
    for entry in kb.entries() {
        for signature in &entry.logs {
            if signature.kind == kind::HSA_MEMORY_FAULT {
                continue;
            }
            let what = format!(
                "{} logs kind={} client={:?} contains={:?}",
                entry.id, signature.kind, signature.client, signature.contains
            );
            let mut shown = false;
            for (source, lines) in &logs {
                let all: Vec<&str> = lines.iter().map(String::as_str).collect();
                if !events(&all).iter().any(|e| event_matches(signature, e)) {
                    continue;
                }
                shown = true;
                let kept: Vec<&str> = all.iter().copied().filter(|l| kept_by_watcher(l)).collect();
                if !events(&kept).iter().any(|e| event_matches(signature, e)) {
                    problems.push(format!(
                        "{what}: matches {source} but not the lines the watcher keeps of it"
                    ));
                }
                if signature.contains.is_some()
                    && !kept.iter().any(|line| raw_line_matches(signature, line))
                {
                    problems.push(format!(
                        "{what}: no line the watcher keeps of {source} holds its text"
                    ));
                }
            }
            if !shown {
                problems.push(format!(
                    "{what}: no example kernel log shows it; add a fixture so this test can check it"
                ));
            }
            checked += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 8, "only {checked} kernel signatures checked");
}

#[test]
fn every_event_kind_the_parser_finds_in_the_examples_is_kept() {
    // Beyond the shipped signatures: an entry added later with any kernel event kind the
    // examples hold must not be filtered out either.
    for (source, lines) in example_logs() {
        let all: Vec<&str> = lines.iter().map(String::as_str).collect();
        for event in events(&all) {
            if event.kind == kind::HSA_MEMORY_FAULT {
                continue;
            }
            assert!(
                kept_by_watcher(&event.line),
                "{source}: the watcher drops the {} line {:?}",
                event.kind,
                event.line
            );
        }
    }
}
