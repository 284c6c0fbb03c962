//! Golden tests of what `check` and `run` print on a terminal: stdout, stderr and the exit
//! code of fixed scenarios on the CPU, compared line by line with
//! `crates/gpuprobe/tests/golden/*.txt`.
//!
//! They pin the user-facing text while code moves between crates: a change to the wording
//! must be deliberate. Only what differs from run to run is masked: durations, the
//! temporary directory, the interpreter's path, the kernel release and the tool's version;
//! and the order of result rows, which follows lane timing.
//! `GPUPROBE_UPDATE_GOLDEN=1` rewrites the files from the current output.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::*;

/// The golden file of `name`.
fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.txt"))
}

/// Masks what differs between runs and machines.
fn normalized(text: &str, tmp: &Path) -> String {
    let durations = regex::Regex::new(r"\b\d+\.\d+ s\b").unwrap();
    let text = text
        .replace(&tmp.display().to_string(), "<TMP>")
        .replace(&python().display().to_string(), "<PYTHON>")
        .replace(
            &format!("gpuprobe {}", env!("CARGO_PKG_VERSION")),
            "gpuprobe <VERSION>",
        );
    let text = match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(kernel) if !kernel.trim().is_empty() => text.replace(kernel.trim(), "<KERNEL>"),
        _ => text,
    };
    let text = durations.replace_all(&text, "<T> s");
    let stamps = regex::Regex::new(r"(?m)^\[ *\d+\.\d+s\] ").unwrap();
    let text = stamps.replace_all(&text, "[<T>] ");
    in_stable_order(&text)
}

/// The text with each run of consecutive probe rows (` probe.id   device  verdict …`), of
/// consecutive evidence lines (`probe: …`) and of progress lines (`[<T>] …`) sorted: results print in the order they arrive,
/// which depends on how the lanes run side by side, not on gpuprobe's code.
fn in_stable_order(text: &str) -> String {
    let row = regex::Regex::new(r"^ [a-z0-9_]+\.\S+ {2,}").unwrap();
    let evidence = regex::Regex::new(r"^ +probe: ").unwrap();
    let kind = |line: &str| {
        if row.is_match(line) {
            1
        } else if evidence.is_match(line) {
            2
        } else if line.starts_with("[<T>] ") {
            3
        } else {
            0
        }
    };
    let mut out: Vec<&str> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut run_kind = 0;
    for line in text.split_inclusive('\n') {
        let k = kind(line);
        if k != run_kind || k == 0 {
            run.sort_unstable();
            out.append(&mut run);
            run_kind = k;
        }
        if k == 0 {
            out.push(line);
        } else {
            run.push(line);
        }
    }
    run.sort_unstable();
    out.append(&mut run);
    out.concat()
}

/// Compares one scenario's output with its golden file (or writes it).
fn assert_golden(name: &str, output: &Output, tmp: &Path) {
    let actual = format!(
        "--- exit {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        normalized(&String::from_utf8_lossy(&output.stdout), tmp),
        normalized(&String::from_utf8_lossy(&output.stderr), tmp),
    );
    let path = golden_path(name);
    if std::env::var_os("GPUPROBE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "{}: {err}; GPUPROBE_UPDATE_GOLDEN=1 writes it",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name}: the output differs from {} at line {}\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display(),
            first + 1
        );
    }
}

fn check_on_cpu(tmp: &Path, extra: &[&str]) -> Output {
    gpuprobe()
        // Wide enough that no row wraps: rows arrive in lane order and are sorted here
        // one line each (the wrapping itself is pinned by gpuprobe-report's snapshots).
        .env("COLUMNS", "250")
        .args(["check", "--device", "cpu", "--python"])
        .arg(python())
        .arg("--run-dir")
        .arg(tmp.join("run"))
        .args(extra)
        .output()
        .unwrap()
}

