//! The run directories that `check`, `fix` and `memtest` leave under the state directory
//! ([`crate::paths::runs_root`]): finding them ([`scan`]), judging whether each is over
//! ([`RunState`]), choosing which to remove ([`plan`], [`Policy`]) and the retention applied
//! after every `check` ([`after_check`]). The binary's `runs` command renders them.
//!
//! Only what is recognisably gpuprobe's is touched: a directory (not a link) with the name
//! [`crate::paths::new_run_dir`] gives (`<command>-<UTC stamp>-<pid>`) and the `workers/`
//! directory that [`crate::RunDir::create`] makes first. Anything else under the state
//! directory is neither listed nor removed.
//!
//! Whether a run is still going is judged from what it holds: a run with its finished marker
//! (`report.json` for `check`, `fix.json` for `fix`, the one result of `memtest`) is
//! finished; one without is in progress while its writer lock (`writer.lock`, which the
//! process writing the run holds and the kernel frees when that process ends, however it
//! ends) is held, and interrupted once it is free. A run without the lock file (made before
//! it existed, or whose process has not started writing) is in progress while the process
//! named in the directory is a live gpuprobe, or while anything in it changed within the last
//! hour (a `check --resume` runs under another process; a home directory shared between
//! hosts hides the process), and interrupted after that. Runs in progress are never removed,
//! nor are runs holding a `fix` profile (`profile.toml`, which `run --profile` may still
//! read from there).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use gpuprobe_model::Summary;
use gpuprobe_model::Tier;
use gpuprobe_model::{ExitStatus, env_vars};
use serde::{Deserialize, Serialize};

use crate::paths;
use crate::rundir::{RunFiles, WORKERS_DIR};

/// Runs kept by the retention applied after each `check`, unless [`KEEP_ENV`] says otherwise.
pub const DEFAULT_KEEP: usize = 20;
/// The variable that sets the retention after each `check` (`0`: never prune).
pub const KEEP_ENV: &str = env_vars::GPUPROBE_KEEP_RUNS;
/// How recently a run without its finished marker must have changed to count as in progress
/// when its process cannot be seen. An hour is longer than any probe's timeout at the default
/// scale, during which a live run writes at least a result or a worker log.
const ACTIVE_WINDOW: Duration = Duration::from_secs(3600);
/// Whether a run is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Its finished marker is there.
    Finished,
    /// No finished marker, and its process is alive or it changed within the last hour.
    InProgress,
    /// No finished marker, no live process, nothing new for an hour: it was killed or
    /// crashed (`check --resume` finishes a check).
    Interrupted,
}

impl RunState {
    /// How `runs list` names it.
    pub fn label(self) -> &'static str {
        match self {
            RunState::Finished => "finished",
            RunState::InProgress => "in progress",
            RunState::Interrupted => "interrupted",
        }
    }
}

/// One run directory, as `runs list --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    /// The directory's name.
    pub name: String,
    /// The directory.
    pub path: PathBuf,
    /// The command that made it.
    pub command: String,
    /// Its start, RFC 3339 UTC (from the name).
    pub started_at: String,
    /// The tier it ran (a `fix`: its starting check's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// Finished, in progress or interrupted.
    pub state: RunState,
    /// Verdict counts: the report's, else the results recorded so far (a `fix`: its starting
    /// check's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdicts: Option<Summary>,
    /// The exit status the run earned, when it recorded one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<ExitStatus>,
    /// Its numeric code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// Space it takes on disk (allocated blocks, as `du` counts them).
    pub bytes: u64,
    /// Whether it holds a `fix` profile (then it is never pruned).
    pub holds_profile: bool,
    /// The start stamp from the name, which sorts as time does.
    #[serde(skip)]
    stamp: String,
}

