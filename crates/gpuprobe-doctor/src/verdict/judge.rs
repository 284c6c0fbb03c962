//! The judge: turns a probe's observation into a verdict by the probe's declared rule.
//!
//! Judging lives here and only here, so it is testable on recorded observations and the
//! same facts always get the same verdict. Every threshold is derived from the sample size
//! and the false-alarm budget, as documented in `docs/probes.md` ("Judging"):
//!
//! - bit-exact: any differing element fails; the failure is classified (all zeros, partial
//!   zeros, NaN/Inf, unchanged output, mismatch) because each class points to a different
//!   kind of bug;
//! - tolerance: the normwise relative error against a float64 reference must stay within
//!   the dtype's tolerance ([`dtype_tolerance`]) times the probe's scale;
//! - statistical: mean, variance, zero count and a chi-square statistic are tested with
//!   bounds that hold exactly for any sample size (Chernoff, Hoeffding, Laurent–Massart),
//!   the false-alarm budget split evenly between the tests (Bonferroni);
//! - invariant: any violation fails.

use gpuprobe_model::{
    CompareStats, Distribution, InvariantCheck, Measurement, Observation, SampleStats, SweepStats,
};
use gpuprobe_model::{FailClass, Verdict};
use gpuprobe_model::{ProbeSpec, Rule};

/// Judges one observation against its probe's rule.
pub fn judge(spec: &ProbeSpec, observation: &Observation) -> Verdict {
    match (&spec.rule, &observation.measurement) {
        (Rule::Measure, _) => Verdict::Pass,
        (Rule::BitExact | Rule::Invariant, Measurement::Compare(stats)) => judge_exact(stats),
        (Rule::Tolerance { dtype, scale }, Measurement::Compare(stats)) => {
            judge_tolerance(stats, dtype, *scale)
        }
        (Rule::Statistical { alpha }, Measurement::Stats(stats)) => judge_statistics(stats, *alpha),
        (Rule::Statistical { .. } | Rule::Invariant, Measurement::Invariant(check)) => {
            judge_invariant(check)
        }
        (Rule::Sweep, Measurement::Sweep(stats)) => judge_sweep(stats),
        (rule, measurement) => Verdict::Error {
            message: format!(
                "probe declares rule {} but reported a {} measurement (a bug in the probe)",
                rule_name(rule),
                measurement_name(measurement)
            ),
        },
    }
}

fn rule_name(rule: &Rule) -> &'static str {
    match rule {
        Rule::BitExact => "bit_exact",
        Rule::Tolerance { .. } => "tolerance",
        Rule::Statistical { .. } => "statistical",
        Rule::Invariant => "invariant",
        Rule::Measure => "measure",
        Rule::Sweep => "sweep",
    }
}

fn measurement_name(measurement: &Measurement) -> &'static str {
    match measurement {
        Measurement::Compare(_) => "compare",
        Measurement::Stats(_) => "stats",
        Measurement::Invariant(_) => "invariant",
        Measurement::Metrics => "metrics",
        Measurement::Sweep(_) => "sweep",
    }
}