fn run_job(tmp: &Path, extra: &[&str], job: &[&str]) -> Output {
    gpuprobe()
        .current_dir(tmp)
        .arg("run")
        .args(extra)
        .arg("--python")
        .arg(python())
        .arg("--")
        .args(job)
        .output()
        .unwrap()
}

#[test]
fn check_of_a_healthy_family() {
    let tmp = tempfile::tempdir().unwrap();
    let output = check_on_cpu(tmp.path(), &["--only", "copy"]);
    assert_golden("check-healthy", &output, tmp.path());
}

#[test]
fn check_of_a_healthy_family_listing_every_result() {
    let tmp = tempfile::tempdir().unwrap();
    let output = check_on_cpu(tmp.path(), &["--only", "dtype.bf16", "--all"]);
    assert_golden("check-healthy-all", &output, tmp.path());
}

#[test]
fn check_with_simulated_wrong_results() {
    let tmp = tempfile::tempdir().unwrap();
    let output = check_on_cpu(
        tmp.path(),
        &[
            "--simulate",
            "h2d-zeros",
            "--timeout-scale",
            "0.15",
            "--only",
            "copy.h2d",
        ],
    );
    assert_golden("check-simulated-zeros", &output, tmp.path());
}

#[test]
fn check_with_a_simulated_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let output = check_on_cpu(
        tmp.path(),
        &[
            "--simulate",
            "crash",
            "--timeout-scale",
            "0.15",
            "--only",
            "copy.roundtrip",
            "--only",
            "copy.h2d.pageable.tiny",
        ],
    );
    assert_golden("check-simulated-crash", &output, tmp.path());
}

#[test]
fn check_that_matches_no_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let output = check_on_cpu(tmp.path(), &["--only", "no.such.probe"]);
    assert_golden("check-no-probe", &output, tmp.path());
}

/// A job that prints a GPU fault message and dies of SIGSEGV.
const CRASHING_JOB: &str = "#!/bin/sh\necho step 1\n\
    echo 'Memory access fault by GPU node-1 (Agent handle: 0x5) on address 0x7f. Reason: Page not present' >&2\n\
    kill -SEGV $$\n";

#[test]
fn run_of_a_crashing_job() {
    let tmp = tempfile::tempdir().unwrap();
    script(tmp.path(), "job.sh", CRASHING_JOB);
    let output = run_job(tmp.path(), &[], &["./job.sh"]);
    assert_golden("run-crash", &output, tmp.path());
}

#[test]
fn run_repeated_of_a_failing_job() {
    let tmp = tempfile::tempdir().unwrap();
    let output = run_job(
        tmp.path(),
        &["--repeat", "2"],
        &["sh", "-c", "echo working; exit 3"],
    );
    assert_golden("run-repeat-failing", &output, tmp.path());
}

#[test]
fn run_of_a_succeeding_job() {
    let tmp = tempfile::tempdir().unwrap();
    let output = run_job(tmp.path(), &["--repeat", "2"], &["sh", "-c", "echo fine"]);
    assert_golden("run-repeat-success", &output, tmp.path());
}

#[test]
fn run_with_a_profile_proven_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("elsewhere.toml"),
        "profile_version = 1\ncreated_by = \"gpuprobe test\"\ncreated_at = \"2026-11-22T10:00:00Z\"\n\n\
         [env]\nHSA_ENABLE_SDMA = \"0\"\n\n[proven_on]\ngpus = []\nkernel = \"1.0\"\n\
         runtime = \"cuda 1.0 (torch build)\"\ntorch = \"1.0.0\"\n",
    )
    .unwrap();
    let output = run_job(
        tmp.path(),
        &["--profile", "elsewhere.toml"],
        &["sh", "-c", "echo never"],
    );
    assert_golden("run-profile-elsewhere", &output, tmp.path());
}

#[test]
fn run_of_a_missing_program() {
    let tmp = tempfile::tempdir().unwrap();
    let output = run_job(tmp.path(), &[], &["./no-such-program"]);
    assert_golden("run-missing-program", &output, tmp.path());
}
