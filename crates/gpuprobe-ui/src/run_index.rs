//! The runs the page shows: which directories are runs and whether each is over are
//! `gpuprobe_runner::scan_runs`'s (the same list `gpuprobe runs list` prints); this module
//! adds what a row of the page needs (the outcome, the stack in one line), the filter of
//! the list, and the one way from a name in a URL to a run directory ([`run_path`]).
//!
//! A run whose report cannot be read is listed as corrupt, with why, and never breaks the
//! list: every read here answers with a value, never an error.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::Report;
use gpuprobe_model::Tier;
use gpuprobe_runner::{Run, RunFileError, RunInfo, RunState, parse_run_dir_name};
use serde::Serialize;

/// What a run came to, as the list shows and filters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// Finished, exit 0.
    Pass,
    /// Finished with a problem (a failing, crashing, hanging or erroring probe, or too
    /// little judged).
    Fail,
    /// Not finished: in progress or interrupted.
    Unfinished,
    /// Its report is there but cannot be read.
    Corrupt,
}

impl Outcome {
    /// The filter's value and the CSS class of its pill.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Unfinished => "unfinished",
            Outcome::Corrupt => "corrupt",
        }
    }

    fn parse(text: &str) -> Option<Outcome> {
        [
            Outcome::Pass,
            Outcome::Fail,
            Outcome::Unfinished,
            Outcome::Corrupt,
        ]
        .into_iter()
        .find(|o| o.name() == text)
    }
}

/// One row of the runs page.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRow {
    /// The directory's name, which is the run's id in URLs.
    pub name: String,
    /// `check`, `fix`, `memtest`.
    pub command: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// The tier's name, or empty.
    pub tier: String,
    /// `finished`, `in progress`, `interrupted`.
    pub state: &'static str,
    /// What it came to.
    pub outcome: Outcome,
    /// The verdict counts in words (`12: 11 passed, 1 failed`).
    pub verdicts: String,
    /// The exit code, when it recorded one.
    pub exit_code: Option<u8>,
    /// The stack in one line (`torch 2.5.1 · nvidia 570.86 · kernel 6.8.0`), or empty.
    pub stack: String,
    /// Whether its results were SIMULATED.
    pub simulated: bool,
    /// Why its report cannot be read (a corrupt run).
    pub problem: Option<String>,
}

/// The list's filter, from the page's GET form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Filter {
    /// `pass`, `fail`, `unfinished`, `corrupt`, or empty for all.
    pub outcome: String,
    /// A tier's name, or empty.
    pub tier: String,
    /// Text the stack line must contain (case-insensitive), or empty.
    pub stack: String,
}

