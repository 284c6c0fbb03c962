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

pub mod bundle;
pub mod console;
pub mod env;
pub mod export;
pub mod fit;
pub mod fix;
pub mod fleet;
pub mod guard;
pub mod html;
pub mod issue;
pub mod json;
pub mod kb;
pub mod matrix;
pub mod memtest;
pub mod profile;
pub mod progress;
pub mod redact;
pub mod runs;
pub mod style;
pub mod terminal;
pub mod timings;
pub mod triage;

#[cfg(test)]
mod test_support;

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
