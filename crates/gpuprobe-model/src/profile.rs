//! Profiles: settings proven to cure failures on one stack, applied by `gpuprobe run`; and
//! the account of the workaround search (`gpuprobe fix`) that proved them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::exit::ExitStatus;
use crate::finding::Cost;
use crate::probe::{DeviceRef, ProbeId};

/// Current profile format version.
pub const PROFILE_VERSION: u32 = 1;

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
    /// Whether it was proven under fault simulation.
    #[serde(default)]
    pub simulated: bool,
    /// Process settings to apply, `NAME` → `VALUE`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables to remove from the environment (a setting shown to be harmful here, such
    /// as an arch override). Empty for most profiles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset: Vec<String>,
    /// Framework switches to apply inside the job's Python after `import torch`, switch →
    /// value (`torch.backends.cuda.enable_cudnn_sdp` → `False`): see [`is_switch_name`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub switches: BTreeMap<String, String>,
    /// Probes it was shown to cure.
    #[serde(default)]
    pub cures: Vec<String>,
    /// Probes still failing with it applied.
    #[serde(default)]
    pub still_failing: Vec<String>,
    /// Failures that did not reproduce when re-run (intermittent): no cure can be proven
    /// for them with a bounded number of runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<String>,
    /// Changes that need root or a reboot: reported, never applied.
    #[serde(default)]
    pub system_changes: Vec<String>,
    /// Other changes reported but not tested: code changes (pinned host buffers),
    /// machine-specific settings. Never applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_changes: Vec<String>,
    /// Code changes proven by `fix` (a probe-side switch made the failing probes pass, such
    /// as contiguous inputs), each with the probes it cures: the user makes them, nothing
    /// applies them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code_changes: Vec<String>,
    /// What the settings cost, as measured by `fix` (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_cost: Option<String>,
    /// The run directory holding the evidence (every trial's results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The stack it was proven on.
    pub proven_on: StackKey,
    /// Why each setting is there: what it cures, where it comes from, what it costs.
    #[serde(default, rename = "setting", skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<ProfileSetting>,
}

/// One setting of a profile with its justification.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProfileSetting {
    /// `NAME=VALUE`, or `unset NAME`.
    pub setting: String,
    /// Probes it cures (alone, or together with the settings named in `together_with`).
    #[serde(default)]
    pub cures: Vec<String>,
    /// Settings it cures those probes only together with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub together_with: Vec<String>,
    /// Knowledge-base and catalogue ids that name it (`RKB-012`, `CAT-SDMA-OFF`).
    #[serde(default)]
    pub sources: Vec<String>,
    /// What it costs, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cost: String,
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

impl StackKey {
    /// What differs between the stack a profile was proven on (`self`) and the stack `here`,
    /// one sentence per fact. A fact the profile records but `here` lacks counts as a
    /// difference (it cannot be shown to be the same); a fact the profile does not record
    /// is not compared. GPUs are compared as a set (enumeration order may change).
    pub fn differences(&self, here: &StackKey) -> Vec<String> {
        let mut out = Vec::new();
        let mut proven = self.gpus.clone();
        let mut current = here.gpus.clone();
        proven.sort();
        current.sort();
        if proven != current {
            let list = |gpus: &[String]| {
                if gpus.is_empty() {
                    "none".to_string()
                } else {
                    gpus.join(", ")
                }
            };
            out.push(format!(
                "GPUs: proven on {}, this machine has {}",
                list(&self.gpus),
                list(&here.gpus)
            ));
        }
        for (what, proven, current) in [
            ("kernel", &self.kernel, &here.kernel),
            ("GPU driver", &self.driver, &here.driver),
            ("GPU runtime", &self.runtime, &here.runtime),
            ("torch", &self.torch, &here.torch),
        ] {
            match (proven, current) {
                (Some(p), Some(c)) if p != c => {
                    out.push(format!("{what}: proven on {p}, this machine has {c}"))
                }
                (Some(p), None) => out.push(format!(
                    "{what}: proven on {p}, unknown on this machine (could not be read)"
                )),
                _ => {}
            }
        }
        out
    }

