//! The worker protocol under real failures: a segfaulting worker, garbage on the worker's
//! streams, missing and broken interpreters, a torch-less interpreter, and a run killed
//! mid-way and resumed.

use std::time::{Duration, Instant};

use gpuprobe_model::ExitStatus;
use gpuprobe_model::Verdict;

use crate::support::*;

/// Processes whose command line mentions `text`.
fn processes_mentioning(text: &str) -> usize {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .chars()
                        .all(|c| c.is_ascii_digit())
                })
                .filter(|e| {
                    std::fs::read(e.path().join("cmdline"))
                        .map(|raw| {
                            String::from_utf8_lossy(&raw)
                                .replace('\0', " ")
                                .contains(text)
                        })
                        .unwrap_or(false)
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_segfaulting_worker_is_a_crash_with_sigsegv() {
    let dir = tempfile::tempdir().unwrap();
    let faults = dir.path().join("segv.toml");
    std::fs::write(
        &faults,
        "[[fault]]\nname = \"segv\"\nop = \"h2d\"\nwhen = { max_bytes = 64, pinned = false }\n\
         effect = { kind = \"crash\", signal = \"SIGSEGV\" }\n",
    )
    .unwrap();
    let (output, report) = check_json(
        &dir.path().join("run"),
        &[
            "--simulate",
            faults.to_str().unwrap(),
            "--only",
            "copy.h2d.pageable.tiny",
            "--only",
            "copy.h2d.pageable.medium",
        ],
    );
    let report = expect_report(&output, report);
    let crashed = result(&report, "copy.h2d.pageable.tiny.nonblocking");
    assert!(
        matches!(
            crashed.verdict,
            Verdict::Crash {
                signal: Some(11),
                ..
            }
        ),
        "{:?}",
        crashed.verdict
    );
    assert!(
        !crashed.stderr_tail.is_empty(),
        "the worker's last output is kept"
    );
    assert_eq!(
        result(&report, "copy.h2d.pageable.medium.blocking").verdict,
        Verdict::Pass
    );
}

#[test]
fn garbage_on_the_worker_streams_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let wrapper = script(
        dir.path(),
        "noisy-python",
        &format!(
            "#!/bin/sh\necho 'garbage on stdout'\necho 'garbage on stderr' >&2\necho '{{not json' >&3\n\
             echo '{{\"event\":\"no-such-event\"}}' >&3\nexec '{}' \"$@\"\n",
            python().display()
        ),
    );
    let output = gpuprobe()
        .args([
            "check",
            "--json",
            "--device",
            "cpu",
            "--only",
            "copy.h2d.pageable.4x4",
            "--python",
        ])
        .arg(&wrapper)
        .arg("--run-dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    assert!(!report.results.is_empty());
    assert!(
        report.results.iter().all(|r| passed_or_skipped(&r.verdict)),
        "{:#?}",
        report.results
    );
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn a_missing_interpreter_leaves_every_probe_not_tested_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // Found, not named: a missing interpreter named with --python is a usage error instead
    // (tests/it/resume_and_interrupt.rs).
    let output = gpuprobe()
        .args([
            "check",
            "--json",
            "--device",
            "cpu",
            "--only",
            "copy.h2d.pageable.4x4",
        ])
        .env("GPUPROBE_PYTHON", "/nonexistent/bin/python")
        .arg("--run-dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    assert_eq!(
        output.status.code(),
        Some(ExitStatus::NothingTested.code() as i32)
    );
    assert!(
        !report.results.is_empty(),
        "the probes are listed even though they could not run"
    );
    for r in &report.results {
        let Verdict::NotTested { reason } = &r.verdict else {
            panic!("{:?}", r.verdict)
        };
        assert!(reason.contains("/nonexistent/bin/python"), "{reason}");
    }
}

#[test]
fn a_broken_interpreter_is_reported_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let broken = script(
        dir.path(),
        "broken-python",
        "#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n",
    );
    let output = gpuprobe()
        .args([
            "check",
            "--json",
            "--device",
            "cpu",
            "--only",
            "copy.h2d.pageable.4x4",
            "--python",
        ])
        .arg(&broken)
        .arg("--run-dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    assert_eq!(output.status.code(), Some(4));
    let Verdict::NotTested { reason } = &report.results[0].verdict else {
        panic!("{:?}", report.results[0].verdict)
    };
    assert!(reason.contains("Fatal Python error"), "{reason}");
}

#[test]
fn an_interpreter_without_torch_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // -S leaves site-packages (and so torch) out of the path.
    let bare = script(
        dir.path(),
        "bare-python",
        &format!("#!/bin/sh\nexec '{}' -S \"$@\"\n", python().display()),
    );
    let output = gpuprobe()
        .args([
            "check",
            "--json",
            "--device",
            "cpu",
            "--only",
            "copy.h2d.pageable.4x4",
            "--python",
        ])
        .arg(&bare)
        .arg("--run-dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    assert_eq!(output.status.code(), Some(4));
    let Verdict::NotTested { reason } = &report.results[0].verdict else {
        panic!("{:?}", report.results[0].verdict)
    };
    assert!(reason.contains("torch"), "{reason}");
    let python = report.fingerprint.python.as_ref().expect("python facts");
    assert!(python.torch.is_none());
    assert!(
        python
            .torch_error
            .as_deref()
            .unwrap_or("")
            .contains("torch")
    );
}

#[test]
fn a_killed_run_keeps_its_results_and_resumes_to_completion() {
    let dir = tempfile::tempdir().unwrap();
    // The first run hangs in the rng probes and is killed; the resumed run (without the
    // variable the hang needs) completes.
    let (mut command, run) = check_that_hangs_in_rng(dir.path());
    let mut child = command
        .arg("--json")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let results = run.join("results.jsonl");
    let deadline = Instant::now() + Duration::from_secs(240);
    let before = loop {
        let text = std::fs::read_to_string(&results).unwrap_or_default();
        // All copy probes are done once the first rng probe starts hanging.
        if text.lines().count() >= 5 && text.lines().all(|l| l.contains("\"copy.")) {
            std::thread::sleep(Duration::from_secs(2));
            let settled = std::fs::read_to_string(&results).unwrap_or_default();
            if settled == text {
                break text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the run never reached the hanging probe"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "gpuprobe ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // The hung worker must not outlive the killed supervisor.
    let marker = run.to_string_lossy().to_string();
    let gone_by = Instant::now() + Duration::from_secs(10);
    while processes_mentioning(&marker) > 0 {
        assert!(
            Instant::now() < gone_by,
            "a worker of the killed run is still running"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let output = gpuprobe()
        .args(["check", "--json", "--resume"])
        .arg(&run)
        .output()
        .unwrap();
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    let after = std::fs::read_to_string(&results).unwrap();
    assert!(
        after.starts_with(&before),
        "results recorded before the kill were rewritten"
    );
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("plan.json")).unwrap()).unwrap();
    let planned = plan["tasks"].as_array().unwrap().len();
    assert_eq!(
        report.results.len(),
        planned,
        "every planned probe has exactly one result"
    );
    let mut ids: Vec<_> = report.results.iter().map(|r| r.probe.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), planned, "a probe was recorded twice");
    assert!(
        report.results.iter().all(|r| passed_or_skipped(&r.verdict)),
        "{:#?}",
        problems(&report)
    );
}
