//! `gpuprobe completions` and `gpuprobe man`: generated from the command line's definitions,
//! they offer every public command and never the hidden internal ones.

use crate::support::*;

const PUBLIC: [&str; 16] = [
    "check",
    "env",
    "triage",
    "memtest",
    "kb",
    "fix",
    "run",
    "profile",
    "runs",
    "report",
    "fleet",
    "ui",
    "bundle",
    "repro",
    "completions",
    "man",
];

fn stdout_of(args: &[&str]) -> String {
    let output = gpuprobe().args(args).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn every_shell_gets_a_script_that_offers_the_public_commands_only() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for command in PUBLIC {
            assert!(script.contains(command), "{shell}: {command} missing");
        }
        assert!(!script.contains("__exec-job"), "{shell} offers __exec-job");
        assert!(
            !script.contains("__native-worker"),
            "{shell} offers __native-worker"
        );
    }
}

#[test]
fn the_bash_script_parses_and_completes_a_command_and_an_option() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpuprobe.bash");
    std::fs::write(&path, stdout_of(&["completions", "bash"])).unwrap();
    // What bash's programmable completion does on `gpuprobe ru<TAB>` and `gpuprobe runs prune --d<TAB>`.
    let probe = format!(
        "source {path}; \
         COMP_WORDS=(gpuprobe ru); COMP_CWORD=1; _gpuprobe gpuprobe ru gpuprobe; echo \"${{COMPREPLY[@]}}\"; \
         COMP_WORDS=(gpuprobe runs prune --d); COMP_CWORD=3; _gpuprobe gpuprobe --d prune; echo \"${{COMPREPLY[@]}}\"",
        path = path.display()
    );
    let output = std::process::Command::new("bash")
        .args(["-c", &probe])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        ["run runs", "--dry-run"],
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let output = gpuprobe().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("bash"));
}

#[test]
fn the_man_page_lists_every_public_command_and_each_has_its_own_page() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH gpuprobe 1"), "{page}");
    for command in PUBLIC {
        assert!(
            page.contains(&format!("gpuprobe\\-{command}(1)")),
            "{command} missing"
        );
    }
    assert!(!page.contains("exec"));
    let dir = tempfile::tempdir().unwrap();
    stdout_of(&["man", "--out", dir.path().to_str().unwrap()]);
    // Every page a SEE-ALSO-style reference names exists, down to `gpuprobe-runs-prune.1`.
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines().filter(|l| l.ends_with("(1)")) {
            let name = line.replace("\\-", "-").trim_end_matches("(1)").to_string();
            if !dir.path().join(format!("{name}.1")).exists() {
                missing.push(name);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "pages referred to but not written: {missing:?}"
    );
    assert!(dir.path().join("gpuprobe-runs-prune.1").exists());
}

#[test]
fn an_unwritable_man_directory_is_a_usage_error() {
    let output = gpuprobe()
        .args(["man", "--out", "/proc/gpuprobe-not-here"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot write /proc/gpuprobe-not-here")
    );
}

#[test]
fn the_readme_command_table_names_every_public_command() {
    let help = stdout_of(&["--help"]);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| !line.is_empty())
        // A command's line starts with two spaces and its name; wrapped help lines with more.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert_eq!(
        commands, PUBLIC,
        "the public commands changed: update PUBLIC and the README"
    );
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    for command in commands {
        assert!(
            readme.contains(&format!("| `gpuprobe {command}")),
            "README.md's command table has no row for `gpuprobe {command}`"
        );
    }
}