    /// One line: `gfx1151 · kernel 6.17.0 · driver ... · runtime 7.2.0 · torch 2.11.0`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.gpus.is_empty() {
            parts.push("no GPU".to_string());
        } else {
            parts.push(self.gpus.join(", "));
        }
        for (what, value) in [
            ("kernel", &self.kernel),
            ("driver", &self.driver),
            ("runtime", &self.runtime),
            ("torch", &self.torch),
        ] {
            if let Some(value) = value {
                parts.push(format!("{what} {value}"));
            }
        }
        parts.join(" · ")
    }
}

/// The variable that carries framework switches to a Python process: `NAME=VALUE` pairs
/// joined by `;` (gpuprobe's workers and the job start-up hook of `gpuprobe run` read it).
pub const SWITCHES_VARIABLE: &str = "GPUPROBE_SWITCHES";

/// Whether `name` names a framework switch rather than an environment variable: a dotted
/// Python path under `torch` (a setting of the framework, applied after `import torch`) or
/// under `gpuprobe` (a switch of gpuprobe's own probes, which stands for a code change).
/// Environment variable names never hold a dot, so the two never collide.
pub fn is_switch_name(name: &str) -> bool {
    let mut parts = name.split('.');
    let root_ok = matches!(parts.next(), Some("torch" | "gpuprobe"));
    let rest: Vec<&str> = parts.collect();
    root_ok
        && !rest.is_empty()
        && rest.iter().all(|part| {
            !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Whether `name` is a switch of gpuprobe's own probes (`gpuprobe.*`): a cure by it proves
/// a code change and is never applied to a job.
pub fn is_probe_side_switch(name: &str) -> bool {
    is_switch_name(name) && name.starts_with("gpuprobe.")
}

/// The value of [`SWITCHES_VARIABLE`] for these switches (`None` when there are none).
pub fn switches_value<'a>(
    switches: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<String> {
    let pairs: Vec<String> = switches
        .into_iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    (!pairs.is_empty()).then(|| pairs.join(";"))
}

/// A process setting change: set `variable` to `value`, or remove it (`value` absent).
/// `variable` is an environment variable, or a framework switch ([`is_switch_name`]).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct SettingChange {
    /// The environment variable.
    pub variable: String,
    /// The value to set; absent means "run without the variable".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl SettingChange {
    /// Set `variable` to `value`.
    pub fn set(variable: impl Into<String>, value: impl Into<String>) -> Self {
        SettingChange {
            variable: variable.into(),
            value: Some(value.into()),
        }
    }

    /// Remove `variable`.
    pub fn unset(variable: impl Into<String>) -> Self {
        SettingChange {
            variable: variable.into(),
            value: None,
        }
    }

    /// Parses the catalogue's spelling: `NAME=VALUE` sets, a bare `NAME` (or `-NAME`,
    /// `unset NAME`) removes.
    pub fn parse(text: &str) -> SettingChange {
        let text = text.trim();
        match text.split_once('=') {
            Some((name, value)) => SettingChange::set(name.trim(), value.trim()),
            None => {
                let name = text
                    .strip_prefix("unset ")
                    .or_else(|| text.strip_prefix('-'))
                    .unwrap_or(text);
                SettingChange::unset(name.trim())
            }
        }
    }

    /// Whether this is a framework switch ([`is_switch_name`]), not an environment variable.
    pub fn is_switch(&self) -> bool {
        is_switch_name(&self.variable)
    }

    /// Whether this is a switch of gpuprobe's own probes ([`is_probe_side_switch`]).
    pub fn is_probe_side(&self) -> bool {
        is_probe_side_switch(&self.variable)
    }

    /// `NAME=VALUE` or `unset NAME`.
    pub fn describe(&self) -> String {
        match &self.value {
            Some(value) => format!("{}={value}", self.variable),
            None => format!("unset {}", self.variable),
        }
    }
}

impl std::fmt::Display for SettingChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// One probe on one device.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ProbeRef {
    /// The probe.
    pub probe: ProbeId,
    /// The device.
    pub device: DeviceRef,
}

impl std::fmt::Display for ProbeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {}", self.probe, self.device)
    }
}

/// A probe result that went wrong under a setting: which probe, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeOutcomeRef {
    /// The probe and device.
    #[serde(flatten)]
    pub at: ProbeRef,
    /// Verdict label (`FAIL`, `CRASH`, ...).
    pub verdict: String,
    /// The verdict's one-line detail.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// What became of one failure the search set out to cure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetStatus {
    /// The chosen settings cure it, verified.
    Cured,
    /// Nothing tried cures it.
    NotCured,
    /// It did not reproduce when re-run: no cure can be proven.
    Flaky,
}

