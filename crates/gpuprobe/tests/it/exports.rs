//! `check --prometheus/--junit` and `report RUN --prometheus/--junit`: a simulated failing
//! run exported as Prometheus metrics and JUnit XML, the real tools' verdict on both
//! (`promtool check metrics`, `xmllint --schema` against the JUnit schema; they must be
//! installed in CI), hostile probe text kept escaped, the atomic write (silent under
//! `--quiet`), and an unwritable path refused before anything runs.

use std::path::{Path, PathBuf};

use crate::support::*;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An external tool: its path when installed. Missing, the check skips locally and says
/// why; in CI (`CI=true`, as CI systems set it) it fails, since the check must run there.
fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !ci,
            "{name} is missing in CI: scripts/python-test-env.sh installs Debian's `{package}`"
        );
        eprintln!("skipped: {name} is not installed (Debian's `{package}` provides it)");
    }
    found
}

/// `promtool check metrics < file` passes without a lint complaint.
fn promtool_passes(file: &Path) {
    let Some(promtool) = tool("promtool", "prometheus") else {
        return;
    };
    let output = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .unwrap();
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool: {:?}\n{}{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// `xmllint --schema junit.xsd file` validates.
fn xmllint_validates(file: &Path) {
    let Some(xmllint) = tool("xmllint", "libxml2-utils") else {
        return;
    };
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gpuprobe-report/tests/fixtures/junit/junit.xsd");
    let output = std::process::Command::new(xmllint)
        .arg("--noout")
        .arg("--schema")
        .arg(schema)
        .arg(file)
        .output()
        .unwrap();
    assert!(output.status.success(), "xmllint: {}", text(&output.stderr));
}

#[test]
fn a_simulated_failing_check_is_exported_and_report_exports_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let prom = dir.path().join("textfile/gpuprobe.prom");
    let junit = dir.path().join("ci/junit.xml");
    let (output, report) = check_json(
        &run_dir,
        &[
            "--only",
            "copy.h2d.pageable.tiny",
            "--simulate",
            "h2d-zeros",
            "--prometheus",
            prom.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let report = expect_report(&output, report);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("Prometheus metrics: ") && stderr.contains("JUnit XML: "));
    let failing = report
        .results
        .iter()
        .find(|r| r.verdict.is_problem())
        .expect("the simulated fault fails a probe");

    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(metrics.contains("\ngpuprobe_simulated 1\n"), "{metrics}");
    assert!(metrics.contains("# SIMULATED run (h2d-zeros)"));
    assert!(metrics.contains(&format!(
        "gpuprobe_failing_probe{{probe=\"{}\",family=\"copy\",device=\"cpu\",verdict=\"fail\"",
        failing.probe
    )));
    assert!(metrics.contains(&format!(
        "gpuprobe_info{{version=\"{}\"",
        env!("CARGO_PKG_VERSION")
    )));
    promtool_passes(&prom);

    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("SIMULATED"));
    assert!(xml.contains(&format!(
        "<testcase classname=\"copy\" name=\"{} [cpu]\"",
        failing.probe
    )));
    assert!(xml.contains("<failure message=\"SIMULATED: "));
    xmllint_validates(&junit);

    // `report` writes the same files from the run directory, and prints nothing on stdout.
    let (prom2, junit2) = (dir.path().join("again.prom"), dir.path().join("again.xml"));
    let again = gpuprobe()
        .arg("report")
        .arg(&run_dir)
        .arg("--prometheus")
        .arg(&prom2)
        .arg("--junit")
        .arg(&junit2)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(again.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&prom2).unwrap(), metrics);
    assert_eq!(std::fs::read_to_string(&junit2).unwrap(), xml);

    // Hostile text in a probe's detail (a report is only data) stays escaped in both.
    let hostile = "\"quoted\"\nnext line </failure> ]]> <![CDATA[ \u{0} nul \u{1b}[31m esc";
    let mut edited = report.clone();
    for r in &mut edited.results {
        if let gpuprobe_model::Verdict::Fail { detail, .. } = &mut r.verdict {
            *detail = hostile.into();
        }
        r.stderr_tail = vec![hostile.into()];
    }
    edited.fingerprint.host.hostname = Some(hostile.into());
    std::fs::write(
        run_dir.join("report.json"),
        serde_json::to_string(&edited).unwrap(),
    )
    .unwrap();
    let rendered = gpuprobe()
        .arg("report")
        .arg(&run_dir)
        .arg("--prometheus")
        .arg(&prom2)
        .arg("--junit")
        .arg(&junit2)
        .output()
        .unwrap();
    assert_eq!(
        rendered.status.code(),
        Some(1),
        "{}",
        text(&rendered.stderr)
    );
    let xml = std::fs::read_to_string(&junit2).unwrap();
    assert!(!xml.contains('\0') && !xml.contains('\u{1b}') && !xml.contains("]]>"));
    assert!(xml.contains("&lt;/failure&gt; ]]&gt; &lt;![CDATA["));
    assert_eq!(
        xml.matches("</failure>").count(),
        xml.matches("<failure ").count()
    );
    xmllint_validates(&junit2);
    let metrics = std::fs::read_to_string(&prom2).unwrap();
    assert!(!metrics.contains("quoted"), "a detail is never a label");
    promtool_passes(&prom2);
}

#[test]
fn an_unwritable_export_path_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let bad = file.join("gpuprobe.prom");
    let run_dir = dir.path().join("run");
    for (option, what) in [
        ("--prometheus", "cannot write the Prometheus metrics to "),
        ("--junit", "cannot write the JUnit XML to "),
    ] {
        let (output, _) = check_json(
            &run_dir,
            &["--only", "copy.h2d", option, bad.to_str().unwrap()],
        );
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
        assert!(
            text(&output.stderr).contains(what),
            "{}",
            text(&output.stderr)
        );
        assert!(!run_dir.join("report.json").exists(), "no probe ran");
        let output = gpuprobe()
            .arg("report")
            .arg(dir.path())
            .arg(option)
            .arg(&bad)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        assert!(text(&output.stderr).contains(what));
        // A directory is no file either.
        let output = gpuprobe()
            .arg("report")
            .arg(dir.path())
            .arg(option)
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
    }
}

#[test]
fn an_export_replaces_the_last_one_whole_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gpuprobe-report/tests/fixtures/report-simulated-zeros.json");
    std::fs::copy(fixture, run_dir.join("report.json")).unwrap();
    let textfile = dir.path().join("textfile");
    std::fs::create_dir(&textfile).unwrap();
    let prom = textfile.join("gpuprobe.prom");
    std::fs::write(&prom, "stale\n").unwrap();
    let output = gpuprobe()
        .args(["--quiet", "report"])
        .arg(&run_dir)
        .arg("--prometheus")
        .arg(&prom)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(
        output.stderr.is_empty(),
        "--quiet: where it wrote is not said"
    );
    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(metrics.starts_with("# gpuprobe ") && metrics.ends_with('\n'));
    let names: Vec<_> = std::fs::read_dir(&textfile)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["gpuprobe.prom"]);
    promtool_passes(&prom);
}