/// What the finished markers record (`report.json`, `fix.json`); every field optional so an
/// older or partial file still yields what it has.
#[derive(Debug, Default, Deserialize)]
struct Recorded {
    #[serde(default)]
    tier: Option<Tier>,
    #[serde(default)]
    summary: Option<Summary>,
    #[serde(default)]
    exit_status: Option<ExitStatus>,
    #[serde(default)]
    exit_code: Option<u8>,
}

/// Space on disk and the newest modification time of everything under `dir`. Links are
/// counted as themselves, never followed; what cannot be read counts as nothing.
fn usage(dir: &Path) -> (u64, SystemTime) {
    use std::os::unix::fs::MetadataExt;
    let mut bytes = 0;
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        bytes += meta.blocks() * 512;
        if let Ok(modified) = meta.modified() {
            newest = newest.max(modified);
        }
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            pending.extend(entries.flatten().map(|e| e.path()));
        }
    }
    (bytes, newest)
}

/// Whether `pid` is a running gpuprobe (its `comm`, the executable's name). Another process
/// that reuses the number keeps the run only until it looks idle, which is the safe side.
fn gpuprobe_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim_end().starts_with("gpuprobe"))
}

/// The run directory at `path` named `name`, or `None` when it is not recognisably one.
fn inspect(path: &Path, name: &str, now: SystemTime) -> Option<RunInfo> {
    inspect_with(path, name, now, true)
}

/// [`inspect`], measuring the run's size only when `measure` says so (its newest change is
/// looked for only when the run's state needs it).
fn inspect_with(path: &Path, name: &str, now: SystemTime, measure: bool) -> Option<RunInfo> {
    let parsed = paths::parse_run_dir_name(name)?;
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if !is_dir(path) || !is_dir(&path.join(WORKERS_DIR)) {
        return None;
    }
    let mut measured = measure.then(|| usage(path));
    let run = RunFiles::at(path);
    let recorded_results = |run: &RunFiles| run.recorded_results().map(|r| Summary::of(&r[..]));
    let (recorded, finished, verdicts, tier) = if parsed.command == "fix" {
        // The account marks a finished search; the verdicts are its starting check's.
        let account = run.read_fix_account::<Recorded>().ok();
        let check = run.check_subrun();
        let report = check.read_report_as::<Recorded>().ok();
        let plan = check.read_plan::<Recorded>().ok();
        let verdicts = report
            .as_ref()
            .and_then(|r| r.summary)
            .or_else(|| recorded_results(&check));
        let tier = report
            .as_ref()
            .and_then(|r| r.tier)
            .or(plan.and_then(|p| p.tier));
        let finished = account.is_some();
        (account, finished, verdicts, tier)
    } else {
        let report = run.read_report_as::<Recorded>().ok();
        let verdicts = report
            .as_ref()
            .and_then(|r| r.summary)
            .or_else(|| recorded_results(&run));
        // A memtest runs no tier: its plan records its probe's (soak, the tier that never
        // selects it), which is no tier the user asked for. The plan is read only when the
        // report does not say (a run not finished).
        let tier = report
            .as_ref()
            .and_then(|r| r.tier)
            .or_else(|| run.read_plan::<Recorded>().ok().and_then(|p| p.tier))
            .filter(|_| parsed.command != "memtest");
        // A memtest writes no report: its one result is the end of it.
        let finished = report.is_some()
            || (parsed.command == "memtest" && verdicts.as_ref().is_some_and(|v| v.total > 0));
        (report, finished, verdicts, tier)
    };
    let mut recently_changed = || {
        let (_, newest) = *measured.get_or_insert_with(|| usage(path));
        now.duration_since(newest)
            .map_or(true, |age| age < ACTIVE_WINDOW)
    };
    // The writer lock answers when the run has one: a fix's own, else its starting
    // check's. Without one (a run made before it, or not started yet), the process named in
    // the directory and the run's last change tell.
    let writer = match run.writer() {
        crate::rundir::Writer::Unknown if parsed.command == "fix" => run.check_subrun().writer(),
        writer => writer,
    };
    let state = if finished {
        RunState::Finished
    } else if writer == crate::rundir::Writer::Alive {
        RunState::InProgress
    } else if writer == crate::rundir::Writer::Gone {
        RunState::Interrupted
    } else if gpuprobe_alive(parsed.pid) || recently_changed() {
        RunState::InProgress
    } else {
        RunState::Interrupted
    };
    let bytes = measured.map_or(0, |(bytes, _)| bytes);
    let recorded = recorded.unwrap_or_default();
    let stamp = parsed.stamp;
    Some(RunInfo {
        name: name.to_string(),
        path: path.to_path_buf(),
        command: parsed.command.to_string(),
        started_at: format!(
            "{}T{}:{}:{}Z",
            &stamp[..10],
            &stamp[11..13],
            &stamp[14..16],
            &stamp[17..19]
        ),
        tier,
        state,
        verdicts,
        exit_status: recorded.exit_status,
        exit_code: recorded
            .exit_code
            .or(recorded.exit_status.map(ExitStatus::code)),
        bytes,
        holds_profile: run.holds_profile(),
        stamp: stamp.to_string(),
    })
}

