//! A run's plan: what `plan.json` holds (the command, tier, patterns, devices, interpreter,
//! settings and every planned probe run), so that a resume, a re-plan, a repro and every
//! reader of a run directory share one type. Making the plan (selection, devices, spreading)
//! is the doctor's; reading and writing its file is the runner's run directory.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::probe::{DeviceRef, ProbeSpec, Tier};
use crate::profile;
use crate::protocol::SimulationSpec;

/// One planned probe run: a probe on a device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    /// The probe's spec at planning time.
    pub spec: ProbeSpec,
    /// The device.
    pub device: DeviceRef,
}

/// Process settings applied to every worker of a run (a profile, or a `fix` candidate).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Settings {
    /// Variables to set.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Variables to remove.
    #[serde(default)]
    pub unset: Vec<String>,
}

impl Settings {
    /// `KEY=VALUE` and `-KEY` strings, for result records.
    pub fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = self.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.extend(self.unset.iter().map(|k| format!("-{k}")));
        out
    }

    /// Whether nothing is changed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.unset.is_empty()
    }

    /// The environment a worker gets: the variables as they are, and the framework switches
    /// (dotted names, see [`profile::is_switch_name`]) folded into the one variable the
    /// worker reads them from, `GPUPROBE_SWITCHES` (`NAME=VALUE;...`); a switch is never
    /// removed, only set.
    pub fn worker_env(&self) -> (BTreeMap<String, String>, Vec<String>) {
        let (switches, variables): (Vec<_>, Vec<_>) = self
            .set
            .iter()
            .partition(|(name, _)| profile::is_switch_name(name));
        let mut env: BTreeMap<String, String> = variables
            .into_iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(value) =
            profile::switches_value(switches.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        {
            env.insert(profile::SWITCHES_VARIABLE.to_string(), value);
        }
        let unset = self
            .unset
            .iter()
            .filter(|name| !profile::is_switch_name(name))
            .cloned()
            .collect();
        (env, unset)
    }
}

/// The run's plan as stored in `plan.json`, enough to resume it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunPlan {
    /// gpuprobe version that made it.
    pub tool_version: String,
    /// The command.
    pub command: String,
    /// Tier.
    pub tier: Tier,
    /// `--only` patterns.
    #[serde(default)]
    pub only: Vec<String>,
    /// Devices asked for (`None`: every GPU torch sees).
    #[serde(default)]
    pub devices: Option<Vec<DeviceRef>>,
    /// The interpreter used.
    #[serde(default)]
    pub python: Option<String>,
    /// How it was chosen.
    #[serde(default)]
    pub python_chosen_by: Option<String>,
    /// Whether native probes were included.
    #[serde(default)]
    pub native: bool,
    /// Seed.
    pub seed: u64,
    /// Simulation, when active.
    #[serde(default)]
    pub simulate: Option<SimulationSpec>,
    /// Settings applied to workers.
    #[serde(default)]
    pub settings: Settings,
    /// Options passed to the probes (`soak_seconds`).
    #[serde(default)]
    pub options: BTreeMap<String, serde_json::Value>,
    /// Every planned (probe, device).
    pub tasks: Vec<Task>,
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// The GPUs planned up front and the stack probes spread over identical ones; absent:
    /// GPU 0 planned, the others added when its worker says how many there are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<SpreadPlan>,
}

/// How a run spreads: every GPU torch listed before the plan was made (all planned up
/// front), and the groups of identical ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpreadPlan {
    /// Every GPU listed, by index, ascending: each is planned.
    pub gpus: Vec<u32>,
    /// The groups of two or more identical GPUs, each spreading the stack's probes over its
    /// members.
    pub groups: Vec<SpreadGroup>,
}

/// GPUs torch reports as identical (same name, total memory and arch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpreadGroup {
    /// Their indices, ascending.
    pub gpus: Vec<u32>,
    /// Their name, as torch reports it.
    pub name: String,
}

impl SpreadPlan {
    /// The devices planned.
    pub fn devices(&self) -> Vec<DeviceRef> {
        self.gpus.iter().map(|i| DeviceRef::Gpu(*i)).collect()
    }
}