/// The sweep's verdict: wrong values fail (the class of the first wrong case, all-zero and
/// zero-only outputs told apart), a device error where the reference computes is an
/// error, a probe that judged no case is not tested (with the reasons), everything else passes (inputs the device accepts and the CPU rejects, a NaN
/// that a decomposition turned into finite numbers, and cases without a usable reference,
/// are counted and named in the observation's notes).
fn judge_sweep(stats: &SweepStats) -> Verdict {
    let wrong: u64 = stats.failed.values().sum();
    let label = if stats.variant_test_name.is_empty() {
        stats.op.clone()
    } else {
        format!("{}.{}", stats.op, stats.variant_test_name)
    };
    if let Some(first) = stats.failures.first().filter(|_| wrong > 0) {
        let class = match first.class.as_str() {
            "nonfinite_invented" => FailClass::NanInf,
            _ if first.all_zero => FailClass::AllZeros,
            _ if first.zeros => FailClass::PartialZeros,
            _ => FailClass::Mismatch,
        };
        let mut at = String::new();
        if let Some(index) = &first.index {
            let parts: Vec<String> = index.iter().map(u64::to_string).collect();
            at = format!("[{}]", parts.join(","));
        }
        let mut detail = format!(
            "{label} {} {} {} sample {}: {}{at} {} (reference {}): {}",
            stats.dtype,
            first.variant,
            first.direction,
            first.sample,
            first.output,
            first.found,
            first.expected,
            first.detail
        );
        if wrong > 1 {
            detail.push_str(&format!("; {wrong} of {} cases wrong", stats.cases));
        }
        return fail(class, detail);
    }
    if stats.device_errors > 0 {
        let first = stats.errors.first();
        let message = match first {
            Some(e) => format!(
                "{label} {} {} {} sample {}: the device raised where the CPU computes: {}",
                stats.dtype, e.variant, e.direction, e.sample, e.message
            ),
            None => format!(
                "{label} {}: the device raised where the CPU computes",
                stats.dtype
            ),
        };
        return Verdict::Error { message };
    }
    if stats.cases == 0 {
        // Nothing was compared: a PASS would say the operator was checked. Why not is in
        // the unjudged reasons (the CPU has no kernel for the reference, every case was
        // refused, the samples did not apply).
        let mut reasons: Vec<String> = stats
            .unjudged
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        if stats.refused > 0 {
            reasons.push(format!("refused {}", stats.refused));
        }
        let why = if reasons.is_empty() {
            String::from("no case applied")
        } else {
            reasons.join(", ")
        };
        return Verdict::NotTested {
            reason: format!("{label} {}: no case could be judged ({why})", stats.dtype),
        };
    }
    Verdict::Pass
}

fn fail(class: FailClass, detail: String) -> Verdict {
    Verdict::Fail { class, detail }
}

/// Classifies a comparison that has wrong elements. The order matters: non-finite values
/// are the most specific sign, then whole outputs of zeros, then zeros mixed with correct
/// values, then untouched outputs, then anything else.
fn classify(stats: &CompareStats) -> (FailClass, String) {
    let n = stats.n;
    if stats.nonfinite_where_finite > 0 {
        return (
            FailClass::NanInf,
            format!(
                "{} of {n} elements NaN/Inf where the reference is finite",
                stats.nonfinite_where_finite
            ),
        );
    }
    if stats.failed_trials > 0 && stats.all_zero_trials == stats.failed_trials {
        let detail = if stats.trials > 1 {
            format!(
                "{} of {} trials came back entirely zero",
                stats.all_zero_trials, stats.trials
            )
        } else {
            format!("the whole output ({n} elements)")
        };
        return (FailClass::AllZeros, detail);
    }
    if stats.mismatches > 0 && stats.zeros_where_nonzero == stats.mismatches {
        let trials = if stats.trials > 1 {
            format!(" in {} of {} trials", stats.failed_trials, stats.trials)
        } else {
            String::new()
        };
        return (
            FailClass::PartialZeros,
            format!(
                "{} of {n} elements zero where the reference is not{trials}",
                stats.zeros_where_nonzero
            ),
        );
    }
    if stats.mismatches > 0 && stats.unchanged == stats.mismatches {
        return (
            FailClass::Unchanged,
            format!(
                "{} of {n} elements still hold the prefilled canary (never written)",
                stats.unchanged
            ),
        );
    }
    let mut detail = format!(
        "{} of {n} elements differ",
        stats.mismatches.max(stats.failed_trials)
    );
    if stats.trials > 1 {
        detail.push_str(&format!(
            " ({} of {} trials)",
            stats.failed_trials, stats.trials
        ));
    }
    if let Some(first) = &stats.first_mismatch {
        detail.push_str(&format!(
            "; first at [{}]: expected {}, found {}",
            first.index, first.expected, first.found
        ));
    }
    (FailClass::Mismatch, detail)
}

