//! `gpuprobe run` and `gpuprobe profile`: profiles applied and refused, crashes and hangs
//! detected, signals passed on, output passed through, rates, CPU fallback.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// This machine's stack key as a profile's `[proven_on]` table.
fn stack_here() -> String {
    let output = gpuprobe()
        .args(["profile", "stack", "--python"])
        .arg(python())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// Writes a profile with `env` lines, extra top-level lines, and `proven_on` (this
/// machine's stack when `None`).
fn profile(dir: &Path, name: &str, env: &str, top: &str, proven_on: Option<&str>) -> PathBuf {
    let stack = proven_on.map_or_else(stack_here, str::to_string);
    let text = format!(
        "profile_version = 1\ncreated_by = \"gpuprobe test\"\ncreated_at = \"2026-11-22T10:00:00Z\"\n\
         {top}\n[env]\n{env}\n\n{stack}\n"
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The state directory of this file's `run`s: a use of a profile is recorded in its runs
/// directory, never in the developer's.
fn state_dir() -> PathBuf {
    std::env::temp_dir().join(format!("gpuprobe-it-run-state-{}", std::process::id()))
}

fn run(args: &[&str], job: &[&str]) -> Output {
    gpuprobe()
        .env("XDG_STATE_HOME", state_dir())
        .arg("run")
        .args(args)
        .arg("--python")
        .arg(python())
        .arg("--")
        .args(job)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// A job that dies of SIGSEGV after a GPU fault message unless HSA_ENABLE_SDMA=0 is set.
const CRASHY: &str = "#!/bin/sh\necho step 1\n\
    if [ \"$HSA_ENABLE_SDMA\" = 0 ]; then echo done; exit 0; fi\n\
    echo 'Memory access fault by GPU node-1 (Agent handle: 0x5) on address 0x7f. Reason: Page not present' >&2\n\
    kill -SEGV $$\n";

#[test]
fn a_crashing_job_is_reported_and_its_exit_code_kept_and_a_profile_cures_it() {
    let dir = tempfile::tempdir().unwrap();
    let job = script(dir.path(), "job.sh", CRASHY);
    let job = job.to_str().unwrap();
    let output = run(&[], &[job]);
    assert_eq!(output.status.code(), Some(139), "128 + SIGSEGV");
    let err = stderr(&output);
    assert!(
        err.contains(
            "gpuprobe: the job crashed: killed by SIGSEGV (signal 11): Memory access fault"
        ),
        "{err}"
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "step 1\n");
    // Every line of gpuprobe's own is on stderr and prefixed.
    for line in err
        .lines()
        .filter(|l| !l.starts_with("Memory access fault"))
    {
        assert!(line.starts_with("gpuprobe: "), "{line:?}");
    }

    let cure = profile(dir.path(), "p.toml", "HSA_ENABLE_SDMA = \"0\"", "", None);
    let output = run(&["--profile", cure.to_str().unwrap()], &[job]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "step 1\ndone\n");
}

#[test]
fn output_and_exit_codes_pass_through_unchanged() {
    let output = run(
        &[],
        &[
            "sh",
            "-c",
            "printf 'no newline\\0binary\\377'; printf 'err' >&2; exit 42",
        ],
    );
    assert_eq!(output.status.code(), Some(42));
    assert_eq!(output.stdout, b"no newline\0binary\xff");
    assert_eq!(
        output.stderr, b"err",
        "a plain failure adds no gpuprobe line"
    );
    let output = run(&[], &["/no/such/program"]);
    assert_eq!(output.status.code(), Some(127));
    assert!(stderr(&output).contains("cannot run /no/such/program"));
}

#[test]
fn a_closed_reader_stops_the_job_as_it_would_without_gpuprobe() {
    use std::io::BufRead;
    let mut child = gpuprobe()
        .args(["run", "--", "sh", "-c", "while true; do echo line; done"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "line\n");
    // The reader is dropped here: the job meets a broken pipe and ends.
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(141), "128 + SIGPIPE");
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
}

#[test]
fn repeat_reports_crash_and_hang_rates() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("n");
    let job = script(
        dir.path(),
        "flaky.sh",
        &format!(
            "#!/bin/sh\nn=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}\n\
             if [ $((n % 2)) = 1 ]; then echo 'RuntimeError: CUDA error: an illegal memory access was encountered' >&2; exit 1; fi\n\
             echo ok\n",
            c = counter.display()
        ),
    );
    let summary = dir.path().join("summary.json");
    let output = run(
        &["--repeat", "4", "--summary", summary.to_str().unwrap()],
        &[job.to_str().unwrap()],
    );
    let err = stderr(&output);
    assert!(
        err.contains("4 runs: 2 succeeded, crash rate 2/4 (50%), hang rate 0/4 (0%)"),
        "{err}"
    );
    assert!(err.contains("run 1/4: the job crashed: exit 1 after: RuntimeError: CUDA error"));
    assert_eq!(output.status.code(), Some(1), "the last failing run's code");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(json["crash_rate"], 0.5);
    assert_eq!(json["hang_rate"], 0.0);
    assert_eq!(json["runs"].as_array().unwrap().len(), 4);
    assert_eq!(json["runs"][1]["outcome"], "succeeded");
}

#[test]
fn a_silent_job_is_a_hang_and_its_whole_group_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("bg.pid");
    let started = Instant::now();
    let output = run(
        &["--hang-timeout", "1"],
        &[
            "sh",
            "-c",
            &format!(
                "echo start; sleep 60 & echo $! > {}; sleep 60; echo never",
                pid_file.display()
            ),
        ],
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let code = output.status.code().unwrap();
    assert!(
        code == 143 || code == 137,
        "killed by SIGTERM or SIGKILL: {code}"
    );
    let err = stderr(&output);
    assert!(
        err.contains("the job hung: no sign of life for 1 s"),
        "{err}"
    );
    assert!(
        err.contains("watched: output"),
        "says which signal was watched: {err}"
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "start\n");
    let background: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(background), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{background}/stat"))
            .unwrap_or_default()
            .contains(") Z ");
    assert!(!alive, "the job's background process survived");
}

#[test]
fn signals_are_passed_to_the_job() {
    let child = gpuprobe()
        .args(["run", "--", "sh", "-c"])
        .arg("trap 'echo got TERM; exit 7' TERM; echo ready; while true; do sleep 0.05; done")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(7), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ready\ngot TERM\n");

    let child = gpuprobe()
        .args(["run", "--", "sleep", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    assert!(stderr(&output).contains("interrupted by SIGINT"));
}

/// A job that works only with every GPU hidden (CPU), and dies of a GPU error otherwise.
const GPU_BROKEN: &str = "#!/bin/sh\n\
    if [ \"${CUDA_VISIBLE_DEVICES-x}\" = '' ] && [ \"${HIP_VISIBLE_DEVICES-x}\" = '' ] && [ \"${ROCR_VISIBLE_DEVICES-x}\" = '' ]; then echo on cpu; exit 0; fi\n\
    echo 'HIP error: hipErrorIllegalAddress' >&2; exit 3\n";

#[test]
fn fallback_cpu_reruns_with_the_gpus_hidden_and_force_gpu_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let job = script(dir.path(), "job.sh", GPU_BROKEN);
    let job = job.to_str().unwrap();
    let output = run(&["--fallback", "cpu"], &[job]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "on cpu\n");
    let err = stderr(&output);
    assert!(
        err.contains("the job crashed: exit 3 after: HIP error"),
        "{err}"
    );
    assert!(
        err.contains("--fallback cpu: running it again on the CPU")
            && err.contains(
                "CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES set empty"
            )
            && err.contains("slower"),
        "{err}"
    );

    let output = run(&["--fallback", "cpu", "--force-gpu"], &[job]);
    assert_eq!(output.status.code(), Some(3));
    assert!(stderr(&output).contains("--force-gpu"));

    // No fallback without --fallback.
    let output = run(&[], &[job]);
    assert_eq!(output.status.code(), Some(3));
    assert!(!stderr(&output).contains("CPU"));
}

#[test]
fn a_profile_with_uncured_failures_sends_the_job_to_the_cpu_with_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let job = script(dir.path(), "job.sh", GPU_BROKEN);
    let job = job.to_str().unwrap();
    let uncured = profile(
        dir.path(),
        "uncured.toml",
        "",
        "still_failing = [\"dtype.bf16.fp32.to.device\"]",
        None,
    );
    let uncured = uncured.to_str().unwrap();
    let output = run(&["--profile", uncured, "--fallback", "cpu"], &[job]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("could not cure (dtype.bf16.fp32.to.device)") && err.contains("judged unsafe"),
        "{err}"
    );
    assert!(!err.contains("HIP error"), "the GPU was never tried: {err}");
    let output = run(
        &["--profile", uncured, "--fallback", "cpu", "--force-gpu"],
        &[job],
    );
    assert_eq!(output.status.code(), Some(3));
    assert!(stderr(&output).contains("running on the GPU anyway (--force-gpu)"));
}

#[test]
fn a_profile_from_another_stack_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = profile(
        dir.path(),
        "foreign.toml",
        "HSA_ENABLE_SDMA = \"0\"",
        "",
        Some(
            "[proven_on]\ngpus = [\"gfx1151\"]\nkernel = \"6.17.0-19-generic\"\ntorch = \"2.11.0+rocm7.2\"",
        ),
    );
    let foreign = foreign.to_str().unwrap();
    let output = run(&["--profile", foreign], &["true"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("was proven on a different stack"), "{err}");
    assert!(
        err.contains("GPUs: proven on gfx1151, this machine has"),
        "{err}"
    );
    assert!(
        err.contains("kernel: proven on 6.17.0-19-generic, this machine has"),
        "{err}"
    );
    assert!(
        err.contains("torch: proven on 2.11.0+rocm7.2, this machine has"),
        "{err}"
    );
    assert!(err.contains("--force"), "{err}");
    let output = run(
        &["--profile", foreign, "--force"],
        &["sh", "-c", "echo $HSA_ENABLE_SDMA"],
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "0\n");
    assert!(stderr(&output).contains("warning: --force"));
}

#[test]
fn settings_outside_the_catalogue_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let job = format!("touch {}", marker.display());
    for (i, (env, top, words)) in [
        (
            "LD_PRELOAD = \"/tmp/evil.so\"",
            "",
            "LD_PRELOAD: would change what code the process loads",
        ),
        (
            "PYTHONPATH = \"/tmp\"",
            "",
            "PYTHONPATH: would change what code",
        ),
        (
            "PYTHONSTARTUP = \"/tmp/x.py\"",
            "",
            "PYTHONSTARTUP: would change what code",
        ),
        (
            "HSA_ENABLE_SDMA = \"/etc/passwd\"",
            "",
            "values may not be paths",
        ),
        (
            "MY_PLUGIN_PATH = \"/opt/plugins\"",
            "",
            "not a setting of the workaround catalogue",
        ),
        (
            "HIP_DISABLE_IPC = \"1\"",
            "",
            "not a setting of the workaround catalogue",
        ),
        ("", "exec = \"rm -rf /\"", "unknown key `exec`"),
        (
            "",
            "unset = [\"LD_PRELOAD\"]",
            "unset LD_PRELOAD: not a setting",
        ),
    ]
    .iter()
    .enumerate()
    {
        let path = profile(dir.path(), &format!("bad{i}.toml"), env, top, None);
        let output = run(&["--profile", path.to_str().unwrap()], &["sh", "-c", &job]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{env}{top}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(words),
            "{env}{top}: {}",
            stderr(&output)
        );
        assert!(!marker.exists(), "the job ran despite {env}{top}");
        // The same refusal for export and check.
        let export = gpuprobe()
            .args(["profile", "export", "--format", "json"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(export.status.code(), Some(2));
        assert!(export.stdout.is_empty());
    }
}

#[test]
fn profile_export_formats() {
    let dir = tempfile::tempdir().unwrap();
    let path = profile(
        dir.path(),
        "p.toml",
        "HSA_ENABLE_SDMA = \"0\"\nPYTORCH_ALLOC_CONF = \"max_split_size_mb:512\"",
        "unset = [\"HSA_OVERRIDE_GFX_VERSION\"]",
        None,
    );
    let export = |format: &str| {
        let output = gpuprobe()
            .args(["profile", "export", "--format", format])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let env = export("env");
    assert!(env.contains("\nHSA_ENABLE_SDMA=0\n"), "{env}");
    assert!(
        env.contains("\nPYTORCH_ALLOC_CONF=max_split_size_mb:512\n"),
        "{env}"
    );
    let shell = export("shell");
    assert!(shell.contains("export HSA_ENABLE_SDMA='0'\n"), "{shell}");
    assert!(
        shell.contains("unset HSA_OVERRIDE_GFX_VERSION\n"),
        "{shell}"
    );
    // The shell export really sets the variables.
    let sourced = Command::new("sh")
        .arg("-c")
        .arg(format!("{shell}\necho \"$HSA_ENABLE_SDMA|$PYTORCH_ALLOC_CONF|${{HSA_OVERRIDE_GFX_VERSION-gone}}\""))
        .env("HSA_OVERRIDE_GFX_VERSION", "11.0.0")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&sourced.stdout),
        "0|max_split_size_mb:512|gone\n"
    );
    let json: serde_json::Value = serde_json::from_str(&export("json")).unwrap();
    assert_eq!(json["set"]["HSA_ENABLE_SDMA"], "0");
    assert_eq!(json["unset"][0], "HSA_OVERRIDE_GFX_VERSION");
    let check = gpuprobe()
        .args(["profile", "check"])
        .arg(&path)
        .arg("--python")
        .arg(python())
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{check:?}");
}

#[test]
fn run_without_a_command_is_a_usage_error() {
    let output = gpuprobe().args(["run"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = gpuprobe()
        .args(["run", "--repeat", "0", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn each_use_of_a_profile_is_recorded_by_its_program_s_name_and_a_journal_that_cannot_be_written_is_a_warning()
 {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let foreign = profile(
        dir.path(),
        "used.toml",
        "HSA_ENABLE_SDMA = \"0\"",
        "",
        Some("[proven_on]\ngpus = [\"gfx1151\"]"),
    );
    let used = |state: &Path, code: &str| {
        gpuprobe()
            .env("XDG_STATE_HOME", state)
            .args(["run", "--force", "--profile"])
            .arg(&foreign)
            .arg("--python")
            .arg(python())
            .args(["--", "/bin/sh", "-c", code, "--token=secret"])
            .output()
            .unwrap()
    };
    let output = used(&state, "exit 3");
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let journal = std::fs::read_to_string(state.join("gpuprobe/runs/profile-uses.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(journal.trim()).unwrap();
    assert_eq!(line["program"], "sh", "{journal}");
    assert_eq!(line["exit_code"], 3, "{journal}");
    assert_eq!(
        line["profile"],
        std::fs::canonicalize(&foreign)
            .unwrap()
            .display()
            .to_string()
    );
    assert!(!journal.contains("secret"), "{journal}");
    // A runs directory that is a file: the job's exit code stands, with a warning.
    let blocked = dir.path().join("blocked");
    std::fs::create_dir_all(blocked.join("gpuprobe")).unwrap();
    std::fs::write(blocked.join("gpuprobe/runs"), "").unwrap();
    let output = used(&blocked, "exit 4");
    assert_eq!(output.status.code(), Some(4));
    assert!(
        stderr(&output).contains("warning: cannot record this use of the profile"),
        "{}",
        stderr(&output)
    );
}
