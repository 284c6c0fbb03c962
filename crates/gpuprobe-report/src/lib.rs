//! Renders reports for people and programs.
//!
//! - [`terminal`]: the table and findings a user reads after `gpuprobe check`;
//! - [`html`]: the self-contained, offline HTML report (`check --html`, `report --html`);
//! - [`json`]: the machine-readable report and its published JSON Schema;
//! - [`export`]: the Prometheus text exposition and JUnit XML of a run, for fleets and CI;
//! - [`guard`]: the terminal guard every line gpuprobe prints passes through;
//! - [`matrix`]: the measured dtype-conversion matrix;
//! - [`fit`]: lines that are not tables, wrapped to the width tables are fitted to;
//! - [`fix`]: the account of a workaround search (`gpuprobe fix`);
//! - [`fleet`]: many nodes' reports merged, grouped by stack, with the cross-node
//!   differential (`gpuprobe fleet`);
//! - [`profile`]: a `fix` profile for people (`gpuprobe profile show`);
//! - [`progress`]: the lines printed above the progress bar as probes finish;
//! - [`runs`]: the run directories `gpuprobe runs` lists and prunes;
//! - [`timings`]: where a run's time went (`check --timings`);
//! - [`triage`]: what pasted logs revealed (`gpuprobe triage`);
//! - [`bundle`]: the support archive (`gpuprobe bundle`) and [`redact`], its redaction.
//!
//! Renderers take a finished [`gpuprobe_model::Report`] and return text; they never decide
//! anything about the results. Nor do they find a run's files: this crate does not depend
//! on the runner; the caller reads the run directory through the runner and hands over
//! what it read (a report, the runs it listed, where a run keeps its files).
//!
//! Most modules are private: what other crates use is re-exported here, by a name that
//! says what it renders (`render_terminal`, `render_json`, `render_kb_entry`), and nothing
//! else is, so `unreachable_pub` flags a `pub` item no other crate can reach. `console`,
//! `export`, `fleet` and `html` are public modules still.

mod bundle;
pub mod console;
mod env;
pub mod export;
mod fit;
mod fix;
pub mod fleet;
mod guard;
pub mod html;
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
pub use env::{json as env_json, render as render_env};
pub use fix::{render as render_fix, render_for as render_fix_for};
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
