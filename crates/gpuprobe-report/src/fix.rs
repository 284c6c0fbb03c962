//! The terminal view of a workaround search (`gpuprobe fix`): what was tried, what cured
//! what, what broke a sentinel, what is still broken, what was chosen and verified, what it
//! costs, and what needs root, a reboot or a code change (reported, never applied).
//!
//! Fitted to a width (`Console::text_width`: the terminal's, or `COLUMNS`): the tables
//! keep settings and probe ids whole (a user copies them into `--candidate` and `--only`)
//! and wrap their other columns, or stack each row where even their words do not fit; the
//! other lines wrap under their text. Paths and the printed commands are never broken: a
//! line that holds one may run past a narrow terminal. Without a width, nothing wraps.

use std::fmt::Write as _;

use comfy_table::presets::NOTHING;
use comfy_table::{ColumnConstraint, ContentArrangement, Table, Width};
use gpuprobe_model::Cost;
use gpuprobe_model::{CandidateTrial, FixAccount, FixOutcome, TargetStatus};
use gpuprobe_model::{StackOptions, shell_word};
use gpuprobe_model::{display_width, terminal_safe};

use crate::fit::{self, cut as short};
use crate::style::Style;

/// A table of `header` and `rows`, its first `whole` columns never wrapped (they hold
/// what a user copies: settings, probe ids). Without a width, nothing wraps. Fitted to
/// `width`, the other columns wrap, each at least as wide as its longest word
/// ([`text_widths`]); where even those words do not fit beside the whole columns, each row
/// is stacked instead ([`stacked`]), so that nothing is squeezed into a column a word wide.
fn table(header: Vec<&str>, rows: Vec<Vec<String>>, whole: usize, width: Option<u16>) -> String {
    let mut table = Table::new();
    table.load_style(NOTHING).set_header(header.clone());
    let Some(width) = width else {
        table.set_content_arrangement(ContentArrangement::Disabled);
        table.add_rows(rows);
        return table.to_string();
    };
    let widest = |column: usize, measure: &dyn Fn(&str) -> usize| {
        std::iter::once(header[column])
            .chain(rows.iter().map(|row| row[column].as_str()))
            .map(measure)
            .max()
            .unwrap_or(0)
    };
    let line_width = |cell: &str| cell.lines().map(display_width).max().unwrap_or(0);
    let word_width = |cell: &str| {
        cell.split_whitespace()
            .map(display_width)
            .max()
            .unwrap_or(0)
    };
    let kept: Vec<usize> = (0..whole).map(|c| widest(c, &line_width)).collect();
    // Every column is padded by one space on either side.
    let room = usize::from(width).saturating_sub(kept.iter().sum::<usize>() + 2 * header.len());
    let text: Vec<(usize, usize)> = (whole..header.len())
        .map(|c| (widest(c, &word_width), widest(c, &line_width)))
        .collect();
    if text.iter().map(|&(word, _)| word).sum::<usize>() > room {
        return stacked(&header, &rows, whole, width);
    }
    let constraints = kept
        .into_iter()
        .chain(text_widths(&text, room))
        .map(|content| {
            let padded = u16::try_from(content + 2).unwrap_or(u16::MAX);
            ColumnConstraint::Absolute(Width::Fixed(padded))
        });
    table
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width)
        .set_constraints(constraints)
        .add_rows(rows);
    table.to_string()
}

/// Rows too wide for columns, one block each: the whole columns on a line of their own,
/// then each other column as `header  value` under it, the value wrapped under itself.
fn stacked(header: &[&str], rows: &[Vec<String>], whole: usize, width: u16) -> String {
    let label = header[whole..]
        .iter()
        .map(|h| display_width(h))
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for row in rows {
        let _ = writeln!(out, " {}", row[..whole].join("  "));
        for (name, cell) in header[whole..].iter().zip(&row[whole..]) {
            let lead = format!("   {name:<label$}  ");
            let indent = display_width(&lead);
            out.push_str(&fit::hanging(&lead, indent, cell, Some(width), |t| {
                t.to_string()
            }));
        }
    }
    out.trim_end_matches('\n').to_string()
}

