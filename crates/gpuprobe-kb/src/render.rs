//! Plain-text renderings for `gpuprobe kb list`, `kb show ID` and `kb match`. No colour and
//! no terminal queries: the CLI decides how to present them.

use std::fmt::Write as _;

use gpuprobe_model::WITHOUT_SIGNATURE;
use gpuprobe_model::terminal_safe;

use crate::entry::{ConditionKind, ConditionRef, Conditions, KbEntry, ProbeOutcome};
use crate::kb::KnowledgeBase;
use crate::matcher::{KbMatch, MatchStatus};

/// One line per entry: id, kind, severity, status, title.
pub fn render_list(kb: &KnowledgeBase) -> String {
    render_list_within(kb, None)
}

/// The fewest columns a title keeps when [`render_list_within`] wraps it.
const MIN_TITLE: usize = 24;

/// [`render_list`] fitted to `width` columns: a title that does not fit wraps at spaces,
/// its continuation lines indented to the title column, so ids, kinds, severities and
/// statuses stay one per row and a row's first line still starts with its id. `None` keeps
/// every title whole; a width that would leave a title fewer than 24 columns gives it 24
/// (the line runs past so narrow a terminal rather than into a column of single words).
pub fn render_list_within(kb: &KnowledgeBase, width: Option<usize>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<9} {:<12} {:<8} {:<12} title",
        "id", "kind", "severity", "status"
    );
    for entry in kb.entries() {
        let columns = format!(
            "{:<9} {:<12} {:<8} {:<12} ",
            entry.id,
            entry.kind.name(),
            severity_name(entry.severity),
            entry.status.name(),
        );
        let indent = columns.chars().count();
        let room = width.map_or(usize::MAX, |w| w.saturating_sub(indent).max(MIN_TITLE));
        // Made visible before it is measured: an escaped control character is wider.
        let title = gpuprobe_model::visible_line(&entry.title);
        let title = gpuprobe_model::wrap_words(&title, room, room);
        let _ = writeln!(out, "{columns}{}", title.first().map_or("", String::as_str));
        for more in title.iter().skip(1) {
            let _ = writeln!(out, "{:indent$}{more}", "");
        }
    }
    let _ = writeln!(out, "{} known issues", kb.len());
    terminal_safe(&out).into_owned()
}

fn severity_name(severity: gpuprobe_model::Severity) -> &'static str {
    match severity {
        gpuprobe_model::Severity::Error => "error",
        gpuprobe_model::Severity::Warning => "warning",
        gpuprobe_model::Severity::Info => "info",
    }
}

fn conditions_lines(conditions: &Conditions, indent: &str, out: &mut String) {
    let mut walked = conditions.walk();
    // `kb show` has always listed the NVIDIA driver and uid ranges with the other version
    // ranges, right after torch's; every other condition in declaration order.
    walked.sort_by_key(|condition| match condition.kind() {
        ConditionKind::NvidiaDriver => (ConditionKind::Torch, 1),
        ConditionKind::Uid => (ConditionKind::Torch, 2),
        kind => (kind, 0),
    });
    for condition in walked {
        condition_lines(condition, indent, out);
    }
}

fn line(out: &mut String, indent: &str, label: &str, value: String) {
    let _ = writeln!(out, "{indent}{label:<20} {value}");
}

