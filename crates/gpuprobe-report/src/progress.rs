//! The lines printed above the progress bar while probes run: every problem as it is
//! judged, and with `--verbose` every other non-passing verdict and the workers' messages.
//! Worker messages are the worker's stderr: shown inert, never obeyed.

use gpuprobe_model::text::visible_line;
use gpuprobe_model::verdict::{ProbeResult, Verdict};

/// The line for a finished probe, if it earns one.
pub fn finished_line(result: &ProbeResult, verbose: bool) -> Option<String> {
    if result.verdict.is_problem() {
        Some(format!(
            "{:<10} {} on {}: {}",
            result.verdict.label(),
            result.probe,
            result.device,
            visible_line(&result.verdict.detail())
        ))
    } else if verbose && !matches!(result.verdict, Verdict::Pass) {
        Some(format!(
            "{:<10} {}: {}",
            result.verdict.label(),
            result.probe,
            visible_line(&result.verdict.detail())
        ))
    } else {
        None
    }
}

/// The line for a worker's message, shown only with `--verbose`.
pub fn log_line(message: &str, verbose: bool) -> Option<String> {
    verbose.then(|| visible_line(message).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::probe::{DeviceRef, Layer, ProbeId};
    use gpuprobe_model::verdict::FailClass;

    fn result(verdict: Verdict) -> ProbeResult {
        ProbeResult::new(
            ProbeId::new("copy.h2d.f32"),
            DeviceRef::Gpu(0),
            Layer::Runtime,
            verdict,
        )
    }

    #[test]
    fn problems_always_print_other_verdicts_only_when_verbose() {
        let fail = result(Verdict::Fail {
            class: FailClass::AllZeros,
            detail: "zeros \u{1b}[2J here".into(),
        });
        let line = finished_line(&fail, false).unwrap();
        assert!(line.contains("copy.h2d.f32 on"), "{line}");
        assert!(!line.contains('\u{1b}'), "{line}");
        let skip = result(Verdict::Skip {
            reason: "no GPU".into(),
        });
        assert_eq!(finished_line(&skip, false), None);
        assert!(finished_line(&skip, true).unwrap().contains("no GPU"));
        assert_eq!(finished_line(&result(Verdict::Pass), true), None);
        assert_eq!(log_line("worker says hi", false), None);
        assert_eq!(log_line("a\u{7}b", true).as_deref(), Some("a\\x07b"));
    }
}
