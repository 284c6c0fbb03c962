//! `gpuprobe repro` against a real simulated `check` on the CPU, with a fake generator: an
//! interpreter script that answers `-m gpuprobe.repro` as the generator's interface says
//! (docs/repro.md) and runs anything else with the test interpreter. What it does is
//! chosen by `FAKE_GENERATOR`: `ok` (a script that reproduces), `healthy` (one that does
//! not), `no` (exit 3, `no repro: ...` with hostile text), `hang` (a script that never
//! ends), `crash` (the generator dies).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use crate::support::{gpuprobe, python, script};

/// The probe the `h2d-zeros` preset fails on the CPU.
const PROBE: &str = "copy.h2d.pageable.4x4.blocking";

/// One simulated check for every test (read-only; tests that break it copy it first).
fn simulated_run() -> &'static Path {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, run) = RUN.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let output = gpuprobe()
            .args([
                "check",
                "--device",
                "cpu",
                "--simulate",
                "h2d-zeros",
                "--only",
                "copy.h2d",
                "--python",
            ])
            .arg(python())
            .arg("--run-dir")
            .arg(&run)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(1),
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (dir, run)
    });
    run
}

fn fake_python(dir: &Path) -> PathBuf {
    let body = format!(
        r#"#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "gpuprobe.repro" ]; then
  out="$8"
  [ -f "$out/RESULT.json" ] && [ -f "$out/PLAN.json" ] || {{ echo "inputs missing" >&2; exit 1; }}
  [ -f "${{PYTHONPATH%%:*}}/gpuprobe/__init__.py" ] || {{ echo "no package on PYTHONPATH" >&2; exit 1; }}
  case "$FAKE_GENERATOR" in
    no) printf 'no repro: this probe \033]0;pwned\007 needs the whole loop\n' >&2; exit 3 ;;
    crash) echo "Traceback: generator broke" >&2; exit 1 ;;
    hang) body='import time; print("torch 2.x"); time.sleep(600)' ;;
    healthy) body='print("torch 2.x"); print("NOT REPRODUCED: all 16 elements match"); raise SystemExit(0)' ;;
    *) body='import os, sys
print("torch 2.x  device cpu")
print("simulate:", "set" if os.environ.get("GPUPROBE_REPRO_SIMULATE") else "unset")
print("expected [0] 1.0 actual 0.0 </details><script>x</script>")
print("REPRODUCED: all zeros: the whole output (16 elements)")
sys.exit(1)' ;;
  esac
  printf '%s\n' "$body" > "$out/repro.py"
  printf '{{"probe": "{PROBE}", "family": "copy", "kind": "python", "needs": ["torch"], "env": {{}}, "summary": "4x4 float32 pageable host-to-device copy", "reference": "the input itself", "tolerance": "bit-exact", "crash_child": false, "simulated": true}}\n' > "$out/repro.json"
  exit 0
fi
exec '{}' "$@"
"#,
        python().display()
    );
    script(dir, "fake-python", &body)
}

