//! `gpuprobe report` and `check --html`: a finished run rendered again as text, JSON and
//! HTML; an unwritable HTML path and a broken or unfinished run are usage errors (exit 2).

use crate::support::*;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_check_writes_html_and_report_renders_the_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let page = dir.path().join("out/check.html");
    let (output, report) = check_json(
        &run_dir,
        &[
            "--only",
            "copy.h2d.pageable.tiny",
            "--simulate",
            "h2d-zeros",
            "--html",
            page.to_str().unwrap(),
        ],
    );
    let report = expect_report(&output, report);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("HTML report: "));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("id=\"simulated\""), "a simulated run says so");
    assert!(html.contains("copy.h2d.pageable.tiny"));

    // The terminal text by default, with the run's exit status.
    let again = gpuprobe().arg("report").arg(&run_dir).output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    let shown = text(&again.stdout);
    assert!(
        shown.contains("SIMULATED") && shown.contains("FAIL"),
        "{shown}"
    );
    // The JSON, the same report.
    let json = gpuprobe()
        .arg("report")
        .arg(&run_dir)
        .arg("--json")
        .output()
        .unwrap();
    let parsed: gpuprobe_model::Report = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(parsed, report);
    // The HTML alone prints nothing on stdout and writes the same page.
    let second = dir.path().join("again.html");
    let rendered = gpuprobe()
        .arg("report")
        .arg(&run_dir)
        .arg("--html")
        .arg(&second)
        .output()
        .unwrap();
    assert_eq!(rendered.status.code(), Some(1));
    assert!(rendered.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&second).unwrap(), html);
}

#[test]
fn an_unwritable_html_path_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let bad = file.join("report.html");
    let run_dir = dir.path().join("run");
    let (output, _) = check_json(
        &run_dir,
        &["--only", "copy.h2d", "--html", bad.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("cannot write the HTML report"));
    assert!(!run_dir.join("report.json").exists(), "no probe ran");
    let output = gpuprobe()
        .arg("report")
        .arg(dir.path())
        .arg("--html")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn a_missing_unfinished_or_broken_run_is_a_clear_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = gpuprobe()
        .arg("report")
        .arg(dir.path().join("nothing"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("no such directory"));
    let unfinished = gpuprobe().arg("report").arg(dir.path()).output().unwrap();
    assert_eq!(unfinished.status.code(), Some(2));
    assert!(text(&unfinished.stderr).contains("no report.json: not a finished gpuprobe run"));
    std::fs::write(dir.path().join("report.json"), "{\"results\": [").unwrap();
    let broken = gpuprobe().arg("report").arg(dir.path()).output().unwrap();
    assert_eq!(broken.status.code(), Some(2));
    assert!(
        text(&broken.stderr).contains("report.json is not a gpuprobe report"),
        "{}",
        text(&broken.stderr)
    );
}
