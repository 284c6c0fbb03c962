//! The command-line conventions of `docs/cli.md`, end to end through the binary: progress
//! lines when stderr is not a terminal (a line per finished family, per probe with `-v`,
//! never a bar or a carriage return), `--quiet`, `--color` against `NO_COLOR` and
//! `CLICOLOR_FORCE`, the table width from `COLUMNS` (then 100), and free text (findings,
//! `kb list`) fitted to `COLUMNS` but whole in a bare pipe. The decisions
//! themselves are unit-tested in `gpuprobe_report`'s console module.

use std::path::Path;
use std::process::Output;

use crate::support::*;

const ESC: char = '\u{1b}';

fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn check_copy_h2d(run_dir: &Path, extra: &[&str]) -> Output {
    gpuprobe()
        .args(["check", "--device", "cpu", "--only", "copy.h2d", "--python"])
        .arg(python())
        .arg("--run-dir")
        .arg(run_dir)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_log_gets_a_line_per_finished_family_and_never_a_bar() {
    let tmp = tempfile::tempdir().unwrap();
    let output = check_copy_h2d(&tmp.path().join("run"), &["--only", "dtype.bf16"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let err = stderr_of(&output);
    assert!(!err.contains('\r') && !err.contains(ESC), "{err:?}");
    let family =
        regex::Regex::new(r"(?m)^\[ *\d+\.\ds\] (\w+): \d+ passed.* \((\d+)/(\d+)\)$").unwrap();
    let families: Vec<&str> = family
        .captures_iter(&err)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    let mut sorted = families.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["copy", "dtype"], "{err}");
    // The last family line counts every probe run.
    let last = family.captures_iter(&err).last().unwrap();
    assert_eq!(last.get(2).unwrap().as_str(), last.get(3).unwrap().as_str());
    // Without -v, a healthy run prints nothing else.
    assert_eq!(err.lines().count(), 2, "{err}");
}

#[test]
fn verbose_in_a_log_prints_a_line_per_finished_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let output = check_copy_h2d(&tmp.path().join("run"), &["-v", "--json"]);
    let err = stderr_of(&output);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let runs = report["results"].as_array().unwrap().len();
    let probe_lines = err
        .lines()
        .filter(|l| l.contains(" copy.h2d.") && (l.contains("PASS") || l.contains("SKIP")))
        .count();
    assert_eq!(probe_lines, runs, "{err}");
    assert!(err.contains("] copy: "), "{err}");
}

#[test]
fn quiet_prints_the_verdict_line_and_no_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let output = check_copy_h2d(
        &tmp.path().join("run"),
        &["--quiet", "--simulate", "h2d-zeros"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stderr_of(&output), "");
    let out = stdout_of(&output);
    let lines: Vec<&str> = out.lines().collect();
    // SIMULATED is never left out.
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[0].trim(), "SIMULATED");
    assert!(
        lines[1].starts_with("exit 1 (problems found): 4 FAIL, 14 PASS, 5 SKIP · SIMULATED"),
        "{out}"
    );
}

fn kb_show(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = gpuprobe();
    command.env_remove("NO_COLOR");
    for (name, value) in env {
        command.env(name, value);
    }
    command.args(["kb", "show", "RKB-001"]).args(args);
    command.output().unwrap()
}

fn coloured(output: &Output) -> bool {
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(output));
    stdout_of(output).contains(ESC)
}

#[test]
fn colour_follows_color_then_no_color_then_clicolor_force() {
    // A pipe is not coloured by default.
    assert!(!coloured(&kb_show(&[], &[])));
    // --color always wins over NO_COLOR; --color never over CLICOLOR_FORCE.
    assert!(coloured(&kb_show(
        &[("NO_COLOR", "1")],
        &["--color", "always"]
    )));
    assert!(!coloured(&kb_show(
        &[("CLICOLOR_FORCE", "1")],
        &["--color=never"]
    )));
    // CLICOLOR_FORCE colours a pipe, unless NO_COLOR holds a value; an empty one does not.
    assert!(coloured(&kb_show(&[("CLICOLOR_FORCE", "1")], &[])));
    assert!(!coloured(&kb_show(
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")],
        &[]
    )));
    assert!(coloured(&kb_show(
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "")],
        &[]
    )));
}