/// Every run directory under `root`, newest first. A root that does not exist holds none.
pub fn scan(root: &Path, now: SystemTime) -> std::io::Result<Vec<RunInfo>> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut runs: Vec<RunInfo> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            inspect(&entry.path(), &name, now)
        })
        .collect();
    runs.sort_by(|a, b| b.stamp.cmp(&a.stamp).then_with(|| b.name.cmp(&a.name)));
    Ok(runs)
}

/// Every run directory under `root` as [`scan`] recognises one (its name, a directory with
/// its `workers/`), newest first, told from the names alone: no file of any run is opened, so
/// a listing shows one page of thousands of runs by inspecting only that page's
/// ([`inspect_run`]).
pub fn scan_names(root: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let mut runs: Vec<(String, String, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let stamp = paths::parse_run_dir_name(&name)?.stamp.to_string();
            let path = entry.path();
            (is_dir(&path) && is_dir(&path.join(WORKERS_DIR))).then_some((stamp, name, path))
        })
        .collect();
    runs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    Ok(runs
        .into_iter()
        .map(|(_, name, path)| (name, path))
        .collect())
}

/// One run directory, as [`scan`] lists it but for its size on disk (`bytes` is 0: measuring
/// walks every file of the run, which a listing of runs does not show).
pub fn inspect_run(path: &Path, name: &str, now: SystemTime) -> Option<RunInfo> {
    inspect_with(path, name, now, false)
}

/// Which runs to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Keep the newest N.
    pub keep: Option<usize>,
    /// Remove only runs started longer ago than this.
    pub older_than: Option<Duration>,
}

/// Why a run the policy selected stays.
fn protected(run: &RunInfo, current: Option<&Path>) -> Option<&'static str> {
    if current == Some(run.path.as_path()) {
        Some("the run that just finished")
    } else if run.state == RunState::InProgress {
        Some("in progress")
    } else if run.holds_profile {
        Some("holds a fix profile (profile.toml)")
    } else {
        None
    }
}

/// The runs (newest first, as [`scan`] gives them) the policy removes, and those it selected
/// but that stay, with why. A run goes when every limit given allows it: it is not among the
/// newest `keep`, and it started longer than `older_than` ago.
pub(crate) fn plan<'a>(
    runs: &'a [RunInfo],
    policy: Policy,
    now: SystemTime,
    current: Option<&Path>,
) -> (Vec<&'a RunInfo>, Vec<(&'a RunInfo, &'static str)>) {
    // Stamps sort as time does, so the cutoff is a stamp too; none when it would lie before
    // the epoch (nothing started that long ago).
    let cutoff = policy
        .older_than
        .map(|age| now.checked_sub(age).map(crate::stamp::file_stamp));
    let mut remove = Vec::new();
    let mut spared = Vec::new();
    for (index, run) in runs.iter().enumerate() {
        let beyond_keep = policy.keep.is_none_or(|keep| index >= keep);
        let old_enough = match &cutoff {
            None => true,
            Some(None) => false,
            Some(Some(cutoff)) => run.stamp.as_str() < cutoff.as_str(),
        };
        if !(beyond_keep && old_enough) {
            continue;
        }
        match protected(run, current) {
            Some(why) => spared.push((run, why)),
            None => remove.push(run),
        }
    }
    (remove, spared)
}

