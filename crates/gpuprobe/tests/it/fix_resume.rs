//! `gpuprobe fix --resume`: a fix killed after some trials, or one whose trial journal was
//! cut short, finishes with the same account and profile as an uninterrupted run, without
//! running the trials it had finished again.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use gpuprobe_model::{FixAccount, Profile};

use crate::support::*;

/// A fix whose search is short (baseline, four singles, verification) and cures the
/// simulated fault with HSA_ENABLE_SDMA=0.
const FIX_ARGS: &[&str] = &[
    "--simulate",
    "h2d-zeros",
    "--only",
    "copy.h2d.pageable.tiny.nonblocking",
    "--candidate",
    "AMD_SERIALIZE_COPY=3",
    "--candidate",
    "HSA_ENABLE_SDMA=0",
    "--candidate",
    "HIP_LAUNCH_BLOCKING=1",
    "--candidate",
    "AMD_SERIALIZE_KERNEL=3",
    "--timeout-scale",
    "0.3",
];

fn fix_command(run_dir: &Path) -> std::process::Command {
    let mut command = gpuprobe();
    command
        .args(["fix", "--json", "--device", "cpu", "--python"])
        .arg(python())
        .arg("--run-dir")
        .arg(run_dir)
        .args(FIX_ARGS);
    command
}