impl TargetStatus {
    /// Lowercase words for tables.
    pub fn describe(self) -> &'static str {
        match self {
            TargetStatus::Cured => "cured",
            TargetStatus::NotCured => "not cured",
            TargetStatus::Flaky => "did not reproduce",
        }
    }
}

/// One failing probe of the starting run, and what the search made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FixTarget {
    /// The failure as first seen.
    #[serde(flatten)]
    pub failure: ProbeOutcomeRef,
    /// The outcome of the search.
    pub status: TargetStatus,
    /// Settings proven to cure it (each entry one option: a single setting or a group
    /// joined with ` + `).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cured_by: Vec<String>,
    /// Settings that cured it but were rejected, with why (`HSA_ENABLE_SDMA=0: breaks
    /// copy.d2d.medium.clone on cpu`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
}

/// One candidate setting tried alone (or not tried, and why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CandidateTrial {
    /// The setting.
    pub setting: SettingChange,
    /// What it is (catalogue or KB title).
    pub title: String,
    /// Knowledge-base and catalogue ids that name it.
    #[serde(default)]
    pub sources: Vec<String>,
    /// What applying it costs.
    #[serde(default)]
    pub cost: Cost,
    /// Whether it was run.
    pub tried: bool,
    /// Why it was not run, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_tried_because: Option<String>,
    /// Failures it cured alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cured: Vec<ProbeRef>,
    /// Passing sentinel probes it broke (a candidate that breaks one is rejected).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broke: Vec<ProbeOutcomeRef>,
    /// Failures it made worse (a wrong result became a crash or hang).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worsened: Vec<ProbeOutcomeRef>,
    /// Failures it cured in part: an operator-sweep probe whose failing cases it removed
    /// while others (another bug of the same operator) still fail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partly_cured: Vec<PartialCure>,
    /// Wall time of its trial, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
}

/// Cases of one failing probe that a setting cured while the probe still fails on others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PartialCure {
    /// The probe and device.
    #[serde(flatten)]
    pub at: ProbeRef,
    /// The cases that passed with the setting (`channels_last backward sample 1 grad[0]`).
    pub cured_cases: Vec<String>,
    /// The cases that still failed with it.
    pub still_failing: Vec<String>,
}

/// One combination found (or attempted) by the group search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GroupTrial {
    /// The settings, together.
    pub settings: Vec<SettingChange>,
    /// Failures they cure together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cured: Vec<ProbeRef>,
    /// Sentinels they break together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broke: Vec<ProbeOutcomeRef>,
    /// Whether this is the minimal set the search narrowed to (as opposed to the
    /// all-candidates starting point).
    pub minimal: bool,
    /// Trials this step used.
    pub runs: u32,
    /// What it means, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// A change that is reported, never applied: kernel parameters, firmware, upgrades, code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReportedChange {
    /// What to do, in words.
    pub description: String,
    /// `kernel_param`, `firmware`, `upgrade`, `downgrade`, `code_change`, `other`.
    pub kind: String,
    /// The setting or command-line token, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<String>,
    /// Its cost.
    #[serde(default)]
    pub cost: Cost,
    /// Knowledge-base and catalogue ids that name it.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// The final run with the chosen settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verification {
    /// The settings verified.
    pub settings: Vec<SettingChange>,
    /// Whether every failure they were chosen for passed and no sentinel broke.
    pub passed: bool,
    /// Failures that passed.
    #[serde(default)]
    pub cured: Vec<ProbeRef>,
    /// Failures that still failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub still_failing: Vec<ProbeOutcomeRef>,
    /// Sentinels that broke.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broke: Vec<ProbeOutcomeRef>,
}

/// A throughput figure with and without the chosen settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MetricCost {
    /// The probe that reported it.
    pub probe: ProbeId,
    /// The metric (`gb_per_s`, `h2d_gbps`, ...).
    pub metric: String,
    /// Without the settings.
    pub without: f64,
    /// With the settings.
    pub with: f64,
}

/// What the chosen settings cost, measured with and without them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CostMeasurement {
    /// What was measured, honestly ("the 9 sentinel probes were timed: the catalogue has
    /// no throughput probe").
    pub method: String,
    /// The probes timed.
    pub probes: Vec<ProbeRef>,
    /// Their summed run time without the settings, seconds.
    pub without_s: f64,
    /// With the settings, seconds.
    pub with_s: f64,
    /// Throughput metrics the timed probes reported, with and without.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricCost>,
}

