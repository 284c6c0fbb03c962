//! Integration tests of gpuprobe-kb: the shipped entries, the schema files, validation
//! diagnostics, versions, matching, the lint, the catalogue and the renderers.

mod broken;
mod build_info;
mod catalogue;
mod conditions;
mod docs;
mod entries;
mod fault_markers;
mod fixtures;
mod lint_rules;
mod matching;
mod render;
mod schema;
mod signatures;
mod triage_findings;
mod versions;