fn repro(dir: &Path, mode: &str, args: &[&str]) -> Output {
    gpuprobe()
        .arg("repro")
        .args(args)
        .arg("--python")
        .arg(fake_python(dir))
        .env("FAKE_GENERATOR", mode)
        .env("XDG_STATE_HOME", dir.join("state"))
        .output()
        .unwrap()
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_simulated_failure_gets_a_script_that_reproduces_and_an_issue_body() {
    let dir = tempfile::tempdir().unwrap();
    let run = simulated_run();
    let out = dir.path().join("out");
    let output = repro(
        dir.path(),
        "ok",
        &[
            PROBE,
            "--run",
            run.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("repro of {PROBE} on cpu (FAIL) · SIMULATED")),
        "{stdout}"
    );
    assert!(stdout.contains("REPRODUCED: all zeros"), "{stdout}");
    assert!(stdout.contains("SIMULATED: run with gpuprobe's fault simulation installed"));
    assert!(stdout.contains("run it  cd "), "{stdout}");
    for file in [
        "repro.py",
        "repro.json",
        "RESULT.json",
        "PLAN.json",
        "run.json",
        "ISSUE.md",
    ] {
        assert!(out.join(file).is_file(), "{file}");
    }
    assert!(
        !out.join(".gpuprobe-package").exists(),
        "the package is removed"
    );
    let issue = std::fs::read_to_string(out.join("ISSUE.md")).unwrap();
    assert!(
        issue.starts_with(&format!("# [SIMULATED] {}", PROBE.replace('_', "\\_"))),
        "{issue}"
    );
    assert!(issue.contains("**SIMULATED.**"));
    assert!(
        issue.contains("simulate: set"),
        "the script ran with the simulation spec: {issue}"
    );
    assert!(issue.contains("**REPRODUCED**"));
    assert!(
        issue.contains("print(\"REPRODUCED: all zeros"),
        "the script inline: {issue}"
    );
    assert!(
        issue.contains("DIAG-COPY"),
        "the diagnosis that names the probe: {issue}"
    );
    // The script's hostile output (in the script and in what it printed) is fenced, never
    // loose HTML.
    let fenced = issue.lines().filter(|l| l.contains("<script>")).count();
    assert_eq!(fenced, 2, "{issue}");
    assert_eq!(
        loose_lines(&issue)
            .filter(|l| l.contains("<script>"))
            .count(),
        0
    );
}

/// The lines of `markdown` outside fenced blocks.
fn loose_lines(markdown: &str) -> impl Iterator<Item = &str> {
    let mut fence: Option<String> = None;
    markdown.lines().filter(move |line| {
        let ticks: String = line.chars().take_while(|&c| c == '`').collect();
        match &fence {
            Some(open) => {
                if ticks.len() >= open.len() && line.trim_end() == ticks {
                    fence = None;
                }
                false
            }
            None if ticks.len() >= 3 => {
                fence = Some(ticks);
                false
            }
            None => true,
        }
    })
}

#[test]
fn the_newest_check_is_the_default_run_and_a_healthy_script_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("state/gpuprobe/runs");
    std::fs::create_dir_all(&runs).unwrap();
    let copy = runs.join("check-2026-01-01T00-00-00-1");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(simulated_run())
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    let output = repro(dir.path(), "healthy", &["*.4x4.blocking"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("NOT REPRODUCED: all 16 elements match"),
        "{stdout}"
    );
    assert!(copy.join("repro").join(PROBE).join("ISSUE.md").is_file());
}

#[test]
fn names_that_are_not_one_failing_probe_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let run = simulated_run().to_str().unwrap().to_string();
    let passing = "copy.h2d.pageable.1mib.blocking";
    let report: gpuprobe_model::Report =
        serde_json::from_slice(&std::fs::read(simulated_run().join("report.json")).unwrap())
            .unwrap();
    let passing = report
        .results
        .iter()
        .find(|r| r.verdict == gpuprobe_model::Verdict::Pass)
        .map_or(passing.to_string(), |r| r.probe.as_str().to_string());
    for (probe, says) in [
        (
            "ops.*",
            "no failing probe matches ops.*; the failing probes are: copy.h2d.",
        ),
        (
            "copy.h2d.pageable.*",
            "names 4 failing probes; name one: copy.h2d.",
        ),
        (
            passing.as_str(),
            "only a failing result (FAIL, CRASH, HANG, ERROR) can be reproduced",
        ),
    ] {
        let output = repro(dir.path(), "ok", &[probe, "--run", &run]);
        let (stdout, stderr) = text(&output);
        assert_eq!(output.status.code(), Some(2), "{probe}: {stdout}{stderr}");
        assert!(stderr.contains(says), "{probe}: {stderr}");
    }
    let output = repro(
        dir.path(),
        "ok",
        &[PROBE, "--run", &run, "--device", "cuda:3"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output).1.contains("it failed on cpu"),
        "{}",
        text(&output).1
    );
}

