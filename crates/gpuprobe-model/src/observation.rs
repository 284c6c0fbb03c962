//! Observations: the facts a probe measured, before any judgement.
//!
//! Probes (Python or native) fill these in and stream them to the supervisor; the judge in
//! `gpuprobe-doctor` turns them into verdicts. Counts are exact integers; errors are floats.
//! Non-finite floats never appear in JSON: probes report NaN/Inf as counts, and example
//! values as strings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::probe::{DeviceRef, ProbeId};

/// One probe's measured facts on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Observation {
    /// The probe that measured it.
    pub probe: ProbeId,
    /// The device under test.
    pub device: DeviceRef,
    /// The measurement its rule judges.
    pub measurement: Measurement,
    /// Key numbers for the report that the rule does not use (bytes moved, GB/s, sizes,
    /// methods tried); free-form but flat.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, serde_json::Value>,
    /// Short notes (warnings a library printed, the backend that was used, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// A digest of the probe's exact outputs, for comparing nodes of one stack with each
    /// other (`gpuprobe fleet`). Present only for a probe whose inputs are fixed by the seed
    /// and whose outputs came out bitwise the same when computed twice on this device;
    /// otherwise absent, and a note says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_digest: Option<Box<OutputDigest>>,
}

/// The digest of a probe's exact outputs: their bytes, dtypes and shapes, hashed. Two
/// devices of one stack (same GPU model, driver, framework and libraries) running the same
/// deterministic probe from the same seed are expected to produce the same digest; a device
/// whose digest differs from its identical peers' computed different bits, even when each
/// value passed its tolerance.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutputDigest {
    /// The hash, as short lowercase hex (16 digits: the first 64 bits of a SHA-256).
    pub value: String,
    /// The seed the inputs were made from (digests of different seeds are never compared).
    pub seed: u64,
    /// How many output tensors it covers.
    pub outputs: u64,
    /// On the CPU device: the threads the framework computed with. A CPU reduction is split
    /// by thread, so its bits depend on the count; digests of different counts are never
    /// compared. Absent on a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_threads: Option<u32>,
}

/// What was measured, by kind of rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Measurement {
    /// Output compared element by element with a reference (bit-exact or with tolerance).
    Compare(CompareStats),
    /// Summary statistics of random samples.
    Stats(SampleStats),
    /// Exact properties checked.
    Invariant(InvariantCheck),
    /// Only measured quantities (see `Observation::metrics`).
    Metrics,
    /// One operator of the sweep in one dtype, case by case.
    Sweep(Box<SweepStats>),
}

/// What one sweep probe (an operator of PyTorch's database in one dtype) saw over its cases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepStats {
    /// The database entry's operator name.
    pub op: String,
    /// The entry's variant (empty for the plain entry).
    #[serde(default)]
    pub variant_test_name: String,
    /// The dtype of the inputs.
    pub dtype: String,
    /// `value`, `structure` or `shape` (which oracle judged the outputs).
    #[serde(default)]
    pub oracle: String,
    /// Cases judged (a case: one sample, one input transform, one direction).
    pub cases: u64,
    /// Cases that were right (including inputs both sides reject).
    pub passed: u64,
    /// Wrong cases by class: `wrong_value`, `nonfinite_invented`, `nan_lost`, `structure`.
    #[serde(default)]
    pub failed: BTreeMap<String, u64>,
    /// Cases where the device raised while the reference computed.
    #[serde(default)]
    pub device_errors: u64,
    /// Cases where the device returned values for an input the CPU rejects (reported, not
    /// counted as wrong math).
    #[serde(default)]
    pub invalid_accepted: u64,
    /// Cases where an argument check of the device's kernel refused an input the CPU
    /// computes (a contiguity or shape requirement): reported, neither wrong math nor an
    /// error of the device's stack.
    #[serde(default)]
    pub refused: u64,
    /// Cases where a NaN or infinity in the input of a decomposition or solver came back as
    /// finite numbers (an output whose reference holds NaN/Inf is entirely finite: it looks
    /// valid but is meaningless): reported, not counted as wrong math, since no linear-algebra
    /// library promises to propagate NaN.
    #[serde(default)]
    pub nonfinite_swallowed: u64,
    /// Cases not judged, by reason (no float64 reference, the reference crashed, ...).
    #[serde(default)]
    pub unjudged: BTreeMap<String, u64>,
    /// The first wrong cases.
    #[serde(default)]
    pub failures: Vec<SweepFailure>,
    /// The first device errors.
    #[serde(default)]
    pub errors: Vec<SweepError>,
}

