//! The text of `gpuprobe runs`: the table of run directories, the lines a prune prints, and
//! the one stderr line a `check` prints when its retention removed old runs. Which
//! directories are runs and which to remove are the runner's to decide; the caller hands
//! this module what was decided as plain values ([`ListedRun`], [`RetentionAccount`]), and
//! it words them. Run names and paths come from the disk, so every one goes out through
//! [`visible`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use gpuprobe_model::Summary;
use gpuprobe_model::Tier;
use gpuprobe_model::env_vars::GPUPROBE_KEEP_RUNS as KEEP_ENV;
use gpuprobe_model::visible;

/// One run directory, as the texts of `runs` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRun {
    /// The directory's name.
    pub name: String,
    /// Its start, RFC 3339 UTC.
    pub started_at: String,
    /// The tier it ran, when it ran one.
    pub tier: Option<Tier>,
    /// Whether it is over, in words (`finished`, `in progress`, `interrupted`).
    pub state: &'static str,
    /// The exit code it earned, when it recorded one.
    pub exit_code: Option<u8>,
    /// Space it takes on disk.
    pub bytes: u64,
    /// Whether it holds a `fix` profile.
    pub holds_profile: bool,
    /// Its verdict counts, when it has any.
    pub verdicts: Option<Summary>,
}

/// What the retention after a `check` did, as far as it is worth a line.
#[derive(Debug)]
pub enum RetentionAccount {
    /// Nothing to say: the check kept its run elsewhere, or the retention is off.
    Quiet,
    /// The retention's variable is unusable; the message says so.
    BadSetting(String),
    /// The runs directory could not be read.
    ScanFailed(std::io::Error),
    /// Old runs were pruned.
    Pruned {
        /// How many runs are kept.
        keep: usize,
        /// The runs directory.
        root: PathBuf,
        /// How many runs were removed.
        removed: usize,
        /// Bytes they took.
        freed: u64,
        /// The runs that could not be removed, by name, with why.
        failures: Vec<(String, std::io::Error)>,
    },
}

