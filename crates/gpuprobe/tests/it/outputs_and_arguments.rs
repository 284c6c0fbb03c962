//! What scripts rely on: `memtest --json` prints one JSON document whatever happens; every
//! output path (`run --summary`, `fix --profile-out`, run directories) is checked before any
//! work, so a typo costs an exit 2 up front and never a run's result; bad arguments of every
//! command exit 2, and time options outside their documented range are refused with the
//! range; gpuprobe's own lines that quote a job's output cannot drive the terminal.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::*;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// A regular file, for paths that lead "through" it (always unwritable, even for root).
fn a_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("a-file");
    std::fs::write(&path, "x").unwrap();
    path
}

fn memtest_json(args: &[&str]) -> (Output, serde_json::Value) {
    let output = gpuprobe()
        .args(["memtest", "--json"])
        .args(args)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}); exit {:?}\nstdout:\n{}\nstderr:\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            stderr(&output)
        )
    });
    (output, json)
}

#[test]
fn memtest_json_is_one_document_for_every_outcome() {
    let dir = tempfile::tempdir().unwrap();
    // Whatever this machine has (here: no GPU runtime, so no report), the outcome is JSON
    // with a status, a reason and the exit code the process leaves with.
    let (output, json) = memtest_json(&["--run-dir", dir.path().join("m").to_str().unwrap()]);
    let code = output.status.code().unwrap();
    assert_eq!(json["exit_code"], code, "{json}");
    assert_eq!(json["command"], "memtest");
    assert!(
        json["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{json}"
    );
    let status = json["status"].as_str().unwrap();
    match code {
        0 => assert_eq!(status, "passed"),
        4 => assert!(["not_tested", "skipped"].contains(&status), "{json}"),
        _ => assert_eq!(code, 1, "{json}"),
    }
    if json.get("version").is_none() {
        // No report: the verdict says why.
        assert!(json["verdict"]["verdict"].is_string(), "{json}");
    }

    // Refused before the test starts: still one document, exit 2.
    let file = a_file(dir.path());
    for args in [
        vec!["--run-dir", file.to_str().unwrap()],
        vec!["--inject-error", "not-an-offset"],
    ] {
        let (output, json) = memtest_json(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {json}");
        assert_eq!(json["status"], "usage_error", "{args:?}");
        assert_eq!(json["exit_code"], 2);
        assert_eq!(json["exit_status"], "usage_error");
        assert!(stderr(&output).starts_with("gpuprobe: error: "), "{args:?}");
    }
    // Refused by the argument parser itself: the same document, the parser's explanation
    // as its reason, the GPU it was asked for.
    for (args, says, gpu) in [
        (vec!["--passes", "0"], "1..=1000", 0),
        (vec!["--device", "3", "--fraction", "2"], "at most 1", 3),
        (
            vec!["--device=1", "--no-such-option"],
            "--no-such-option",
            1,
        ),
    ] {
        let (output, json) = memtest_json(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {json}");
        assert_eq!(json["status"], "usage_error", "{args:?}");
        assert_eq!(json["exit_code"], 2);
        assert_eq!(json["gpu"], gpu, "{args:?}");
        assert!(
            json["reason"].as_str().unwrap().contains(says),
            "{args:?}: {json}"
        );
        assert!(stderr(&output).contains(says), "{args:?}");
    }
}

#[test]
fn run_checks_the_summary_path_before_the_job_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("job-ran");
    let job = script(
        dir.path(),
        "job.sh",
        &format!("#!/bin/sh\ntouch '{}'\nexit 3\n", marker.display()),
    );
    let file = a_file(dir.path());
    let output = gpuprobe()
        .args(["run", "--summary"])
        .arg(file.join("summary.json"))
        .arg("--")
        .arg(&job)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("--summary"), "{}", stderr(&output));
    assert!(!marker.exists(), "the job must not run");

    // A summary in a directory yet to be made is fine, and the job's code is kept.
    let summary = dir.path().join("new/dir/summary.json");
    let output = gpuprobe()
        .args(["run", "--summary"])
        .arg(&summary)
        .arg("--")
        .arg(&job)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(marker.exists());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(json["exit_code"], 3);
}

#[test]
fn fix_checks_the_profile_path_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let file = a_file(dir.path());
    let run_dir = dir.path().join("fix");
    let started = Instant::now();
    let output = gpuprobe()
        .args(["fix", "--device", "cpu", "--python"])
        .arg(python())
        .args([
            "--simulate",
            "h2d-zeros",
            "--only",
            "copy.h2d.pageable.tiny.nonblocking",
            "--candidate",
            "HSA_ENABLE_SDMA=0",
            "--profile-out",
        ])
        .arg(file.join("profile.toml"))
        .arg("--run-dir")
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("--profile-out"),
        "{}",
        stderr(&output)
    );
    assert!(
        !stderr(&output).contains("trial "),
        "no trial may run: {}",
        stderr(&output)
    );
    assert!(!run_dir.exists(), "nothing is created");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn unwritable_run_directories_are_refused_before_any_probe() {
    let dir = tempfile::tempdir().unwrap();
    let file = a_file(dir.path());
    for command in ["check", "fix"] {
        let output = gpuprobe()
            .args([command, "--device", "cpu", "--only", "copy.d2d", "--python"])
            .arg(python())
            .arg("--run-dir")
            .arg(file.join("run"))
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{command}: {}",
            stderr(&output)
        );
        assert!(stderr(&output).contains("cannot create"), "{command}");
    }
}

