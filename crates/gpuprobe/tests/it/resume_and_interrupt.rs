//! What a run may be finished under, and how it ends when it is stopped: `--resume` refuses
//! another interpreter unless `--replan`, a run mostly NOT-TESTED says so, an interpreter
//! named with `--python` that is none is a usage error, and Ctrl-C or SIGTERM stop the
//! workers, say how to finish, and leave a run that resumes to completion.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use gpuprobe_model::Report;
use gpuprobe_model::{ProbeResult, Verdict};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::*;

/// The test interpreter as a run records it (absolute, links not followed).
fn recorded_python() -> PathBuf {
    std::path::absolute(python()).unwrap()
}

/// A finished CPU run of the pageable host-to-device copies, cut back to its first PASS, as
/// a run killed after one result would have left it.
fn run_cut_to_one_pass(dir: &Path) -> PathBuf {
    let run = dir.join("run");
    let (output, report) = check_json(&run, &["--only", "copy.h2d.pageable"]);
    let report = expect_report(&output, report);
    assert!(report.results.len() >= 4, "{:?}", report.results);
    let results = run.join("results.jsonl");
    let text = std::fs::read_to_string(&results).unwrap();
    let first_pass = text
        .lines()
        .find(|line| {
            serde_json::from_str::<ProbeResult>(line).is_ok_and(|r| r.verdict == Verdict::Pass)
        })
        .expect("a probe passed")
        .to_string();
    std::fs::write(&results, first_pass + "\n").unwrap();
    std::fs::remove_file(run.join("report.json")).unwrap();
    run
}

/// The number of tasks in a run's plan.
fn planned(run: &Path) -> usize {
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("plan.json")).unwrap()).unwrap();
    plan["tasks"].as_array().unwrap().len()
}

/// Asserts every planned probe has exactly one result.
fn assert_complete(report: &Report, run: &Path) {
    let mut ids: Vec<_> = report
        .results
        .iter()
        .map(|r| (r.probe.as_str(), r.device))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        report.results.len(),
        "a probe was recorded twice"
    );
    assert_eq!(
        report.results.len(),
        planned(run),
        "a planned probe has no result"
    );
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn resume(run: &Path, extra: &[&str]) -> Output {
    gpuprobe()
        .args(["check", "--resume"])
        .arg(run)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_python_that_is_no_interpreter_is_a_usage_error_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let not_python = script(dir.path(), "not-python", "#!/bin/sh\nexit 0\n");
    for python in [
        Path::new("/nonexistent/bin/python"),
        dir.path(),
        not_python.as_path(),
    ] {
        let output = gpuprobe()
            .args([
                "check",
                "--device",
                "cpu",
                "--only",
                "copy.h2d.pageable.4x4",
            ])
            .arg("--python")
            .arg(python)
            .arg("--run-dir")
            .arg(&run)
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "check --python {python:?}: {stderr}"
        );
        assert!(stderr.contains(&python.display().to_string()), "{stderr}");
        assert!(
            !run.exists(),
            "a run directory was made for a refused --python"
        );
    }
    let output = gpuprobe()
        .args(["env", "--no-tools", "--python", "/nonexistent/bin/python"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("/nonexistent/bin/python: no such file"));
    let fix_dir = dir.path().join("fix");
    let output = gpuprobe()
        .args([
            "fix",
            "--device",
            "cpu",
            "--python",
            "/nonexistent/bin/python",
        ])
        .arg("--run-dir")
        .arg(&fix_dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(!fix_dir.exists(), "fix started work for a refused --python");
}

#[test]
fn a_resume_under_another_interpreter_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cut_to_one_pass(dir.path());
    // The same interpreter behind another path: what runs may differ (a wrapper can set
    // anything), so only the path the run recorded counts as the same.
    let wrapper = python_behind_another_path(dir.path());
    let before = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let output = resume(&run, &["--python", wrapper.to_str().unwrap()]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&recorded_python().display().to_string()),
        "the run's interpreter is not named: {stderr}"
    );
    assert!(stderr.contains(&wrapper.display().to_string()), "{stderr}");
    assert!(stderr.contains("--replan"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(run.join("results.jsonl")).unwrap(),
        before,
        "a refused resume ran probes"
    );

    // The run's own interpreter, named again, finishes it.
    let output = resume(&run, &["--json", "--python", python().to_str().unwrap()]);
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_complete(&report, &run);
}

