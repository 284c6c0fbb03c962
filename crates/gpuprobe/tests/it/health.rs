//! `check --health`: one line on stdout and nothing else, exit 0 for a healthy CPU run, 1
//! for a planted fault (SIMULATED in the line), 2 for an interpreter that is not there or
//! not a Python, a command line that does not parse and a `--budget` spent before half the
//! probe runs were judged (the rest NOT-TESTED in the report); the line stays within its
//! format's length and quotes no path.

use std::path::Path;
use std::process::Output;

use crate::support::*;

/// `gpuprobe check --health --device cpu --tier quick --run-dir RUN` plus `extra`.
fn health(run_dir: &Path, extra: &[&str]) -> Output {
    gpuprobe()
        .args([
            "check",
            "--health",
            "--device",
            "cpu",
            "--tier",
            "quick",
            "--run-dir",
        ])
        .arg(run_dir)
        .args(extra)
        .output()
        .expect("gpuprobe runs")
}

/// The one line on stdout (checked to be the only one, printable ASCII and at most `max`
/// bytes), and the exit code.
fn line_and_code(output: &Output, max: usize) -> (String, i32) {
    let stdout = String::from_utf8(output.stdout.clone()).expect("ASCII");
    let line = stdout
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("one line ending in a newline: {stdout:?}"));
    assert!(!line.contains('\n'), "one line: {stdout:?}");
    assert!(line.len() <= max, "{} bytes: {line}", line.len());
    assert!(
        line.bytes().all(|b| (0x20..0x7f).contains(&b)),
        "printable ASCII: {line:?}"
    );
    (
        line.to_string(),
        output.status.code().expect("an exit code"),
    )
}

fn python_arg() -> String {
    python().display().to_string()
}

#[test]
fn a_healthy_cpu_run_is_ok_and_prints_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let output = health(&run_dir, &["--only", "copy", "--python", &python_arg()]);
    let (line, code) = line_and_code(&output, 200);
    assert_eq!(code, 0, "{line}");
    assert!(line.starts_with("OK: gpuprobe: "), "{line}");
    assert!(
        line.ends_with("probe runs passed on cpu (quick tier)"),
        "{line}"
    );
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_planted_fault_fails_with_a_short_simulated_reason_without_paths() {
    let dir = tempfile::tempdir().unwrap();
    for (format, max) in [("slurm", 200), ("npd", 80)] {
        let run_dir = dir.path().join(format);
        let output = health(
            &run_dir,
            &[
                "--only",
                "copy",
                "--python",
                &python_arg(),
                "--simulate",
                "h2d-zeros",
                "--health-format",
                format,
            ],
        );
        let (line, code) = line_and_code(&output, max);
        assert_eq!(code, 1, "{line}");
        assert!(line.starts_with("FAIL: SIMULATED gpuprobe: "), "{line}");
        assert!(!line.contains('/'), "no path: {line}");
        if format == "slurm" {
            assert!(line.contains("first copy."), "{line}");
        }
        assert!(output.stderr.is_empty());
        // The report is kept for whoever looks at the drained node.
        assert!(run_dir.join("report.json").is_file());
    }
}

#[test]
fn an_interpreter_that_is_missing_or_broken_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let broken = script(dir.path(), "python", "#!/bin/sh\necho no >&2\nexit 1\n");
    for python in [
        dir.path().join("nowhere/python").display().to_string(),
        broken.display().to_string(),
    ] {
        let output = health(
            &dir.path().join("run"),
            &["--only", "copy", "--python", &python],
        );
        let (line, code) = line_and_code(&output, 200);
        assert_eq!(
            (code, line.as_str()),
            (2, "UNKNOWN: gpuprobe: usage or input error"),
            "{python}"
        );
        // The message, which names the path, is for the log on stderr.
        assert!(String::from_utf8_lossy(&output.stderr).contains("gpuprobe: error: --python"));
    }
    // A command line that does not parse: its usage on stderr, the line on stdout.
    let output = health(
        &dir.path().join("run"),
        &["--json", "--health-format", "npd"],
    );
    let (line, code) = line_and_code(&output, 80);
    assert_eq!(
        (code, line.as_str()),
        (2, "UNKNOWN: gpuprobe: usage or input error")
    );
    // A budget out of range: refused with its range, before anything runs.
    let output = health(&dir.path().join("run"), &["--budget", "0"]);
    let (line, code) = line_and_code(&output, 200);
    assert_eq!(
        (code, line.as_str()),
        (2, "UNKNOWN: gpuprobe: usage or input error")
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("1 to 604800"));
    assert!(!dir.path().join("run").exists(), "nothing may run");
}

#[test]
fn a_spent_budget_stops_the_run_and_leaves_the_rest_not_tested() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let started = std::time::Instant::now();
    // The whole quick tier takes far longer than a second on the CPU.
    let output = health(&run_dir, &["--python", &python_arg(), "--budget", "1"]);
    let elapsed = started.elapsed().as_secs_f64();
    let (line, code) = line_and_code(&output, 200);
    assert_eq!(code, 2, "{line}");
    assert!(
        line.starts_with("UNKNOWN: gpuprobe: budget spent; nothing could be tested ("),
        "{line}"
    );
    assert!(
        elapsed < 30.0,
        "stopped at the budget, not run out: {elapsed} s"
    );
    let report: gpuprobe_model::Report =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report.exit_code, 4);
    let left = report
        .results
        .iter()
        .filter(|r| {
            matches!(&r.verdict, gpuprobe_model::Verdict::NotTested { reason }
                if reason == "the time budget was spent before it ran")
        })
        .count();
    assert!(
        left * 2 > report.results.len(),
        "{left} of {}",
        report.results.len()
    );
}