impl CostMeasurement {
    /// `with_s / without_s` (1.0 when nothing was timed).
    pub fn slowdown(&self) -> f64 {
        if self.without_s > 0.0 {
            self.with_s / self.without_s
        } else {
            1.0
        }
    }

    /// One line for people and profiles.
    pub fn summary(&self) -> String {
        let percent = (self.slowdown() - 1.0) * 100.0;
        let mut line = format!(
            "{:.2} s without, {:.2} s with ({:+.0}%) over {} probe run(s)",
            self.without_s,
            self.with_s,
            percent,
            self.probes.len()
        );
        for metric in self.metrics.iter().take(3) {
            line.push_str(&format!(
                "; {} {} {:.3} → {:.3}",
                metric.probe, metric.metric, metric.without, metric.with
            ));
        }
        line
    }
}

/// How many trials the search used.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct RunBudget {
    /// The limit (`--max-runs`).
    pub max_runs: u32,
    /// Trials run (each a fresh set of workers with one set of settings).
    pub trials: u32,
    /// Worker processes started across all trials (a crash restarts a worker).
    pub workers: u32,
    /// Whether the search stopped because the budget ran out.
    pub exhausted: bool,
}

/// The overall result of a workaround search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FixOutcome {
    /// Every probe passed: nothing to fix.
    NothingToFix,
    /// Every reproducible failure is cured by the chosen settings, verified.
    AllCured,
    /// Some failures are cured; others remain.
    PartlyCured,
    /// Candidates were tried; none cured anything.
    NoneCured,
    /// The failures did not reproduce when re-run (intermittent): nothing to prove a cure on.
    NotReproduced,
    /// Failures exist, but nothing testable applies (or nothing could be run).
    NothingTestable,
}

impl FixOutcome {
    /// A few words for the terminal.
    pub fn describe(self) -> &'static str {
        match self {
            FixOutcome::NothingToFix => "nothing to fix",
            FixOutcome::AllCured => "every reproducible failure cured",
            FixOutcome::PartlyCured => "some failures cured, some remain",
            FixOutcome::NoneCured => "no candidate cured anything",
            FixOutcome::NotReproduced => "the failures did not reproduce",
            FixOutcome::NothingTestable => "nothing testable",
        }
    }
}

