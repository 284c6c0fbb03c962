//! Profiles: settings proven to cure failures on one stack, applied by `gpuprobe run`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A profile file (TOML). Data only: `gpuprobe run` accepts only settings from the
/// workaround catalogue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Profile {
    /// Profile format version.
    pub profile_version: u32,
    /// gpuprobe version that wrote it.
    pub created_by: String,
    /// When it was written (RFC 3339 UTC).
    pub created_at: String,
    /// Process settings to apply, `NAME` → `VALUE`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The stack it was proven on.
    pub proven_on: StackKey,
    /// Probes it was shown to cure.
    #[serde(default)]
    pub cures: Vec<String>,
    /// Probes still failing with it applied.
    #[serde(default)]
    pub still_failing: Vec<String>,
    /// Changes that need root or a reboot: reported, never applied.
    #[serde(default)]
    pub system_changes: Vec<String>,
    /// Whether it was proven under fault simulation.
    #[serde(default)]
    pub simulated: bool,
}

/// The identity of a stack for profile matching: the facts that, when changed, make a
/// proof invalid.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StackKey {
    /// GPU ISAs (native) or names, in enumeration order.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// Kernel release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// GPU driver version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// ROCm/HIP or CUDA runtime version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// torch version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
}
