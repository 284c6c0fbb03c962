//! The other commands and the command line's exit codes.

use crate::support::*;

#[test]
fn usage_errors_exit_2_with_a_message() {
    let output = gpuprobe()
        .args(["check", "--tier", "ludicrous"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = gpuprobe()
        .args(["check", "--device", "gpu", "--python", "/x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--device"));
    let output = gpuprobe()
        .args(["check", "--simulate", "no-such-preset"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("presets:"));
}

#[test]
fn an_unwritable_run_directory_is_a_usage_error() {
    let output = gpuprobe()
        .args([
            "check",
            "--device",
            "cpu",
            "--run-dir",
            "/proc/gpuprobe-not-here",
            "--python",
        ])
        .arg(python())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot"));
}

#[test]
fn resume_of_a_directory_that_is_no_run_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = gpuprobe()
        .args(["check", "--resume"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a gpuprobe run"));
}

#[test]
fn kb_list_show_and_validate() {
    let output = gpuprobe().args(["kb", "list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.lines().filter(|l| l.starts_with("RKB-")).count() >= 25,
        "{text}"
    );
    let output = gpuprobe().args(["kb", "show", "rkb-005"]).output().unwrap();
    assert!(String::from_utf8_lossy(&output.stdout).contains("0x83"));
    let output = gpuprobe().args(["kb", "show", "RKB-999"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_broken_user_kb_file_is_reported_by_line_and_the_rest_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("RKB-900-broken.toml"),
        "id = \"RKB-900\"\ntitle = [unclosed\n",
    )
    .unwrap();
    let output = gpuprobe()
        .args(["kb", "--kb"])
        .arg(dir.path())
        .arg("list")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("RKB-900-broken.toml:2:"), "{stderr}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("RKB-001"),
        "the shipped entries still load"
    );
}

#[test]
fn triage_recognizes_a_fixture_and_finds_the_mes_firmware() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let firmware = std::fs::read_dir(fixtures.join("firmware"))
        .or_else(|_| std::fs::read_dir(fixtures.join("amdgpu_firmware_info")))
        .expect("firmware fixtures")
        .flatten()
        .map(|e| e.path())
        .next()
        .expect("a firmware fixture");
    let output = gpuprobe().arg("triage").arg(&firmware).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("amdgpu_firmware_info"), "{text}");
    assert!(text.contains("0x00000080"), "{text}");
    let output = gpuprobe().arg("triage").arg("-").output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "empty input is an input error"
    );
}

/// `env` lints the environment without running a probe: a folklore setting is flagged with
/// its remedy (an action, never the bare name), and a harmful one makes it exit 1.
#[test]
fn env_lints_the_environment_without_probes() {
    let output = gpuprobe()
        .args(["env", "--no-tools", "--python"])
        .arg(python())
        .env("HIP_DISABLE_IPC", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("HIP_DISABLE_IPC"), "{text}");
    assert!(text.contains("unset HIP_DISABLE_IPC"), "{text}");
    assert!(!text.contains("probes:"), "no probe ran: {text}");

    // A warning is not a problem: the exit code stays 0 (errors give 1, as in `check`).
    assert_eq!(output.status.code(), Some(0), "{text}");

    let output = gpuprobe()
        .args(["env", "--json", "--no-tools", "--python"])
        .arg(python())
        .env("HIP_DISABLE_IPC", "1")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let findings = report["findings"].as_array().expect("findings");
    assert!(
        findings
            .iter()
            .any(|f| f["id"] == "LINT-ENV-NONEXISTENT"
                || f.to_string().contains("LINT-ENV-NONEXISTENT")),
        "{report}"
    );
}

/// An interpreter whose prefix is a conda environment: the packages conda installed reach
/// the fingerprint marked as conda's, a broken record is skipped with a note, and `env`
/// shows them as conda names them.
#[test]
fn env_reads_the_packages_of_a_conda_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("conda-env");
    let created = std::process::Command::new(python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&prefix)
        .status()
        .unwrap();
    assert!(created.success());
    let meta = prefix.join("conda-meta");
    std::fs::create_dir(&meta).unwrap();
    std::fs::write(
        meta.join("cudatoolkit-11.8.0-h6a678d5_0.json"),
        r#"{"build": "h6a678d5_0", "channel": "https://conda.anaconda.org/nvidia/linux-64",
            "name": "cudatoolkit", "version": "11.8.0"}"#,
    )
    .unwrap();
    std::fs::write(
        meta.join("cudnn-8.9.2.26-cuda12_0.json"),
        r#"{"name": "cudnn", "#,
    )
    .unwrap();
    let interpreter = prefix.join("bin/python");
    let output = gpuprobe()
        .args(["env", "--json", "--no-tools", "--python"])
        .arg(&interpreter)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let fingerprint: gpuprobe_model::Fingerprint =
        serde_json::from_value(report["fingerprint"].clone()).unwrap();
    let python = fingerprint.python.expect("python facts");
    assert_eq!(python.packages["cudatoolkit"], "11.8.0");
    let conda = python.conda.expect("a conda environment");
    assert_eq!(conda.packages["cudatoolkit"].channel, "nvidia");
    assert_eq!(conda.skipped.len(), 1, "{:?}", conda.skipped);
    assert!(conda.skipped[0].starts_with("cudnn-8.9.2.26-cuda12_0.json: not JSON"));
    let text = gpuprobe()
        .args(["env", "--no-tools", "--python"])
        .arg(&interpreter)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("nvidia::cudatoolkit=11.8.0=h6a678d5_0"),
        "{text}"
    );
}

#[test]
fn env_describes_this_machine() {
    let output = gpuprobe()
        .args(["env", "--json", "--no-tools", "--python"])
        .arg(python())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let fingerprint: gpuprobe_model::Fingerprint =
        serde_json::from_value(report["fingerprint"].clone()).unwrap();
    assert!(report["findings"].is_array(), "{report}");
    assert_eq!(fingerprint.source, "live");
    assert!(fingerprint.host.kernel_release.is_some());
    let torch = fingerprint
        .python
        .and_then(|p| p.torch)
        .expect("torch facts from the interpreter");
    assert!(!torch.version.is_empty());
}