/// The lines of one condition: the single place that says how each kind is shown.
fn condition_lines(condition: ConditionRef<'_>, indent: &str, out: &mut String) {
    use ConditionRef as C;
    let mut line = |label: &str, value: String| line(out, indent, label, value);
    match condition {
        C::Vendor(vendor) => line("vendor", format!("{vendor:?}").to_lowercase()),
        C::Arch(arch) => line("arch (native ISA)", arch.join(", ")),
        C::Apu(apu) => line("APU", apu.to_string()),
        C::Firmware(firmware) => {
            for fw in firmware {
                line("firmware", format!("{} {}", fw.component, fw.version));
            }
        }
        C::TorchSupportsArch(v) => line("ISA in torch wheel", v.to_string()),
        C::OverrideDiffers(v) => line("override differs", v.to_string()),
        C::OverrideSibling(v) => line("override is sibling", v.to_string()),
        C::Os(os) => line(
            "os",
            os.iter().map(|o| o.name()).collect::<Vec<_>>().join(", "),
        ),
        C::Kernel(range) => line("kernel", range.to_string()),
        C::Rocm(range) => line("ROCm", range.to_string()),
        C::Hip(range) => line("HIP", range.to_string()),
        C::Torch(range) => line("torch", range.to_string()),
        C::NvidiaDriver(range) => line("NVIDIA driver", range.to_string()),
        C::Uid(range) => line("uid", range.to_string()),
        C::TorchLocal(prefixes) => line("torch local tag", format!("{}*", prefixes.join("*, "))),
        C::AmdgpuDriver(driver) => {
            let mut parts = Vec::new();
            if let Some(source) = driver.source {
                parts.push(format!("{source:?}").to_lowercase());
            }
            if let Some(version) = &driver.version {
                parts.push(version.clone());
            }
            line("amdgpu driver", parts.join(" "));
        }
        C::Env(env) => {
            for env in env {
                let text = if env.set == Some(false) {
                    format!("{} unset", env.name)
                } else if !env.decodes_to.is_empty() {
                    format!("{} decodes to {}", env.name, env.decodes_to.join(" or "))
                } else if !env.one_of.is_empty() {
                    format!("{} = {}", env.name, env.one_of.join(" or "))
                } else {
                    format!("{} set", env.name)
                };
                line("env", text);
            }
        }
        C::ModuleParams(params) => {
            for param in params {
                line(
                    "module parameter",
                    format!("{} = {}", param.name, param.one_of.join(" or ")),
                );
            }
        }
        C::Cmdline { has, lacks } => {
            if !has.is_empty() {
                line("cmdline has", has.join(" "));
            }
            if !lacks.is_empty() {
                line("cmdline lacks", lacks.join(" "));
            }
        }
        C::MinGpus(min) => line("GPUs", format!("at least {min}")),
        C::Container(container) => line("container", container.to_string()),
        C::SecureBoot(secure_boot) => line("Secure Boot", secure_boot.to_string()),
        C::Packages(packages) => {
            for package in packages {
                line(
                    "package",
                    format!(
                        "{} {}",
                        package.name,
                        package.version.clone().unwrap_or_default()
                    )
                    .trim()
                    .to_string(),
                );
            }
        }
        C::AllocConf(conditions) => {
            for alloc in conditions {
                line(
                    "allocator conf",
                    format!("{}:{}", alloc.key, alloc.one_of.join("|")),
                );
            }
        }
        C::AnyOf(groups) => {
            for (i, group) in groups.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{indent}{} alternative {}:",
                    if i == 0 { "and at least one" } else { "or" },
                    i + 1
                );
                conditions_lines(group, &format!("{indent}    "), out);
            }
        }
    }
}

/// Appended to a `confirm` or `logs` pattern that names no signature of its own.
const HINT_ONLY: &str = " (no signature of its own: raises suspicion only)";

fn outcome_line(outcome: &ProbeOutcome) -> String {
    let verdicts: Vec<&str> = outcome.verdicts.iter().map(|v| v.name()).collect();
    let mut text = format!("{} → {}", outcome.probes.join(", "), verdicts.join("/"));
    if !outcome.fail_classes.is_empty() {
        let classes: Vec<&str> = outcome.fail_classes.iter().map(|c| c.describe()).collect();
        text.push_str(&format!(" ({})", classes.join(", ")));
    }
    if !outcome.message_contains.is_empty() {
        text.push_str(&format!(
            " with “{}”",
            outcome.message_contains.join("” or “")
        ));
    }
    if !outcome.exit_codes.is_empty() {
        let codes: Vec<String> = outcome.exit_codes.iter().map(i32::to_string).collect();
        text.push_str(&format!(" exit code {}", codes.join(" or ")));
    }
    if let Some(note) = &outcome.note {
        text.push_str(&format!(" — {note}"));
    }
    text
}

