//! The terminal view of a workaround search (`gpuprobe fix`): what was tried, what cured
//! what, what broke a sentinel, what is still broken, what was chosen and verified, what it
//! costs, and what needs root, a reboot or a code change (reported, never applied).

use std::fmt::Write as _;

use comfy_table::presets::NOTHING;
use comfy_table::{ContentArrangement, Table};
use gpuprobe_model::command_line::{StackOptions, shell_word};
use gpuprobe_model::finding::Cost;
use gpuprobe_model::profile::{CandidateTrial, FixAccount, FixOutcome, TargetStatus};
use gpuprobe_model::text::terminal_safe;

use crate::style::Style;

fn table() -> Table {
    let mut table = Table::new();
    table
        .load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    table
}

fn cost_words(cost: &Cost) -> String {
    let mut parts: Vec<String> = cost.tags().iter().map(|t| t.to_string()).collect();
    if let Some(note) = &cost.note {
        parts.push(note.clone());
    }
    parts.join("; ")
}

fn trial_result(trial: &CandidateTrial, failures: usize, style: Style) -> String {
    if !trial.tried {
        return style.dim(&format!(
            "not tried: {}",
            trial.not_tried_because.as_deref().unwrap_or("")
        ));
    }
    let mut parts = Vec::new();
    if trial.cured.is_empty() {
        parts.push("cures nothing".to_string());
    } else {
        parts.push(format!("cures {}/{failures}", trial.cured.len()));
    }
    if trial.broke.is_empty() {
        if !trial.cured.is_empty() {
            parts.push("breaks nothing".into());
        }
    } else {
        let first = &trial.broke[0];
        let more = if trial.broke.len() > 1 {
            format!(" and {} more", trial.broke.len() - 1)
        } else {
            String::new()
        };
        parts.push(style.bad(&format!(
            "BREAKS {} ({}: {}){more} → rejected",
            first.at, first.verdict, first.detail
        )));
    }
    if !trial.worsened.is_empty() {
        parts.push(style.warn(&format!(
            "makes {} worse ({})",
            trial.worsened[0].at, trial.worsened[0].verdict
        )));
    }
    for partial in &trial.partly_cured {
        parts.push(format!(
            "cures {} of {}'s failing cases",
            partial.cured_cases.len(),
            partial.at.probe
        ));
    }
    parts.join(" · ")
}

/// Renders the account, its `use it:` line with no options of the search's stack.
pub fn render(account: &FixAccount, style: Style) -> String {
    render_for(account, style, &StackOptions::default())
}

