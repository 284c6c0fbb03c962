//! Probe specifications: what a probe is, where it runs and which rule judges it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A stable probe identifier of the form `family.case.variant` (more dots allowed),
/// e.g. `copy.h2d.pageable.tiny.nonblocking`.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct ProbeId(pub String);

impl ProbeId {
    /// Wraps a string as a probe id.
    pub fn new(id: impl Into<String>) -> Self {
        ProbeId(id.into())
    }

    /// The family: the part before the first dot.
    pub fn family(&self) -> &str {
        self.0.split('.').next().unwrap_or(&self.0)
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProbeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How much work a run does. Each tier includes every tier below it (except `soak`, which
/// repeats a chosen set).
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
pub enum Tier {
    /// Seconds: the probes that catch the common silent failures.
    Quick,
    /// Every family, typical and threshold sizes.
    Standard,
    /// Adds the large cases (index-width boundaries, ≥ 1 GiB buffers).
    Full,
    /// Repeats probes cold and after sustained load.
    Soak,
}

impl Tier {
    /// Whether a probe declared at `probe_tier` runs when the user asked for `self`. The
    /// soak tier runs the quick and standard probes and its own (sustained load, the full
    /// VRAM test), not the large cases of `full`.
    pub fn includes(self, probe_tier: Tier) -> bool {
        match self {
            Tier::Soak => probe_tier <= Tier::Standard || probe_tier == Tier::Soak,
            _ => probe_tier <= self,
        }
    }

    /// The tier's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Quick => "quick",
            Tier::Standard => "standard",
            Tier::Full => "full",
            Tier::Soak => "soak",
        }
    }
}

/// The layer of the stack a probe exercises; failures are attributed to the lowest layer
/// where they appear.
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
pub enum Layer {
    /// L0: kernel, driver, firmware, module parameters, IOMMU.
    System,
    /// L1: native CUDA/HIP copies, memory and kernels.
    Runtime,
    /// L2: PyTorch operations.
    Framework,
    /// L3: DataLoader workers, Accelerate, serialization.
    Pipeline,
    /// L4: the user's own job.
    Job,
}

impl Layer {
    /// Short lowercase name used in tables.
    pub fn name(self) -> &'static str {
        match self {
            Layer::System => "system",
            Layer::Runtime => "runtime",
            Layer::Framework => "framework",
            Layer::Pipeline => "pipeline",
            Layer::Job => "job",
        }
    }
}

/// Which worker runs a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// The Python worker, inside the user's interpreter (PyTorch probes).
    Python,
    /// The gpuprobe binary re-executed as a worker (CUDA driver / HIP runtime probes).
    Native,
}

impl Backend {
    /// Its name in plans, reports and logs (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Python => "python",
            Backend::Native => "native",
        }
    }
}

/// The rule that turns a probe's observation into a verdict. Judging happens in Rust
/// (crate `gpuprobe-doctor`); the probe only declares which rule applies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Rule {
    /// Every compared element must be bit-identical to the reference.
    BitExact,
    /// Elements must agree with a float64 reference within the documented tolerance of
    /// `dtype` (see `docs/probes.md`); `scale` widens it for reductions over many terms.
    Tolerance {
        /// The dtype whose tolerance applies (`float32`, `float16`, `bfloat16`, ...).
        dtype: String,
        /// Multiplier on the dtype tolerance (1.0 for elementwise math).
        #[serde(default = "one")]
        scale: f64,
    },
    /// Sample statistics must be consistent with the named distribution at a false-alarm
    /// rate below `alpha` (the judge derives every threshold from `n` and `alpha`).
    Statistical {
        /// Total false-alarm probability budget for the probe.
        #[serde(default = "default_alpha")]
        alpha: f64,
    },
    /// A property that must hold exactly (a permutation is a permutation, values lie in range,
    /// seeded runs repeat); any violation fails.
    Invariant,
    /// The probe only measures (bandwidth, timings); it passes when it ran.
    Measure,
    /// The operator sweep: the probe judged each case against its float64 reference with
    /// the sweep's documented oracles (`docs/probes.md`, "sweep") and reports the failure
    /// classes it counted; any wrong value fails, a device error where the reference
    /// computes is an error.
    Sweep,
}

fn one() -> f64 {
    1.0
}

/// The value of the longest entry of `table` that is a whole-part prefix of the probe id `id`
/// (`nn.sdpa` covers `nn.sdpa.bf16` and `nn.sdpa`, not `nn.sdpax`): how per-prefix tables
/// (typical seconds, first-use seconds) are read.
pub fn longest_prefix_value(table: &[(&str, f64)], id: &str) -> Option<f64> {
    table
        .iter()
        .filter(|(prefix, _)| {
            id.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, value)| *value)
}

/// Default false-alarm budget of a statistical probe (issue: below 1e-9).
pub(crate) fn default_alpha() -> f64 {
    1e-10
}

