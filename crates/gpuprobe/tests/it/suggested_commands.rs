//! The commands a report suggests, copied as printed, test the same stack: they carry the
//! run's `--python`, `--device`, `--tier` and `--simulate`, quoted for a shell whatever
//! the path holds; and a first run that could test nothing says which option to pass.

use std::path::Path;
use std::process::Command;

use crate::support::*;

/// The words a POSIX shell makes of `command` (bash reads it; nothing in it runs).
fn shell_words(command: &str) -> Vec<String> {
    let out = Command::new("bash")
        .args([
            "-c",
            r#"eval "set -- $1"; printf '%s\0' "$@""#,
            "_",
            command,
        ])
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// The value after `flag` among `words`.
fn value_of<'a>(words: &'a [String], flag: &str) -> Option<&'a str> {
    let at = words.iter().position(|w| w == flag)?;
    words.get(at + 1).map(String::as_str)
}

#[test]
fn a_suggested_check_carries_the_interpreter_devices_tier_and_simulation() {
    let dir = tempfile::tempdir().unwrap();
    // An interpreter behind a path that a shell would split, expand or run.
    let hostile = dir.path().join("it's $(touch pwned) `id`");
    std::fs::create_dir(&hostile).unwrap();
    let python = python_behind_another_path(&hostile);
    let output = gpuprobe()
        .current_dir(dir.path())
        .args(["check", "--json", "--device", "cpu", "--tier", "standard"])
        .arg("--python")
        .arg(&python)
        .args([
            "--simulate",
            "h2d-zeros",
            "--only",
            "copy.h2d.pageable.tiny.*",
        ])
        .arg("--run-dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let report = expect_report(&output, serde_json::from_slice(&output.stdout).ok());
    let step = report
        .findings
        .iter()
        .flat_map(|f| f.next_steps.iter())
        .find(|s| s.starts_with("gpuprobe check"))
        .unwrap_or_else(|| panic!("no suggested check: {:#?}", report.findings));
    let command = step.split("   (").next().unwrap();
    let words = shell_words(command);
    assert_eq!(value_of(&words, "--python"), python.to_str(), "{step}");
    assert_eq!(value_of(&words, "--device"), Some("cpu"), "{step}");
    assert_eq!(value_of(&words, "--tier"), Some("standard"), "{step}");
    assert_eq!(value_of(&words, "--simulate"), Some("h2d-zeros"), "{step}");
    assert!(!dir.path().join("pwned").exists());
}

#[test]
fn a_first_run_without_pytorch_names_the_options_that_make_it_test() {
    let dir = tempfile::tempdir().unwrap();
    // The test interpreter without its site-packages: Python, but no torch.
    let no_torch = script(
        dir.path(),
        "python-without-torch",
        &format!("#!/bin/sh\nexec '{}' -S \"$@\"\n", python().display()),
    );
    let output = gpuprobe()
        .args(["check", "--only", "copy.h2d.pageable.tiny.*", "--python"])
        .arg(&no_torch)
        .arg("--run-dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(4), "{text}");
    assert!(
        text.contains("probe runs planned, none could run"),
        "{text}"
    );
    assert!(!text.contains("device(s)"), "{text}");
    assert!(text.contains("→ gpuprobe check --python PATH"), "{text}");
    let env_line = text
        .lines()
        .find(|l| l.contains("→ gpuprobe env"))
        .unwrap_or_else(|| panic!("{text}"));
    let words = shell_words(
        env_line
            .split("→ ")
            .nth(1)
            .unwrap()
            .split("   (")
            .next()
            .unwrap(),
    );
    assert_eq!(
        value_of(&words, "--python").map(Path::new),
        Some(no_torch.as_path())
    );
}
