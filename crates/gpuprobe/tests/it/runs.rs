//! `runs list` and `runs prune` over a state directory of the test's own (`XDG_STATE_HOME`
//! and `HOME` point into a temporary directory, so the real one is never read or touched),
//! and the retention `check` applies after a run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use gpuprobe_model::{DeviceRef, Layer, ProbeId};
use gpuprobe_model::{FailClass, ProbeResult, Verdict};
use serde_json::Value;

use crate::support::*;

/// A state directory of the test's own.
struct State {
    dir: tempfile::TempDir,
}

impl State {
    fn new() -> State {
        let state = State {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(state.root()).unwrap();
        std::fs::create_dir_all(state.dir.path().join("home")).unwrap();
        state
    }

    /// Where runs go: `$XDG_STATE_HOME/gpuprobe/runs`.
    fn root(&self) -> PathBuf {
        self.dir.path().join("state/gpuprobe/runs")
    }

    fn gpuprobe(&self) -> Command {
        let mut command = gpuprobe();
        command
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("HOME", self.dir.path().join("home"))
            .env_remove("GPUPROBE_KEEP_RUNS");
        command
    }

    /// A run directory as gpuprobe lays it out: `workers/` and the given files.
    fn run(&self, name: &str, files: &[(&str, String)]) -> PathBuf {
        let dir = self.root().join(name);
        std::fs::create_dir_all(dir.join("workers")).unwrap();
        for (file, text) in files {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    /// What is left under the runs directory.
    fn entries(&self) -> BTreeSet<String> {
        std::fs::read_dir(self.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    fn list_json(&self) -> Value {
        let output = self
            .gpuprobe()
            .args(["runs", "list", "--json"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Sets the modification time of everything under `path` two days back, deepest first (a
/// change inside a directory would renew the directory's time): a run nobody has touched.
fn backdate(path: &Path) {
    let then = SystemTime::now() - Duration::from_secs(2 * 86_400);
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            backdate(&entry.unwrap().path());
        }
    }
    std::fs::File::open(path)
        .unwrap()
        .set_modified(then)
        .unwrap();
}

fn plan(tier: &str) -> (&'static str, String) {
    ("plan.json", format!(r#"{{"tier": "{tier}", "tasks": []}}"#))
}

/// A finished check's report: `passed` and `failed` results, the exit status they earn.
fn report(tier: &str, passed: u32, failed: u32) -> (&'static str, String) {
    let (status, code) = if failed > 0 {
        ("problems_found", 1)
    } else {
        ("all_passed", 0)
    };
    (
        "report.json",
        serde_json::json!({
            "tier": tier,
            "summary": {"total": passed + failed, "passed": passed, "failed": failed, "crashed": 0,
                        "hung": 0, "errors": 0, "skipped": 0, "not_tested": 0},
            "exit_status": status,
            "exit_code": code,
        })
        .to_string(),
    )
}

/// `results.jsonl` with the given verdicts.
fn results(verdicts: &[Verdict]) -> (&'static str, String) {
    let lines: String = verdicts
        .iter()
        .enumerate()
        .map(|(i, verdict)| {
            let result = ProbeResult::new(
                ProbeId::new(format!("copy.case{i}")),
                DeviceRef::Cpu,
                Layer::Framework,
                verdict.clone(),
            );
            serde_json::to_string(&result).unwrap() + "\n"
        })
        .collect();
    ("results.jsonl", lines)
}

fn fail() -> Verdict {
    Verdict::Fail {
        class: FailClass::Mismatch,
        detail: "wrong".into(),
    }
}

/// A process id no process can have (above the kernel's `pid_max` limit of 2^22).
const DEAD: u32 = 4_000_000_000;

/// Entries that are not run directories: never listed, never removed.
fn strangers(state: &State) -> BTreeSet<String> {
    let root = state.root();
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(root.join("notes/keep.txt"), "mine").unwrap();
    // A run's name without its workers/ directory.
    std::fs::create_dir_all(root.join("check-2019-01-07T00-00-00-5")).unwrap();
    // A run's name on a plain file.
    std::fs::write(root.join("check-2019-01-08T00-00-00-6"), "not a directory").unwrap();
    // A run's name on a link to a run directory elsewhere: the link is not a run directory.
    let elsewhere = state
        .dir
        .path()
        .join("elsewhere/check-2019-01-09T00-00-00-7");
    std::fs::create_dir_all(elsewhere.join("workers")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("check-2019-01-09T00-00-00-7")).unwrap();
    for path in [root.join("notes"), elsewhere.clone()] {
        backdate(&path);
    }
    [
        "notes",
        "check-2019-01-07T00-00-00-5",
        "check-2019-01-08T00-00-00-6",
        "check-2019-01-09T00-00-00-7",
    ]
    .map(String::from)
    .into()
}

#[test]
fn list_shows_each_run_with_its_state_verdicts_exit_and_size_and_nothing_else() {
    let state = State::new();
    let strangers = strangers(&state);
    let finished = state.run(
        "check-2020-01-02T03-04-05-11",
        &[plan("quick"), report("quick", 2, 1), results(&[])],
    );
    let interrupted = state.run(
        &format!("check-2020-01-03T00-00-00-{DEAD}"),
        &[plan("standard"), results(&[Verdict::Pass, fail()])],
    );
    // Not backdated: it changed a moment ago, so it may be running.
    state.run(
        &format!("check-2020-01-04T00-00-00-{DEAD}"),
        &[plan("quick")],
    );
    let memtest = state.run(
        &format!("memtest-2020-01-05T00-00-00-{DEAD}"),
        &[plan("soak"), results(&[Verdict::Pass])],
    );
    let fix = state.run(
        &format!("fix-2020-01-06T00-00-00-{DEAD}"),
        &[
            (
                "fix.json",
                r#"{"exit_status": "all_passed", "exit_code": 0}"#.into(),
            ),
            ("profile.toml", "[settings]\n".into()),
            ("check/plan.json", plan("quick").1),
            ("check/report.json", report("quick", 1, 1).1),
        ],
    );
    for dir in [&finished, &interrupted, &memtest, &fix] {
        backdate(dir);
    }

    let listing = state.list_json();
    assert_eq!(
        listing["root"].as_str().map(PathBuf::from),
        Some(state.root())
    );
    assert_eq!(listing["keep_after_check"], 20);
    let runs = listing["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            format!("fix-2020-01-06T00-00-00-{DEAD}"),
            format!("memtest-2020-01-05T00-00-00-{DEAD}"),
            format!("check-2020-01-04T00-00-00-{DEAD}"),
            format!("check-2020-01-03T00-00-00-{DEAD}"),
            "check-2020-01-02T03-04-05-11".to_string(),
        ],
        "newest first, and no stranger: {listing:#}"
    );
    let field = |i: usize, key: &str| runs[i][key].clone();
    let states: Vec<Value> = (0..5).map(|i| field(i, "state")).collect();
    assert_eq!(
        states,
        [
            "finished",
            "finished",
            "in_progress",
            "interrupted",
            "finished"
        ]
    );
    let tiers: Vec<Value> = (0..5).map(|i| field(i, "tier")).collect();
    // A memtest runs no tier (its plan records its probe's, soak): none is shown.
    assert_eq!(
        tiers,
        [
            Value::from("quick"),
            Value::Null,
            Value::from("quick"),
            Value::from("standard"),
            Value::from("quick")
        ]
    );
    // Exit codes where the run recorded one: the fix's account and the finished check.
    let exits: Vec<Value> = (0..5).map(|i| field(i, "exit_code")).collect();
    assert_eq!(
        exits,
        [json(0), Value::Null, Value::Null, Value::Null, json(1)]
    );
    assert_eq!(field(4, "exit_status"), "problems_found");
    // Verdicts: the report's, else the results so far; a fix shows its starting check's.
    let counts = |i: usize| {
        let v = field(i, "verdicts");
        (v["total"].clone(), v["passed"].clone(), v["failed"].clone())
    };
    assert_eq!(counts(0), (json(2), json(1), json(1)));
    assert_eq!(counts(1), (json(1), json(1), json(0)));
    // Nothing recorded yet.
    assert_eq!(field(2, "verdicts"), Value::Null);
    assert_eq!(counts(3), (json(2), json(1), json(1)));
    assert_eq!(counts(4), (json(3), json(2), json(1)));
    assert_eq!(field(4, "started_at"), "2020-01-02T03:04:05Z");
    assert_eq!(field(0, "holds_profile"), true);
    assert_eq!(field(4, "holds_profile"), false);
    let sizes: Vec<u64> = runs.iter().map(|r| r["bytes"].as_u64().unwrap()).collect();
    assert!(sizes.iter().all(|&b| b > 0), "{sizes:?}");
    assert_eq!(listing["total_bytes"].as_u64(), Some(sizes.iter().sum()));

    let output = state.gpuprobe().args(["runs", "list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("5 run(s) in "), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("check-2020-01-02T03-04-05-11")
                && l.contains("2020-01-02T03:04:05Z")
                && l.contains("finished")
                && l.contains("3: 2 passed, 1 failed")),
        "{stdout}"
    );
    assert!(stdout.contains("interrupted") && stdout.contains("in progress"));
    assert!(stdout.contains("finished (profile)"), "{stdout}");
    assert!(
        !stdout.contains("notes") && !stdout.contains("2019-"),
        "{stdout}"
    );
    // Listing changed nothing.
    let mut all = strangers.clone();
    all.extend(names.iter().map(|n| n.to_string()));
    assert_eq!(state.entries(), all);
}

fn json(n: u64) -> Value {
    Value::from(n)
}

#[test]
fn list_of_a_state_directory_without_runs_says_so() {
    let state = State::new();
    std::fs::remove_dir_all(state.root()).unwrap();
    let output = state.gpuprobe().args(["runs", "list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(text(&output.stdout).starts_with("no runs in "));
    assert_eq!(state.list_json()["runs"], Value::Array(Vec::new()));
}

#[test]
fn prune_keeps_the_newest_and_never_a_run_in_progress_a_profile_or_a_stranger() {
    let state = State::new();
    let strangers = strangers(&state);
    // A live gpuprobe process: its run counts as in progress however old its files look.
    let mut live = state
        .gpuprobe()
        .args(["run", "--", "sleep", "60"])
        .spawn()
        .unwrap();
    let mut names = Vec::new();
    for day in 1..=4 {
        let name = format!("check-2020-01-0{day}T00-00-00-{DEAD}");
        backdate(&state.run(&name, &[plan("quick"), report("quick", 1, 0)]));
        names.push(name);
    }
    let interrupted = format!("check-2020-01-05T00-00-00-{DEAD}");
    backdate(&state.run(&interrupted, &[plan("quick"), results(&[Verdict::Pass])]));
    let running = format!("check-2020-01-06T00-00-00-{}", live.id());
    backdate(&state.run(&running, &[plan("quick")]));
    let fresh = format!("check-2020-01-07T00-00-00-{DEAD}");
    state.run(&fresh, &[plan("quick")]);
    let profile = format!("fix-2019-12-31T00-00-00-{DEAD}");
    backdate(&state.run(
        &profile,
        &[
            (
                "fix.json",
                r#"{"exit_status": "all_passed", "exit_code": 0}"#.into(),
            ),
            ("profile.toml", "[settings]\n".into()),
        ],
    ));
    let before = state.entries();

    let prune = |args: &[&str]| -> Output {
        let output = state
            .gpuprobe()
            .args(["runs", "prune"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        output
    };
    // A dry run says what would go and removes nothing.
    let stdout = text(&prune(&["--keep", "1", "--dry-run"]).stdout);
    assert!(
        stdout.contains(&format!("would remove {interrupted}")),
        "{stdout}"
    );
    assert!(stdout.contains("would remove 5 run(s)"), "{stdout}");
    assert!(stdout.contains("would be freed"), "{stdout}");
    assert_eq!(state.entries(), before);

    let bytes_of: std::collections::BTreeMap<String, u64> = state.list_json()["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let stdout = text(&prune(&["--keep", "1"]).stdout);
    // SIGTERM: `run` passes it to its job and exits, leaving no sleep behind.
    Command::new("kill")
        .arg(live.id().to_string())
        .status()
        .unwrap();
    live.wait().unwrap();
    // The newest (the fresh run) is kept by --keep; of the others, everything finished or
    // interrupted goes, the live one and the profile stay, and the strangers are untouched.
    let removed: Vec<&String> = names.iter().chain([&interrupted]).collect();
    for name in &removed {
        assert!(stdout.contains(&format!("removed {name} (")), "{stdout}");
    }
    assert!(
        stdout.contains(&format!("kept {running}: in progress")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("kept {profile}: holds a fix profile")),
        "{stdout}"
    );
    let freed: u64 = removed.iter().map(|n| bytes_of[n.as_str()]).sum();
    assert!(freed > 0);
    assert!(stdout.contains("removed 5 run(s), "), "{stdout}");
    assert!(stdout.contains("freed; 3 run(s) left"), "{stdout}");
    let mut left = strangers.clone();
    left.extend([fresh, running, profile]);
    assert_eq!(state.entries(), left);
    assert_eq!(
        std::fs::read_to_string(state.root().join("notes/keep.txt")).unwrap(),
        "mine"
    );
}

/// The current UTC time as a run directory's stamp.
fn stamp_now() -> String {
    let output = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H-%M-%S"])
        .output()
        .unwrap();
    text(&output.stdout).trim().to_string()
}

#[test]
fn prune_older_than_removes_only_runs_started_before_then() {
    let state = State::new();
    let old = "check-2020-01-01T00-00-00-1".to_string();
    let recent = format!("check-{}-2", stamp_now());
    for name in [&old, &recent] {
        backdate(&state.run(name, &[plan("quick"), report("quick", 1, 0)]));
    }
    let output = state
        .gpuprobe()
        .args(["runs", "prune", "--older-than", "7d"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains(&format!("removed {old} (")));
    assert_eq!(state.entries(), [recent.clone()].into());
    // With --keep as well, a run goes only when both allow it: the newest 0 and older than 30 m.
    let output = state
        .gpuprobe()
        .args(["runs", "prune", "--keep", "0", "--older-than", "30m"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(state.entries(), [recent].into());

    for bad in ["7", "7x", "d", "-1d"] {
        let output = state
            .gpuprobe()
            .args(["runs", "prune", &format!("--older-than={bad}")])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{bad}");
        assert!(text(&output.stderr).contains("--older-than"), "{bad}");
    }
}

#[test]
fn prune_without_limits_applies_the_retention_variable() {
    let state = State::new();
    for day in 1..=3 {
        backdate(&state.run(
            &format!("check-2020-01-0{day}T00-00-00-{DEAD}"),
            &[plan("quick"), report("quick", 1, 0)],
        ));
    }
    let prune = |keep: &str| {
        state
            .gpuprobe()
            .args(["runs", "prune"])
            .env("GPUPROBE_KEEP_RUNS", keep)
            .output()
            .unwrap()
    };
    let off = prune("0");
    assert_eq!(off.status.code(), Some(0));
    assert!(text(&off.stdout).contains("GPUPROBE_KEEP_RUNS=0"));
    assert_eq!(state.entries().len(), 3);
    let bad = prune("many");
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("GPUPROBE_KEEP_RUNS"));
    assert_eq!(prune("2").status.code(), Some(0));
    assert_eq!(
        state.entries(),
        [
            format!("check-2020-01-02T00-00-00-{DEAD}"),
            format!("check-2020-01-03T00-00-00-{DEAD}"),
        ]
        .into()
    );
}

#[test]
fn check_prunes_the_state_directory_only_when_it_keeps_its_run_there() {
    let state = State::new();
    let mut old = Vec::new();
    for day in 1..=3 {
        let name = format!("check-2020-01-0{day}T00-00-00-{DEAD}");
        backdate(&state.run(&name, &[plan("quick"), report("quick", 1, 0)]));
        old.push(name);
    }
    let check = |extra: &[&str]| {
        let output = state
            .gpuprobe()
            .env("GPUPROBE_KEEP_RUNS", "2")
            .args([
                "check",
                "--json",
                "--device",
                "cpu",
                "--only",
                "copy.h2d.pageable.4x4",
            ])
            .arg("--python")
            .arg(python())
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        output
    };
    // A run kept elsewhere leaves the state directory alone.
    let elsewhere = state.dir.path().join("elsewhere-run");
    let output = check(&["--run-dir", elsewhere.to_str().unwrap()]);
    assert!(
        !text(&output.stderr).contains("old run"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(state.entries().len(), 3);

    // A run in the state directory keeps itself and the newest other.
    let output = check(&[]);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("removed 2 old run(s) from "), "{stderr}");
    assert!(stderr.contains("GPUPROBE_KEEP_RUNS"), "{stderr}");
    let listing = state.list_json();
    let runs = listing["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{listing:#}");
    assert_eq!(runs[1]["name"].as_str(), Some(old[2].as_str()));
    let new = &runs[0];
    assert!(new["name"].as_str().unwrap().starts_with("check-"));
    assert_eq!(new["state"], "finished");
    assert_eq!(new["tier"], "quick");
    assert_eq!(new["exit_code"], 0);
    assert_eq!(new["exit_status"], "all_passed");
    assert!(new["verdicts"]["total"].as_u64().unwrap() >= 1, "{new:#}");
    assert!(new["bytes"].as_u64().unwrap() > 0);
}
