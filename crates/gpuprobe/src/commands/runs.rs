//! `gpuprobe runs`: `runs list` shows the run directories under the state directory,
//! `runs prune` removes old ones, and [`after_check`] says what the retention applied at the
//! end of every `check` did. Which directories are runs, whether each is over and which to
//! remove are `gpuprobe_runner::runs`'s; this module parses the arguments and renders.

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;
use gpuprobe_model::ExitStatus;
use gpuprobe_model::report::Summary;
use gpuprobe_model::text::visible;
use gpuprobe_runner::runs::{
    self, DEFAULT_KEEP, KEEP_ENV, Policy, Retention, RunInfo, keep_from_env, parse_age, plan, scan,
};

use crate::cli::{RunsAction, RunsArgs};
use crate::errors::CliError;
use crate::paths;

use super::process_env;

/// Sizes for people: `512 B`, `1.9 MB` (powers of 1000, as `du --si`).
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 999.95 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `103: 100 passed, 2 failed, 1 skipped` (only the verdicts that occur).
fn verdict_text(summary: &Summary) -> String {
    let parts: Vec<String> = [
        (summary.passed, "passed"),
        (summary.failed, "failed"),
        (summary.crashed, "crashed"),
        (summary.hung, "hung"),
        (summary.errors, "errors"),
        (summary.skipped, "skipped"),
        (summary.not_tested, "not tested"),
    ]
    .into_iter()
    .filter(|(count, _)| *count > 0)
    .map(|(count, label)| format!("{count} {label}"))
    .collect();
    if parts.is_empty() {
        "no results".into()
    } else {
        format!("{}: {}", summary.total, parts.join(", "))
    }
}

/// Runs `runs`.
pub(super) fn run(args: RunsArgs) -> Result<ExitStatus> {
    let env = process_env();
    let root = paths::runs_root(&env);
    let now = SystemTime::now();
    let runs = scan(&root, now).map_err(|source| CliError::UnreadableRunsDir {
        root: root.clone(),
        source,
    })?;
    match args.action {
        RunsAction::List { json } => list(&root, &runs, &env, json)?,
        RunsAction::Prune {
            keep,
            older_than,
            dry_run,
        } => {
            let older_than = older_than
                .as_deref()
                .map(parse_age)
                .transpose()
                .map_err(CliError::BadRetention)?;
            let policy = if keep.is_none() && older_than.is_none() {
                match keep_from_env(&env).map_err(CliError::BadRetention)? {
                    Some(keep) => Policy {
                        keep: Some(keep),
                        older_than: None,
                    },
                    None => {
                        writeln!(
                            crate::output::stdout(),
                            "nothing pruned: {KEEP_ENV}=0 turns the retention off; pass --keep N or --older-than D"
                        )?;
                        return Ok(ExitStatus::AllPassed);
                    }
                }
            } else {
                Policy { keep, older_than }
            };
            prune(&root, &runs, policy, now, dry_run)?;
        }
    }
    Ok(ExitStatus::AllPassed)
}