/// The widths of the wrapping columns, each given as (longest word, longest line), within
/// `room` columns: every column as wide as its longest line when all fit; else each as wide
/// as its longest word (a setting, an id: never split) and what is left shared in
/// proportion to how much more each would take. Where even the words do not fit, their
/// widths ([`table`] stacks its rows instead).
fn text_widths(columns: &[(usize, usize)], room: usize) -> Vec<usize> {
    let words: usize = columns.iter().map(|&(word, _)| word).sum();
    let lines: usize = columns.iter().map(|&(_, line)| line).sum();
    if lines <= room {
        return columns.iter().map(|&(_, line)| line).collect();
    }
    if words > room {
        return columns.iter().map(|&(word, _)| word).collect();
    }
    let (spare, wanted) = (room - words, lines - words);
    let mut widths: Vec<usize> = columns
        .iter()
        .map(|&(word, line)| word + spare * (line - word) / wanted)
        .collect();
    // What the rounding left goes to the first columns that still want more.
    let mut left = room - widths.iter().sum::<usize>();
    for (width, &(_, line)) in widths.iter_mut().zip(columns) {
        let more = left.min(line - *width);
        *width += more;
        left -= more;
    }
    widths
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

/// Renders the account, its `use it:` line with no options of the search's stack, every
/// line whole.
pub fn render(account: &FixAccount, style: Style) -> String {
    render_for(account, style, &StackOptions::default(), None)
}

/// Renders the account fitted to `width` columns (`None`: every line whole); the `use it:`
/// line carries `run_options` (the search's `--python`), so that, run as printed, `run`
/// compares the profile with the stack it was proven on.
pub fn render_for(
    account: &FixAccount,
    style: Style,
    run_options: &StackOptions,
    width: Option<u16>,
) -> String {
    let mut out = String::new();
    let plain = |text: &str| text.to_string();
    let dim = |text: &str| style.dim(text);
    if account.simulated {
        let _ = writeln!(out, "{}", style.banner(" SIMULATED "));
    }
    out.push_str(&fit::hanging(
        "",
        2,
        &format!(
            "gpuprobe {} fix  ·  stack: {}",
            account.tool_version,
            account.stack.describe()
        ),
        width,
        |text| style.bold(text),
    ));
    if let Some(source) = &account.simulation {
        // The banner pads each of its lines with a space on either side.
        out.push_str(&fit::hanging(
            "",
            0,
            &format!("SIMULATED faults ({source}): the cures below are proven against the simulation, not real hardware"),
            width.map(|w| w.saturating_sub(2)),
            |text| style.banner(&format!(" {text} ")),
        ));
    }
    if account.outcome == FixOutcome::NothingToFix || account.targets.is_empty() {
        let what = if account.outcome == FixOutcome::NothingTestable {
            "nothing could be tested"
        } else {
            "nothing to fix: every probe passed"
        };
        let _ = writeln!(out, "{what}; no profile written");
        for note in &account.notes {
            out.push_str(&fit::hanging("", 6, &format!("note: {note}"), width, dim));
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
    let summary = format!(
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
    out.push_str(&fit::hanging("", 2, &summary, width, plain));
    if account.budget.exhausted {
        out.push_str(&fit::hanging(
            "",
            2,
            "the run budget ran out: not everything was tried (raise --max-runs)",
            width,
            |text| style.warn(text),
        ));
    }

    if !account.candidates.is_empty() {
        let _ = writeln!(out, "\n{}", style.bold("tried alone"));
        let rows = account
            .candidates
            .iter()
            .map(|trial| {
                vec![
                    trial.setting.to_string(),
                    trial.sources.join(" "),
                    short(&cost_words(&trial.cost), 44),
                    trial_result(trial, failures, style),
                ]
            })
            .collect();
        let t = table(vec!["setting", "from", "cost", "result"], rows, 1, width);
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
            let label = if group.minimal || settings.len() <= 4 {
                settings.join(" + ")
            } else {
                format!("all {} compatible candidates", settings.len())
            };
            let text = format!("{label}: {} ({} trial(s))", group.note, group.runs);
            // A minimal group is the answer: green, as its label always was.
            let paint = |text: &str| {
                if group.minimal {
                    style.good(text)
                } else {
                    text.to_string()
                }
            };
            out.push_str(&fit::hanging(" ", 3, &text, width, paint));
        }
    }

    let _ = writeln!(out, "\n{}", style.bold("failures"));
    let mut rows = Vec::new();
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
        rows.push(vec![
            target.failure.at.probe.to_string(),
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
    let t = table(
        vec!["probe", "device", "was", "now", "cured by"],
        rows,
        2,
        width,
    );
    let _ = writeln!(out, "{t}");

    if account.chosen.is_empty() {
        out.push_str(&fit::hanging(
            "chosen: ",
            8,
            "no setting (nothing tried cures these failures without breaking a sentinel)",
            width,
            plain,
        ));
    } else {
        let chosen: Vec<String> = account.chosen.iter().map(|c| c.describe()).collect();
        out.push_str(&fit::hanging(
            "chosen: ",
            8,
            &chosen.join(" "),
            width,
            |text| style.bold(text),
        ));
    }
    if let Some(verification) = &account.verification {
        let line = format!(
            "verified in one final run: {} of {} failure(s) pass, {} sentinel(s) broken",
            verification.cured.len(),
            failures,
            verification.broke.len()
        );
        out.push_str(&fit::hanging("", 2, &line, width, |text| {
            if verification.passed {
                style.good(text)
            } else {
                style.warn(text)
            }
        }));
    }
    if let Some(cost) = &account.cost {
        out.push_str(&fit::hanging("cost: ", 6, &cost.summary(), width, plain));
        let method = format!("({})", cost.method);
        out.push_str(&fit::hanging("      ", 7, &method, width, dim));
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
            let text = format!(
                "{}{setting}{} — {}",
                change.description,
                if cost.is_empty() {
                    String::new()
                } else {
                    format!(" ({cost})")
                },
                change.sources.join(", ")
            );
            let lead = format!(" {:<13} ", change.kind);
            out.push_str(&fit::hanging(&lead, 15, &text, width, plain));
        }
    }
    for note in &account.notes {
        out.push_str(&fit::hanging("", 6, &format!("note: {note}"), width, dim));
    }
    if let Some(profile) = &account.profile {
        // The path and the commands stay whole: they are copied, not read.
        let _ = writeln!(out, "\nprofile: {profile}");
        if !account.chosen.is_empty() {
            let quoted = shell_word(profile);
            let run = run_options.carry(&format!("gpuprobe run --profile {quoted}"));
            let use_it = format!("  use it: {run} -- <your command>");
            let export = format!("gpuprobe profile export {quoted} --format env");
            let one_line = format!("{use_it}   ·   {export}");
            if width.is_none_or(|w| one_line.chars().count() <= usize::from(w)) {
                let _ = writeln!(out, "{one_line}");
            } else {
                let _ = writeln!(out, "{use_it}\n  or:     {export}");
            }
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
    out.push_str(&fit::hanging("", 2, &line, width, |text| {
        if account.exit_code == 0 {
            style.good(text)
        } else {
            style.bold(text)
        }
    }));
    terminal_safe(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::ExitStatus;
    use gpuprobe_model::{DeviceRef, ProbeId};
    use gpuprobe_model::{
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
        let text = render_for(&account, Style::PLAIN, &options, None);
        assert!(
            text.contains(
                "use it: gpuprobe run --python /opt/venv/bin/python --profile '/tmp/my fixes/p.toml' -- <your command>   ·   gpuprobe profile export '/tmp/my fixes/p.toml' --format env"
            ),
            "{text}"
        );
    }

    #[test]
    fn text_columns_keep_their_words_and_share_what_is_left() {
        // All fit: each as wide as its longest line.
        assert_eq!(text_widths(&[(5, 10), (3, 20)], 40), [10, 20]);
        // Words fit: the rest shared by how much more each would take.
        assert_eq!(text_widths(&[(5, 15), (5, 45)], 30), [9, 21]);
        assert_eq!(text_widths(&[(5, 14), (5, 9), (21, 60)], 40), [8, 5, 27]);
        // Not even the words: their widths, never a panic.
        assert_eq!(text_widths(&[(20, 40), (10, 40)], 16), [20, 10]);
    }

    #[test]
    fn the_account_fits_80_columns_and_stays_whole_at_200() {
        use crate::test_support::widest;
        let mut account = account();
        account.notes = vec![
            "the search ran on the simulation: a real GPU may need another setting, run it again without --simulate".into(),
        ];
        account.reported = vec![gpuprobe_model::ReportedChange {
            kind: "kernel_param".into(),
            description:
                "Boot with amdgpu.sg_display=0 so that scatter-gather display buffers stay off"
                    .into(),
            setting: Some("amdgpu.sg_display=0".into()),
            cost: Cost {
                needs_reboot: true,
                ..Cost::default()
            },
            sources: vec!["RKB-001".into(), "CAT-SG-DISPLAY".into()],
        }];
        let colour = Style { color: true };
        let whole = render_for(&account, colour, &StackOptions::default(), None);
        assert!(widest(&whole) > 100, "{whole}");
        let narrow = render_for(&account, colour, &StackOptions::default(), Some(80));
        assert!(widest(&narrow) <= 80, "{narrow}");
        // Settings and probe ids are never split: they are copied into options.
        for whole_word in [
            "HSA_ENABLE_SDMA=0",
            "AMD_SERIALIZE_COPY=3",
            "copy.h2d.pageable.tiny.nonblocking",
            "gpuprobe run --profile /tmp/p.toml -- <your command>",
            "gpuprobe profile export /tmp/p.toml --format env",
        ] {
            assert!(narrow.contains(whole_word), "{whole_word}\n{narrow}");
        }
        // At 80 columns the failures' words do not fit beside the probe id: each row is
        // stacked; at 200 they are a table.
        assert!(narrow.contains("\n   cured by  "), "{narrow}");
        let wide = render_for(&account, colour, &StackOptions::default(), Some(200));
        assert!(wide.contains(" probe   "), "{wide}");
        let longest = whole.lines().max_by_key(|l| widest(l)).unwrap();
        assert!(wide.lines().any(|l| l == longest), "{wide}");
        assert!(widest(&wide) <= 200);
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