#[test]
fn a_bad_color_value_is_a_usage_error_naming_the_choices() {
    let output = gpuprobe()
        .args(["--color", "yes", "kb", "list"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr_of(&output);
    assert!(err.contains("auto") && err.contains("never"), "{err}");
}

/// `gpuprobe report` of a copy of gpuprobe-report's report fixture, under `COLUMNS`.
fn report_at(columns: Option<&str>) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gpuprobe-report/tests/fixtures/report-simulated-zeros.json");
    std::fs::copy(fixture, tmp.path().join("report.json")).unwrap();
    let mut command = gpuprobe();
    if let Some(columns) = columns {
        command.env("COLUMNS", columns);
    }
    let output = command.arg("report").arg(tmp.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    stdout_of(&output)
}

/// The widest line of the probe table (from its header to the passed line).
fn table_width(text: &str) -> usize {
    text.lines()
        .skip_while(|l| !l.starts_with(" probe "))
        .take_while(|l| !l.contains(" passed"))
        .map(|l| l.chars().count())
        .max()
        .unwrap()
}

#[test]
fn the_table_fits_columns_and_otherwise_100() {
    assert!(table_width(&report_at(Some("80"))) <= 80);
    let wide = report_at(Some("200"));
    assert!(table_width(&wide) > 100, "{wide}");
    for unusable in [None, Some("0"), Some("-3"), Some("wide")] {
        let text = report_at(unusable);
        let width = table_width(&text);
        assert!((90..=100).contains(&width), "{unusable:?}: {width}\n{text}");
    }
}

/// The widest line of the findings block (from its heading to the exit line).
fn findings_width(text: &str) -> usize {
    text.lines()
        .skip_while(|l| *l != "findings")
        .take_while(|l| !l.starts_with("exit "))
        .map(|l| l.chars().count())
        .max()
        .unwrap()
}

#[test]
fn findings_and_kb_list_fit_columns_and_stay_whole_in_a_bare_pipe() {
    let narrow = report_at(Some("80"));
    assert!(findings_width(&narrow) <= 80, "{narrow}");
    // Piped without COLUMNS, free text keeps its lines whole (for grep and logs).
    let piped = report_at(None);
    assert!(findings_width(&piped) > 100, "{piped}");
    let kb_list = |columns: Option<&str>| {
        let mut command = gpuprobe();
        command.env_remove("COLUMNS");
        if let Some(columns) = columns {
            command.env("COLUMNS", columns);
        }
        let output = command.args(["kb", "list"]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        stdout_of(&output)
    };
    let fitted = kb_list(Some("80"));
    assert!(fitted.lines().all(|l| l.chars().count() <= 80), "{fitted}");
    let whole = kb_list(None);
    assert!(whole.lines().any(|l| l.chars().count() > 100), "{whole}");
    // A row per entry: no continuation line.
    assert!(!whole.lines().any(|l| l.starts_with(' ')), "{whole}");
    assert!(fitted.lines().any(|l| l.starts_with(' ')), "{fitted}");
}

/// `gpuprobe report` of the fixture with stdout on a pseudo-terminal of `columns` columns
/// (util-linux `script`; `None` where it is missing), under `env`.
fn report_on_a_terminal(columns: u16, env: &str) -> Option<String> {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gpuprobe-report/tests/fixtures/report-simulated-zeros.json");
    std::fs::copy(fixture, tmp.path().join("report.json")).unwrap();
    let program = gpuprobe().get_program().to_owned();
    let inner = format!(
        "stty cols {columns} rows 40; env -u COLUMNS -u NO_COLOR -u CLICOLOR_FORCE {env} '{}' report '{}'",
        Path::new(&program).display(),
        tmp.path().display()
    );
    let output = std::process::Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .output()
        .ok()?;
    assert_eq!(output.status.code(), Some(1), "{}", stderr_of(&output));
    Some(stdout_of(&output).replace('\r', ""))
}

fn without_escapes(text: &str) -> String {
    regex::Regex::new("\u{1b}\\[[0-9;]*m")
        .unwrap()
        .replace_all(text, "")
        .into_owned()
}

#[test]
fn a_terminal_sets_the_width_and_one_of_0_columns_counts_as_unknown() {
    let Some(narrow) = report_on_a_terminal(70, "TERM=xterm") else {
        eprintln!("skipped: no `script` to give gpuprobe a terminal");
        return;
    };
    // A terminal is coloured, and the table fits it.
    assert!(narrow.contains(ESC), "{narrow}");
    assert!(table_width(&without_escapes(&narrow)) <= 70, "{narrow}");
    // A terminal of 0 columns: COLUMNS, else 100 (never one character per column).
    let zero = without_escapes(&report_on_a_terminal(0, "TERM=xterm").unwrap());
    assert!((90..=100).contains(&table_width(&zero)), "{zero}");
    let columns = without_escapes(&report_on_a_terminal(0, "TERM=xterm COLUMNS=84").unwrap());
    assert!((75..=84).contains(&table_width(&columns)), "{columns}");
    // NO_COLOR with a value turns colour off on a terminal; an empty one does not.
    let no_color = report_on_a_terminal(120, "TERM=xterm NO_COLOR=1").unwrap();
    assert!(!no_color.contains(ESC), "{no_color}");
    let empty = report_on_a_terminal(120, "TERM=xterm NO_COLOR=").unwrap();
    assert!(empty.contains(ESC), "{empty}");
}