/// `7d`, `12h`, `30m`, `90s`, `2w`: a whole number and a unit.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(unit_at);
    let seconds_per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => 0,
    };
    if seconds_per == 0 || number.is_empty() {
        return Err(format!(
            "--older-than {text:?}: expected a whole number and a unit (s, m, h, d or w), e.g. 7d, 12h, 30m"
        ));
    }
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(seconds_per))
        .map(Duration::from_secs)
        .ok_or_else(|| format!("--older-than {text:?} is too long"))
}

/// The retention after each `check`: the newest N runs are kept; `None` when pruning is off
/// (`GPUPROBE_KEEP_RUNS=0`).
pub fn keep_from_env(env: &BTreeMap<String, String>) -> Result<Option<usize>, String> {
    match env
        .get(KEEP_ENV)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
    {
        None => Ok(Some(DEFAULT_KEEP)),
        Some(text) => match text.parse::<usize>() {
            Ok(0) => Ok(None),
            Ok(keep) => Ok(Some(keep)),
            Err(_) => Err(format!(
                "{KEEP_ENV}={text:?} is not a number of runs (0 keeps every run)"
            )),
        },
    }
}

/// What `runs prune` did: the runs it removed (or, on a dry run, would remove) in order,
/// the runs the policy selected but spared and why, and the runs it could not remove.
#[derive(Debug)]
pub struct Pruned<'a> {
    /// Removed, or selected on a dry run.
    pub removed: Vec<&'a RunInfo>,
    /// Selected but kept, with the reason.
    pub spared: Vec<(&'a RunInfo, &'static str)>,
    /// Could not be removed: the run and why.
    pub failures: Vec<(&'a RunInfo, std::io::Error)>,
}

impl Pruned<'_> {
    /// Bytes the removed runs took.
    pub fn freed(&self) -> u64 {
        self.removed.iter().map(|r| r.bytes).sum()
    }
}

/// Removes the runs `policy` selects from `runs` (nothing on a `dry_run`): a run goes when
/// every limit given allows it (it is not among the newest `keep`, and it started longer
/// than `older_than` ago), unless it must stay (in progress, or holding a fix profile),
/// which the result's `spared` lists with why. A run already gone (another prune got there
/// first) counts as neither removed nor failed.
pub fn prune(runs: &[RunInfo], policy: Policy, now: SystemTime, dry_run: bool) -> Pruned<'_> {
    let (selected, spared) = plan(runs, policy, now, None);
    let mut pruned = Pruned {
        removed: Vec::new(),
        spared,
        failures: Vec::new(),
    };
    for run in selected {
        match if dry_run { Ok(true) } else { remove(run) } {
            Ok(true) => pruned.removed.push(run),
            Ok(false) => {}
            Err(e) => pruned.failures.push((run, e)),
        }
    }
    pruned
}