/// One wrong case of a sweep probe.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepFailure {
    /// The failure class.
    #[serde(rename = "class")]
    pub class: String,
    /// The input transform (`base`, `noncontig`, `nan`, ...).
    pub variant: String,
    /// `forward` or `backward`.
    pub direction: String,
    /// The sample's index in the database's generator.
    pub sample: u64,
    /// Which output (`out[i]`) or gradient (`grad[i]`).
    pub output: String,
    /// What differs, in words.
    pub detail: String,
    /// The first differing element's position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<Vec<u64>>,
    /// The reference's value there.
    #[serde(default)]
    pub expected: String,
    /// The device's value there.
    #[serde(default)]
    pub found: String,
    /// Every wrong element is zero.
    #[serde(default)]
    pub zeros: bool,
    /// The whole output is zero where the reference is not.
    #[serde(default)]
    pub all_zero: bool,
    /// Wrong elements, of `elements`.
    #[serde(default)]
    pub bad_elements: u64,
    /// Elements compared.
    #[serde(default)]
    pub elements: u64,
    /// Largest absolute error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_err: Option<f64>,
    /// The bound at the reported element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<f64>,
}

/// A device error in a sweep case.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepError {
    /// The input transform.
    pub variant: String,
    /// `forward` or `backward`.
    pub direction: String,
    /// The sample's index.
    pub sample: u64,
    /// The exception type and first line.
    pub message: String,
}

/// Element-wise comparison of an output with its reference, over all trials.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareStats {
    /// Elements compared, over all trials.
    pub n: u64,
    /// Elements that differ: bitwise for bit-exact rules; beyond the probe's own tolerance
    /// for tolerance rules (the judge re-checks with `max_abs_err`/`max_rel_err`).
    pub mismatches: u64,
    /// Output elements that are zero where the reference is not.
    #[serde(default)]
    pub zeros_where_nonzero: u64,
    /// Output elements that are NaN or ±Inf where the reference is finite.
    #[serde(default)]
    pub nonfinite_where_finite: u64,
    /// Output elements still holding the canary the output was pre-filled with
    /// (the operation did not write them).
    #[serde(default)]
    pub unchanged: u64,
    /// Number of trials (repetitions, threads × iterations, ...).
    #[serde(default = "one")]
    pub trials: u64,
    /// Trials with at least one mismatching element.
    #[serde(default)]
    pub failed_trials: u64,
    /// Trials whose output was entirely zero while the reference was not.
    #[serde(default)]
    pub all_zero_trials: u64,
    /// Largest absolute error against the reference (finite elements only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_err: Option<f64>,
    /// Largest error relative to the reference's scale (finite elements only); how the scale
    /// is taken is the probe's documented choice (usually max |reference|).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rel_err: Option<f64>,
    /// Largest distance in units in the last place, where the probe computes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ulp: Option<u64>,
    /// The first mismatching element, for the report and the repro.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_mismatch: Option<MismatchExample>,
}

fn one() -> u64 {
    1
}

/// One element that differed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MismatchExample {
    /// Flat index in the output (and trial number, when there were several).
    pub index: u64,
    /// Trial in which it was seen.
    #[serde(default)]
    pub trial: u64,
    /// Reference value as text (value and, for floats, hex bits).
    pub expected: String,
    /// Output value as text.
    pub found: String,
}

/// The distribution random samples should follow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Distribution {
    /// Normal with the given mean and standard deviation.
    Normal {
        /// Expected mean.
        mean: f64,
        /// Expected standard deviation.
        std: f64,
    },
    /// Continuous uniform on `[low, high)`.
    Uniform {
        /// Lower bound (inclusive).
        low: f64,
        /// Upper bound (exclusive).
        high: f64,
    },
    /// Discrete uniform on the integers `low..high`.
    UniformInt {
        /// Lower bound (inclusive).
        low: i64,
        /// Upper bound (exclusive).
        high: i64,
    },
}

/// Summary statistics of `n` random samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SampleStats {
    /// The distribution the generator was asked for.
    pub distribution: Distribution,
    /// The dtype the samples were generated in.
    pub dtype: String,
    /// Number of samples.
    pub n: u64,
    /// Sample mean (finite samples, computed in float64).
    pub mean: f64,
    /// Sample variance (unbiased, float64).
    pub var: f64,
    /// Smallest finite sample.
    pub min: f64,
    /// Largest finite sample.
    pub max: f64,
    /// Samples exactly equal to zero.
    pub zeros: u64,
    /// NaN or ±Inf samples.
    pub nonfinite: u64,
    /// Samples outside the distribution's support (uniform bounds).
    #[serde(default)]
    pub out_of_range: u64,
    /// Probability of one sample being exactly zero in this dtype if the generator is right
    /// (the probe computes it from the dtype's representable values); the judge turns it into
    /// a binomial bound.
    #[serde(default)]
    pub p_zero: f64,
    /// Pearson chi-square statistic over equiprobable bins, when computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chi2: Option<f64>,
    /// Degrees of freedom of `chi2` (bins − 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chi2_dof: Option<u64>,
}

/// Exact properties that were checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InvariantCheck {
    /// What was checked, in a few words ("is a permutation of 0..n").
    pub property: String,
    /// Number of items (elements, trials) checked.
    pub checked: u64,
    /// Items that violated the property.
    pub violations: u64,
    /// Of the violations, how many were zeros where a non-zero value was required.
    #[serde(default)]
    pub zero_violations: u64,
    /// An example violation, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}
