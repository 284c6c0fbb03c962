//! `gpuprobe runs`: `runs list` shows the run directories under the state directory,
//! `runs prune` removes old ones, and [`after_check`] says what the retention applied at the
//! end of every `check` did. Which directories are runs, whether each is over and which to
//! remove are `gpuprobe_runner::runs`'s; the words are `gpuprobe_report::runs`'s, given the
//! runs as plain values ([`listed`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use gpuprobe_model::ExitStatus;
use gpuprobe_model::visible;
use gpuprobe_report::{ListedRun, RetentionAccount};
use gpuprobe_runner::{
    DEFAULT_KEEP, KEEP_ENV, Policy, Retention, RunInfo, keep_from_env, parse_age, scan_runs,
};

use crate::cli::{RunsAction, RunsArgs};
use crate::errors::CliError;
use crate::errors::{Internal, Result};
use crate::paths;

use super::process_env;

/// Runs `runs`.
pub(super) fn run(args: RunsArgs) -> Result<ExitStatus> {
    let env = process_env();
    let root = paths::runs_root(&env);
    let now = SystemTime::now();
    let runs = scan_runs(&root, now).map_err(|source| CliError::UnreadableRunsDir {
        root: root.clone(),
        source,
    })?;
    let mut out = crate::output::stdout();
    match args.action {
        RunsAction::List { json: true } => {
            let document = serde_json::json!({
                "root": root,
                "total_bytes": runs.iter().map(|r| r.bytes).sum::<u64>(),
                // The retention after each check: null when it is off or its variable is unusable.
                "keep_after_check": keep_from_env(&env).ok().flatten(),
                "runs": runs,
            });
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&document).internal()?
            )
            .internal()?;
        }
        RunsAction::List { json: false } => {
            let listed: Vec<ListedRun> = runs.iter().map(listed).collect();
            write!(
                out,
                "{}",
                gpuprobe_report::render_run_list(&root, &listed, keep_from_env(&env), DEFAULT_KEEP)
            )
            .internal()?;
        }
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
            let policy = match (keep, older_than) {
                (None, None) => match keep_from_env(&env).map_err(CliError::BadRetention)? {
                    Some(keep) => Policy {
                        keep: Some(keep),
                        older_than: None,
                    },
                    None => {
                        writeln!(
                            out,
                            "nothing pruned: {KEEP_ENV}=0 turns the retention off; pass --keep N or --older-than D"
                        ).internal()?;
                        return Ok(ExitStatus::AllPassed);
                    }
                },
                (keep, older_than) => Policy { keep, older_than },
            };
            prune(&root, &runs, policy, now, dry_run)?;
        }
    }
    Ok(ExitStatus::AllPassed)
}

/// `runs prune`: removes what the policy selects and says what it did.
fn prune(
    root: &Path,
    runs: &[RunInfo],
    policy: Policy,
    now: SystemTime,
    dry_run: bool,
) -> Result<()> {
    let pruned = gpuprobe_runner::prune_runs(runs, policy, now, dry_run);
    let removed: Vec<ListedRun> = pruned.removed.iter().map(|run| listed(run)).collect();
    let spared: Vec<(ListedRun, &str)> = pruned
        .spared
        .iter()
        .map(|(run, why)| (listed(run), *why))
        .collect();
    write!(
        crate::output::stdout(),
        "{}",
        gpuprobe_report::render_prune(root, runs.len(), &removed, &spared, dry_run)
    )
    .internal()?;
    if !pruned.failures.is_empty() {
        let failures = pruned
            .failures
            .iter()
            .map(|(run, e)| format!("{}: {e}", visible(&run.name)))
            .collect();
        return Err(CliError::PruneFailed { failures }.into());
    }
    Ok(())
}

/// Says what the retention at the end of a `check` did (see
/// [`gpuprobe_runner::after_check`]): never fails the check; what it removed, or why
/// it could not, is one line on stderr.
pub(crate) fn after_check(env: &BTreeMap<String, String>, run_dir: &Path) {
    let account = match gpuprobe_runner::after_check(env, run_dir) {
        Retention::NotHere | Retention::Off => RetentionAccount::Quiet,
        Retention::BadSetting(why) => RetentionAccount::BadSetting(why),
        Retention::ScanFailed(e) => RetentionAccount::ScanFailed(e),
        Retention::Pruned {
            keep,
            root,
            removed,
            freed,
            failures,
        } => RetentionAccount::Pruned {
            keep,
            root,
            removed,
            freed,
            failures,
        },
    };
    for line in gpuprobe_report::retention_lines(&account) {
        gpuprobe_report::console_note(&format!("gpuprobe: {line}"));
    }
}

/// A run as the words of `runs` take it.
fn listed(run: &RunInfo) -> ListedRun {
    ListedRun {
        name: run.name.clone(),
        started_at: run.started_at.clone(),
        tier: run.tier,
        state: run.state.label(),
        exit_code: run.exit_code,
        bytes: run.bytes,
        holds_profile: run.holds_profile,
        verdicts: run.verdicts,
    }
}
