//! Findings: what the results mean, with the evidence that supports each claim.
//!
//! A finding comes from the knowledge base (a known issue matched), from the config lint
//! (a setting that is a no-op, harmful, deprecated, ...), or from the diagnosis (a failure
//! pattern placed on a layer). Nothing is claimed without evidence.

use serde::{Deserialize, Serialize};

use crate::probe::ProbeId;

/// How serious a finding is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Wrong results, crashes or hangs, confirmed or very likely.
    Error,
    /// Something to fix or check: a harmful or useless setting, a suspected known issue.
    Warning,
    /// Worth knowing, nothing to do.
    Info,
}

impl Severity {
    /// Symbol used on the terminal.
    pub fn symbol(self) -> &'static str {
        match self {
            Severity::Error => "✖",
            Severity::Warning => "⚠",
            Severity::Info => "ℹ",
        }
    }
}

/// Where in the stack a finding places the problem. `Config` is for settings the user made
/// (environment, kernel parameters) rather than a component's behaviour.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FindingLayer {
    /// Kernel, driver, firmware, module parameters, IOMMU.
    System,
    /// Native runtime (CUDA/HIP), copy engines, memory.
    Runtime,
    /// PyTorch.
    Framework,
    /// Data loading, Accelerate, serialization.
    Pipeline,
    /// The user's job.
    Job,
    /// A setting the user made.
    Config,
}

impl FindingLayer {
    /// Short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            FindingLayer::System => "system",
            FindingLayer::Runtime => "runtime",
            FindingLayer::Framework => "framework",
            FindingLayer::Pipeline => "pipeline",
            FindingLayer::Job => "job",
            FindingLayer::Config => "config",
        }
    }
}

/// How sure the finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// The conditions hold and probe results confirm it.
    Confirmed,
    /// The conditions hold but no probe result confirms it (not run, or not testable here).
    Suspected,
    /// Established by the observation itself (lint facts, a diagnosis from results).
    Observed,
}

/// One piece of evidence behind a finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    /// `condition` (a fingerprint condition held), `probe` (a probe result), `absent`
    /// (a condition that could not be checked), `setting`, `log`.
    pub kind: String,
    /// What held, in words ("native ISA gfx1100 matches gfx11*").
    pub text: String,
    /// The probe whose result this is, for `probe` evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeId>,
}

impl Evidence {
    /// Evidence of a kind with a text.
    pub fn new(kind: &str, text: impl Into<String>) -> Self {
        Evidence {
            kind: kind.to_string(),
            text: text.into(),
            probe: None,
        }
    }

    /// Evidence from a probe result.
    pub fn from_probe(probe: ProbeId, text: impl Into<String>) -> Self {
        Evidence {
            kind: "probe".to_string(),
            text: text.into(),
            probe: Some(probe),
        }
    }
}

/// What applying a remedy costs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cost {
    /// It makes things slower.
    #[serde(default)]
    pub slower: bool,
    /// It needs root.
    #[serde(default)]
    pub needs_root: bool,
    /// It needs a reboot.
    #[serde(default)]
    pub needs_reboot: bool,
    /// It needs a change to the user's code.
    #[serde(default)]
    pub code_change: bool,
    /// Anything else worth saying about the cost ("copies go through blit kernels").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Cost {
    /// A short list of cost tags for tables.
    pub fn tags(&self) -> Vec<&'static str> {
        let mut tags = Vec::new();
        if self.slower {
            tags.push("slower");
        }
        if self.needs_root {
            tags.push("needs root");
        }
        if self.needs_reboot {
            tags.push("needs reboot");
        }
        if self.code_change {
            tags.push("code change");
        }
        tags
    }
}

/// A thing to do about a finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Remedy {
    /// What to do, in words.
    pub description: String,
    /// `env` (a process setting), `kernel_param`, `firmware`, `upgrade`, `downgrade`,
    /// `code_change`, `unset` (remove a setting), `other`.
    pub kind: String,
    /// The setting, for `env`, `unset` and `kernel_param` remedies (`HSA_ENABLE_SDMA=0`,
    /// `amdgpu.cwsr_enable=0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<String>,
    /// Its cost.
    #[serde(default)]
    pub cost: Cost,
}

