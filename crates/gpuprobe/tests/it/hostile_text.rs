//! Hostile text through every command that echoes outside text: a `--python` wrapper that
//! prints terminal commands (window title, screen clear, bell) on its streams, a
//! knowledge-base file given with `--kb`, environment variables `env` lints, and a file name
//! quoted in an error. None of those bytes may reach the terminal as themselves; each is
//! shown as a visible escape (`\x1b`).

use std::path::Path;
use std::process::Output;

use crate::support::*;

/// What the wrapper prints: an OSC window title, a CSI screen clear and cursor home, a bell,
/// a C1 CSI and a right-to-left override.
const HOSTILE_SHELL: &str = r"\033]0;pwned\007\033[2J\033[H\007\302\23331m\342\200\256";

/// Fails when a stream holds a byte a terminal would obey: a C0 control other than line
/// break and tab, DEL, a C1 control or a bidirectional override.
fn assert_no_raw_controls(output: &Output, what: &str) {
    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        let bad: Vec<(usize, char)> = text
            .char_indices()
            .filter(|(_, c)| {
                (c.is_control() && *c != '\n' && *c != '\t')
                    || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
            })
            .collect();
        assert!(
            bad.is_empty(),
            "{what}: raw control characters on {stream}: {bad:?}\n{text}"
        );
    }
}

fn wrapper(dir: &Path, name: &str, then: &str) -> std::path::PathBuf {
    script(
        dir,
        name,
        &format!(
            "#!/bin/sh\nprintf '{HOSTILE_SHELL}\\n'\nprintf '{HOSTILE_SHELL}\\n' >&2\n{then}\n"
        ),
    )
}

/// A fault specification whose crash message holds terminal commands: the message reaches
/// the results table, the findings and the evidence, the paths a worker's last words take.
const HOSTILE_CRASH: &str = r#"
description = "a crash whose last words are terminal commands"
[[fault]]
name = "hostile-crash"
description = "large host-to-device copies abort"
op = "h2d"
[fault.when]
min_bytes = 16777216
[fault.effect]
kind = "crash"
signal = "SIGABRT"
message = "Memory access fault by GPU \u001b]0;pwned\u0007\u001b[2J\u009b31m\u202e node-1"
"#;

#[test]
fn worker_output_holding_terminal_commands_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let python = python();
    let noisy = wrapper(
        dir.path(),
        "noisy-python",
        &format!("exec '{}' \"$@\"", python.display()),
    );
    let spec = dir.path().join("hostile.toml");
    std::fs::write(&spec, HOSTILE_CRASH).unwrap();
    let output = gpuprobe()
        .args(["check", "--device", "cpu", "--only", "copy", "-v", "--all"])
        .arg("--simulate")
        .arg(&spec)
        .arg("--python")
        .arg(&noisy)
        .arg("--run-dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert_no_raw_controls(
        &output,
        "check with a noisy interpreter and a hostile crash",
    );
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("\\x1b]0;pwned\\x07"), "{stdout}");
}

#[test]
fn a_broken_python_whose_message_holds_terminal_commands_is_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let broken = wrapper(dir.path(), "broken-python", "exit 1");
    for command in [
        vec!["check", "--device", "cpu", "--only", "copy"],
        vec!["env"],
    ] {
        let output = gpuprobe()
            .args(&command)
            .arg("--python")
            .arg(&broken)
            .args(if command[0] == "check" {
                vec!["--run-dir".into(), dir.path().join("run").into_os_string()]
            } else {
                vec!["--no-tools".into()]
            })
            .output()
            .unwrap();
        assert_no_raw_controls(&output, &format!("{command:?} with a broken interpreter"));
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("\\x1b]0;pwned")
                || String::from_utf8_lossy(&output.stderr).contains("\\x1b]0;pwned"),
            "{command:?}: the wrapper's message is not quoted"
        );
    }
}

#[test]
fn a_knowledge_base_file_with_terminal_commands_is_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../kb/RKB-001-small-pageable-h2d-dropped.toml");
    let entry = std::fs::read_to_string(shipped)
        .unwrap()
        .replace("id = \"RKB-001\"", "id = \"RKB-901\"")
        .replace(
            "title = \"Small pageable",
            "title = \"\\u001b]0;pwned\\u0007\\u001b[2JSmall pageable",
        )
        .replace(
            "notes = \"Reproduced",
            "notes = \"\\u009b31m\\u202eReproduced",
        );
    std::fs::write(dir.path().join("RKB-901-hostile.toml"), entry).unwrap();
    for action in [&["list"][..], &["show", "RKB-901"], &["validate"]] {
        let output = gpuprobe()
            .arg("kb")
            .args(action)
            .arg("--kb")
            .arg(dir.path())
            .output()
            .unwrap();
        assert_no_raw_controls(&output, &format!("kb {action:?}"));
    }
    let shown = gpuprobe()
        .args(["kb", "show", "RKB-901", "--kb"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&shown.stdout);
    assert!(stdout.contains("\\x1b]0;pwned\\x07"), "{stdout}");
}

#[test]
fn env_shows_a_hostile_setting_escaped() {
    let output = gpuprobe()
        .args(["env", "--no-tools"])
        .env("HSA_OVERRIDE_GFX_VERSION", "\x1b]0;pwned\x0710.3.0")
        .env(
            "PYTORCH_CUDA_ALLOC_CONF",
            "\x1b[2J\u{202e}expandable_segments:True",
        )
        .output()
        .unwrap();
    assert_no_raw_controls(&output, "env");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("\\x1b]0;pwned\\x07"), "{stdout}");
}

#[test]
fn a_file_name_with_terminal_commands_is_shown_escaped_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().join("log\x1b]0;pwned\x07.txt");
    let output = gpuprobe().arg("triage").arg(&name).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_no_raw_controls(&output, "triage of a missing file with a hostile name");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("\\x1b]0;pwned"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
