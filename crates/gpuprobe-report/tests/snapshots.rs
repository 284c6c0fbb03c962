//! Snapshot tests (insta) of the terminal renderings users read: `check` (a report from
//! `tests/fixtures/`), `env` (a fixed fingerprint from `tests/fixtures/`, so that facts added
//! to the live fingerprint only change the snapshot, never the input), `kb show` and
//! `triage` (pastes from the repository's `fixtures/`).
//!
//! Each is rendered as `gpuprobe_report::Console` decides for a terminal of 80 and of 120
//! columns (colour on; escapes shown as `␛` in the snapshot) and for a non-terminal (no
//! colour, the default width). Only `check` fits itself to the width (its table, and on a
//! terminal its findings); the other views never wrap, so their 80- and 120-column
//! renderings must both equal one snapshot.
//!
//! The snapshots live in `tests/snapshots/`. A difference fails the test; `cargo insta
//! review` (or `INSTA_UPDATE=always`) accepts a deliberate change. In CI (`CI=true`) insta
//! writes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gpuprobe_model::Fingerprint;
use gpuprobe_model::Report;
use gpuprobe_report::{ColorWhen, Console};
use insta::assert_snapshot;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A terminal of `columns` columns (`TERM` set, nothing else), or a pipe.
fn console(columns: Option<u16>) -> Console {
    let terminal_env: BTreeMap<String, String> = [("TERM".to_string(), "xterm-256color".into())]
        .into_iter()
        .collect();
    match columns {
        Some(width) => Console::decide(
            ColorWhen::Auto,
            false,
            (true, true),
            Some(width),
            &terminal_env,
        ),
        None => Console::decide(
            ColorWhen::Auto,
            false,
            (false, false),
            None,
            &BTreeMap::new(),
        ),
    }
}

/// The cases every view is rendered in: (snapshot suffix, console).
fn consoles() -> [(&'static str, Console); 3] {
    [
        ("terminal-80", console(Some(80))),
        ("terminal-120", console(Some(120))),
        ("pipe", console(None)),
    ]
}

/// Escapes made visible, so the snapshot shows where colour is.
fn shown(text: &str) -> String {
    text.replace('\u{1b}', "␛")
}

fn report() -> Report {
    serde_json::from_str(&std::fs::read_to_string(fixture("report-simulated-zeros.json")).unwrap())
        .unwrap()
}

#[test]
fn check_at_80_and_120_columns_and_in_a_pipe() {
    let report = report();
    for (case, console) in consoles() {
        let text = gpuprobe_report::render_terminal(&report, console.terminal_options());
        assert_snapshot!(format!("check-{case}"), shown(&text));
    }
    let pipe = console(None).terminal_options();
    assert!(pipe.width == Some(100) && !pipe.style.color);
}

#[test]
fn check_quiet_prints_the_verdict_line_alone() {
    let report = report();
    let mut options = console(None).terminal_options();
    options.quiet = true;
    let text = gpuprobe_report::render_terminal(&report, options);
    assert_snapshot!("check-quiet", shown(&text));
}

/// Renders a width-independent view in every case: the two terminals must agree.
fn assert_views(name: &str, render: impl Fn(&Console) -> String) {
    for (case, console) in consoles() {
        let case = if case == "pipe" { "pipe" } else { "terminal" };
        assert_snapshot!(format!("{name}-{case}"), shown(&render(&console)));
    }
}

#[test]
fn env_of_a_fixed_fingerprint() {
    let text = std::fs::read_to_string(fixture("fingerprint-h100.json")).unwrap();
    let fingerprint: Fingerprint = serde_json::from_str(&text).unwrap();
    let findings = gpuprobe_kb::lint(&fingerprint);
    assert_views("env", |console| {
        gpuprobe_report::render_env(&fingerprint, &findings, console.stdout_style())
    });
}

#[test]
fn kb_show_of_a_built_in_entry() {
    let kb = gpuprobe_kb::KnowledgeBase::load_embedded().kb;
    let entry = kb.get("RKB-001").unwrap();
    assert_views("kb-show", |console| {
        gpuprobe_report::render_kb_entry(entry, console.stdout_style())
    });
}

#[test]
fn triage_of_fixture_pastes() {
    // Relative to this crate, as a user names them: the path is part of the output.
    let files = [
        PathBuf::from("../../fixtures/rocminfo/gfx1151-rocm-issue5817.txt"),
        PathBuf::from("../../fixtures/dmesg/gfx1151-pagefault-CPF-mes0x83-rocm-issue5724.txt"),
    ];
    let cap = gpuprobe_detect::DEFAULT_TRIAGE_MAX_BYTES;
    let inputs = gpuprobe_detect::triage_inputs(&files, cap, &mut |_| {}).unwrap();
    let outcome = &inputs.outcome;
    // As `gpuprobe triage` composes it.
    let kb = gpuprobe_kb::KnowledgeBase::load_embedded().kb;
    let matches = gpuprobe_kb::match_all(&kb, &outcome.fingerprint, &[]);
    let matched = gpuprobe_report::triage_matched_lines(&matches, outcome);
    let mut findings = gpuprobe_kb::lint(&outcome.fingerprint);
    findings.extend(matches.iter().map(|m| m.to_finding()));
    assert!(!findings.is_empty(), "the pastes should reveal something");
    assert_views("triage", |console| {
        let mut out = Vec::new();
        gpuprobe_report::write_triage_text(
            &mut out,
            outcome,
            &inputs.truncated,
            &matched,
            &findings,
            console.stdout_style(),
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    });
}