/// Renders the account; the `use it:` line carries `run_options` (the search's
/// `--python`), so that, run as printed, `run` compares the profile with the stack it was
/// proven on.
pub fn render_for(account: &FixAccount, style: Style, run_options: &StackOptions) -> String {
    let mut out = String::new();
    if account.simulated {
        let _ = writeln!(out, "{}", style.banner(" SIMULATED "));
    }
    let _ = writeln!(
        out,
        "{}",
        style.bold(&format!(
            "gpuprobe {} fix  ·  stack: {}",
            account.tool_version,
            account.stack.describe()
        ))
    );
    if let Some(source) = &account.simulation {
        let _ = writeln!(
            out,
            "{}",
            style.banner(&format!(" SIMULATED faults ({source}): the cures below are proven against the simulation, not real hardware "))
        );
    }
    if account.outcome == FixOutcome::NothingToFix || account.targets.is_empty() {
        let what = if account.outcome == FixOutcome::NothingTestable {
            "nothing could be tested"
        } else {
            "nothing to fix: every probe passed"
        };
        let _ = writeln!(out, "{what}; no profile written");
        for note in &account.notes {
            let _ = writeln!(out, "{}", style.dim(&format!("note: {note}")));
        }
        let _ = writeln!(
            out,
            "exit {} ({})",
            account.exit_code,
            account.exit_status.describe()
        );
        return out;
    }
    let failures = account
        .targets
        .iter()
        .filter(|t| t.status != TargetStatus::Flaky)
        .count();
    let tried = account.candidates.iter().filter(|c| c.tried).count();
    let _ = writeln!(
        out,
        "{} failing probe run(s) · {} sentinel(s) · {} candidate(s), {} tried · {} trial(s) of --max-runs {} ({} worker process(es)) · {:.1} s",
        account.targets.len(),
        account.sentinels.len(),
        account.candidates.len(),
        tried,
        account.budget.trials,
        account.budget.max_runs,
        account.budget.workers,
        account.wall_s
    );
    if account.budget.exhausted {
        let _ = writeln!(
            out,
            "{}",
            style.warn("the run budget ran out: not everything was tried (raise --max-runs)")
        );
    }

    if !account.candidates.is_empty() {
        let _ = writeln!(out, "\n{}", style.bold("tried alone"));
        let mut t = table();
        t.set_header(vec![" setting", "from", "cost", "result"]);
        for trial in &account.candidates {
            t.add_row(vec![
                format!(" {}", trial.setting),
                trial.sources.join(" "),
                short(&cost_words(&trial.cost), 44),
                trial_result(trial, failures, style),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }

    if !account.groups.is_empty() {
        let _ = writeln!(
            out,
            "\n{}",
            style.bold("group search (for failures no single setting cures)")
        );
        for group in &account.groups {
            let settings: Vec<String> = group.settings.iter().map(|s| s.describe()).collect();
            let label = if group.minimal {
                style.good(&format!(" {}", settings.join(" + ")))
            } else if settings.len() > 4 {
                format!(" all {} compatible candidates", settings.len())
            } else {
                format!(" {}", settings.join(" + "))
            };
            let _ = writeln!(out, "{label}: {} ({} trial(s))", group.note, group.runs);
        }
    }

    let _ = writeln!(out, "\n{}", style.bold("failures"));
    let mut t = table();
    t.set_header(vec![" probe", "device", "was", "now", "cured by"]);
    for target in &account.targets {
        let now = match target.status {
            TargetStatus::Cured => style.good("cured"),
            TargetStatus::NotCured => style.bad("not cured"),
            TargetStatus::Flaky => style.warn("did not reproduce"),
        };
        let mut cured_by = if target.cured_by.is_empty() {
            "—".to_string()
        } else {
            target.cured_by.join(" | ")
        };
        if !target.rejected.is_empty() {
            cured_by.push_str(&style.warn(&format!(" (rejected: {})", target.rejected.join("; "))));
        }
        if target.status == TargetStatus::NotCured {
            for trial in &account.candidates {
                for partial in trial
                    .partly_cured
                    .iter()
                    .filter(|p| p.at == target.failure.at)
                {
                    cured_by = format!(
                        "in part: {} cures {}; still failing: {}",
                        trial.setting,
                        partial.cured_cases.join(", "),
                        partial.still_failing.join(", ")
                    );
                }
            }
        }
        t.add_row(vec![
            format!(" {}", target.failure.at.probe),
            target.failure.at.device.to_string(),
            format!(
                "{} {}",
                target.failure.verdict,
                short(&target.failure.detail, 40)
            ),
            now,
            cured_by,
        ]);
    }
    let _ = writeln!(out, "{t}");

    if account.chosen.is_empty() {
        let _ = writeln!(
            out,
            "chosen: no setting (nothing tried cures these failures without breaking a sentinel)"
        );
    } else {
        let chosen: Vec<String> = account.chosen.iter().map(|c| c.describe()).collect();
        let _ = writeln!(out, "chosen: {}", style.bold(&chosen.join(" ")));
    }
    if let Some(verification) = &account.verification {
        let line = format!(
            "verified in one final run: {} of {} failure(s) pass, {} sentinel(s) broken",
            verification.cured.len(),
            failures,
            verification.broke.len()
        );
        let _ = writeln!(
            out,
            "{}",
            if verification.passed {
                style.good(&line)
            } else {
                style.warn(&line)
            }
        );
    }
    if let Some(cost) = &account.cost {
        let _ = writeln!(out, "cost: {}", cost.summary());
        let _ = writeln!(out, "{}", style.dim(&format!("      ({})", cost.method)));
    }

    if !account.reported.is_empty() {
        let _ = writeln!(
            out,
            "\n{}",
            style.bold("reported, never applied (root, reboot, code or machine-specific changes)")
        );
        for change in &account.reported {
            let setting = change
                .setting
                .as_deref()
                .map(|s| format!(" [{s}]"))
                .unwrap_or_default();
            let cost = cost_words(&change.cost);
            let _ = writeln!(
                out,
                " {:<13} {}{setting}{} — {}",
                change.kind,
                change.description,
                if cost.is_empty() {
                    String::new()
                } else {
                    format!(" ({cost})")
                },
                change.sources.join(", ")
            );
        }
    }
    for note in &account.notes {
        let _ = writeln!(out, "{}", style.dim(&format!("note: {note}")));
    }
    if let Some(profile) = &account.profile {
        let _ = writeln!(out, "\nprofile: {profile}");
        if !account.chosen.is_empty() {
            let quoted = shell_word(profile);
            let run = run_options.carry(&format!("gpuprobe run --profile {quoted}"));
            let _ = writeln!(
                out,
                "  use it: {run} -- <your command>   ·   gpuprobe profile export {quoted} --format env"
            );
        }
    }
    let sim = if account.simulated {
        " · SIMULATED"
    } else {
        ""
    };
    let line = format!(
        "exit {} ({}: {}){sim}",
        account.exit_code,
        account.exit_status.describe(),
        account.outcome_words()
    );
    let _ = writeln!(
        out,
        "{}",
        if account.exit_code == 0 {
            style.good(&line)
        } else {
            style.bold(&line)
        }
    );
    terminal_safe(&out).into_owned()
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::ExitStatus;
    use gpuprobe_model::probe::{DeviceRef, ProbeId};
    use gpuprobe_model::profile::{
        FixTarget, ProbeOutcomeRef, ProbeRef, RunBudget, SettingChange, StackKey, Verification,
    };

    fn at(probe: &str) -> ProbeRef {
        ProbeRef {
            probe: ProbeId::new(probe),
            device: DeviceRef::Cpu,
        }
    }

    fn account() -> FixAccount {
        FixAccount {
            tool_version: "0.1.0".into(),
            build: None,
            started_at: "2026-11-22T10:00:00Z".into(),
            wall_s: 12.0,
            simulated: true,
            simulation: Some("h2d-zeros-cure-breaks-d2d".into()),
            run_dir: None,
            source_run: None,
            stack: StackKey::default(),
            targets: vec![FixTarget {
                failure: ProbeOutcomeRef {
                    at: at("copy.h2d.pageable.tiny.nonblocking"),
                    verdict: "FAIL".into(),
                    detail: "all zeros".into(),
                },
                status: TargetStatus::Cured,
                cured_by: vec!["AMD_SERIALIZE_COPY=3".into()],
                rejected: vec!["HSA_ENABLE_SDMA=0: breaks copy.d2d.medium.clone on cpu".into()],
            }],
            sentinels: vec![at("copy.d2d.medium.clone")],
            candidates: vec![
                CandidateTrial {
                    setting: SettingChange::set("HSA_ENABLE_SDMA", "0"),
                    title: "copy engine off".into(),
                    sources: vec!["CAT-SDMA-OFF".into()],
                    cost: Cost {
                        slower: true,
                        ..Cost::default()
                    },
                    tried: true,
                    not_tried_because: None,
                    cured: vec![at("copy.h2d.pageable.tiny.nonblocking")],
                    broke: vec![ProbeOutcomeRef {
                        at: at("copy.d2d.medium.clone"),
                        verdict: "FAIL".into(),
                        detail: "partial zeros".into(),
                    }],
                    worsened: vec![],
                    partly_cured: vec![],
                    elapsed_s: Some(3.0),
                },
                CandidateTrial {
                    setting: SettingChange::set("AMD_SERIALIZE_COPY", "3"),
                    title: "serialize copies".into(),
                    sources: vec!["CAT-SERIALIZE-COPY".into()],
                    cost: Cost::default(),
                    tried: true,
                    not_tried_because: None,
                    cured: vec![at("copy.h2d.pageable.tiny.nonblocking")],
                    broke: vec![],
                    worsened: vec![],
                    partly_cured: vec![],
                    elapsed_s: Some(3.0),
                },
            ],
            groups: vec![],
            chosen: vec![SettingChange::set("AMD_SERIALIZE_COPY", "3")],
            verification: Some(Verification {
                settings: vec![SettingChange::set("AMD_SERIALIZE_COPY", "3")],
                passed: true,
                cured: vec![at("copy.h2d.pageable.tiny.nonblocking")],
                still_failing: vec![],
                broke: vec![],
            }),
            cost: None,
            reported: vec![],
            budget: RunBudget {
                max_runs: 40,
                trials: 4,
                workers: 4,
                exhausted: false,
            },
            outcome: FixOutcome::AllCured,
            exit_status: ExitStatus::AllPassed,
            exit_code: 0,
            profile: Some("/tmp/p.toml".into()),
            notes: vec![],
        }
    }

    #[test]
    fn says_what_cured_what_broke_and_simulated() {
        let account = account();
        let text = render(&account, Style::PLAIN);
        assert!(text.starts_with(" SIMULATED "), "{text}");
        assert!(
            text.contains("BREAKS copy.d2d.medium.clone on cpu (FAIL: partial zeros) → rejected"),
            "{text}"
        );
        assert!(text.contains("chosen: AMD_SERIALIZE_COPY=3"), "{text}");
        assert!(
            text.contains("(rejected: HSA_ENABLE_SDMA=0: breaks copy.d2d.medium.clone on cpu)"),
            "{text}"
        );
        assert!(text.contains("verified in one final run: 1 of 1"), "{text}");
        assert!(
            text.contains("gpuprobe run --profile /tmp/p.toml"),
            "{text}"
        );
        assert!(text.contains("exit 0 (all passed: every reproducible failure cured) · SIMULATED"));
    }

    #[test]
    fn the_use_line_runs_the_profile_against_the_stack_it_was_proven_on() {
        let mut account = account();
        account.profile = Some("/tmp/my fixes/p.toml".into());
        let options = StackOptions {
            python: Some("/opt/venv/bin/python".into()),
            // Options `run` does not take stay out of its line.
            device: Some("cpu".into()),
            simulate: Some("h2d-zeros".into()),
            tier: None,
        };
        let text = render_for(&account, Style::PLAIN, &options);
        assert!(
            text.contains(
                "use it: gpuprobe run --python /opt/venv/bin/python --profile '/tmp/my fixes/p.toml' -- <your command>   ·   gpuprobe profile export '/tmp/my fixes/p.toml' --format env"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_partial_cure_whose_other_failures_did_not_reproduce_says_so() {
        let mut account = account();
        let mut flaky = account.targets[0].clone();
        flaky.failure.at = at("copy.h2d.pageable.tiny.blocking");
        flaky.status = TargetStatus::Flaky;
        flaky.cured_by.clear();
        account.targets.push(flaky);
        account.outcome = FixOutcome::PartlyCured;
        account.exit_status = ExitStatus::ProblemsFound;
        account.exit_code = 1;
        let text = render(&account, Style::PLAIN);
        assert!(!text.contains("some remain"), "{text}");
        assert!(
            text.contains("some failures cured; the others did not reproduce"),
            "{text}"
        );
        // A target nothing cured still "remains".
        account.targets[1].status = TargetStatus::NotCured;
        let text = render(&account, Style::PLAIN);
        assert!(text.contains("some failures cured, some remain"), "{text}");
    }
}