/// The words that end a remedy's description, in parentheses, when its sources do not show
/// that it cures the issue. Every listing keeps them next to the remedy (an `env` remedy is
/// printed as `set NAME=VALUE`, which would otherwise drop them and read as a cure).
pub mod qualifier {
    /// Those affected say it helps; nobody showed that it cures the issue.
    pub const REPORTED: &str = "reported to help, not verified";
    /// One or two uncorroborated reports.
    pub const ANECDOTAL: &str = "anecdotal, not verified";
    /// Plausible, not shown to help.
    pub const UNVERIFIED: &str = "unverified";
    /// Helps find the problem; does not cure it.
    pub const DEBUG: &str = "debugging aid, not a cure";

    /// How a qualifier starts; a trailing parenthesis that starts otherwise is part of the
    /// description ("Remove HIP_DISABLE_IPC (no effect)").
    pub(crate) const STARTS: &[&str] = &["reported", "anecdotal", "unverified", "debugging aid"];
}

/// How evidence that matched a known issue's pattern without the issue's own signature
/// starts (its text follows): the knowledge base writes it, and renderers that list such
/// evidence apart find it by it.
pub const WITHOUT_SIGNATURE: &str = "seen, without this issue's signature: ";

impl Remedy {
    /// What to do, as one short imperative line: the action and its setting, followed by
    /// the evidence qualifier when the description has one. A bare setting name reads as
    /// "set it", which for an `unset` remedy is the opposite of the advice
    /// (`HIP_DISABLE_IPC` printed under "to try" for a variable that does nothing).
    pub fn action(&self) -> String {
        let action = self.bare_action();
        match self.qualifier() {
            Some(words) => format!("{action} ({words})"),
            None => action,
        }
    }

    /// What to do with its qualifier and cost tags after it, for people: `ACTION (not yet
    /// proven here; needs root)`. An unproven remedy says so first, so that it never reads
    /// as a cure.
    pub fn described(&self) -> String {
        let mut notes: Vec<String> = self.qualifier().map(str::to_string).into_iter().collect();
        let tags = self.cost.tags();
        if !tags.is_empty() {
            notes.push(tags.join(", "));
        }
        if notes.is_empty() {
            self.bare_action()
        } else {
            format!("{} ({})", self.bare_action(), notes.join("; "))
        }
    }

    /// The action without its evidence qualifier, for listings that print the qualifier
    /// themselves (next to the cost).
    pub fn bare_action(&self) -> String {
        let description = self.bare_description();
        let Some(setting) = self.setting.as_deref().filter(|s| !s.trim().is_empty()) else {
            return description.to_string();
        };
        match self.kind.as_str() {
            "unset" => format!("unset {}", setting.split('=').next().unwrap_or(setting)),
            "env" => format!("set {setting}"),
            "kernel_param" if description.contains(setting) => description.to_string(),
            "kernel_param" => format!("{description} (kernel parameter {setting})"),
            _ => description.to_string(),
        }
    }

    /// The evidence qualifier at the end of the description (see [`qualifier`]): `Some`
    /// when the remedy is not shown to cure the issue.
    pub fn qualifier(&self) -> Option<&str> {
        self.split_qualifier().1
    }

    fn bare_description(&self) -> &str {
        self.split_qualifier().0
    }

    fn split_qualifier(&self) -> (&str, Option<&str>) {
        let text = self.description.trim_end();
        if let Some(inner) = text.strip_suffix(')')
            && let Some(open) = inner.rfind('(')
        {
            let words = &inner[open + 1..];
            if qualifier::STARTS
                .iter()
                .any(|start| words.starts_with(start))
            {
                return (inner[..open].trim_end(), Some(words));
            }
        }
        (&self.description, None)
    }
}