fn judge_exact(stats: &CompareStats) -> Verdict {
    if stats.mismatches == 0 && stats.failed_trials == 0 && stats.nonfinite_where_finite == 0 {
        return Verdict::Pass;
    }
    let (class, detail) = classify(stats);
    fail(class, detail)
}

/// The dtype tolerance table, shared with the Python worker, whose probes compute the same
/// bound (the dtype's tolerance times their scale) to classify elements: one file, so the
/// two never disagree (`tests/python/test_tolerances.py` checks the Python side). The file
/// lives inside the Python package, which gpuprobe-runner embeds whole (its build.rs); the
/// crate's `tolerances.json` is a symlink to it, so that the crate's package carries it.
const TOLERANCES_JSON: &str = include_str!("../../tolerances.json");

/// `tolerances.json`: the base tolerance by dtype, and the short names rules may use.
#[derive(Debug, serde::Deserialize)]
struct ToleranceTable {
    dtype_tolerance: std::collections::BTreeMap<String, f64>,
    aliases: std::collections::BTreeMap<String, String>,
}

/// The table, parsed once; `None` only if the embedded file does not parse, which the
/// tests below rule out.
fn tolerance_table() -> Option<&'static ToleranceTable> {
    static TABLE: std::sync::LazyLock<Option<ToleranceTable>> =
        std::sync::LazyLock::new(|| serde_json::from_str(TOLERANCES_JSON).ok());
    TABLE.as_ref()
}

/// The normwise relative error (‖out − ref‖₂ / ‖ref‖₂) allowed for results computed in
/// `dtype`, against a float64 reference. Set well above honest rounding error so a healthy
/// GPU is never blamed, and far below what a broken kernel produces (zeros or garbage give
/// errors near 1). `tf32` is float32 math on tensor cores (PyTorch's default for
/// convolutions on NVIDIA). The values and the aliases (`fp32`, `fp16`, `bf16`, `fp64`,
/// `fp8_e4m3`, `fp8_e5m2`) come from `python/gpuprobe/worker/tolerances.json`.
pub(super) fn dtype_tolerance(dtype: &str) -> Option<f64> {
    let table = tolerance_table()?;
    let name = table.aliases.get(dtype).map_or(dtype, String::as_str);
    table.dtype_tolerance.get(name).copied()
}

fn judge_tolerance(stats: &CompareStats, dtype: &str, scale: f64) -> Verdict {
    let Some(base) = dtype_tolerance(dtype) else {
        return Verdict::Error {
            message: format!("no tolerance is defined for dtype {dtype:?} (a bug in the probe)"),
        };
    };
    let tolerance = base * scale;
    let rel = stats.max_rel_err;
    let within = rel.is_some_and(|r| r <= tolerance);
    if stats.nonfinite_where_finite == 0 && within && stats.unchanged == 0 {
        return Verdict::Pass;
    }
    if stats.nonfinite_where_finite > 0
        || stats.failed_trials > 0 && stats.all_zero_trials == stats.failed_trials
    {
        let (class, detail) = classify(stats);
        return fail(class, detail);
    }
    let rel_text = rel
        .map(|r| format!("{r:.3e}"))
        .unwrap_or_else(|| "unknown".into());
    let (class, detail) = if stats.mismatches > 0
        && (stats.zeros_where_nonzero == stats.mismatches || stats.unchanged == stats.mismatches)
    {
        classify(stats)
    } else {
        (
            FailClass::Mismatch,
            format!("{} of {} elements grossly wrong", stats.mismatches, stats.n),
        )
    };
    fail(
        class,
        format!(
            "{detail}; relative error {rel_text} exceeds the {dtype} tolerance {tolerance:.1e}"
        ),
    )
}

fn judge_invariant(check: &InvariantCheck) -> Verdict {
    if check.violations == 0 {
        return Verdict::Pass;
    }
    let example = check
        .example
        .as_deref()
        .map(|e| format!("; e.g. {e}"))
        .unwrap_or_default();
    let class = if check.zero_violations == check.violations {
        if check.violations == check.checked {
            FailClass::AllZeros
        } else {
            FailClass::PartialZeros
        }
    } else {
        FailClass::Mismatch
    };
    fail(
        class,
        format!(
            "{} of {} violate \"{}\"{example}",
            check.violations, check.checked, check.property
        ),
    )
}

