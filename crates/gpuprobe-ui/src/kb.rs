//! The KB page: the known issues gpuprobe ships, searched by text, and which of them match
//! this machine and why. The match is the KB crate's own matcher (`gpuprobe_kb::match_all`),
//! as `gpuprobe kb match` and `check` run it: over the newest finished check's fingerprint
//! and results by default (what this machine showed when it was last checked), or over the
//! fingerprint read now when the user asks (which runs the system's tools and Python, so it
//! takes seconds).

use std::path::Path;

use gpuprobe_kb::KnowledgeBase;
use gpuprobe_kb::MatchStatus;
use gpuprobe_model::Fingerprint;
use gpuprobe_model::ProbeResult;
use serde::Serialize;

/// One entry of the list.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EntryView {
    /// `RKB-001`.
    pub id: String,
    /// Its title.
    pub title: String,
    /// `error`, `warning`, `info`.
    pub severity: String,
    /// Its summary.
    pub summary: String,
}

/// One entry that matches, with why.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MatchView {
    /// The entry's id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// `confirmed`, `suspected`.
    pub status: &'static str,
    /// The conditions that held, each with the fact that satisfied it.
    pub held: Vec<String>,
    /// The results that show its failure pattern.
    pub confirming: Vec<String>,
    /// Kernel-log lines that match it.
    pub logs: Vec<String>,
    /// Conditions that could not be checked, and why.
    pub unchecked: Vec<String>,
}

fn severity(value: impl Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// The entries whose id, title or summary contains `query` (case-insensitive; all when it
/// is empty).
pub(crate) fn search(kb: &KnowledgeBase, query: &str) -> Vec<EntryView> {
    let query = query.trim().to_lowercase();
    kb.entries()
        .filter(|e| {
            query.is_empty()
                || e.id.to_lowercase().contains(&query)
                || e.title.to_lowercase().contains(&query)
                || e.summary.to_lowercase().contains(&query)
        })
        .map(|e| EntryView {
            id: e.id.clone(),
            title: e.title.clone(),
            severity: severity(e.severity),
            summary: e.summary.clone(),
        })
        .collect()
}

/// The entries that match `fingerprint` and `results`: confirmed first, then suspected.
pub(crate) fn matches(
    kb: &KnowledgeBase,
    fingerprint: &Fingerprint,
    results: &[ProbeResult],
) -> Vec<MatchView> {
    let mut found: Vec<_> = gpuprobe_kb::match_all(kb, fingerprint, results)
        .into_iter()
        .filter(|m| m.status != MatchStatus::NotObserved)
        .collect();
    found.sort_by_key(|m| m.status);
    found
        .into_iter()
        .map(|m| MatchView {
            id: m.entry.id.clone(),
            title: m.entry.title.clone(),
            status: m.status.name(),
            held: m.held.clone(),
            confirming: m
                .confirming
                .iter()
                .map(|e| format!("{} on {}: {}", e.probe, e.device, e.text))
                .collect(),
            logs: m.logs.clone(),
            unchecked: m.unchecked.clone(),
        })
        .collect()
}

/// The newest finished check under `root`: its name, fingerprint and results.
pub(crate) fn newest_report(root: &Path) -> Option<(String, Fingerprint, Vec<ProbeResult>)> {
    let runs = gpuprobe_runner::scan_run_names(root).ok()?;
    runs.iter().find_map(|(name, path)| {
        let report = crate::run_index::read_report(path)?.ok()?;
        Some((name.clone(), report.fingerprint, report.results))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_entries_by_id_title_or_summary() {
        let kb = KnowledgeBase::embedded();
        let all = search(&kb, "");
        assert_eq!(all.len(), kb.len());
        let first = &all[0];
        let by_id = search(&kb, &first.id.to_lowercase());
        assert!(by_id.iter().any(|e| e.id == first.id));
        assert!(search(&kb, "no entry says this 7f3a").is_empty());
    }
}
