//! Renders reports for people and programs.
//!
//! Each module owns one rendering; the names re-exported from it are in brackets.
//!
//! - `console`: how output meets the terminal (colour, width, progress), decided once per
//!   process, and the guarded stdout and stderr ([`Console`], [`setup_console`],
//!   [`current_console`], [`console_stdout`], [`console_stderr`], [`console_note`]);
//! - `terminal`: the table and findings a user reads after `gpuprobe check`
//!   ([`render_terminal`]);
//! - `html`: the self-contained, offline HTML report (`check --html`, `report --html`;
//!   [`write_html_report`], [`render_html_linked`] for `gpuprobe ui`);
//! - `json`: the machine-readable report and its published JSON Schema ([`render_json`],
//!   [`report_schema`]);
//! - `export`: the Prometheus text exposition and JUnit XML of a run, for fleets and CI
//!   ([`render_prometheus`], [`render_junit`], [`write_export`]), and a health check's
//!   line and exit code ([`health_of_report`]);
//! - `guard`: the terminal guard every line gpuprobe prints passes through;
//! - `matrix`: the measured dtype-conversion matrix;
//! - `fit`: lines that are not tables, wrapped to the width tables are fitted to;
//! - `fix`: the account of a workaround search (`gpuprobe fix`; [`render_fix`]);
//! - `fleet`: many nodes' reports merged, grouped by stack, with the cross-node
//!   differential (`gpuprobe fleet`; [`Fleet`], [`render_fleet_text`],
//!   [`write_fleet_page`]);
//! - `profile`: a `fix` profile for people (`gpuprobe profile show`; [`render_profile`]);
//! - `progress`: the lines printed above the progress bar as probes finish
//!   ([`ProgressLog`]);
//! - `runs`: the run directories `gpuprobe runs` lists and prunes ([`render_run_list`],
//!   [`render_prune`]);
//! - `timings`: where a run's time went (`check --timings`);
//! - `triage`: what pasted logs revealed (`gpuprobe triage`; [`write_triage_text`]);
//! - `bundle`: the support archive (`gpuprobe bundle`; [`make_bundle`]) and `redact`, its
//!   redaction.
//!
//! Renderers take a finished [`gpuprobe_model::Report`] and return text; they never decide
//! anything about the results. Nor do they find a run's files: this crate does not depend
//! on the runner; the caller reads the run directory through the runner and hands over
//! what it read (a report, the runs it listed, where a run keeps its files).
//!
//! Every module is private: what other crates use is re-exported here, by a name that
//! says what it renders or does (`render_terminal`, `render_html_linked`,
//! `write_fleet_page`, `health_of_report`, `current_console`), and nothing else is, so
//! `unreachable_pub` flags a `pub` item no other crate can reach.

mod bundle;
mod console;
mod env;
mod export;
mod fit;
mod fix;
mod fleet;
mod guard;
mod html;
mod issue;
mod json;
mod kb;
mod matrix;
mod memtest;
mod profile;
mod progress;
mod redact;
mod runs;
mod style;
mod terminal;
mod timings;
mod triage;

#[cfg(test)]
mod test_support;

pub use bundle::{
    BundleError, Options as BundleOptions, RunLayout, make as make_bundle,
    render_text as render_bundle_text,
};
pub use console::{
    ColorWhen, Console, ProgressMode, current as current_console, note as console_note,
    setup as setup_console, stderr as console_stderr, stdout as console_stdout,
};
pub use env::{json as env_json, render as render_env};
pub use export::health::{
    Health, HealthFormat, HealthState, NoReport, of_no_report as health_of_no_report,
    of_report as health_of_report,
};
pub use export::{
    ExportError, check_writable as check_export_writable, junit::render as render_junit,
    prometheus::render as render_prometheus, write as write_export,
};
pub use fix::{render as render_fix, render_for as render_fix_for};
pub use fleet::{
    Fleet, FleetView, html::write_page as write_fleet_page, render_text as render_fleet_text,
};
pub use html::{
    HtmlError, IssueText, Linked as HtmlLinks, STYLESHEET as HTML_STYLESHEET,
    check_writable as check_html_writable, issue_texts, render_linked as render_html_linked,
    text as report_text, write_report as write_html_report,
};
pub use issue::{render_repro, terminal_text as issue_terminal_text};
pub use json::{render as render_json, schema as report_schema};
pub use kb::{list as render_kb_list, matches as render_kb_matches, show as render_kb_entry};
pub use memtest::colour as memtest_colour;
pub use profile::render_profile;
pub use progress::{
    ProgressLog, finished_line as progress_finished_line, log_line as progress_log_line,
};
pub use runs::{
    ListedRun, RetentionAccount, render_list as render_run_list, render_prune, retention_lines,
    verdict_text as run_verdict_text,
};
pub use style::Style;
pub use terminal::{TerminalOptions, render as render_terminal};
pub use triage::{
    matched_lines as triage_matched_lines, render_json as render_triage_json,
    truncation_message as triage_truncation_message, write_text as write_triage_text,
};

#[cfg(test)]
mod layering {
    /// The crates this one builds on, by its manifest: every table of dependencies
    /// (`[dependencies]`, `[build-dependencies]`, `[target.X.dependencies]`) and each
    /// dependency given a table of its own (`[dependencies.NAME]`); dev-dependencies are
    /// not built into it.
    fn built_on(manifest: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut in_dependencies = false;
        for line in manifest.lines().map(str::trim) {
            if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let last = header.rsplit('.').next().unwrap_or(header);
                let table = header.trim_end_matches(&format!(".{last}"));
                let is_table = |name: &str| header == name || header.ends_with(&format!(".{name}"));
                in_dependencies = is_table("dependencies") || is_table("build-dependencies");
                if !in_dependencies
                    && (table == "dependencies"
                        || table == "build-dependencies"
                        || table.ends_with(".dependencies")
                        || table.ends_with(".build-dependencies"))
                {
                    names.push(last.trim_matches('"').to_string());
                }
                continue;
            }
            if in_dependencies && let Some((name, _)) = line.split_once('=') {
                let name = name.trim().trim_matches('"');
                if !name.is_empty() && !name.starts_with('#') {
                    names.push(name.split('.').next().unwrap_or(name).to_string());
                }
            }
        }
        names
    }

    #[test]
    fn the_report_crate_does_not_depend_on_the_runner() {
        let names = built_on(include_str!("../Cargo.toml"));
        assert!(
            names.iter().any(|n| n == "gpuprobe-model"),
            "the manifest's dependencies were not found: {names:?}"
        );
        assert!(
            !names.iter().any(|n| n == "gpuprobe-runner"),
            "gpuprobe-report renders values it is given; the caller reads run directories \
             through the runner: {names:?}"
        );
        // The reading sees each way of naming a dependency, and leaves dev-dependencies out.
        let sample = "[dependencies]\na.workspace = true\nb = \"1\"\n[dev-dependencies]\nc = 1\n\
                      [target.'cfg(unix)'.dependencies]\nd = 1\n[dependencies.e]\nversion = 1\n\
                      [build-dependencies]\nf = 1\n";
        assert_eq!(built_on(sample), ["a", "b", "d", "e", "f"]);
    }
}