/// `runs list`.
fn list(
    root: &Path,
    runs: &[RunInfo],
    env: &std::collections::BTreeMap<String, String>,
    json: bool,
) -> Result<()> {
    let total: u64 = runs.iter().map(|r| r.bytes).sum();
    let mut out = crate::output::stdout();
    if json {
        let document = serde_json::json!({
            "root": root,
            "total_bytes": total,
            // The retention after each check: null when it is off or its variable is unusable.
            "keep_after_check": keep_from_env(env).ok().flatten(),
            "runs": runs,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&document)?)?;
        return Ok(());
    }
    let root_text = visible(&root.display().to_string()).into_owned();
    if runs.is_empty() {
        writeln!(out, "no runs in {root_text}")?;
        return Ok(());
    }
    writeln!(
        out,
        "{} run(s) in {root_text}, {} in all, newest first:",
        runs.len(),
        human_bytes(total)
    )?;
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(|r| {
            [
                visible(&r.name).into_owned(),
                r.started_at.clone(),
                r.tier.map_or("-".into(), |t| t.name().to_string()),
                r.state.label().to_string() + if r.holds_profile { " (profile)" } else { "" },
                r.exit_code.map_or("-".into(), |c| c.to_string()),
                human_bytes(r.bytes),
                r.verdicts.as_ref().map_or("-".into(), verdict_text),
            ]
        })
        .collect();
    let header = [
        "RUN", "STARTED", "TIER", "STATE", "EXIT", "SIZE", "VERDICTS",
    ]
    .map(String::from);
    let widths: Vec<usize> = (0..7)
        .map(|i| {
            rows.iter()
                .chain(std::iter::once(&header))
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in std::iter::once(&header).chain(rows.iter()) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        writeln!(out, "  {}", line.join("  ").trim_end())?;
    }
    writeln!(
        out,
        "remove old runs with `gpuprobe runs prune --keep N` or `--older-than 7d`; every check keeps the newest {} ({KEEP_ENV}; 0 keeps all)",
        match keep_from_env(env) {
            Ok(Some(keep)) => keep.to_string(),
            Ok(None) => "(off)".into(),
            Err(_) => format!("{DEFAULT_KEEP}? ({KEEP_ENV} is not a number)"),
        }
    )?;
    Ok(())
}

/// `runs prune`: removes what [`plan`] selects and says what it did.
fn prune(
    root: &Path,
    runs: &[RunInfo],
    policy: Policy,
    now: SystemTime,
    dry_run: bool,
) -> Result<()> {
    let (remove, spared) = plan(runs, policy, now, None);
    let mut out = crate::output::stdout();
    let verb = if dry_run { "would remove" } else { "removed" };
    let mut freed = 0;
    let mut removed = 0;
    let mut failures = Vec::new();
    for run in &remove {
        if !dry_run {
            match runs::remove(run) {
                Ok(true) => {}
                // Another prune (a check finishing beside this one) got there first.
                Ok(false) => continue,
                Err(e) => {
                    failures.push(format!("{}: {e}", visible(&run.name)));
                    continue;
                }
            }
        }
        removed += 1;
        freed += run.bytes;
        writeln!(
            out,
            "{verb} {} ({}, {}, {})",
            visible(&run.name),
            run.started_at,
            run.state.label(),
            human_bytes(run.bytes)
        )?;
    }
    for (run, why) in &spared {
        writeln!(out, "kept {}: {why}", visible(&run.name))?;
    }
    let (freed_verb, left_verb) = if dry_run {
        ("would be freed", "would be left")
    } else {
        ("freed", "left")
    };
    writeln!(
        out,
        "{verb} {removed} run(s), {} {freed_verb}; {} run(s) {left_verb} in {}",
        human_bytes(freed),
        runs.len() - removed,
        visible(&root.display().to_string())
    )?;
    if !failures.is_empty() {
        return Err(CliError::PruneFailed { failures }.into());
    }
    Ok(())
}

/// Says what the retention at the end of a `check` did (see
/// [`gpuprobe_runner::runs::after_check`]): never fails the check; what it removed, or why
/// it could not, is one line on stderr.
pub(crate) fn after_check(env: &std::collections::BTreeMap<String, String>, run_dir: &Path) {
    let say = |line: String| crate::output::eprint_line(&format!("gpuprobe: {line}"));
    match runs::after_check(env, run_dir) {
        Retention::NotHere | Retention::Off => {}
        Retention::BadSetting(why) => say(format!("{why}; no old run was pruned")),
        Retention::ScanFailed(e) => say(format!("could not prune old runs: {e}")),
        Retention::Pruned {
            keep,
            root,
            removed,
            freed,
            failures,
        } => {
            for (name, e) in failures {
                say(format!("could not remove old run {}: {e}", visible(&name)));
            }
            if removed > 0 {
                say(format!(
                    "removed {removed} old run(s) from {} ({} freed); {KEEP_ENV} sets how many are kept (now {keep}; 0 keeps all)",
                    visible(&root.display().to_string()),
                    human_bytes(freed)
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_knows_where_fix_marks_a_finished_search() {
        assert_eq!(
            runs::FIX_ACCOUNT_FILE,
            gpuprobe_doctor::fix::options::ACCOUNT_FILE
        );
    }

    #[test]
    fn sizes_read_as_du_si_does() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1000), "1.0 kB");
        assert_eq!(human_bytes(1_949_000), "1.9 MB");
        assert_eq!(human_bytes(999_960), "1.0 MB");
        assert_eq!(human_bytes(5_000_000_000), "5.0 GB");
    }

    #[test]
    fn verdicts_name_only_what_occurs() {
        let summary = Summary {
            total: 103,
            passed: 100,
            failed: 2,
            skipped: 1,
            ..Summary::default()
        };
        assert_eq!(
            verdict_text(&summary),
            "103: 100 passed, 2 failed, 1 skipped"
        );
        assert_eq!(verdict_text(&Summary::default()), "no results");
    }
}