/// The whole account of a `gpuprobe fix` run: what was tried, what cured what, what
/// broke a sentinel, what is still broken, and what needs root, a reboot or a code change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FixAccount {
    /// gpuprobe version.
    pub tool_version: String,
    /// The commit and knowledge-base revision of that gpuprobe (absent in accounts made
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::build_info::BuildInfo>,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Whether the search ran under fault simulation (every result is then SIMULATED).
    pub simulated: bool,
    /// The simulation source (preset names or file), when simulated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulation: Option<String>,
    /// The fix's run directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<String>,
    /// The run whose failures were the starting point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_run: Option<String>,
    /// The stack the search ran on.
    pub stack: StackKey,
    /// The failures set out to cure, and what became of each.
    #[serde(default)]
    pub targets: Vec<FixTarget>,
    /// Passing probes re-run in every trial to catch a cure that breaks something else.
    #[serde(default)]
    pub sentinels: Vec<ProbeRef>,
    /// Every candidate, tried alone or not.
    #[serde(default)]
    pub candidates: Vec<CandidateTrial>,
    /// Combinations from the group search.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupTrial>,
    /// The settings chosen (the smallest set covering every curable failure).
    #[serde(default)]
    pub chosen: Vec<SettingChange>,
    /// The final run with the chosen settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// The measured cost of the chosen settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostMeasurement>,
    /// Changes reported, never applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reported: Vec<ReportedChange>,
    /// Trials used against the budget.
    pub budget: RunBudget,
    /// The overall result.
    pub outcome: FixOutcome,
    /// The exit status it earns (docs/exit-codes.md).
    pub exit_status: ExitStatus,
    /// The numeric exit code.
    pub exit_code: u8,
    /// Where the profile was written, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Remarks about the search.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl FixAccount {
    /// The outcome in a few words, as the targets bear it out: a partly cured search
    /// whose uncured targets all did not reproduce says so (nothing "remains" failing:
    /// the profile's `still_failing` is empty, and those targets are under `flaky`).
    pub fn outcome_words(&self) -> &'static str {
        let none_left_failing = self
            .targets
            .iter()
            .all(|t| t.status != TargetStatus::NotCured);
        if self.outcome == FixOutcome::PartlyCured && none_left_failing {
            "some failures cured; the others did not reproduce, so no cure could be proven"
        } else {
            self.outcome.describe()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_names_are_dotted_python_paths_under_torch_or_gpuprobe() {
        for name in [
            "torch.backends.cuda.enable_cudnn_sdp",
            "torch._inductor.config.triton.cudagraphs",
            "gpuprobe.inputs.contiguous",
        ] {
            assert!(is_switch_name(name), "{name}");
        }
        for name in [
            "HSA_ENABLE_SDMA",
            "torch",
            "torch.",
            "torch..x",
            "numpy.x",
            "torch.1x",
            "torch.x;y",
            "torch.x=y",
            "torch.backends.cudnn.enabled ",
        ] {
            assert!(!is_switch_name(name), "{name}");
        }
        assert!(is_probe_side_switch("gpuprobe.inputs.contiguous"));
        assert!(!is_probe_side_switch("torch.backends.cudnn.enabled"));
        assert!(SettingChange::set("torch.backends.cudnn.enabled", "False").is_switch());
        assert!(!SettingChange::set("HSA_ENABLE_SDMA", "0").is_switch());
        assert_eq!(
            switches_value([("torch.a.b", "False"), ("torch.c", "True")]).as_deref(),
            Some("torch.a.b=False;torch.c=True")
        );
        assert_eq!(switches_value([]), None);
    }

    #[test]
    fn stack_differences_name_each_fact() {
        let proven = StackKey {
            gpus: vec!["gfx1151".into()],
            kernel: Some("6.17.0-19-generic".into()),
            driver: None,
            runtime: Some("7.2.0".into()),
            torch: Some("2.11.0+rocm7.2".into()),
        };
        assert!(proven.differences(&proven.clone()).is_empty());
        let here = StackKey {
            gpus: vec!["gfx1100".into()],
            kernel: Some("6.18.4".into()),
            driver: Some("x".into()),
            runtime: None,
            torch: Some("2.11.0+rocm7.2".into()),
        };
        let diffs = proven.differences(&here);
        assert_eq!(diffs.len(), 3, "{diffs:?}");
        assert!(diffs[0].contains("gfx1151") && diffs[0].contains("gfx1100"));
        assert!(diffs[1].contains("6.17.0-19-generic") && diffs[1].contains("6.18.4"));
        assert!(diffs[2].contains("unknown on this machine"));
    }

    #[test]
    fn gpu_order_does_not_matter() {
        let a = StackKey {
            gpus: vec!["gfx1100".into(), "gfx1036".into()],
            ..Default::default()
        };
        let b = StackKey {
            gpus: vec!["gfx1036".into(), "gfx1100".into()],
            ..Default::default()
        };
        assert!(a.differences(&b).is_empty());
    }

    #[test]
    fn setting_change_spellings() {
        assert_eq!(
            SettingChange::parse("HSA_ENABLE_SDMA=0"),
            SettingChange::set("HSA_ENABLE_SDMA", "0")
        );
        for text in [
            "HSA_OVERRIDE_GFX_VERSION",
            "-HSA_OVERRIDE_GFX_VERSION",
            "unset HSA_OVERRIDE_GFX_VERSION",
        ] {
            assert_eq!(
                SettingChange::parse(text),
                SettingChange::unset("HSA_OVERRIDE_GFX_VERSION")
            );
        }
        assert_eq!(
            SettingChange::parse("PYTORCH_ALLOC_CONF=max_split_size_mb:512").describe(),
            "PYTORCH_ALLOC_CONF=max_split_size_mb:512"
        );
    }

    #[test]
    fn profile_reads_the_minimal_format() {
        let profile: Profile = serde_json::from_str(
            r#"{"profile_version":1,"created_by":"gpuprobe 0.1.0","created_at":"2026-11-22T10:00:00Z",
                "env":{"HSA_ENABLE_SDMA":"0"},"proven_on":{"gpus":["gfx1100"]}}"#,
        )
        .unwrap();
        assert!(profile.unset.is_empty() && profile.settings.is_empty() && !profile.simulated);
        assert_eq!(profile.env["HSA_ENABLE_SDMA"], "0");
    }
}
