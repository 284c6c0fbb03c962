//! The lines the job runner says about the job (the caller prefixes and prints them): one
//! per run that is worth a word, the fallback's, the crash and hang rates.

use std::collections::BTreeMap;

use super::{HIDE_GPUS, JobOutcome, JobRun};
use crate::process::signal_words;

/// The warning about failures a profile could not cure, saying what happens instead.
pub(crate) fn uncured_warning(
    uncured: &[String],
    may_fall_back: bool,
    force_gpu: bool,
) -> Option<String> {
    if uncured.is_empty() {
        return None;
    }
    let list = uncured.join(", ");
    Some(if may_fall_back {
        format!(
            "warning: the profile records failures it could not cure ({list}): the GPU stack \
             is judged unsafe; --fallback cpu: running on the CPU with every GPU hidden. \
             Expect it to be much slower (often 10-100x for training); --force-gpu keeps the GPU"
        )
    } else if force_gpu {
        format!(
            "warning: the profile records failures it could not cure ({list}); running on the GPU anyway (--force-gpu)"
        )
    } else {
        format!(
            "warning: the profile records failures it could not cure ({list}); results may be wrong \
             (--fallback cpu runs the job on the CPU instead)"
        )
    })
}

/// How run `number` of `total` ended; none for a single run that simply succeeded or
/// failed (its exit code says it).
pub(crate) fn run_line(job: &JobRun, number: u32, total: u32) -> Option<String> {
    let detail = match &job.outcome {
        JobOutcome::Crashed { reason } => format!(": {reason}"),
        JobOutcome::Hung { watched } => format!(" (watched: {watched})"),
        JobOutcome::Interrupted { signal } => format!(" by {}", signal_words(*signal)),
        _ => String::new(),
    };
    let quiet = total == 1 && matches!(job.outcome, JobOutcome::Succeeded | JobOutcome::Failed);
    if quiet {
        return None;
    }
    let prefix = if total > 1 {
        format!("run {number}/{total}: ")
    } else {
        String::new()
    };
    Some(format!(
        "{prefix}the job {}{detail} (exit {}, {:.1} s)",
        job.outcome.word(),
        job.exit_code,
        job.seconds
    ))
}

/// The warning before the CPU fallback runs.
pub(crate) fn fallback_warning(runs: &[JobRun]) -> String {
    format!(
        "warning: the job {} on the GPU; --fallback cpu: running it again on the CPU with every \
         GPU hidden ({} set empty). Expect it to be much slower (often 10-100x for training)",
        runs.iter()
            .rev()
            .find(|r| r.outcome.unsafe_stack())
            .map_or("failed", |r| r.outcome.word()),
        HIDE_GPUS.join(", ")
    )
}

/// How the CPU fallback ended.
pub(crate) fn fallback_line(job: &JobRun) -> String {
    format!(
        "CPU fallback {} (exit {}, {:.1} s)",
        job.outcome.word(),
        job.exit_code,
        job.seconds
    )
}

/// The crash and hang rates of repeated runs, with the exit codes.
pub(super) fn rates(runs: &[JobRun]) -> String {
    let n = runs.len().max(1) as f64;
    let count =
        |pred: &dyn Fn(&JobOutcome) -> bool| runs.iter().filter(|r| pred(&r.outcome)).count();
    let succeeded = count(&|o| matches!(o, JobOutcome::Succeeded));
    let crashed = count(&|o| matches!(o, JobOutcome::Crashed { .. }));
    let hung = count(&|o| matches!(o, JobOutcome::Hung { .. }));
    let failed = count(&|o| matches!(o, JobOutcome::Failed));
    let interrupted = count(&|o| matches!(o, JobOutcome::Interrupted { .. }));
    let mut codes: BTreeMap<i32, usize> = BTreeMap::new();
    for run in runs {
        *codes.entry(run.exit_code).or_default() += 1;
    }
    let codes: Vec<String> = codes.iter().map(|(c, n)| format!("{c}×{n}")).collect();
    let mut line = format!(
        "{} runs: {succeeded} succeeded, crash rate {crashed}/{} ({:.0}%), hang rate {hung}/{} ({:.0}%), {failed} failed otherwise",
        runs.len(),
        runs.len(),
        100.0 * crashed as f64 / n,
        runs.len(),
        100.0 * hung as f64 / n,
    );
    if interrupted > 0 {
        line.push_str(&format!(", {interrupted} interrupted"));
    }
    line.push_str(&format!("; exit codes {}", codes.join(", ")));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(outcome: JobOutcome, exit_code: i32) -> JobRun {
        JobRun {
            device: "gpu",
            outcome,
            exit_code,
            seconds: 1.0,
        }
    }

    #[test]
    fn rates_count_each_outcome() {
        let runs = vec![
            job(JobOutcome::Succeeded, 0),
            job(JobOutcome::Crashed { reason: "x".into() }, 139),
            job(
                JobOutcome::Hung {
                    watched: "output".into(),
                },
                143,
            ),
            job(JobOutcome::Succeeded, 0),
        ];
        let line = rates(&runs);
        assert!(line.contains("4 runs: 2 succeeded"), "{line}");
        assert!(line.contains("crash rate 1/4 (25%)"), "{line}");
        assert!(line.contains("hang rate 1/4 (25%)"), "{line}");
        assert!(line.contains("0×2, 139×1, 143×1"), "{line}");
    }

    #[test]
    fn a_single_plain_run_says_nothing() {
        assert_eq!(run_line(&job(JobOutcome::Failed, 1), 1, 1), None);
        assert_eq!(
            run_line(&job(JobOutcome::Interrupted { signal: 2 }, 130), 1, 1).as_deref(),
            Some("the job was interrupted by SIGINT (signal 2) (exit 130, 1.0 s)")
        );
    }
}