#[test]
fn a_resume_whose_interpreter_now_reports_another_torch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cut_to_one_pass(dir.path());
    let stack: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("stack.json")).unwrap()).unwrap();
    let torch = stack["torch"]
        .as_str()
        .expect("the run recorded its torch")
        .to_string();
    // As if torch had been upgraded in place since the run.
    std::fs::write(run.join("stack.json"), r#"{"torch": "1.0.0+earlier"}"#).unwrap();
    let output = resume(&run, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("torch 1.0.0+earlier") && stderr.contains(&format!("torch {torch}")),
        "{stderr}"
    );
    let output = resume(&run, &["--json", "--replan"]);
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_complete(&report, &run);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("re-planned") && n.contains("torch 1.0.0+earlier")),
        "{:?}",
        report.notes
    );
    let stack = std::fs::read_to_string(run.join("stack.json")).unwrap();
    assert!(
        stack.contains(&torch),
        "the new torch is not recorded: {stack}"
    );
}

#[test]
fn replan_continues_under_another_interpreter_and_the_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cut_to_one_pass(dir.path());
    let wrapper = python_behind_another_path(dir.path());
    let output = resume(
        &run,
        &["--json", "--replan", "--python", wrapper.to_str().unwrap()],
    );
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_complete(&report, &run);
    let note = report
        .notes
        .iter()
        .find(|n| n.contains("re-planned"))
        .unwrap_or_else(|| panic!("no re-plan note: {:?}", report.notes));
    assert!(
        note.contains(&recorded_python().display().to_string())
            && note.contains(&wrapper.display().to_string()),
        "{note}"
    );
    assert!(note.contains("1 result(s) recorded before"), "{note}");
    let plan = std::fs::read_to_string(run.join("plan.json")).unwrap();
    assert!(plan.contains(&wrapper.display().to_string()), "{plan}");
}

#[test]
fn a_resumed_run_mostly_not_tested_says_so_and_does_not_pass() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cut_to_one_pass(dir.path());
    let planned = planned(&run);
    // -S leaves site-packages, and with them torch, out: every other probe is NOT-TESTED.
    let bare = script(
        dir.path(),
        "bare-python",
        &format!("#!/bin/sh\nexec '{}' -S \"$@\"\n", python().display()),
    );
    let output = resume(&run, &["--replan", "--python", bare.to_str().unwrap()]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(4),
        "{stdout}{}",
        text(&output.stderr)
    );
    let summary_line = stdout
        .lines()
        .find(|l| l.starts_with("exit 4"))
        .unwrap_or_else(|| panic!("no summary line: {stdout}"));
    assert!(
        summary_line.contains(&format!(
            "only 1 of {planned} probe runs were judged ({} NOT-TESTED)",
            planned - 1
        )),
        "{summary_line}"
    );
    assert!(!summary_line.contains("all passed"), "{summary_line}");
    let report: Report =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(report.summary.judged, 1);
    assert!(report.summary.mostly_not_tested, "{:?}", report.summary);
}