/// Everything the engine needs to plan, run and judge a probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeSpec {
    /// Stable id, `family.case.variant`.
    pub id: ProbeId,
    /// Lowest tier that runs it.
    pub tier: Tier,
    /// Stack layer it exercises.
    pub layer: Layer,
    /// How its observation is judged.
    pub rule: Rule,
    /// Which worker runs it.
    pub backend: Backend,
    /// Wall-clock limit for one run of the probe, in seconds (excluding worker start-up).
    pub timeout_s: f64,
    /// One line saying what it checks.
    pub description: String,
    /// Capabilities it needs (`multi_gpu`, `accelerate`, `safetensors`, `fp8`, ...); the
    /// worker reports SKIP with a reason when one is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Whether the probe needs a worker process of its own (large or risky cases).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub isolated: bool,
    /// How the probe may share its device with other probes running at the same time.
    #[serde(default, skip_serializing_if = "Placement::is_default")]
    pub placement: Placement,
    /// The side lane a side probe runs in; absent means its family's lane. A family
    /// spreads over several lanes by naming them (the sweep's `sweep-1` … `sweep-N`, N by the host's cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Seconds one run of the probe typically takes on a warm machine, where its family
    /// knows it better than the engine's table by id prefix (the sweep's standard subset runs
    /// a fraction of the cases its full-tier probes of the same operators run). Only lanes
    /// are sized by it; absent: the engine's estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typical_s: Option<f64>,
    /// The native probe id prefix (`native.copy`) that covers the same operation one layer
    /// down, declared by the probe's family: when the family's probes fail, its native
    /// counterpart passing or failing places the failure above or at the runtime. Absent:
    /// the family has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_counterpart: Option<String>,
    /// The group the HTML report shows the probe's results in, where its family declares one
    /// other than its own name. Absent: the family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_group: Option<String>,
}

/// How a probe shares its device with the probes that run beside it. A device's probes
/// run in parallel lanes (the native lane, the main framework lane, a side lane); a probe
/// that fills device memory must not overlap with any of them.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// In its backend's main lane, beside the other lanes.
    #[default]
    Shared,
    /// In a side lane of its family, beside the main lane: it uses little device memory,
    /// and its time goes to work that overlaps well with other lanes (starting processes
    /// that import the framework, DataLoader workers, collective ranks, float64 references
    /// computed on the host).
    Side,
    /// Alone on the device, after every other probe on it has finished: it fills device
    /// memory or measures what is free.
    Exclusive,
    /// Alone on the device, before any other probe on it begins: it fills device memory
    /// while the other lanes' workers are still starting (a Python worker imports the
    /// framework for seconds before it touches the device), so nothing waits for it at the
    /// end. Meant for native probes, which start in milliseconds.
    First,
}

impl Placement {
    /// Its name in catalogs and reports (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Placement::Shared => "shared",
            Placement::Side => "side",
            Placement::Exclusive => "exclusive",
            Placement::First => "first",
        }
    }

    /// Whether its lane runs alone on the device (exclusive or first): never cut, never
    /// sharing a worker, not counted among the lanes side by side.
    pub fn alone(self) -> bool {
        matches!(self, Placement::Exclusive | Placement::First)
    }

    /// Whether this is the default placement (omitted in JSON).
    pub fn is_default(&self) -> bool {
        *self == Placement::Shared
    }
}

/// The device a probe runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema)]
#[schemars(with = "String")]
pub enum DeviceRef {
    /// The CPU as device under test: a self-test of the probes, and the device of fault
    /// simulation on machines without a GPU.
    Cpu,
    /// A GPU by its index as the framework enumerates it (`cuda:N` in PyTorch on both
    /// CUDA and ROCm builds).
    Gpu(u32),
}

impl DeviceRef {
    /// The PyTorch device string (`cpu`, `cuda:0`).
    pub fn torch_name(self) -> String {
        match self {
            DeviceRef::Cpu => "cpu".to_string(),
            DeviceRef::Gpu(i) => format!("cuda:{i}"),
        }
    }

    /// Parses `cpu`, `cuda:N`, `gpu:N` or a bare index.
    pub fn parse(s: &str) -> Option<DeviceRef> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("cpu") {
            return Some(DeviceRef::Cpu);
        }
        let index = s
            .strip_prefix("cuda:")
            .or_else(|| s.strip_prefix("gpu:"))
            .unwrap_or(s);
        index.parse().ok().map(DeviceRef::Gpu)
    }
}

impl fmt::Display for DeviceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceRef::Cpu => f.write_str("cpu"),
            DeviceRef::Gpu(i) => write!(f, "{i}"),
        }
    }
}

impl Serialize for DeviceRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.torch_name())
    }
}

impl<'de> Deserialize<'de> for DeviceRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        DeviceRef::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("not a device: {s:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_nest() {
        assert!(Tier::Quick.includes(Tier::Quick));
        assert!(!Tier::Quick.includes(Tier::Standard));
        assert!(Tier::Full.includes(Tier::Standard));
        assert!(Tier::Soak.includes(Tier::Quick));
        assert!(Tier::Soak.includes(Tier::Soak));
        assert!(!Tier::Soak.includes(Tier::Full));
        assert!(!Tier::Full.includes(Tier::Soak));
    }

    #[test]
    fn device_round_trips() {
        for d in [DeviceRef::Cpu, DeviceRef::Gpu(0), DeviceRef::Gpu(7)] {
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(serde_json::from_str::<DeviceRef>(&json).unwrap(), d);
        }
        assert_eq!(DeviceRef::parse("3"), Some(DeviceRef::Gpu(3)));
        assert_eq!(DeviceRef::parse("gpu"), None);
    }

    #[test]
    fn rule_json_shape() {
        let r: Rule = serde_json::from_str(r#"{"kind":"tolerance","dtype":"float16"}"#).unwrap();
        assert_eq!(
            r,
            Rule::Tolerance {
                dtype: "float16".into(),
                scale: 1.0
            }
        );
        let r: Rule = serde_json::from_str(r#"{"kind":"statistical"}"#).unwrap();
        assert_eq!(r, Rule::Statistical { alpha: 1e-10 });
    }
}
