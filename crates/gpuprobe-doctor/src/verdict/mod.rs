//! From observations to verdicts and findings: [`judge`] applies each probe's declared rule
//! to what its worker observed ([`to_result`] makes the recordable result of a worker's raw
//! outcome); [`diagnose`] places a run's failures on a layer of the stack with the evidence
//! for it; [`suggest`] carries the run's options into the follow-up commands findings print.

pub(crate) mod diagnose;
mod judge;
pub(crate) mod suggest;

use gpuprobe_model::{ProbeResult, ProbeSpec, Settings, Verdict};
use gpuprobe_runner::{RawOutcome, RawResult};

pub use judge::judge;

/// Turns a raw result into a judged, recordable one.
pub(crate) fn to_result(
    spec: &ProbeSpec,
    raw: RawResult,
    settings: &Settings,
    simulated: bool,
) -> ProbeResult {
    let mut stderr_tail = raw.output_tail;
    let (verdict, observation) = match raw.outcome {
        RawOutcome::Observed(observation) => (judge(spec, &observation), Some(*observation)),
        RawOutcome::Skip(reason) => (Verdict::Skip { reason }, None),
        RawOutcome::Error {
            error_type,
            message,
            traceback,
        } => {
            if let Some(tb) = traceback {
                let lines: Vec<&str> = tb.lines().collect();
                stderr_tail = lines[lines.len().saturating_sub(15)..]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
            }
            (
                Verdict::Error {
                    message: format!("{error_type}: {message}"),
                },
                None,
            )
        }
        RawOutcome::Crash {
            signal,
            exit_code,
            message,
        } => (
            Verdict::Crash {
                signal,
                exit_code,
                message,
            },
            None,
        ),
        RawOutcome::Hang { timeout_s } => (Verdict::Hang { timeout_s }, None),
        RawOutcome::NotTested(reason) => (Verdict::NotTested { reason }, None),
    };
    ProbeResult {
        probe: raw.probe,
        device: raw.device,
        layer: spec.layer,
        verdict,
        observation,
        elapsed_s: raw.elapsed_s,
        stderr_tail,
        kernel_log: raw.kernel_log,
        settings: settings.describe(),
        simulated,
        report_group: spec.report_group.clone(),
    }
}
