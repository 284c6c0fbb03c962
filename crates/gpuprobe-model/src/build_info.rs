//! What a build of gpuprobe was made from: the source commit and the revision of the
//! embedded knowledge base. `--version` prints both and every report carries them, so a
//! report pasted into an issue says exactly which code and which known issues judged it.
//! gpuprobe-kb's build script finds the values (docs/packaging.md says how).

use serde::{Deserialize, Serialize};

/// The commit and the knowledge-base revision of the gpuprobe that made a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BuildInfo {
    /// The source commit (its first 12 hex digits), or `unknown` when the build had
    /// neither git, nor a packaging note, nor `GPUPROBE_BUILD_COMMIT`.
    pub commit: String,
    /// The embedded knowledge base: its entry count and the first 12 hex digits of the
    /// SHA-256 of `sha256sum`'s listing of its files, e.g. `53.1f0c2d3e4b5a`.
    pub kb_revision: String,
}