#[test]
fn a_broken_or_missing_run_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    let output = repro(
        dir.path(),
        "ok",
        &[PROBE, "--run", broken.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output).1.contains("holds no report.json"),
        "{}",
        text(&output).1
    );
    std::fs::write(broken.join("report.json"), "{\"results\": [\x1b[2J").unwrap();
    let output = repro(
        dir.path(),
        "ok",
        &[PROBE, "--run", broken.to_str().unwrap()],
    );
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("report.json is broken"), "{stderr}");
    // No finished check under the state directory.
    let output = repro(dir.path(), "ok", &[PROBE]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output).1.contains("no finished check run under"),
        "{}",
        text(&output).1
    );
    // An interpreter that does not exist.
    let output = gpuprobe()
        .args([
            "repro",
            PROBE,
            "--run",
            simulated_run().to_str().unwrap(),
            "--python",
        ])
        .arg(dir.path().join("no-python"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output).1.contains("no such file"),
        "{}",
        text(&output).1
    );
    // The run's own interpreter, gone.
    let gone = dir.path().join("gone");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(simulated_run())
        .arg(&gone)
        .status()
        .unwrap();
    assert!(status.success());
    let plan = gone.join("plan.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    value["python"] = serde_json::json!("/nonexistent/venv/bin/python");
    std::fs::write(&plan, serde_json::to_vec(&value).unwrap()).unwrap();
    let output = gpuprobe()
        .args(["repro", PROBE, "--run"])
        .arg(&gone)
        .output()
        .unwrap();
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let says = "the run's interpreter /nonexistent/venv/bin/python: no such file; name another";
    assert!(stderr.contains(says), "{stderr}");
}