/// The full text of one entry.
pub fn render_entry(entry: &KbEntry) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}  {}", entry.id, entry.title);
    let _ = writeln!(
        out,
        "kind {} · severity {} · layer {} · status {}",
        entry.kind.name(),
        severity_name(entry.severity),
        entry.layer.name(),
        entry.status.name()
    );
    let _ = writeln!(out);
    for line in entry.summary.trim().lines() {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "applies when");
    conditions_lines(&entry.conditions, "  ", &mut out);
    if !entry.confirm.is_empty() || !entry.logs.is_empty() {
        let _ = writeln!(out, "confirmed by");
        for outcome in &entry.confirm {
            let hint = if outcome.has_signature() {
                ""
            } else {
                HINT_ONLY
            };
            let _ = writeln!(out, "  {}{hint}", outcome_line(outcome));
        }
        for log in &entry.logs {
            let mut text = format!("kernel log {}", log.kind);
            if let Some(client) = &log.client {
                text.push_str(&format!(" (client {client})"));
            }
            if let Some(contains) = &log.contains {
                text.push_str(&format!(" containing “{contains}”"));
            }
            if let Some(note) = &log.note {
                text.push_str(&format!(" — {note}"));
            }
            if !log.has_signature() {
                text.push_str(HINT_ONLY);
            }
            let _ = writeln!(out, "  {text}");
        }
    }
    if !entry.control.is_empty() {
        let _ = writeln!(out, "while (controls)");
        for outcome in &entry.control {
            let _ = writeln!(out, "  {}", outcome_line(outcome));
        }
    }
    if !entry.contradict.is_empty() {
        let _ = writeln!(out, "argued against by");
        for outcome in &entry.contradict {
            let _ = writeln!(out, "  {}", outcome_line(outcome));
        }
    }
    if !entry.workarounds.is_empty() {
        let _ = writeln!(out, "workarounds");
        for w in &entry.workarounds {
            let mut tags: Vec<String> = w.cost.tags().iter().map(|t| t.to_string()).collect();
            if w.testable {
                tags.push("testable with gpuprobe fix".to_string());
            }
            // How well the sources support it comes first: an unproven workaround must
            // never read as a cure.
            let evidence = w.evidence.qualifier().unwrap_or(w.evidence.name());
            let notes = if tags.is_empty() {
                evidence.to_string()
            } else {
                format!("{evidence}; {}", tags.join(", "))
            };
            let setting = w
                .setting
                .as_ref()
                .map(|s| format!(" [{s}]"))
                .unwrap_or_default();
            let _ = writeln!(out, "  - {}{setting} ({notes})", w.description);
            if let Some(note) = &w.cost.note {
                let _ = writeln!(out, "    cost: {note}");
            }
            if let Some(source) = &w.source {
                let _ = writeln!(out, "    source: {source}");
            }
        }
    }
    if !entry.fixed_in.is_empty() {
        let _ = writeln!(out, "fixed in");
        for fixed in &entry.fixed_in {
            let mut text = fixed.component.clone();
            if let Some(version) = &fixed.version {
                text.push_str(&format!(" {version}"));
            }
            if let Some(note) = &fixed.note {
                text.push_str(&format!(" — {note}"));
            }
            let _ = writeln!(out, "  {text}");
        }
    }
    if let Some(notes) = &entry.notes {
        let _ = writeln!(out, "notes");
        for line in notes.trim().lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let _ = writeln!(out, "citations");
    for citation in citation_lines(&entry.citations) {
        let _ = writeln!(out, "  {citation}");
    }
    terminal_safe(&out).into_owned()
}