/// A run killed while it wrote a result leaves a torn last line: the resume cuts it before
/// appending, so every line of the journal reads back and each planned probe has one result.
#[test]
fn a_torn_last_result_line_is_cut_before_the_resume_appends() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_cut_to_one_pass(dir.path());
    let results = run.join("results.jsonl");
    let mut journal = std::fs::read(&results).unwrap();
    journal.extend_from_slice(br#"{"probe":"copy.h2d.pageable.16x16.blocking","dev"#);
    std::fs::write(&results, journal).unwrap();
    let output = resume(&run, &["--json"]);
    let report = serde_json::from_slice::<Report>(&output.stdout).ok();
    let report = expect_report(&output, report);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_complete(&report, &run);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.starts_with("1 unreadable line(s) in results.jsonl")),
        "{:?}",
        report.notes
    );
    let journal = std::fs::read_to_string(&results).unwrap();
    assert!(journal.ends_with('\n'));
    let unreadable: Vec<&str> = journal
        .lines()
        .filter(|l| serde_json::from_str::<ProbeResult>(l).is_err())
        .collect();
    assert!(unreadable.is_empty(), "{unreadable:?}");
    assert_eq!(journal.lines().count(), planned(&run));
}

/// Processes whose command line mentions `text`, with their pids.
fn processes_mentioning(text: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|raw| {
                    String::from_utf8_lossy(&raw)
                        .replace('\0', " ")
                        .contains(text)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Whether process `pid` runs (a zombie runs nothing).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            !stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// A `check` on the CPU that is stuck in a hanging probe (a simulated hang that exists only
/// while `GPUPROBE_TEST_HANG=1` is set, so a resume runs it to completion), once every
/// probe before it is recorded; returns the process, its run directory and its results.
fn hanging_check(dir: &Path) -> (Child, PathBuf, String) {
    let (mut command, run) = check_that_hangs_in_rng(dir);
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let results = run.join("results.jsonl");
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let text = std::fs::read_to_string(&results).unwrap_or_default();
        if text.lines().count() >= 5 && text.lines().all(|l| l.contains("\"copy.")) {
            std::thread::sleep(Duration::from_secs(2));
            let settled = std::fs::read_to_string(&results).unwrap_or_default();
            if settled == text {
                return (child, run, text);
            }
        }
        assert!(
            Instant::now() < deadline,
            "the run never reached the hanging probe"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "gpuprobe ended before it was stopped"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Sends `signal` to a hanging check and asserts how it ends: promptly, with 128 + the
/// signal, the resume line, no worker left and no result added.
fn stop_with(signal: Signal) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, run, before) = hanging_check(dir.path());
    let marker = run.display().to_string();
    let workers = processes_mentioning(&marker);
    assert!(!workers.is_empty(), "no worker of the run is running");
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "gpuprobe did not stop on {signal}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Checked at once: a worker that only the kernel's parent-death signal ends would
    // still be here.
    let left: Vec<i32> = workers.into_iter().filter(|pid| alive(*pid)).collect();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(128 + signal as i32), "{stderr}");
    assert!(left.is_empty(), "workers {left:?} outlived gpuprobe");
    assert!(
        processes_mentioning(&marker).is_empty(),
        "a process of the run is still running"
    );
    let expected = format!(
        "of {} probes done; finish with: gpuprobe check --resume {marker}",
        planned(&run)
    );
    let line = stderr
        .lines()
        .find(|l| l.starts_with("interrupted: "))
        .unwrap_or_else(|| panic!("no resume line: {stderr}"));
    assert!(line.ends_with(&expected), "{line}");
    assert_eq!(
        std::fs::read_to_string(run.join("results.jsonl")).unwrap(),
        before,
        "the stop added or changed a result"
    );
    (dir, run, before)
}

#[test]
fn ctrl_c_stops_the_workers_says_how_to_finish_and_the_run_resumes_to_completion() {
    let (_dir, run, before) = stop_with(Signal::SIGINT);
    let output = resume(&run, &["--json"]);
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_complete(&report, &run);
    let after = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    assert!(
        after.starts_with(&before),
        "results recorded before the stop were rewritten"
    );
    assert!(
        report.results.iter().all(|r| passed_or_skipped(&r.verdict)),
        "{:#?}",
        problems(&report)
    );
}

#[test]
fn sigterm_stops_a_check_with_143_and_the_same_resume_line() {
    stop_with(Signal::SIGTERM);
}