#[test]
fn a_generator_that_says_no_or_fails_and_a_script_that_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let run = simulated_run().to_str().unwrap().to_string();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let output = repro(dir.path(), "no", &[PROBE, "--run", &run, "--out", out]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("no repro: this probe \\x1b]0;pwned\\x07 needs the whole loop"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'));
    let output = repro(dir.path(), "ok", &[PROBE, "--run", &run, "--out", out]);
    assert_eq!(output.status.code(), Some(0));
    let output = repro(dir.path(), "crash", &[PROBE, "--run", &run, "--out", out]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    for stale in ["repro.py", "repro.json", "run.json", "ISSUE.md"] {
        assert!(
            !Path::new(out).join(stale).exists(),
            "{stale} of the earlier repro is gone"
        );
    }
    assert!(
        stderr.contains("the repro generator failed (exit 1): Traceback: generator broke"),
        "{stderr}"
    );
    let started = std::time::Instant::now();
    let output = repro(
        dir.path(),
        "hang",
        &[PROBE, "--run", &run, "--out", out, "--timeout", "2"],
    );
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(started.elapsed().as_secs() < 60);
    assert!(stdout.contains("TIMED OUT  (killed after 2 s)"), "{stdout}");
    let issue = std::fs::read_to_string(Path::new(out).join("ISSUE.md")).unwrap();
    assert!(
        issue.contains("did not finish in 2 s and was killed"),
        "{issue}"
    );
    // --no-run writes the files and exits 0.
    let output = repro(
        dir.path(),
        "hang",
        &[PROBE, "--run", &run, "--out", out, "--no-run"],
    );
    assert_eq!(output.status.code(), Some(0));
    assert!(text(&output).0.contains("not run (--no-run)"));
}

#[test]
fn a_native_failure_gets_a_ctypes_script_that_cannot_run_without_a_driver() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(simulated_run())
        .arg(&run)
        .status()
        .unwrap();
    assert!(status.success());
    let path = run.join("report.json");
    let mut report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    report["results"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "probe": "native.copy.roundtrip.pinned", "device": "cuda:0", "layer": "runtime",
            "verdict": {"verdict": "fail", "class": "all_zeros", "detail": "3 of 40 round trips"},
            "observation": {"probe": "native.copy.roundtrip.pinned", "device": "cuda:0",
                "measurement": {"kind": "metrics"},
                "metrics": {"failed_copies_by_size": {"64B async": 3}}}
        }));
    std::fs::write(&path, serde_json::to_vec(&report).unwrap()).unwrap();
    let output = gpuprobe()
        .args(["repro", "native.*", "--run"])
        .arg(&run)
        .arg("--python")
        .arg(python())
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("(Python + ctypes, no torch)"), "{stdout}");
    assert!(
        stdout.contains("CANNOT RUN: no usable GPU runtime"),
        "{stdout}"
    );
    let out = run.join("repro/native.copy.roundtrip.pinned");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("repro.json")).unwrap()).unwrap();
    assert_eq!(manifest["kind"], "ctypes");
    let script = std::fs::read_to_string(out.join("repro.py")).unwrap();
    assert!(script.contains(r#"\"bytes\":64"#) && script.contains(r#"\"async\":true"#));
    let issue = std::fs::read_to_string(out.join("ISSUE.md")).unwrap();
    assert!(
        issue.contains("Python with ctypes against the CUDA driver API"),
        "{issue}"
    );
    assert!(issue.contains("**CANNOT RUN**"), "{issue}");
}

/// The real generator of the probe package, end to end: the script it writes reproduces
/// the simulated failure under the simulation shim, and ISSUE.md carries the script and its
/// observed run, labelled SIMULATED.
#[test]
fn the_real_generator_makes_a_script_that_reproduces_the_simulated_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = gpuprobe()
        .args(["repro", PROBE, "--run"])
        .arg(simulated_run())
        .arg("--out")
        .arg(&out)
        .arg("--python")
        .arg(python())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("REPRODUCED"), "{stdout}");
    assert!(stdout.contains("SIMULATED"), "{stdout}");
    let script = std::fs::read_to_string(out.join("repro.py")).unwrap();
    assert!(!script.contains("import gpuprobe"), "{script}");
    let issue = std::fs::read_to_string(out.join("ISSUE.md")).unwrap();
    assert!(issue.contains("SIMULATED"), "{issue}");
    assert!(issue.contains("REPRODUCED"), "{issue}");
    // Alone, without the shim, the same script finds nothing wrong on this healthy CPU.
    let alone = std::process::Command::new(python())
        .arg("repro.py")
        .current_dir(&out)
        .env_remove("PYTHONPATH")
        .output()
        .unwrap();
    let (alone_out, alone_err) = text(&alone);
    assert_eq!(alone.status.code(), Some(0), "{alone_out}{alone_err}");
    assert!(alone_out.contains("NOT REPRODUCED"), "{alone_out}");
}

/// A relative `--run` and `--out` are taken from the working directory: the script, which
/// runs from the output directory, still finds the simulation it is said to run under.
#[test]
fn relative_run_and_out_paths_keep_the_simulation_installed() {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(simulated_run())
        .arg(dir.path().join("run"))
        .status()
        .unwrap();
    assert!(status.success());
    let output = gpuprobe()
        .args(["repro", PROBE, "--run", "run", "--out", "out", "--python"])
        .arg(python())
        .current_dir(dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("REPRODUCED"), "{stdout}");
    assert!(!stdout.contains("NOT REPRODUCED"), "{stdout}");
    let out = dir.path().join("out");
    let issue = std::fs::read_to_string(out.join("ISSUE.md")).unwrap();
    assert!(issue.contains(": **REPRODUCED**."), "{issue}");
    // The directory to run the script from is named in full.
    assert!(
        stdout.contains(&format!("cd {}", out.display())),
        "{stdout}"
    );
}