impl Filter {
    /// The filter a query asks for; unknown values are ignored (they filter nothing).
    pub(crate) fn from_query(query: &[(String, String)]) -> Filter {
        let get = |name: &str| {
            query
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        let outcome = get("verdict");
        let tier = get("tier");
        Filter {
            outcome: if Outcome::parse(&outcome).is_some() {
                outcome
            } else {
                String::new()
            },
            tier: if tier_named(&tier).is_some() {
                tier
            } else {
                String::new()
            },
            stack: get("stack"),
        }
    }

    /// Whether it keeps every row.
    pub(crate) fn is_empty(&self) -> bool {
        self.outcome.is_empty() && self.tier.is_empty() && self.stack.is_empty()
    }

    /// Its query pairs, as the form sends them (the empty ones left out).
    pub(crate) fn query(&self) -> Vec<(String, String)> {
        [
            ("verdict", &self.outcome),
            ("tier", &self.tier),
            ("stack", &self.stack),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
    }

    /// Whether a run may pass it, told from what `runs list` knows of it (no report read
    /// beyond its summary): never false for a run whose row [`Filter::keeps`], so the rows of
    /// the runs it rules out need not be made.
    fn may_keep(&self, info: &RunInfo, has_report: bool) -> bool {
        let finished = info.state == RunState::Finished;
        let tier_ok =
            self.tier.is_empty() || info.tier.is_some_and(|t| t.name() == self.tier.as_str());
        let outcome_ok = match self.outcome.as_str() {
            "pass" => finished && info.exit_code == Some(0),
            "fail" => finished && info.exit_code != Some(0),
            "unfinished" => !finished,
            "corrupt" => has_report,
            _ => true,
        };
        tier_ok && outcome_ok
    }

    /// Whether a row passes it.
    pub(crate) fn keeps(&self, row: &RunRow) -> bool {
        (self.outcome.is_empty() || row.outcome.name() == self.outcome)
            && (self.tier.is_empty() || row.tier == self.tier)
            && (self.stack.is_empty()
                || row
                    .stack
                    .to_lowercase()
                    .contains(&self.stack.to_lowercase()))
    }
}

/// The tier of that name.
pub(crate) fn tier_named(name: &str) -> Option<Tier> {
    [Tier::Quick, Tier::Standard, Tier::Full, Tier::Soak]
        .into_iter()
        .find(|t| t.name() == name)
}

/// The runs one page of the list shows at most.
pub(crate) const PAGE_SIZE: usize = 100;

/// One page of the list.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Page {
    /// Its rows, newest first.
    pub rows: Vec<RunRow>,
    /// Its number, from 1.
    pub number: usize,
    /// How many pages the runs the filter keeps fill (at least 1).
    pub pages: usize,
    /// The position of its first row among the runs the filter keeps, from 1 (0: none).
    pub first: usize,
    /// How many runs the filter keeps.
    pub matching: usize,
    /// How many runs the runs directory holds.
    pub total: usize,
    /// The URL of the page before, with the same filter, when there is one.
    pub previous: Option<String>,
    /// The URL of the page after, when there is one.
    pub next: Option<String>,
}

/// Page `number` (from 1; one past the end is the last) of the runs under `root` that
/// `filter` keeps, newest first. Which directories are runs, and their order, come from their
/// names alone; only the runs the page shows are read, unless a filter is set, which needs
/// every run's outcome, tier and stack (read from its plan and report, never its size on
/// disk).
pub(crate) fn page(root: &Path, filter: &Filter, number: usize) -> Result<Page, String> {
    let names = gpuprobe_runner::scan_run_names(root)
        .map_err(|e| format!("cannot read the runs directory {}: {e}", root.display()))?;
    let now = SystemTime::now();
    let read = |(name, path): &(String, PathBuf)| {
        gpuprobe_runner::inspect_run(path, name, now).map(|info| row(&info))
    };
    let total = names.len();
    let (matching, rows, number, pages) = if filter.is_empty() {
        let pages = total.div_ceil(PAGE_SIZE).max(1);
        let number = number.clamp(1, pages);
        let shown = names.iter().skip((number - 1) * PAGE_SIZE).take(PAGE_SIZE);
        (total, shown.filter_map(read).collect(), number, pages)
    } else {
        // The outcome and tier rule out most runs from what `runs list` reads; only the
        // others' reports are read for their stack.
        let kept: Vec<RunRow> = names
            .iter()
            .filter_map(|(name, path)| gpuprobe_runner::inspect_run(path, name, now))
            .filter(|info| {
                let has_report = Run::open(&info.path).is_ok_and(|run| run.check().has_report());
                filter.may_keep(info, has_report)
            })
            .map(|info| row(&info))
            .filter(|r| filter.keeps(r))
            .collect();
        let pages = kept.len().div_ceil(PAGE_SIZE).max(1);
        let number = number.clamp(1, pages);
        let matching = kept.len();
        let rows = kept
            .into_iter()
            .skip((number - 1) * PAGE_SIZE)
            .take(PAGE_SIZE)
            .collect();
        (matching, rows, number, pages)
    };
    let link = |to: usize| {
        let mut query = filter.query();
        query.push(("page".to_string(), to.to_string()));
        crate::gate::with_query("/", &query)
    };
    Ok(Page {
        rows,
        number,
        pages,
        first: if matching == 0 {
            0
        } else {
            (number - 1) * PAGE_SIZE + 1
        },
        matching,
        total,
        previous: (number > 1).then(|| link(number - 1)),
        next: (number < pages).then(|| link(number + 1)),
    })
}

/// What a row needs of a report: the stack, and whether it was simulated. The results are
/// skimmed for their simulation flag only.
#[derive(serde::Deserialize)]
struct RowView {
    #[serde(default)]
    fingerprint: Fingerprint,
    #[serde(default)]
    simulation: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    results: Vec<SimulatedFlag>,
}

#[derive(serde::Deserialize)]
struct SimulatedFlag {
    #[serde(default)]
    simulated: bool,
}

/// The names of every run under `root`, newest first, from the directory's names alone (no
/// run file is read); none when the runs directory cannot be read.
pub(crate) fn run_names(root: &Path) -> Vec<String> {
    gpuprobe_runner::scan_run_names(root)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// What a run's report says, or why it cannot be read; `None` when it has none yet.
pub(crate) fn read_report(path: &Path) -> Option<Result<Report, String>> {
    let run = Run::open(path).ok()?;
    let check = run.check();
    if !check.has_report() {
        return None;
    }
    Some(check.read_report().map_err(|e| describe(&e, path)))
}

/// A run file's error, its path shown from the run directory on.
fn describe(error: &RunFileError, run: &Path) -> String {
    let text = error.to_string();
    let prefix = format!("{}/", run.display());
    text.replace(&prefix, "")
}

fn row(info: &RunInfo) -> RunRow {
    let report = Run::open(&info.path).ok().and_then(|run| {
        let check = run.check();
        check.has_report().then(|| {
            check
                .read_report_as::<RowView>()
                .map_err(|e| describe(&e, &info.path))
        })
    });
    let (stack, simulated, problem) = match &report {
        Some(Ok(report)) => (
            stack_line(&report.fingerprint),
            report.simulation.is_some() || report.results.iter().any(|r| r.simulated),
            None,
        ),
        Some(Err(why)) => (String::new(), false, Some(why.clone())),
        None => (String::new(), false, None),
    };
    let outcome = if problem.is_some() {
        Outcome::Corrupt
    } else if info.state != RunState::Finished {
        Outcome::Unfinished
    } else if info.exit_code == Some(0) {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    RunRow {
        name: info.name.clone(),
        command: info.command.clone(),
        started_at: info.started_at.clone(),
        tier: info.tier.map(|t| t.name().to_string()).unwrap_or_default(),
        state: info.state.label(),
        outcome,
        verdicts: info
            .verdicts
            .as_ref()
            .map(gpuprobe_report::run_verdict_text)
            .unwrap_or_else(|| "no results".into()),
        exit_code: info.exit_code,
        stack,
        simulated,
        problem,
    }
}

/// The stack a run ran on, in one line: torch, the GPU driver, the kernel, the GPUs.
pub(crate) fn stack_line(fp: &Fingerprint) -> String {
    let mut parts = Vec::new();
    if let Some(torch) = fp.python.as_ref().and_then(|p| p.torch.as_ref()) {
        parts.push(format!("torch {}", torch.version));
    }
    if let Some(version) = fp.nvidia.as_ref().and_then(|d| d.version.as_ref()) {
        parts.push(format!("nvidia {version}"));
    }
    if let Some(version) = fp.amdgpu.as_ref().and_then(|d| d.version.as_ref()) {
        parts.push(format!("amdgpu {version}"));
    }
    if let Some(kernel) = &fp.host.kernel_release {
        parts.push(format!("kernel {kernel}"));
    }
    let gpus: Vec<&str> = fp.gpus.iter().filter_map(|g| g.name.as_deref()).collect();
    if !gpus.is_empty() {
        parts.push(gpus.join(", "));
    }
    parts.join(" · ")
}

/// The run directory a URL names: only a name `check`, `fix` or `memtest` make
/// (`check-2026-11-22T10-04-05-123`: letters, digits and dashes, so neither `/` nor `..`),
/// of a directory right under `root` that is no link and resolves inside it.
pub(crate) fn run_path(root: &Path, name: &str) -> Option<PathBuf> {
    if name.is_empty()
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        || parse_run_dir_name(name).is_none()
    {
        return None;
    }
    let path = root.join(name);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_dir() {
        return None;
    }
    let real_root = std::fs::canonicalize(root).ok()?;
    let real = std::fs::canonicalize(&path).ok()?;
    (real.parent() == Some(real_root.as_path())).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_runner::scan_runs;

    const NAME: &str = "check-2026-11-22T10-04-05-123";

    #[test]
    fn only_a_run_directory_right_under_the_root_is_served() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join(NAME);
        std::fs::create_dir(&run).unwrap();
        assert_eq!(run_path(root.path(), NAME), Some(run.clone()));
        let outside = tempfile::tempdir().unwrap();
        let linked = "check-2026-11-22T10-04-06-1";
        std::os::unix::fs::symlink(outside.path(), root.path().join(linked)).unwrap();
        for bad in [
            "",
            "..",
            "../etc",
            "check-2026-11-22T10-04-05-123/..",
            "check-2026-11-22T10-04-05-123/workers",
            "%2e%2e",
            "check-2026-11-22T10-04-05-999",
            "notarun",
            linked,
            "check-2026-11-22T10-04-05-12\0",
        ] {
            assert_eq!(run_path(root.path(), bad), None, "{bad:?}");
        }
        // A file by a run's name is no run either.
        let file = "check-2026-11-22T10-04-07-1";
        std::fs::write(root.path().join(file), "x").unwrap();
        assert_eq!(run_path(root.path(), file), None);
    }

    #[test]
    fn a_page_reads_only_its_runs_and_keeps_the_filter_in_its_links() {
        let root = tempfile::tempdir().unwrap();
        // 250 runs, one a minute; every tenth has a corrupt report.
        for i in 0..250 {
            let name = format!("check-2026-11-22T{:02}-{:02}-00-1", 10 + i / 60, i % 60);
            let run = root.path().join(&name);
            std::fs::create_dir_all(run.join("workers")).unwrap();
            if i % 10 == 0 {
                std::fs::write(run.join(gpuprobe_runner::REPORT_FILE), "[").unwrap();
            }
        }
        let all = Filter::default();
        let first = page(root.path(), &all, 1).unwrap();
        assert_eq!((first.rows.len(), first.pages, first.total), (100, 3, 250));
        assert_eq!(first.rows[0].name, "check-2026-11-22T14-09-00-1");
        assert_eq!(first.previous, None);
        assert_eq!(first.next.as_deref(), Some("/?page=2"));
        let last = page(root.path(), &all, 99).unwrap();
        assert_eq!((last.number, last.rows.len(), last.first), (3, 50, 201));
        assert_eq!(last.rows[49].name, "check-2026-11-22T10-00-00-1");
        assert_eq!(last.next, None);
        // A filter reads every run, and its links keep it.
        let corrupt = Filter::from_query(&[
            ("verdict".to_string(), "corrupt".to_string()),
            ("stack".to_string(), "".to_string()),
        ]);
        let kept = page(root.path(), &corrupt, 1).unwrap();
        assert_eq!((kept.matching, kept.pages, kept.rows.len()), (25, 1, 25));
        assert!(kept.rows.iter().all(|r| r.outcome == Outcome::Corrupt));
        let stack = Filter::from_query(&[("stack".to_string(), "torch 2.5 & x".to_string())]);
        let none = page(root.path(), &stack, 1).unwrap();
        assert_eq!((none.matching, none.first, none.rows.len()), (0, 0, 0));
        let many = Filter {
            outcome: "unfinished".into(),
            ..Filter::default()
        };
        let p = page(root.path(), &many, 2).unwrap();
        assert_eq!((p.matching, p.number), (225, 2));
        assert_eq!(p.previous.as_deref(), Some("/?verdict=unfinished&page=1"));
        assert_eq!(p.next.as_deref(), Some("/?verdict=unfinished&page=3"));
        let q = Filter {
            stack: "torch 2.5 & x".into(),
            ..Filter::default()
        };
        assert_eq!(
            q.query(),
            [("stack".to_string(), "torch 2.5 & x".to_string())]
        );
    }

    fn row_of(outcome: Outcome, tier: &str, stack: &str) -> RunRow {
        RunRow {
            name: NAME.into(),
            command: "check".into(),
            started_at: String::new(),
            tier: tier.into(),
            state: "finished",
            outcome,
            verdicts: String::new(),
            exit_code: None,
            stack: stack.into(),
            simulated: false,
            problem: None,
        }
    }

    #[test]
    fn the_filter_keeps_what_every_field_given_allows() {
        let q = |items: &[(&str, &str)]| {
            Filter::from_query(
                &items
                    .iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        let pass = row_of(Outcome::Pass, "quick", "torch 2.5.1 · kernel 6.8");
        let fail = row_of(Outcome::Fail, "full", "torch 2.6.0 · nvidia 570");
        let all = q(&[]);
        assert!(all.keeps(&pass) && all.keeps(&fail));
        let f = q(&[("verdict", "fail")]);
        assert!(!f.keeps(&pass) && f.keeps(&fail));
        let f = q(&[("tier", "quick"), ("stack", "TORCH 2.5")]);
        assert!(f.keeps(&pass) && !f.keeps(&fail));
        let f = q(&[("stack", "nvidia")]);
        assert!(!f.keeps(&pass) && f.keeps(&fail));
        // Unknown values filter nothing.
        let f = q(&[("verdict", "<script>"), ("tier", "huge")]);
        assert_eq!(f, Filter::default());
    }

    /// Every run under `root`, newest first, as rows, unpaged (the server shows
    /// [`page`]s); a runs directory that cannot be read is the error's text.
    fn rows(root: &Path) -> Result<Vec<RunRow>, String> {
        let runs = scan_runs(root, SystemTime::now())
            .map_err(|e| format!("cannot read the runs directory {}: {e}", root.display()))?;
        Ok(runs.iter().map(row).collect())
    }

    #[test]
    fn a_corrupt_report_is_a_row_that_says_so() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join(NAME);
        std::fs::create_dir_all(run.join("workers")).unwrap();
        std::fs::write(run.join(gpuprobe_runner::REPORT_FILE), "{\"schema").unwrap();
        let listed = rows(root.path()).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].outcome, Outcome::Corrupt);
        let why = listed[0].problem.as_deref().unwrap();
        assert!(why.contains("is not a gpuprobe report"), "{why}");
        assert!(!why.contains(&root.path().display().to_string()), "{why}");
        assert!(rows(&root.path().join("missing")).unwrap().is_empty());
    }
}