/// `owner/repo#N`, `owner/repo PR #N` or `repo PR #N` (any words after): the repository's
/// owner (when named), name and the number.
fn named_reference(citation: &str) -> Option<(Option<&str>, &str, &str)> {
    let first = citation.split_whitespace().next()?;
    let (place, number) = match first.split_once('#') {
        Some((place, number)) => (place, number),
        None => {
            let rest = citation[first.len()..].trim_start();
            let number = rest.strip_prefix("PR #")?.split_whitespace().next()?;
            (first, number)
        }
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match place.split_once('/') {
        Some((owner, repo)) => Some((Some(owner), repo, number)),
        None => Some((None, place, number)),
    }
}

/// `https://github.com/OWNER/REPO/{pull,issues}/N` (a fragment or query allowed): owner,
/// repository and number.
fn github_url(citation: &str) -> Option<(&str, &str, &str)> {
    let path = citation.strip_prefix("https://github.com/")?;
    let mut parts = path.split('/');
    let (owner, repo, kind, number) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if !matches!(kind, "pull" | "issues") {
        return None;
    }
    let number = number.split(['#', '?']).next()?;
    Some((owner, repo, number))
}

/// The citations, one line each, a reference and its URL on one line: an entry cites a
/// GitHub issue or pull request both by name and by address, which are the same source.
pub(crate) fn citation_lines(citations: &[String]) -> Vec<String> {
    let urls: Vec<Option<(&str, &str, &str)>> = citations.iter().map(|c| github_url(c)).collect();
    let mut joined = vec![false; citations.len()];
    let mut lines = Vec::new();
    for (i, citation) in citations.iter().enumerate() {
        if urls[i].is_some() {
            continue;
        }
        let address = named_reference(citation).and_then(|(owner, repo, number)| {
            urls.iter().position(|url| {
                url.is_some_and(|(o, r, n)| {
                    n == number
                        && r.eq_ignore_ascii_case(repo)
                        && owner.is_none_or(|owner| o.eq_ignore_ascii_case(owner))
                })
            })
        });
        match address {
            Some(j) if !joined[j] => {
                joined[j] = true;
                lines.push(format!("{citation} — {}", citations[j]));
            }
            _ => lines.push(citation.clone()),
        }
    }
    for (i, citation) in citations.iter().enumerate() {
        if urls[i].is_some() && !joined[i] {
            lines.push(citation.clone());
        }
    }
    lines
}

/// Each match with its status, the conditions that held, what could not be checked and the
/// results and log events behind it.
pub fn render_matches(matches: &[KbMatch]) -> String {
    let mut out = String::new();
    if matches.is_empty() {
        let _ = writeln!(out, "no known issue matches this stack");
        return out;
    }
    for m in matches {
        let status = match m.status {
            MatchStatus::Confirmed => "CONFIRMED",
            MatchStatus::Suspected => "SUSPECTED",
            MatchStatus::NotObserved => "NOT OBSERVED HERE",
        };
        let _ = writeln!(
            out,
            "{} {}  {}  [{}]",
            m.severity().symbol(),
            m.entry.id,
            m.entry.title,
            status
        );
        for text in &m.held {
            let _ = writeln!(out, "    ✓ {text}");
        }
        for text in m.unchecked_texts() {
            let _ = writeln!(out, "    ? could not check: {text}");
        }
        for item in &m.confirming {
            let _ = writeln!(out, "    ✖ {}", item.text);
        }
        for text in &m.logs {
            let _ = writeln!(out, "    ✖ {text}");
        }
        for item in &m.hints {
            let _ = writeln!(out, "    ~ {WITHOUT_SIGNATURE}{}", item.text);
        }
        for text in &m.hint_logs {
            let _ = writeln!(out, "    ~ {WITHOUT_SIGNATURE}{text}");
        }
        for item in &m.controls {
            let mark = if item.as_predicted {
                "✓ control"
            } else {
                "! control failed"
            };
            let _ = writeln!(out, "    {mark}: {}", item.text);
        }
        for item in &m.contradicting {
            let _ = writeln!(out, "    ○ argues against: {}", item.text);
        }
        if m.status == MatchStatus::Suspected {
            let _ = writeln!(out, "    suspected only: no probe result confirms it here");
        }
        if m.status != MatchStatus::NotObserved {
            for w in &m.entry.workarounds {
                let setting = w
                    .setting
                    .as_ref()
                    .map(|s| format!(" [{s}]"))
                    .unwrap_or_default();
                let qualifier = w
                    .evidence
                    .qualifier()
                    .map(|words| format!(" ({words})"))
                    .unwrap_or_default();
                let _ = writeln!(out, "    → {}{setting}{qualifier}", w.description);
            }
        }
        let _ = writeln!(
            out,
            "    cite: {}",
            citation_lines(&m.entry.citations).join("; ")
        );
    }
    terminal_safe(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_cited_by_name_and_by_address_is_listed_once() {
        let citations: Vec<String> = [
            "ROCm/rocm-systems PR #10639",
            "ROCm/rocMLIR PR #2457",
            "pytorch/pytorch#12345 (closed)",
            "rocm-systems PR #11617",
            "https://github.com/ROCm/rocm-systems/pull/10639",
            "https://github.com/pytorch/pytorch/issues/12345#issuecomment-1",
            "https://github.com/ROCm/rocm-systems/pull/11617",
            "https://rocm.docs.amd.com/en/latest/",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            citation_lines(&citations),
            [
                "ROCm/rocm-systems PR #10639 — https://github.com/ROCm/rocm-systems/pull/10639",
                "ROCm/rocMLIR PR #2457",
                "pytorch/pytorch#12345 (closed) — https://github.com/pytorch/pytorch/issues/12345#issuecomment-1",
                "rocm-systems PR #11617 — https://github.com/ROCm/rocm-systems/pull/11617",
                "https://rocm.docs.amd.com/en/latest/",
            ]
        );
    }

    #[test]
    fn kb_show_lists_no_source_twice() {
        let kb = KnowledgeBase::load_embedded().kb;
        for entry in kb.entries() {
            let lines = citation_lines(&entry.citations);
            for url in entry
                .citations
                .iter()
                .filter(|c| c.starts_with("https://github.com/"))
            {
                let n = lines.iter().filter(|l| l.contains(url.as_str())).count();
                assert_eq!(n, 1, "{} cites {url} {n} times: {lines:?}", entry.id);
            }
            assert!(lines.len() <= entry.citations.len());
        }
        let entry = kb.entries().find(|e| e.id == "RKB-001").unwrap();
        let shown = render_entry(entry);
        assert_eq!(
            shown.matches("rocm-systems/pull/10639").count(),
            1,
            "{shown}"
        );
        assert_eq!(shown.matches("PR #10639").count(), 1, "{shown}");
        assert!(
            shown.contains(
                "ROCm/rocm-systems PR #10639 — https://github.com/ROCm/rocm-systems/pull/10639"
            ),
            "{shown}"
        );
    }
}
