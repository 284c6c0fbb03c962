//! Renders reports for people and programs.
//!
//! - [`terminal`]: the table and findings a user reads after `gpuprobe check`;
//! - [`html`]: the self-contained, offline HTML report (`check --html`, `report --html`);
//! - [`json`]: the machine-readable report and its published JSON Schema;
//! - [`guard`]: the terminal guard every line gpuprobe prints passes through;
//! - [`matrix`]: the measured dtype-conversion matrix;
//! - [`fit`]: lines that are not tables, wrapped to the width tables are fitted to;
//! - [`fix`]: the account of a workaround search (`gpuprobe fix`);
//! - [`profile`]: a `fix` profile for people (`gpuprobe profile show`);
//! - [`progress`]: the lines printed above the progress bar as probes finish;
//! - [`runs`]: the run directories `gpuprobe runs` lists and prunes;
//! - [`timings`]: where a run's time went (`check --timings`);
//! - [`triage`]: what pasted logs revealed (`gpuprobe triage`);
//! - [`bundle`]: the support archive (`gpuprobe bundle`) and [`redact`], its redaction.
//!
//! Renderers take a finished [`gpuprobe_model::Report`] and return text; they never decide
//! anything about the results.

pub mod bundle;
pub mod console;
pub mod env;
pub mod fit;
pub mod fix;
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