/// A conclusion for the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// Stable id: a KB id (`RKB-001`), a lint rule id (`LINT-OVERRIDE-UNNEEDED`) or a
    /// diagnosis id (`DIAG-COPY-H2D`).
    pub id: String,
    /// `kb`, `lint` or `diagnosis`.
    pub source: String,
    /// Severity.
    pub severity: Severity,
    /// Where it places the problem.
    pub layer: FindingLayer,
    /// One line.
    pub title: String,
    /// What it means, a few sentences.
    #[serde(default)]
    pub explanation: String,
    /// How sure it is.
    pub confidence: Confidence,
    /// What supports it.
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// What to do.
    #[serde(default)]
    pub remedies: Vec<Remedy>,
    /// Public sources (`ROCm/ROCm#5724`, URLs).
    #[serde(default)]
    pub citations: Vec<String>,
    /// Next gpuprobe commands worth running (`gpuprobe fix`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub next_steps: Vec<String>,
    /// Ids of findings about the same problem from another source (a lint rule that is the
    /// config-side face of a known issue); the report merges them into one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remedy(kind: &str, description: &str, setting: Option<&str>) -> Remedy {
        Remedy {
            description: description.into(),
            kind: kind.into(),
            setting: setting.map(str::to_string),
            cost: Cost::default(),
        }
    }

    #[test]
    fn a_cost_with_a_key_this_version_lacks_still_reads() {
        // Reports, profiles and fix journals are read across gpuprobe versions (`fleet`,
        // `ui`), so a key a newer version adds must not make them unreadable. Only the
        // knowledge base reads a cost strictly (gpuprobe-kb's `StrictCost`).
        let cost: Cost =
            serde_json::from_str(r#"{"needs_root": true, "needs_power_cycle": true}"#).unwrap();
        assert_eq!(
            cost,
            Cost {
                needs_root: true,
                ..Cost::default()
            }
        );
    }

    #[test]
    fn an_unset_remedy_says_unset_never_the_bare_name() {
        let r = remedy(
            "unset",
            "Remove HIP_DISABLE_IPC (no effect)",
            Some("HIP_DISABLE_IPC"),
        );
        assert_eq!(r.action(), "unset HIP_DISABLE_IPC");
        let r = remedy(
            "unset",
            "Remove it",
            Some("HSA_OVERRIDE_GFX_VERSION=10.3.0"),
        );
        assert_eq!(r.action(), "unset HSA_OVERRIDE_GFX_VERSION");
    }

    #[test]
    fn other_remedies_say_what_to_do_with_their_setting() {
        assert_eq!(
            remedy("env", "Turn SDMA off", Some("HSA_ENABLE_SDMA=0")).action(),
            "set HSA_ENABLE_SDMA=0"
        );
        assert_eq!(
            remedy("kernel_param", "Replace it with iommu=pt", Some("iommu=pt")).action(),
            "Replace it with iommu=pt"
        );
        assert_eq!(
            remedy("kernel_param", "Disable CWSR", Some("amdgpu.cwsr_enable=0")).action(),
            "Disable CWSR (kernel parameter amdgpu.cwsr_enable=0)"
        );
        assert_eq!(
            remedy("upgrade", "Upgrade ROCm to 6.4", None).action(),
            "Upgrade ROCm to 6.4"
        );
        assert_eq!(
            remedy("unset", "Remove the override", Some(" ")).action(),
            "Remove the override"
        );
    }

    #[test]
    fn an_unproven_remedy_keeps_its_qualifier_in_the_action() {
        let r = remedy(
            "env",
            &format!("Turn SDMA off ({})", qualifier::REPORTED),
            Some("HSA_ENABLE_SDMA=0"),
        );
        assert_eq!(r.qualifier(), Some(qualifier::REPORTED));
        assert_eq!(r.bare_action(), "set HSA_ENABLE_SDMA=0");
        assert_eq!(
            r.action(),
            "set HSA_ENABLE_SDMA=0 (reported to help, not verified)"
        );
        let r = remedy(
            "kernel_param",
            &format!("Disable CWSR ({})", qualifier::ANECDOTAL),
            Some("amdgpu.cwsr_enable=0"),
        );
        assert_eq!(
            r.action(),
            "Disable CWSR (kernel parameter amdgpu.cwsr_enable=0) (anecdotal, not verified)"
        );
        let plain = remedy(
            "unset",
            "Remove HIP_DISABLE_IPC (no effect)",
            Some("HIP_DISABLE_IPC"),
        );
        assert_eq!(plain.qualifier(), None);
    }
}