/// Disk sizes for people: `512 B`, `1.9 MB` (powers of 1000, as `du --si` prints them;
/// memory sizes use binary units instead, `gpuprobe_detect::human_bytes`).
pub(crate) fn disk_bytes(bytes: u64) -> String {
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
pub fn verdict_text(summary: &Summary) -> String {
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

/// `runs list` for people. `keep_after_check` is what `GPUPROBE_KEEP_RUNS` reads as: the
/// number kept, `None` when the retention is off, an error when the variable is unusable
/// (then the default, `default_keep`, is shown in doubt).
pub fn render_list(
    root: &Path,
    runs: &[ListedRun],
    keep_after_check: Result<Option<usize>, String>,
    default_keep: usize,
) -> String {
    let root_text = visible(&root.display().to_string()).into_owned();
    if runs.is_empty() {
        return format!("no runs in {root_text}\n");
    }
    let total: u64 = runs.iter().map(|r| r.bytes).sum();
    let mut out = format!(
        "{} run(s) in {root_text}, {} in all, newest first:\n",
        runs.len(),
        disk_bytes(total)
    );
    let header = [
        "RUN", "STARTED", "TIER", "STATE", "EXIT", "SIZE", "VERDICTS",
    ]
    .map(String::from);
    let rows: Vec<[String; 7]> = runs.iter().map(list_row).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .chain(std::iter::once(&header))
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in std::iter::once(&header).chain(rows.iter()) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
    let kept = match keep_after_check {
        Ok(Some(keep)) => keep.to_string(),
        Ok(None) => "(off)".into(),
        Err(_) => format!("{default_keep}? ({KEEP_ENV} is not a number)"),
    };
    let _ = writeln!(
        out,
        "remove old runs with `gpuprobe runs prune --keep N` or `--older-than 7d`; every check keeps the newest {kept} ({KEEP_ENV}; 0 keeps all)"
    );
    out
}

fn list_row(run: &ListedRun) -> [String; 7] {
    [
        visible(&run.name).into_owned(),
        run.started_at.clone(),
        run.tier.map_or("-".into(), |t| t.name().to_string()),
        run.state.to_string() + if run.holds_profile { " (profile)" } else { "" },
        run.exit_code.map_or("-".into(), |c| c.to_string()),
        disk_bytes(run.bytes),
        run.verdicts.as_ref().map_or("-".into(), verdict_text),
    ]
}

/// One line of `runs prune`: `removed NAME (STARTED, STATE, SIZE)`, or `would remove ...`
/// on a dry run.
fn prune_line(run: &ListedRun, dry_run: bool) -> String {
    format!(
        "{} {} ({}, {}, {})",
        if dry_run { "would remove" } else { "removed" },
        visible(&run.name),
        run.started_at,
        run.state,
        disk_bytes(run.bytes)
    )
}

/// The line for a run the prune's policy selected but spared, and why.
fn spared_line(run: &ListedRun, why: &str) -> String {
    format!("kept {}: {why}", visible(&run.name))
}

/// The closing line of `runs prune`.
fn prune_summary(root: &Path, removed: usize, freed: u64, left: usize, dry_run: bool) -> String {
    let (verb, freed_verb, left_verb) = if dry_run {
        ("would remove", "would be freed", "would be left")
    } else {
        ("removed", "freed", "left")
    };
    format!(
        "{verb} {removed} run(s), {} {freed_verb}; {left} run(s) {left_verb} in {}",
        disk_bytes(freed),
        visible(&root.display().to_string())
    )
}

/// All of `runs prune`'s account: a line per run removed (or that would be, on a dry run),
/// a line per run the policy selected but spared, with why, and the closing line; `total`
/// is how many runs there were.
pub fn render_prune(
    root: &Path,
    total: usize,
    removed: &[ListedRun],
    spared: &[(ListedRun, &str)],
    dry_run: bool,
) -> String {
    let mut out = String::new();
    for run in removed {
        let _ = writeln!(out, "{}", prune_line(run, dry_run));
    }
    for (run, why) in spared {
        let _ = writeln!(out, "{}", spared_line(run, why));
    }
    let freed = removed.iter().map(|run| run.bytes).sum();
    let _ = writeln!(
        out,
        "{}",
        prune_summary(root, removed.len(), freed, total - removed.len(), dry_run)
    );
    out
}

/// What the retention at the end of a `check` did, as lines for stderr (none when it did
/// nothing worth saying). It never fails the check.
pub fn retention_lines(retention: &RetentionAccount) -> Vec<String> {
    match retention {
        RetentionAccount::Quiet => Vec::new(),
        RetentionAccount::BadSetting(why) => vec![format!("{why}; no old run was pruned")],
        RetentionAccount::ScanFailed(e) => vec![format!("could not prune old runs: {e}")],
        RetentionAccount::Pruned {
            keep,
            root,
            removed,
            freed,
            failures,
        } => {
            let mut lines: Vec<String> = failures
                .iter()
                .map(|(name, e)| format!("could not remove old run {}: {e}", visible(name)))
                .collect();
            if *removed > 0 {
                lines.push(format!(
                    "removed {removed} old run(s) from {} ({} freed); {KEEP_ENV} sets how many are kept (now {keep}; 0 keeps all)",
                    visible(&root.display().to_string()),
                    disk_bytes(*freed)
                ));
            }
            lines
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_du_si_does() {
        assert_eq!(disk_bytes(0), "0 B");
        assert_eq!(disk_bytes(999), "999 B");
        assert_eq!(disk_bytes(1000), "1.0 kB");
        assert_eq!(disk_bytes(1_949_000), "1.9 MB");
        assert_eq!(disk_bytes(999_960), "1.0 MB");
        assert_eq!(disk_bytes(5_000_000_000), "5.0 GB");
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

    #[test]
    fn an_empty_state_directory_says_so() {
        let text = render_list(Path::new("/s/runs"), &[], Ok(Some(20)), 20);
        assert_eq!(text, "no runs in /s/runs\n");
    }

    #[test]
    fn a_hostile_root_is_shown_inert() {
        let text = prune_summary(Path::new("/s/\u{1b}[2Jruns"), 0, 0, 3, true);
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(
            text.starts_with("would remove 0 run(s), 0 B would be freed; 3 run(s) would be left")
        );
    }
}