/// Removes a run directory; `false` when it was gone already (another prune, a check
/// finishing beside this one, got there first).
pub(crate) fn remove(run: &RunInfo) -> std::io::Result<bool> {
    match std::fs::remove_dir_all(&run.path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// What the retention after a `check` did.
#[derive(Debug)]
pub enum Retention {
    /// The check kept its run elsewhere (`--run-dir`): the state directory is left alone.
    NotHere,
    /// [`KEEP_ENV`] is `0`: nothing is pruned.
    Off,
    /// [`KEEP_ENV`] is not a number; the message says so.
    BadSetting(String),
    /// The runs directory could not be read.
    ScanFailed(std::io::Error),
    /// Pruned.
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

/// The retention applied at the end of every `check`: keeps the newest
/// `$GPUPROBE_KEEP_RUNS` (default [`DEFAULT_KEEP`]) run directories of the state directory,
/// never the one that just finished, one in progress or one holding a profile. Only when the
/// check kept its own run there: a check given `--run-dir` elsewhere leaves the state
/// directory alone. Never fails: what it did is returned for the caller to say.
pub fn after_check(env: &BTreeMap<String, String>, run_dir: &Path) -> Retention {
    let root = paths::runs_root(env);
    let same = |a: &Path, b: &Path| {
        a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    };
    if !run_dir.parent().is_some_and(|parent| same(parent, &root)) {
        return Retention::NotHere;
    }
    let keep = match keep_from_env(env) {
        Ok(Some(keep)) => keep,
        Ok(None) => return Retention::Off,
        Err(why) => return Retention::BadSetting(why),
    };
    let now = SystemTime::now();
    let runs = match scan(&root, now) {
        Ok(runs) => runs,
        Err(e) => return Retention::ScanFailed(e),
    };
    let policy = Policy {
        keep: Some(keep),
        older_than: None,
    };
    let (chosen, _) = plan(&runs, policy, now, Some(run_dir));
    let (mut removed, mut freed) = (0, 0);
    let mut failures = Vec::new();
    for run in chosen {
        match remove(run) {
            Ok(true) => {
                removed += 1;
                freed += run.bytes;
            }
            Ok(false) => {}
            Err(e) => failures.push((run.name.clone(), e)),
        }
    }
    Retention::Pruned {
        keep,
        root,
        removed,
        freed,
        failures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stamp: &str, state: RunState) -> RunInfo {
        RunInfo {
            name: format!("check-{stamp}-1"),
            path: PathBuf::from(format!("/runs/check-{stamp}-1")),
            command: "check".into(),
            started_at: String::new(),
            tier: None,
            state,
            verdicts: None,
            exit_status: None,
            exit_code: None,
            bytes: 1000,
            holds_profile: false,
            stamp: stamp.into(),
        }
    }

    fn names<'a>(runs: &[&'a RunInfo]) -> Vec<&'a str> {
        runs.iter().map(|r| r.stamp.as_str()).collect()
    }

    /// Noon, 2026-11-22 (UTC).
    fn noon() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_348_800)
    }

    #[test]
    fn ages_take_a_whole_number_and_a_unit() {
        for (text, seconds) in [
            ("90s", 90),
            ("30m", 1800),
            ("12h", 43_200),
            ("7d", 604_800),
            ("2w", 1_209_600),
            (" 0d ", 0),
        ] {
            assert_eq!(parse_age(text), Ok(Duration::from_secs(seconds)), "{text}");
        }
        for bad in [
            "",
            "7",
            "d",
            "-1d",
            "1.5d",
            "7x",
            "7 d",
            "7dd",
            "99999999999999999999w",
        ] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_retention_variable_defaults_to_20_and_0_turns_it_off() {
        let env = |value: &str| [(KEEP_ENV.to_string(), value.to_string())].into();
        assert_eq!(keep_from_env(&Default::default()), Ok(Some(DEFAULT_KEEP)));
        assert_eq!(keep_from_env(&env("")), Ok(Some(DEFAULT_KEEP)));
        assert_eq!(keep_from_env(&env("5")), Ok(Some(5)));
        assert_eq!(keep_from_env(&env("0")), Ok(None));
        assert!(keep_from_env(&env("all")).unwrap_err().contains(KEEP_ENV));
        assert!(keep_from_env(&env("-1")).is_err());
    }

    #[test]
    fn a_run_goes_only_when_every_limit_allows_and_nothing_protected_goes() {
        use RunState::*;
        let runs = vec![
            run("2026-11-22T11-00-00", Finished),
            run("2026-11-22T10-00-00", InProgress),
            run("2026-11-20T10-00-00", Finished),
            run("2026-11-10T10-00-00", Interrupted),
            run("2026-11-01T10-00-00", Finished),
        ];
        let day = Duration::from_secs(86_400);
        let policy = |keep, older_than| Policy { keep, older_than };
        let (remove, spared) = plan(&runs, policy(Some(1), None), noon(), None);
        assert_eq!(
            names(&remove),
            [
                "2026-11-20T10-00-00",
                "2026-11-10T10-00-00",
                "2026-11-01T10-00-00"
            ]
        );
        assert_eq!(spared.len(), 1);
        assert_eq!(
            (spared[0].0.stamp.as_str(), spared[0].1),
            ("2026-11-22T10-00-00", "in progress")
        );
        // Older than a week: the two of November 10 and 1.
        let (remove, _) = plan(&runs, policy(None, Some(7 * day)), noon(), None);
        assert_eq!(
            names(&remove),
            ["2026-11-10T10-00-00", "2026-11-01T10-00-00"]
        );
        // Both: beyond the newest 4 and older than a week.
        let (remove, _) = plan(&runs, policy(Some(4), Some(7 * day)), noon(), None);
        assert_eq!(names(&remove), ["2026-11-01T10-00-00"]);
        // Keep 0 removes everything that is not protected; the current run and a profile stay.
        let mut with_profile = runs.clone();
        with_profile[2].holds_profile = true;
        let current = with_profile[0].path.clone();
        let (remove, spared) = plan(&with_profile, policy(Some(0), None), noon(), Some(&current));
        assert_eq!(
            names(&remove),
            ["2026-11-10T10-00-00", "2026-11-01T10-00-00"]
        );
        let why: Vec<&str> = spared.iter().map(|(_, why)| *why).collect();
        assert_eq!(
            why,
            [
                "the run that just finished",
                "in progress",
                "holds a fix profile (profile.toml)"
            ]
        );
        // An age longer than the epoch is old selects nothing.
        let (remove, _) = plan(&runs, policy(None, Some(Duration::MAX)), noon(), None);
        assert!(remove.is_empty());
    }

    #[test]
    fn a_run_whose_writer_lock_is_free_is_interrupted_though_its_named_process_lives() {
        let root = tempfile::tempdir().unwrap();
        // Named after this process, a live one whose name starts with gpuprobe (the test
        // binary's): without the lock it would count as in progress.
        let name = format!("check-2026-11-22T10-04-05-{}", std::process::id());
        let path = root.path().join(&name);
        let now = SystemTime::now();
        std::fs::create_dir_all(path.join(WORKERS_DIR)).unwrap();
        let state = || inspect_run(&path, &name, now).unwrap().state;
        assert_eq!(
            state(),
            RunState::InProgress,
            "no lock yet: the process tells"
        );
        let writer = crate::RunDir::create(&path).unwrap();
        writer
            .write_json(crate::rundir::PLAN_FILE, &serde_json::json!({"tasks": []}))
            .unwrap();
        assert_eq!(state(), RunState::InProgress);
        drop(writer);
        assert_eq!(state(), RunState::Interrupted, "its writer is gone");
        // The names alone list it, newest first, and a listing's inspection measures nothing.
        std::fs::create_dir_all(
            root.path()
                .join("check-2026-11-22T11-00-00-1")
                .join(WORKERS_DIR),
        )
        .unwrap();
        std::fs::create_dir_all(root.path().join("notarun").join(WORKERS_DIR)).unwrap();
        let listed: Vec<String> = scan_names(root.path())
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            listed,
            ["check-2026-11-22T11-00-00-1".to_string(), name.clone()]
        );
        assert_eq!(inspect_run(&path, &name, now).unwrap().bytes, 0);
        assert!(scan(root.path(), now).unwrap()[1].bytes > 0);
    }
}