/// Significand digits of a dtype (implicit bit included), for discretization allowances.
fn significand_digits(dtype: &str) -> u32 {
    match dtype {
        "float64" | "fp64" => 53,
        "float32" | "fp32" => 24,
        "float16" | "fp16" => 11,
        "bfloat16" | "bf16" => 8,
        "float8_e4m3fn" | "fp8_e4m3" => 4,
        "float8_e5m2" | "fp8_e5m2" => 3,
        _ => 53,
    }
}

/// The smallest count `k` with P(Binomial(n, p) ≥ k) ≤ `alpha`, by the Chernoff bound
/// P(X ≥ k) ≤ exp(−n·KL(k/n ‖ p)), which holds for every n.
pub(super) fn binomial_upper_threshold(n: u64, p: f64, alpha: f64) -> u64 {
    if n == 0 {
        return 0;
    }
    let p = p.clamp(0.0, 1.0);
    if p >= 1.0 {
        return n;
    }
    let target = -alpha.ln();
    let kl = |q: f64| -> f64 {
        // KL(q ‖ p) for Bernoulli; q > p.
        let a = if q > 0.0 { q * (q / p).ln() } else { 0.0 };
        let b = if q < 1.0 {
            (1.0 - q) * ((1.0 - q) / (1.0 - p)).ln()
        } else {
            0.0
        };
        a + b
    };
    if p == 0.0 {
        return 1;
    }
    let nf = n as f64;
    let mut lo = (nf * p).ceil() as u64; // bound is trivial at or below the mean
    let mut hi = n;
    if nf * kl(hi as f64 / nf) < target {
        return n; // even n successes are not rare enough: never fail on this count
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if mid as f64 / nf > p && nf * kl(mid as f64 / nf) >= target {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// Laurent–Massart bounds for a chi-square variable with `k` degrees of freedom:
/// P(X − k ≥ 2√(kx) + 2x) ≤ e^(−x) and P(k − X ≥ 2√(kx)) ≤ e^(−x). Returns the interval
/// outside which a value has probability at most `alpha` (each side ≤ alpha/2).
pub(super) fn chi_square_interval(k: f64, alpha: f64) -> (f64, f64) {
    let x = (2.0 / alpha).ln();
    let spread = 2.0 * (k * x).sqrt();
    ((k - spread).max(0.0), k + spread + 2.0 * x)
}

fn judge_statistics(stats: &SampleStats, alpha: f64) -> Verdict {
    let n = stats.n;
    if n == 0 {
        return Verdict::Error {
            message: "the probe drew no samples".into(),
        };
    }
    if stats.nonfinite > 0 {
        return fail(
            FailClass::NanInf,
            format!("{} of {n} samples are NaN/Inf", stats.nonfinite),
        );
    }
    if stats.out_of_range > 0 {
        return fail(
            FailClass::Mismatch,
            format!(
                "{} of {n} samples fall outside the distribution's range",
                stats.out_of_range
            ),
        );
    }
    // Probabilistic tests: zeros, mean, variance, and chi-square when reported.
    let tests = 3 + u32::from(stats.chi2.is_some());
    let alpha_each = alpha / f64::from(tests);
    let digits = significand_digits(&stats.dtype);
    let resolution = 2f64.powi(-(digits as i32));

    let zero_limit = binomial_upper_threshold(n, stats.p_zero, alpha_each);
    if stats.zeros >= zero_limit.max(1) && stats.zeros > 0 {
        let class = if stats.zeros == n {
            FailClass::AllZeros
        } else {
            FailClass::PartialZeros
        };
        return fail(
            class,
            format!(
                "{} of {n} samples are exactly 0 (a correct generator gives fewer than {zero_limit})",
                stats.zeros
            ),
        );
    }

    let nf = n as f64;
    let log_term = (2.0 / alpha_each).ln();
    let (mu, sigma2, mean_slack, var_interval, what) = match stats.distribution {
        Distribution::Normal { mean, std } => {
            let sigma2 = std * std;
            // The sample mean of normal samples is exactly normal: P(|Z| ≥ z) ≤ 2e^(−z²/2).
            let mean_slack = (2.0 * log_term).sqrt() * std / nf.sqrt() + std * resolution;
            // (n−1)s²/σ² is chi-square with n−1 degrees of freedom.
            let k = nf - 1.0;
            let (lo, hi) = chi_square_interval(k, alpha_each);
            let allowance = 2.0 * resolution;
            let interval = (
                sigma2 * (lo / k) * (1.0 - allowance),
                sigma2 * (hi / k) * (1.0 + allowance),
            );
            (
                mean,
                sigma2,
                mean_slack,
                interval,
                format!("N({mean}, {std}²)"),
            )
        }
        Distribution::Uniform { low, high } => uniform_bounds(
            low,
            high,
            (high - low).powi(2) / 12.0,
            nf,
            log_term,
            resolution,
            format!("U[{low}, {high})"),
        ),
        Distribution::UniformInt { low, high } => {
            let m = (high - low) as f64;
            uniform_bounds(
                low as f64,
                (high - 1) as f64,
                (m * m - 1.0) / 12.0,
                nf,
                log_term,
                0.0,
                format!("uniform integers {low}..{high}"),
            )
        }
    };
    if (stats.mean - mu).abs() > mean_slack {
        return fail(
            FailClass::Mismatch,
            format!(
                "sample mean {:.6} is off {what} by more than {mean_slack:.2e} (n = {n})",
                stats.mean
            ),
        );
    }
    // For the uniform cases the variance test uses the mean square about the true mean.
    let observed_var = match stats.distribution {
        Distribution::Normal { .. } => stats.var,
        _ => (nf - 1.0) / nf * stats.var + (stats.mean - mu).powi(2),
    };
    if observed_var < var_interval.0 || observed_var > var_interval.1 {
        return fail(
            FailClass::Mismatch,
            format!(
                "sample variance {observed_var:.6} outside [{:.6}, {:.6}] expected of {what} (σ² = {sigma2:.6}, n = {n})",
                var_interval.0, var_interval.1
            ),
        );
    }
    if let (Some(chi2), Some(dof)) = (stats.chi2, stats.chi2_dof) {
        let (_, hi) = chi_square_interval(dof as f64, alpha_each);
        if chi2 > hi {
            return fail(
                FailClass::Mismatch,
                format!(
                    "chi-square {chi2:.1} over {dof} degrees of freedom exceeds {hi:.1}: samples do not follow {what}"
                ),
            );
        }
    }
    Verdict::Pass
}

/// Mean and variance bounds for samples bounded in `[a, b]` (Hoeffding's inequality, which
/// holds for every n). The variance test uses the mean square about the true mean, each
/// term bounded by (b − a)²/4.
fn uniform_bounds(
    a: f64,
    b: f64,
    sigma2: f64,
    n: f64,
    log_term: f64,
    resolution: f64,
    what: String,
) -> (f64, f64, f64, (f64, f64), String) {
    let width = b - a;
    let mu = (a + b) / 2.0;
    let mean_slack = width * (log_term / (2.0 * n)).sqrt() + width * resolution;
    let var_slack =
        width * width / 4.0 * (log_term / (2.0 * n)).sqrt() + 2.0 * width * width * resolution;
    (
        mu,
        sigma2,
        mean_slack,
        (sigma2 - var_slack, sigma2 + var_slack),
        what,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::MismatchExample;
    use gpuprobe_model::{DeviceRef, ProbeId};

    fn spec(rule: Rule) -> ProbeSpec {
        ProbeSpec {
            rule,
            ..crate::test_support::spec("t.case")
        }
    }

    fn obs(measurement: Measurement) -> Observation {
        Observation {
            probe: ProbeId::new("t.case"),
            device: DeviceRef::Gpu(0),
            measurement,
            metrics: Default::default(),
            notes: vec![],
            output_digest: None,
        }
    }

    fn compare(f: impl FnOnce(&mut CompareStats)) -> Observation {
        let mut stats = CompareStats {
            n: 1000,
            trials: 10,
            ..Default::default()
        };
        f(&mut stats);
        obs(Measurement::Compare(stats))
    }

    #[test]
    fn exact_classes() {
        let exact = spec(Rule::BitExact);
        assert_eq!(judge(&exact, &compare(|_| {})), Verdict::Pass);
        let v = judge(
            &exact,
            &compare(|s| {
                s.mismatches = 200;
                s.zeros_where_nonzero = 200;
                s.failed_trials = 2;
                s.all_zero_trials = 2;
            }),
        );
        assert_eq!(v.fail_class(), Some(FailClass::AllZeros), "{v:?}");
        assert_eq!(
            v.detail(),
            "all zeros: 2 of 10 trials came back entirely zero"
        );
        let v = judge(
            &exact,
            &compare(|s| {
                s.mismatches = 5;
                s.zeros_where_nonzero = 5;
                s.failed_trials = 1;
            }),
        );
        assert_eq!(v.fail_class(), Some(FailClass::PartialZeros));
        let v = judge(
            &exact,
            &compare(|s| {
                s.mismatches = 5;
                s.nonfinite_where_finite = 1;
                s.failed_trials = 1;
            }),
        );
        assert_eq!(v.fail_class(), Some(FailClass::NanInf));
        let v = judge(
            &exact,
            &compare(|s| {
                s.mismatches = 7;
                s.unchanged = 7;
                s.failed_trials = 1;
            }),
        );
        assert_eq!(v.fail_class(), Some(FailClass::Unchanged));
        let v = judge(
            &exact,
            &compare(|s| {
                s.mismatches = 1;
                s.failed_trials = 1;
                s.first_mismatch = Some(MismatchExample {
                    index: 3,
                    trial: 0,
                    expected: "1.0".into(),
                    found: "1.5".into(),
                });
            }),
        );
        assert_eq!(v.fail_class(), Some(FailClass::Mismatch));
        assert!(
            v.detail().contains("expected 1.0, found 1.5"),
            "{}",
            v.detail()
        );
    }

    #[test]
    fn tolerance_by_dtype() {
        let rule = spec(Rule::Tolerance {
            dtype: "bfloat16".into(),
            scale: 1.0,
        });
        assert_eq!(
            judge(&rule, &compare(|s| s.max_rel_err = Some(0.01))),
            Verdict::Pass
        );
        let v = judge(&rule, &compare(|s| s.max_rel_err = Some(0.5)));
        assert_eq!(v.fail_class(), Some(FailClass::Mismatch));
        let strict = spec(Rule::Tolerance {
            dtype: "float32".into(),
            scale: 1.0,
        });
        assert!(judge(&strict, &compare(|s| s.max_rel_err = Some(0.01))).is_problem());
        let v = judge(
            &rule,
            &compare(|s| {
                s.max_rel_err = None;
                s.nonfinite_where_finite = 3;
                s.mismatches = 3;
            }),
        );
        assert_eq!(v.fail_class(), Some(FailClass::NanInf));
        let unknown = spec(Rule::Tolerance {
            dtype: "float7".into(),
            scale: 1.0,
        });
        assert!(matches!(
            judge(&unknown, &compare(|s| s.max_rel_err = Some(0.0))),
            Verdict::Error { .. }
        ));
    }

    /// The table the judge uses is the file's, aliases included, and its values are those
    /// the judge has always used.
    #[test]
    fn dtype_tolerances_come_from_the_shared_file() {
        let file: serde_json::Value = serde_json::from_str(TOLERANCES_JSON).unwrap();
        let values = file["dtype_tolerance"].as_object().unwrap();
        let aliases = file["aliases"].as_object().unwrap();
        assert!(tolerance_table().is_some(), "tolerances.json parses");
        for (name, value) in values {
            assert_eq!(dtype_tolerance(name), value.as_f64(), "{name}");
        }
        for (alias, name) in aliases {
            let name = name.as_str().unwrap();
            assert!(values.contains_key(name), "{alias} stands for {name}");
            assert_eq!(dtype_tolerance(alias), dtype_tolerance(name), "{alias}");
        }
        // The numbers parse exactly as Rust literals would (serde_json's float parsing is
        // not correctly rounded in every case).
        let mut numbers = 0;
        for line in TOLERANCES_JSON.lines() {
            if let Some((name, number)) = line.trim().trim_end_matches(',').split_once("\": ")
                && let Ok(number) = number.parse::<f64>()
            {
                let name = name.trim_start_matches('"');
                assert_eq!(dtype_tolerance(name), Some(number), "{name}");
                numbers += 1;
            }
        }
        assert_eq!(numbers, values.len(), "one number per line");
        // What the judge has always used: changing a tolerance changes verdicts, so it must
        // be a deliberate edit here too.
        let expected = [
            ("float64", 1e-12),
            ("fp64", 1e-12),
            ("float32", 1e-5),
            ("fp32", 1e-5),
            ("tf32", 2e-3),
            ("float16", 4e-3),
            ("fp16", 4e-3),
            ("bfloat16", 3e-2),
            ("bf16", 3e-2),
            ("float8_e4m3fn", 0.15),
            ("fp8_e4m3", 0.15),
            ("float8_e5m2", 0.3),
            ("fp8_e5m2", 0.3),
        ];
        for (name, value) in expected {
            assert_eq!(dtype_tolerance(name), Some(value), "{name}");
        }
        assert_eq!(values.len() + aliases.len(), expected.len());
        for unknown in ["float7", "int32", "FP32", "", "fp8"] {
            assert_eq!(dtype_tolerance(unknown), None, "{unknown}");
        }
    }

    fn normal_stats(n: u64, mean: f64, var: f64, zeros: u64) -> Observation {
        obs(Measurement::Stats(SampleStats {
            distribution: Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
            dtype: "float32".into(),
            n,
            mean,
            var,
            min: -5.0,
            max: 5.0,
            zeros,
            nonfinite: 0,
            out_of_range: 0,
            p_zero: 2f64.powi(-23),
            chi2: Some(63.0),
            chi2_dof: Some(63),
        }))
    }

    #[test]
    fn statistics_accept_honest_samples_and_catch_broken_ones() {
        let rule = spec(Rule::Statistical { alpha: 1e-10 });
        let n = 1_000_000;
        // A few standard errors off is normal sampling noise.
        assert_eq!(
            judge(
                &rule,
                &normal_stats(n, 4.0 / 1000.0, 1.0 + 4.0 * (2.0f64 / n as f64).sqrt(), 1)
            ),
            Verdict::Pass
        );
        let all_zero = judge(&rule, &normal_stats(n, 0.0, 0.0, n));
        assert_eq!(all_zero.fail_class(), Some(FailClass::AllZeros));
        let some_zero = judge(&rule, &normal_stats(n, 0.0, 0.9, n / 10));
        assert_eq!(some_zero.fail_class(), Some(FailClass::PartialZeros));
        assert!(judge(&rule, &normal_stats(n, 0.05, 1.0, 0)).is_problem());
        assert!(judge(&rule, &normal_stats(n, 0.0, 0.9, 0)).is_problem());
    }

    #[test]
    fn binomial_threshold_is_sane() {
        // p tiny: one zero is already rare enough to fail only if expected ≪ 1.
        let k = binomial_upper_threshold(1_000_000, 2f64.powi(-23), 2.5e-11);
        assert!((3..=12).contains(&k), "{k}");
        // p large: threshold above the mean.
        let k = binomial_upper_threshold(1_000_000, 2f64.powi(-8), 2.5e-11);
        assert!(k > 3906 && k < 5000, "{k}");
    }

    #[test]
    fn chi_square_interval_contains_its_mean() {
        let (lo, hi) = chi_square_interval(63.0, 2.5e-11);
        assert!(lo < 63.0 && hi > 63.0 && hi < 250.0, "{lo} {hi}");
    }

    #[test]
    fn mismatched_rule_and_measurement_is_an_error_not_a_pass() {
        let rule = spec(Rule::BitExact);
        assert!(matches!(
            judge(&rule, &obs(Measurement::Metrics)),
            Verdict::Error { .. }
        ));
    }

    #[test]
    fn sweep_wrong_values_fail_errors_error_and_refusals_swallowed_nan_and_notes_pass() {
        use gpuprobe_model::{SweepError, SweepFailure};
        let rule = spec(Rule::Sweep);
        let mut stats = SweepStats {
            op: "cumsum".into(),
            dtype: "float32".into(),
            cases: 20,
            passed: 20,
            invalid_accepted: 2,
            refused: 3,
            nonfinite_swallowed: 4,
            ..SweepStats::default()
        };
        assert_eq!(
            judge(&rule, &obs(Measurement::Sweep(Box::new(stats.clone())))),
            Verdict::Pass
        );
        stats.device_errors = 1;
        stats.errors.push(SweepError {
            variant: "transposed".into(),
            direction: "forward".into(),
            sample: 2,
            message: "RuntimeError: boom".into(),
        });
        let Verdict::Error { message } =
            judge(&rule, &obs(Measurement::Sweep(Box::new(stats.clone()))))
        else {
            panic!("a device error is an error")
        };
        assert!(
            message.contains("cumsum float32 transposed forward sample 2"),
            "{message}"
        );
        stats.failed.insert("wrong_value".into(), 2);
        stats.failures.push(SweepFailure {
            class: "wrong_value".into(),
            variant: "noncontig".into(),
            direction: "backward".into(),
            sample: 1,
            output: "grad[0]".into(),
            detail: "3 of 12 elements beyond the bound".into(),
            index: Some(vec![0, 3]),
            expected: "0.5".into(),
            found: "0".into(),
            zeros: true,
            ..SweepFailure::default()
        });
        let verdict = judge(&rule, &obs(Measurement::Sweep(Box::new(stats.clone()))));
        assert_eq!(verdict.fail_class(), Some(FailClass::PartialZeros));
        let Verdict::Fail { detail, .. } = verdict else {
            unreachable!()
        };
        assert!(
            detail.contains("noncontig backward sample 1: grad[0][0,3] 0"),
            "{detail}"
        );
        assert!(detail.contains("2 of 20 cases wrong"), "{detail}");
        stats.failures[0].class = "nonfinite_invented".into();
        assert_eq!(
            judge(&rule, &obs(Measurement::Sweep(Box::new(stats)))).fail_class(),
            Some(FailClass::NanInf)
        );
    }

    #[test]
    fn a_sweep_probe_that_judged_no_case_is_not_tested_with_its_reasons() {
        let rule = spec(Rule::Sweep);
        let stats = SweepStats {
            op: "torch.ops.aten._flash_attention_forward".into(),
            dtype: "float16".into(),
            unjudged: std::collections::BTreeMap::from([("unsupported".to_string(), 31)]),
            ..SweepStats::default()
        };
        let Verdict::NotTested { reason } = judge(&rule, &obs(Measurement::Sweep(Box::new(stats))))
        else {
            panic!("nothing compared is not a pass")
        };
        assert!(
            reason.contains("no case could be judged (unsupported 31)"),
            "{reason}"
        );
        let refused = SweepStats {
            op: "x".into(),
            refused: 2,
            ..SweepStats::default()
        };
        let verdict = judge(&rule, &obs(Measurement::Sweep(Box::new(refused))));
        assert!(
            matches!(&verdict, Verdict::NotTested { reason } if reason.contains("refused 2")),
            "{verdict:?}"
        );
    }
}