#[test]
fn time_options_outside_their_range_exit_2_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    for (args, range) in [
        (vec!["check", "--timeout-scale", "1e-9"], "0.05 to 1000"),
        (vec!["check", "--startup-timeout", "0"], "1 to 3600"),
        (vec!["check", "--soak-seconds", "100000"], "0.5 to 720"),
        (vec!["fix", "--timeout-scale", "1e-9"], "0.05 to 1000"),
        (vec!["fix", "--startup-timeout", "0"], "1 to 3600"),
        (vec!["memtest", "--fraction", "0"], "more than 0, at most 1"),
        (vec!["memtest", "--passes", "0"], "1..=1000"),
    ] {
        let output = gpuprobe()
            .args(&args)
            .args(["--device", if args[0] == "memtest" { "0" } else { "cpu" }])
            .arg("--run-dir")
            .arg(&run_dir)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains(range),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!run_dir.exists(), "{args:?}: nothing may run");
    }
    let output = gpuprobe()
        .args(["run", "--hang-timeout", "0", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("1 to 604800"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn bad_arguments_of_every_command_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = a_file(dir.path());
    let python = python();
    let python = python.to_str().unwrap();
    let nowhere = dir.path().join("nowhere").display().to_string();
    let file = file.to_str().unwrap();
    // check and fix get a run directory of their own, so nothing lands in the home.
    let with_run_dir = [
        vec!["check", "--device", "gpu0"],
        vec!["fix", "--device", "0,x"],
        vec!["check", "--device", "cpu", "--only", "no-such-probe*"],
        vec!["fix", "--device", "cpu", "--only", "no-such-probe*"],
        vec!["check", "--device", "cpu", "--simulate", "no-such-preset"],
        vec!["fix", "--device", "cpu", "--simulate", "no-such-preset"],
        vec!["fix", "--from", &nowhere],
        vec!["fix", "--from", file],
    ];
    let mut cases: Vec<Vec<String>> = Vec::new();
    for (i, args) in with_run_dir.iter().enumerate() {
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let run_dir = dir.path().join(format!("run{i}"));
        args.extend(["--python".into(), python.into()]);
        args.extend(["--run-dir".into(), run_dir.display().to_string()]);
        cases.push(args);
    }
    for args in [
        vec!["fix", "--resume", &nowhere],
        vec!["fix", "--resume", file],
        vec!["kb", "--kb", &nowhere, "list"],
        vec!["run", "--profile", &nowhere, "--", "true"],
        vec!["run", "--profile", file, "--", "true"],
        vec!["profile", "show", file],
        vec!["profile", "export", &nowhere],
        vec!["memtest", "--run-dir", file],
    ] {
        cases.push(args.iter().map(|a| a.to_string()).collect());
    }
    for args in cases {
        let output = gpuprobe().args(&args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).starts_with("gpuprobe: error: "),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

/// gpuprobe quotes the fatal line of a crashed job; a line with terminal escapes is shown
/// escaped in gpuprobe's own message (the job's own stderr still passes through as written).
#[test]
fn gpuprobe_lines_quoting_job_output_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let job = script(
        dir.path(),
        "job.sh",
        "#!/bin/sh\nprintf '\\033]0;pwned\\007Memory access fault by GPU node-1 \\033[2J\\n' >&2\nkill -SEGV $$\n",
    );
    let output = gpuprobe().args(["run", "--"]).arg(&job).output().unwrap();
    assert_eq!(output.status.code(), Some(139));
    let text = stderr(&output);
    let ours: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("gpuprobe:"))
        .collect();
    let crash = ours
        .iter()
        .find(|l| l.contains("crashed"))
        .unwrap_or_else(|| panic!("{text:?}"));
    assert!(
        !crash.contains('\x1b') && !crash.contains('\x07'),
        "{crash:?}"
    );
    assert!(
        crash.contains("\\x1b]0;pwned\\x07Memory access fault"),
        "{crash:?}"
    );
    // The job's own line went through untouched.
    assert!(text.contains("\x1b]0;pwned\x07Memory access fault"));
}

/// A profile is a file from anywhere: `profile show` prints its free text made visible.
#[test]
fn profile_show_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(
        &path,
        "profile_version = 1\ncreated_by = \"gpuprobe \\u001b]0;pwned\\u0007\"\n\
         created_at = \"2026-11-22T10:00:00Z\"\n[env]\nHSA_ENABLE_SDMA = \"0\"\n\
         [proven_on]\ngpus = []\n",
    )
    .unwrap();
    let output = gpuprobe()
        .args(["profile", "show"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    assert!(text.contains("gpuprobe \\x1b]0;pwned\\x07"), "{text:?}");
}
