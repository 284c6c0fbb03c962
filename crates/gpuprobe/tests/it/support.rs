//! Helpers shared by the integration tests.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use gpuprobe_model::Report;
use gpuprobe_model::{ProbeResult, Verdict};

/// The interpreter with a CPU PyTorch that the tests probe. Set up by `scripts/test.sh`;
/// a missing one is a setup error, never a silently skipped test.
pub(crate) fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("GPUPROBE_TEST_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(
        venv.exists(),
        "no test interpreter: run `bash scripts/test.sh` (it creates .venv with a CPU PyTorch) \
         or set GPUPROBE_TEST_PYTHON to a python with torch installed"
    );
    venv
}

/// The gpuprobe binary under test: the one cargo built with these tests, or the one named by
/// `GPUPROBE_TEST_BIN` (a test binary copied to another machine, where cargo's path does not
/// exist).
pub(crate) fn gpuprobe() -> std::process::Command {
    let program = std::env::var_os("GPUPROBE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gpuprobe")));
    let mut command = std::process::Command::new(program);
    // Tests must not depend on the developer's environment.
    command
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("GPUPROBE_PYTHON")
        .env_remove("GPUPROBE_ZYGOTE")
        .env_remove("COLUMNS")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .env("NO_COLOR", "1");
    command
}

/// Runs `gpuprobe check --json` with the test interpreter on the CPU, plus `extra`.
pub(crate) fn check_json(run_dir: &Path, extra: &[&str]) -> (Output, Option<Report>) {
    let output = gpuprobe()
        .args(["check", "--json", "--device", "cpu", "--python"])
        .arg(python())
        .arg("--run-dir")
        .arg(run_dir)
        .args(extra)
        .output()
        .expect("gpuprobe runs");
    let report = serde_json::from_slice::<Report>(&output.stdout).ok();
    (output, report)
}

/// The report, or a panic that shows what gpuprobe printed.
pub(crate) fn expect_report(output: &Output, report: Option<Report>) -> Report {
    report.unwrap_or_else(|| {
        panic!(
            "no JSON report; exit {:?}\nstdout:\n{}\nstderr:\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The result of one probe on the CPU.
pub(crate) fn result<'a>(report: &'a Report, probe: &str) -> &'a ProbeResult {
    report
        .results
        .iter()
        .find(|r| r.probe.as_str() == probe)
        .unwrap_or_else(|| {
            panic!(
                "no result for {probe}; have {:?}",
                report
                    .results
                    .iter()
                    .map(|r| r.probe.as_str())
                    .collect::<Vec<_>>()
            )
        })
}

/// Results whose verdict is a problem.
pub(crate) fn problems(report: &Report) -> Vec<&ProbeResult> {
    report
        .results
        .iter()
        .filter(|r| r.verdict.is_problem())
        .collect()
}

/// Whether a verdict is PASS or SKIP.
pub(crate) fn passed_or_skipped(verdict: &Verdict) -> bool {
    matches!(verdict, Verdict::Pass | Verdict::Skip { .. })
}

/// Writes an executable script.
pub(crate) fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The test interpreter behind another path (`dir/other-python`, a script that execs it):
/// the same Python to run, another interpreter to a resume, which goes by the path.
pub(crate) fn python_behind_another_path(dir: &Path) -> PathBuf {
    script(
        dir,
        "other-python",
        &format!("#!/bin/sh\nexec '{}' \"$@\"\n", python().display()),
    )
}

/// A `check` on the CPU whose copy probes pass and whose first rng probe then hangs (a
/// simulated fault that exists only while `GPUPROBE_TEST_HANG=1`, so a resume without it
/// completes), with a timeout long enough that the test decides when it ends. The run
/// directory is `dir/run`; the caller adds its own options and streams.
pub(crate) fn check_that_hangs_in_rng(dir: &Path) -> (std::process::Command, PathBuf) {
    let run = dir.join("run");
    let faults = dir.join("hang.toml");
    std::fs::write(
        &faults,
        "[[fault]]\nname = \"late-hang\"\nop = \"randn\"\nonly_when_set = [\"GPUPROBE_TEST_HANG=1\"]\n\
         effect = { kind = \"hang\" }\n",
    )
    .unwrap();
    let mut command = gpuprobe();
    command
        .args([
            "check",
            "--device",
            "cpu",
            "--only",
            "copy.h2d.pageable",
            "--only",
            "rng.randn.",
            "--python",
        ])
        .arg(python())
        .arg("--run-dir")
        .arg(&run)
        .arg("--simulate")
        .arg(&faults)
        .args(["--timeout-scale", "100"])
        .env("GPUPROBE_TEST_HANG", "1");
    (command, run)
}
