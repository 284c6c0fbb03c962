//! The build's commit and the embedded knowledge base's revision, found by this crate's
//! build script (the crate that embeds the knowledge base is the one that can digest it):
//! the `--version` line and the [`BuildInfo`] every report carries. docs/packaging.md
//! defines both values.

use gpuprobe_model::BuildInfo;

/// The source commit (12 hex digits), or `unknown`.
pub const COMMIT: &str = env!("GPUPROBE_COMMIT");

/// The embedded knowledge base's entry count and digest, e.g. `53.1f0c2d3e4b5a`.
pub const KB_REVISION: &str = env!("GPUPROBE_KB_REVISION");

/// What `gpuprobe --version` prints after the program name:
/// `0.1.0 (commit 3cb9c11d0a2e, kb 53.1f0c2d3e4b5a)`.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("GPUPROBE_COMMIT"),
    ", kb ",
    env!("GPUPROBE_KB_REVISION"),
    ")"
);

/// The commit and knowledge-base revision, as a report records them.
pub fn build_info() -> BuildInfo {
    BuildInfo {
        commit: COMMIT.to_string(),
        kb_revision: KB_REVISION.to_string(),
    }
}