fn account_of(output: &Output) -> FixAccount {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON account ({e}); exit {:?}\nstdout:\n{}\nstderr:\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn resume(run_dir: &Path) -> (Output, FixAccount) {
    let output = gpuprobe()
        .args(["fix", "--json", "--resume"])
        .arg(run_dir)
        .output()
        .unwrap();
    let account = account_of(&output);
    (output, account)
}

fn journal_lines(run_dir: &Path) -> Vec<String> {
    std::fs::read_to_string(run_dir.join("trials.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Everything the search decided (not its timings, not where it ran, not its notes).
fn decisions(account: &FixAccount) -> serde_json::Value {
    let mut value = serde_json::to_value(account).unwrap();
    let object = value.as_object_mut().unwrap();
    for key in [
        "started_at",
        "wall_s",
        "run_dir",
        "source_run",
        "notes",
        "profile",
        "cost",
    ] {
        object.remove(key);
    }
    for candidate in object["candidates"].as_array_mut().unwrap() {
        candidate.as_object_mut().unwrap().remove("elapsed_s");
    }
    value
}

fn profile_of(account: &FixAccount) -> Profile {
    let path = account.profile.as_ref().expect("a profile");
    let mut profile: Profile = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    // When it was written, where its evidence is, and timings differ from run to run.
    profile.created_at.clear();
    profile.evidence = None;
    profile.measured_cost = None;
    profile
}

fn same_result(resumed: &FixAccount, uninterrupted: &FixAccount) {
    assert_eq!(decisions(resumed), decisions(uninterrupted));
    assert_eq!(profile_of(resumed), profile_of(uninterrupted));
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn a_killed_fix_resumes_without_redoing_its_finished_trials() {
    let dir = tempfile::tempdir().unwrap();

    let whole_dir = dir.path().join("uninterrupted");
    let output = fix_command(&whole_dir).output().unwrap();
    let whole = account_of(&output);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let total = whole.budget.trials as usize;
    assert_eq!(total, 6, "baseline, four candidates, verification");
    assert_eq!(journal_lines(&whole_dir).len(), total);
    assert_eq!(whole.chosen[0].describe(), "HSA_ENABLE_SDMA=0");

    // The same fix, killed once three trials are recorded.
    let run_dir = dir.path().join("killed");
    let mut child = fix_command(&run_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while journal_lines(&run_dir).len() < 3 {
        assert!(Instant::now() < deadline, "the fix never recorded 3 trials");
        assert!(child.try_wait().unwrap().is_none(), "the fix ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let recorded = journal_lines(&run_dir);
    let k = recorded.len();
    assert!(k >= 3 && k < total, "{k} of {total} trials recorded");
    assert!(!run_dir.join("fix.json").exists());
    // Marks in the finished trials' directories: a trial run again would remake them.
    for entry in std::fs::read_dir(run_dir.join("trials")).unwrap() {
        let path = entry.unwrap().path();
        let number: usize = path.file_name().unwrap().to_str().unwrap()[..2]
            .parse()
            .unwrap();
        if number <= k {
            std::fs::write(path.join("finished-before-the-kill"), "").unwrap();
        }
    }

    let (output, resumed) = resume(&run_dir);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("{k} finished trial(s) recorded")),
        "{text}"
    );
    same_result(&resumed, &whole);
    assert_eq!(
        text.matches("recorded by the interrupted run").count(),
        k,
        "{text}"
    );
    assert_eq!(
        text.matches("gpuprobe: fix: trial ").count(),
        total,
        "{text}"
    );
    let journal = journal_lines(&run_dir);
    assert_eq!(journal.len(), total);
    assert_eq!(
        journal[..k],
        recorded[..],
        "the recorded trials are kept as they were"
    );
    let mut trial_dirs: Vec<String> = std::fs::read_dir(run_dir.join("trials"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    trial_dirs.sort();
    assert_eq!(trial_dirs.len(), total, "{trial_dirs:?}");
    for name in &trial_dirs[..k] {
        assert!(
            run_dir
                .join("trials")
                .join(name)
                .join("finished-before-the-kill")
                .exists(),
            "trial {name} ran again"
        );
    }
    assert!(
        resumed
            .notes
            .iter()
            .any(|n| n.contains(&format!("{k} of the {total} trial(s) were read back"))),
        "{:?}",
        resumed.notes
    );

    // A finished fix is not resumed again.
    let output = gpuprobe()
        .args(["fix", "--resume"])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("has finished"),
        "{}",
        stderr(&output)
    );

    // A journal cut in the middle of a line (the process died while writing it) loses only
    // that trial.
    std::fs::remove_file(whole_dir.join("fix.json")).unwrap();
    std::fs::remove_file(whole_dir.join("profile.toml")).unwrap();
    let lines = journal_lines(&whole_dir);
    let cut = format!(
        "{}\n{}\n{}",
        lines[0],
        lines[1],
        &lines[2][..lines[2].len() / 2]
    );
    std::fs::write(whole_dir.join("trials.jsonl"), cut).unwrap();
    let (output, again) = resume(&whole_dir);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("2 finished trial(s) recorded (1 unfinished line(s) dropped)"),
        "{text}"
    );
    assert_eq!(
        text.matches("recorded by the interrupted run").count(),
        2,
        "{text}"
    );
    same_result(&again, &whole);
    assert_eq!(journal_lines(&whole_dir).len(), total);
    assert_eq!(journal_lines(&whole_dir)[..2], lines[..2]);
}

#[test]
fn resume_refuses_what_it_cannot_resume() {
    let dir = tempfile::tempdir().unwrap();
    // Not a fix run.
    let output = gpuprobe()
        .args(["fix", "--resume"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("not a resumable fix run directory"));
    // Options that decide the search come from the interrupted run, never from here.
    let output = gpuprobe()
        .args(["fix", "--resume"])
        .arg(dir.path())
        .args(["--candidate", "HSA_ENABLE_SDMA=0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("cannot be used with"),
        "{}",
        stderr(&output)
    );
}

/// Ctrl-C in the middle of a trial: gpuprobe leaves with 130 and says how to finish, the
/// cut-short trial is not recorded (a resume would otherwise replay its broken results),
/// and the resumed fix runs it again and finishes.
#[test]
fn an_interrupted_trial_is_not_recorded_and_the_fix_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("interrupted");
    let child = fix_command(&run_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while journal_lines(&run_dir).len() < 2 {
        assert!(Instant::now() < deadline, "the fix never recorded 2 trials");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Into the third trial's workers.
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(130), "{text}");
    assert!(
        text.contains(&format!("gpuprobe fix --resume {}", run_dir.display())),
        "{text}"
    );
    let recorded = journal_lines(&run_dir);
    let k = recorded.len();
    assert!((2..6).contains(&k), "{k}");
    // Every recorded trial is whole: all its probes came back with a verdict.
    for line in &recorded {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let results = record["results"].as_array().unwrap();
        assert_eq!(
            results.len(),
            record["probes"].as_array().unwrap().len(),
            "{line}"
        );
        assert!(
            results
                .iter()
                .all(|r| r["verdict"]["verdict"] != "not_tested"),
            "{line}"
        );
    }

    let (output, resumed) = resume(&run_dir);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert_eq!(text.matches("recorded by the interrupted run").count(), k);
    assert_eq!(resumed.budget.trials, 6);
    assert_eq!(resumed.chosen[0].describe(), "HSA_ENABLE_SDMA=0");
}
