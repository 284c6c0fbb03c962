//! The lines of progress while probes run. On a terminal, the lines printed above the
//! progress bar: every problem as it is judged, and with `--verbose` every other
//! non-passing verdict and the workers' messages. Off a terminal (CI logs, Slurm output
//! files), [`ProgressLog`]: the same lines with the elapsed time before them, one line per
//! finished family with its counts by verdict, and with `--verbose` one line per finished
//! probe; never a bar or a carriage return. Worker messages are the worker's stderr: shown
//! inert, never obeyed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpuprobe_model::ProbeId;
use gpuprobe_model::visible_line;
use gpuprobe_model::{ProbeResult, Verdict};

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

/// The words a family's line counts verdicts with, in the order it lists them.
const COUNTED: [&str; 7] = [
    "passed",
    "failed",
    "crashed",
    "hung",
    "errors",
    "skipped",
    "not tested",
];

fn counted_as(verdict: &Verdict) -> usize {
    match verdict {
        Verdict::Pass => 0,
        Verdict::Fail { .. } => 1,
        Verdict::Crash { .. } => 2,
        Verdict::Hang { .. } => 3,
        Verdict::Error { .. } => 4,
        Verdict::Skip { .. } => 5,
        Verdict::NotTested { .. } => 6,
    }
}

/// Progress as plain lines for a log: what each finished probe and family prints.
#[derive(Debug, Default)]
pub struct ProgressLog {
    verbose: bool,
    /// Planned probe runs per family.
    planned: BTreeMap<String, usize>,
    /// Finished probe runs per family, by verdict ([`COUNTED`]).
    finished: BTreeMap<String, [usize; COUNTED.len()]>,
    planned_total: usize,
    finished_total: usize,
}

impl ProgressLog {
    /// A log that prints every finished probe when `verbose`.
    pub fn new(verbose: bool) -> ProgressLog {
        ProgressLog {
            verbose,
            ..ProgressLog::default()
        }
    }

    /// More probe runs were planned.
    pub fn planned<'a>(&mut self, probes: impl IntoIterator<Item = &'a ProbeId>) {
        for probe in probes {
            *self.planned.entry(probe.family().to_string()).or_default() += 1;
            self.planned_total += 1;
        }
    }

    /// The lines for a probe run that finished `elapsed_s` seconds into the session: its
    /// own (a problem always, any probe when verbose), then its family's when it was the
    /// family's last planned run.
    pub fn finished(&mut self, result: &ProbeResult, elapsed_s: f64) -> Vec<String> {
        let stamp = format!("[{elapsed_s:>7.1}s]");
        let mut lines = Vec::new();
        if let Some(line) = finished_line(result, self.verbose) {
            lines.push(format!("{stamp} {line}"));
        } else if self.verbose {
            lines.push(format!(
                "{stamp} {:<10} {} on {}",
                result.verdict.label(),
                result.probe,
                result.device
            ));
        }
        let family = result.probe.family();
        let counts = self.finished.entry(family.to_string()).or_default();
        counts[counted_as(&result.verdict)] += 1;
        self.finished_total += 1;
        let done: usize = counts.iter().sum();
        if self
            .planned
            .get(family)
            .is_some_and(|&planned| done == planned)
        {
            let mut line = format!("{stamp} {family}:");
            let mut first = true;
            for (word, n) in COUNTED.iter().zip(counts.iter()) {
                if *n > 0 {
                    let _ = write!(line, "{} {n} {word}", if first { "" } else { "," });
                    first = false;
                }
            }
            let _ = write!(
                line,
                " ({}/{})",
                self.finished_total,
                self.planned_total.max(self.finished_total)
            );
            lines.push(line);
        }
        lines
    }

    /// The line for a worker's message (only when verbose).
    pub fn log(&self, message: &str, elapsed_s: f64) -> Option<String> {
        log_line(message, self.verbose).map(|line| format!("[{elapsed_s:>7.1}s] {line}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::FailClass;
    use gpuprobe_model::{DeviceRef, Layer, ProbeId};

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

    fn of(probe: &str, verdict: Verdict) -> ProbeResult {
        ProbeResult::new(ProbeId::new(probe), DeviceRef::Cpu, Layer::Runtime, verdict)
    }

    fn fail() -> Verdict {
        Verdict::Fail {
            class: FailClass::AllZeros,
            detail: "zeros".into(),
        }
    }

    #[test]
    fn a_family_prints_one_line_with_its_counts_when_its_last_probe_finishes() {
        let ids: Vec<ProbeId> = ["ops.a", "ops.b", "copy.a", "ops.c"]
            .into_iter()
            .map(ProbeId::new)
            .collect();
        let mut log = ProgressLog::new(false);
        log.planned(&ids);
        assert!(log.finished(&of("ops.a", Verdict::Pass), 0.5).is_empty());
        assert_eq!(
            log.finished(&of("copy.a", Verdict::Pass), 1.0),
            vec!["[    1.0s] copy: 1 passed (2/4)"]
        );
        let lines = log.finished(&of("ops.b", fail()), 2.25);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("[    2.2s] FAIL "), "{lines:?}");
        let skip = Verdict::Skip {
            reason: "no GPU".into(),
        };
        let last = log.finished(&of("ops.c", skip), 12.3);
        assert_eq!(
            last,
            vec!["[   12.3s] ops: 1 passed, 1 failed, 1 skipped (4/4)"]
        );
        assert!(!last[0].contains('\r'));
    }

    #[test]
    fn verbose_prints_every_finished_probe_and_worker_messages() {
        let mut log = ProgressLog::new(true);
        log.planned(&[ProbeId::new("copy.a"), ProbeId::new("copy.b")]);
        assert_eq!(
            log.finished(&of("copy.a", Verdict::Pass), 0.1),
            vec!["[    0.1s] PASS       copy.a on cpu"]
        );
        let lines = log.finished(&of("copy.b", Verdict::Pass), 0.2);
        assert_eq!(
            lines,
            vec![
                "[    0.2s] PASS       copy.b on cpu",
                "[    0.2s] copy: 2 passed (2/2)"
            ]
        );
        assert_eq!(
            log.log("warn\u{1b}[2J", 0.3).as_deref(),
            Some("[    0.3s] warn\\x1b[2J")
        );
        assert_eq!(ProgressLog::new(false).log("quiet", 0.3), None);
    }

    #[test]
    fn a_family_planned_again_later_prints_again_when_it_is_finished_again() {
        let mut log = ProgressLog::new(false);
        log.planned(&[ProbeId::new("copy.a")]);
        assert_eq!(log.finished(&of("copy.a", Verdict::Pass), 1.0).len(), 1);
        // A second GPU's lane adds the family again after the first finished it.
        log.planned(&[ProbeId::new("copy.a")]);
        assert_eq!(
            log.finished(&of("copy.a", Verdict::Pass), 2.0),
            vec!["[    2.0s] copy: 2 passed (2/2)"]
        );
    }
}
