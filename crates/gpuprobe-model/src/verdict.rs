//! Verdicts: the judgement on one probe run, and the result record that carries it.

use serde::{Deserialize, Serialize};

use crate::observation::Observation;
use crate::probe::{DeviceRef, Layer, ProbeId};

/// How a wrong result was wrong. The classes point to different bug families, so they are
/// kept apart (a KB entry matches on them: `docs/kb-format.md`, "Probe outcomes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailClass {
    /// Every wrong trial came back entirely zero.
    AllZeros,
    /// Some elements became zero, the rest is right.
    PartialZeros,
    /// NaN or Inf appeared where the reference is finite.
    NanInf,
    /// The output still holds what was there before: the operation did nothing.
    Unchanged,
    /// Values differ in any other way (wrong numbers, statistics off, property violated).
    Mismatch,
}

impl FailClass {
    /// Human name used in tables.
    pub fn describe(self) -> &'static str {
        match self {
            FailClass::AllZeros => "all zeros",
            FailClass::PartialZeros => "partial zeros",
            FailClass::NanInf => "NaN/Inf",
            FailClass::Unchanged => "unchanged output",
            FailClass::Mismatch => "mismatch",
        }
    }
}

/// The judgement on one probe run on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The result is right.
    Pass,
    /// The result is wrong.
    Fail {
        /// How it is wrong.
        class: FailClass,
        /// The key numbers, one line ("all zeros in 212 of 50000 copies (≤ 64 B)").
        detail: String,
    },
    /// The worker died while the probe ran.
    Crash {
        /// Terminating signal, when killed by one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        /// Exit code, when it exited on its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// The most telling last line of output ("Memory access fault by GPU node-1 ...").
        message: String,
    },
    /// The probe did not finish in time; its worker's process group was killed.
    Hang {
        /// The limit it exceeded.
        timeout_s: f64,
    },
    /// The probe raised an error (an exception, a runtime error code).
    Error {
        /// Exception type and message, or the runtime's error text.
        message: String,
    },
    /// The probe does not apply here (missing capability, single GPU, ...).
    Skip {
        /// Why.
        reason: String,
    },
    /// The probe could not be attempted (no Python, no torch, an earlier failure).
    NotTested {
        /// Why.
        reason: String,
    },
}

impl Verdict {
    /// Upper-case label for tables: PASS, FAIL, CRASH, HANG, ERROR, SKIP, NOT-TESTED.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail { .. } => "FAIL",
            Verdict::Crash { .. } => "CRASH",
            Verdict::Hang { .. } => "HANG",
            Verdict::Error { .. } => "ERROR",
            Verdict::Skip { .. } => "SKIP",
            Verdict::NotTested { .. } => "NOT-TESTED",
        }
    }

    /// Whether this verdict is a problem with the stack (FAIL, CRASH, HANG, ERROR).
    pub fn is_problem(&self) -> bool {
        matches!(
            self,
            Verdict::Fail { .. }
                | Verdict::Crash { .. }
                | Verdict::Hang { .. }
                | Verdict::Error { .. }
        )
    }

    /// Whether the probe actually ran to a judgement (PASS or FAIL).
    pub fn is_judged(&self) -> bool {
        matches!(self, Verdict::Pass | Verdict::Fail { .. })
    }

    /// The failure class, for FAIL verdicts.
    pub fn fail_class(&self) -> Option<FailClass> {
        match self {
            Verdict::Fail { class, .. } => Some(*class),
            _ => None,
        }
    }

    /// One-line detail for tables (empty for PASS).
    pub fn detail(&self) -> String {
        match self {
            Verdict::Pass => String::new(),
            Verdict::Fail { class, detail } => format!("{}: {detail}", class.describe()),
            Verdict::Crash {
                signal: Some(sig),
                message,
                ..
            } => format!("signal {sig}: {message}"),
            Verdict::Crash {
                exit_code, message, ..
            } => match exit_code {
                Some(code) => format!("exit {code}: {message}"),
                None => message.clone(),
            },
            Verdict::Hang { timeout_s } => {
                format!("no result within {timeout_s:.0} s; worker killed")
            }
            Verdict::Error { message } => message.clone(),
            Verdict::Skip { reason } | Verdict::NotTested { reason } => reason.clone(),
        }
    }
}

/// One probe run on one device: what was observed and how it was judged. Appended to the
/// run directory's `results.jsonl` as soon as it is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbeResult {
    /// The probe.
    pub probe: ProbeId,
    /// The device it ran on.
    pub device: DeviceRef,
    /// The layer it exercises (copied from its spec so a report stands alone).
    pub layer: Layer,
    /// The judgement.
    pub verdict: Verdict,
    /// The facts, when the probe produced any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    /// Seconds the probe took (begin to result), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// Last lines the worker wrote to stderr, for CRASH/HANG/ERROR.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stderr_tail: Vec<String>,
    /// New kernel log lines seen while it ran (when the kernel log is readable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_log: Vec<String>,
    /// Settings applied to the worker for this run (`fix` candidates, profile), `KEY=VALUE`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<String>,
    /// True when the result was produced under fault simulation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// The group the HTML report shows it in, copied from its spec (`ProbeSpec::report_group`)
    /// so a report stands alone. Absent where the family is its own group, and in reports
    /// written before the catalog published groups: the family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_group: Option<String>,
}

impl ProbeResult {
    /// A result with its verdict and nothing else recorded (no observation, timing, logs
    /// or settings; not simulated).
    pub fn new(probe: ProbeId, device: DeviceRef, layer: Layer, verdict: Verdict) -> Self {
        ProbeResult {
            probe,
            device,
            layer,
            verdict,
            observation: None,
            elapsed_s: None,
            stderr_tail: Vec::new(),
            kernel_log: Vec::new(),
            settings: Vec::new(),
            simulated: false,
            report_group: None,
        }
    }

    /// The group the report shows it in: its spec's `report_group`, else its family.
    pub fn group(&self) -> &str {
        self.report_group
            .as_deref()
            .unwrap_or_else(|| self.probe.family())
    }
}
