//! The health-check verdict of a run (`gpuprobe check --health`, `docs/fleet.md`): one
//! short line and an exit code for a scheduler's node health check (Slurm's
//! `HealthCheckProgram`, a prolog, `scontrol update ... state=drain reason="$line"`) or for
//! node-problem-detector's custom plugin monitor.
//!
//! This module owns the contract (`docs/exit-codes.md`): the mapping of gpuprobe's exit
//! codes onto healthy (0), a problem to drain the node for (1) and unknown (2), in one
//! function ([`state_of_exit_code`]); and the line itself, built from probe ids, finding
//! ids, device names and counts only, never from a probe's detail text, a path, a host or
//! user name or an environment value. Whatever the report holds, the line is printable
//! ASCII of a safe set (anything else becomes `?`) and at most [`SLURM_REASON_MAX`] bytes
//! (`--health-format slurm`) or [`NPD_MESSAGE_MAX`] bytes (`npd`).

use std::collections::BTreeSet;

use gpuprobe_model::DeviceRef;
use gpuprobe_model::Severity;
use gpuprobe_model::Verdict;
use gpuprobe_model::{ExitStatus, Report};

/// The longest line for Slurm, in bytes: the reason an operator hands to `scontrol update
/// ... reason=` (kept well inside what slurmctld stores and `sinfo -R` shows).
pub(crate) const SLURM_REASON_MAX: usize = 200;

/// The longest line for node-problem-detector, in bytes: its custom plugin monitor cuts a
/// plugin's output at `max_output_length`, 80 by default
/// (`pkg/custompluginmonitor/types/config.go`, `defaultMaxOutputLength`).
pub(crate) const NPD_MESSAGE_MAX: usize = 80;

/// Who reads the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthFormat {
    /// Slurm: a drain reason, up to `SLURM_REASON_MAX` bytes.
    Slurm,
    /// node-problem-detector's custom plugin: up to `NPD_MESSAGE_MAX` bytes.
    Npd,
}

impl HealthFormat {
    /// The longest line this reader takes, in bytes.
    pub fn max_len(self) -> usize {
        match self {
            HealthFormat::Slurm => SLURM_REASON_MAX,
            HealthFormat::Npd => NPD_MESSAGE_MAX,
        }
    }
}

/// The health of the node, as both formats' exit codes say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    /// Healthy: exit 0, the line starts `OK:`.
    Ok,
    /// A problem was found (drain the node; NPD's NonOK): exit 1, `FAIL:`.
    Problem,
    /// gpuprobe could not judge the node: exit 2, `UNKNOWN:`.
    Unknown,
}

impl HealthState {
    /// The process exit code: the same numbers in both formats (NPD: 0 OK, 1 NonOK, 2
    /// Unknown).
    pub fn code(self) -> u8 {
        match self {
            HealthState::Ok => 0,
            HealthState::Problem => 1,
            HealthState::Unknown => 2,
        }
    }

    fn word(self) -> &'static str {
        match self {
            HealthState::Ok => "OK",
            HealthState::Problem => "FAIL",
            HealthState::Unknown => "UNKNOWN",
        }
    }
}

/// The one mapping of a gpuprobe exit code (`docs/exit-codes.md`) onto the health
/// contract: 0 healthy; 1 a problem; everything else unknown (2 usage or input error, 3
/// internal failure, 4 nothing or too little tested, 128 + a signal, any other).
pub(crate) fn state_of_exit_code(code: u8) -> HealthState {
    match code {
        0 => HealthState::Ok,
        1 => HealthState::Problem,
        _ => HealthState::Unknown,
    }
}

/// The verdict: the exit code and the one line to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The state, whose [`HealthState::code`] is the exit code.
    pub state: HealthState,
    /// The line, without a newline: `OK: ...`, `FAIL: ...` or `UNKNOWN: ...`.
    pub line: String,
}

impl Health {
    /// The process exit code.
    pub fn code(&self) -> u8 {
        self.state.code()
    }
}

/// Why a check produced no report to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReport {
    /// gpuprobe refused the command: an error of the [`ExitStatus`] given (a usage or
    /// input error, an internal failure).
    Error(ExitStatus),
    /// A signal stopped the check (`signal`).
    Interrupted(i32),
}

/// The health of a finished check's `report`. `budget_spent` says that `--budget` stopped
/// the run (what did not run is NOT-TESTED in the report).
pub fn of_report(report: &Report, budget_spent: bool, format: HealthFormat) -> Health {
    let state = state_of_exit_code(report.exit_status.code());
    let summary = &report.summary;
    let mut reason = String::from("gpuprobe: ");
    if budget_spent {
        reason.push_str("budget spent; ");
    }
    match state {
        HealthState::Ok => reason.push_str(&format!(
            "{} probe runs passed on {} ({} tier)",
            summary.judged,
            devices(report.results.iter().map(|r| r.device)),
            report.tier.name()
        )),
        HealthState::Problem => reason.push_str(&problem_reason(report)),
        HealthState::Unknown => {
            reason.push_str(report.exit_status.describe());
            reason.push_str(&format!(
                " ({} of {} runs judged)",
                summary.judged,
                summary.total.saturating_sub(summary.skipped)
            ));
        }
    }
    finish(state, report.simulation.is_some(), &reason, format)
}

/// The health of a check that made no report.
pub fn of_no_report(why: NoReport, simulated: bool, format: HealthFormat) -> Health {
    let (state, reason) = match why {
        NoReport::Error(status) => (
            state_of_exit_code(status.code()),
            format!("gpuprobe: {}", status.describe()),
        ),
        NoReport::Interrupted(signal) => (
            HealthState::Unknown,
            format!("gpuprobe: interrupted by signal {signal}"),
        ),
    };
    finish(state, simulated, &reason, format)
}

/// `3 problems on cuda:0 (2 FAIL, 1 CRASH; RKB-057; first nn.sdpa.matrix.bf16)`.
fn problem_reason(report: &Report) -> String {
    let s = &report.summary;
    let failing: Vec<_> = report
        .results
        .iter()
        .filter(|r| {
            matches!(
                r.verdict,
                Verdict::Fail { .. }
                    | Verdict::Crash { .. }
                    | Verdict::Hang { .. }
                    | Verdict::Error { .. }
            )
        })
        .collect();
    let error_findings: BTreeSet<String> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| id_token(&f.id))
        .collect();
    let mut parts: Vec<String> = Vec::new();
    let kinds: Vec<String> = [
        (s.failed, "FAIL"),
        (s.crashed, "CRASH"),
        (s.hung, "HANG"),
        (s.errors, "ERROR"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, word)| format!("{n} {word}"))
    .collect();
    if !kinds.is_empty() {
        parts.push(kinds.join(", "));
    }
    if !error_findings.is_empty() {
        let shown: Vec<&str> = error_findings.iter().take(3).map(String::as_str).collect();
        let more = error_findings.len().saturating_sub(shown.len());
        let mut ids = shown.join(",");
        if more > 0 {
            ids.push_str(&format!(",+{more}"));
        }
        parts.push(ids);
    }
    if let Some(first) = failing.first() {
        parts.push(format!("first {}", id_token(&first.probe.0)));
    }
    let head = if failing.is_empty() {
        format!(
            "{} error finding(s) on {}",
            error_findings.len(),
            devices(report.results.iter().map(|r| r.device))
        )
    } else {
        format!(
            "{} probe runs failed on {}",
            failing.len(),
            devices(failing.iter().map(|r| r.device))
        )
    };
    format!("{head} ({})", parts.join("; "))
}

/// The devices, in order, as torch names them: `cuda:0,cuda:1`, at most four then `+N`;
/// `no device` when there is none.
fn devices(all: impl Iterator<Item = DeviceRef>) -> String {
    let set: BTreeSet<DeviceRef> = all.collect();
    if set.is_empty() {
        return "no device".to_string();
    }
    let names: Vec<String> = set
        .iter()
        .take(4)
        .map(|d| match d {
            DeviceRef::Cpu => "cpu".to_string(),
            DeviceRef::Gpu(i) => format!("cuda:{i}"),
        })
        .collect();
    let mut text = names.join(",");
    if set.len() > names.len() {
        text.push_str(&format!(",+{}", set.len() - names.len()));
    }
    text
}

/// The longest id (probe, finding) the line quotes, in bytes.
const MAX_ID: usize = 64;

/// An id as the line quotes it: as it is when it is made of the characters ids are made
/// of (letters, digits, `.`, `_`, `-`, `*`; at most [`MAX_ID`] bytes), else `?`: an id with
/// a slash, a space or a quote in it is not one gpuprobe made, and none of it is quoted.
fn id_token(id: &str) -> String {
    let plain = !id.is_empty()
        && id.len() <= MAX_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-*".contains(c));
    if plain {
        id.to_string()
    } else {
        "?".to_string()
    }
}

/// Whether `c` may stand in a line: printable ASCII without the characters a shell, a
/// quoted `reason="..."` or a path would make something of (quotes, backslash, `$`, `` ` ``,
/// `/`, `~`).
fn safe(c: char) -> bool {
    (c.is_ascii_graphic() || c == ' ') && !"\"'\\$`/~".contains(c)
}

/// `STATE: [SIMULATED ]reason`, made safe and cut to the format's length (ending in `...`
/// when cut).
fn finish(state: HealthState, simulated: bool, reason: &str, format: HealthFormat) -> Health {
    let mut line = format!(
        "{}: {}{reason}",
        state.word(),
        if simulated { "SIMULATED " } else { "" }
    );
    line = line
        .chars()
        .map(|c| if safe(c) { c } else { '?' })
        .collect();
    let max = format.max_len();
    if line.len() > max {
        // ASCII only: bytes are characters.
        line.truncate(max - 3);
        line.push_str("...");
    }
    Health { state, line }
}

#[cfg(test)]
mod tests {
    use gpuprobe_model::SimulationSpec;
    use gpuprobe_model::Summary;
    use gpuprobe_model::{Confidence, Finding, FindingLayer};
    use gpuprobe_model::{FailClass, ProbeResult};
    use gpuprobe_model::{Layer, ProbeId};

    use super::*;

    const HOSTILE: &str = "a \"q\" 'x'\n/home/alice/.venv $HOME `id` \u{1b}[31m \0 ünï \\ end";

    fn result(id: &str, device: DeviceRef, verdict: Verdict) -> ProbeResult {
        ProbeResult::new(ProbeId::new(id), device, Layer::Framework, verdict)
    }

    fn fail(detail: &str) -> Verdict {
        Verdict::Fail {
            class: FailClass::AllZeros,
            detail: detail.into(),
        }
    }

    fn finding(id: &str, severity: Severity) -> Finding {
        Finding {
            id: id.into(),
            source: "kb".into(),
            severity,
            layer: FindingLayer::Runtime,
            title: HOSTILE.into(),
            explanation: HOSTILE.into(),
            confidence: Confidence::Confirmed,
            evidence: Vec::new(),
            remedies: Vec::new(),
            citations: Vec::new(),
            next_steps: Vec::new(),
            related: Vec::new(),
        }
    }

    fn report(results: Vec<ProbeResult>, findings: Vec<Finding>) -> Report {
        let mut fp = gpuprobe_model::Fingerprint::default();
        fp.host.hostname = Some("node-secret-7".into());
        let mut report = crate::test_support::report(fp, results, findings);
        report.run_dir = Some("/home/alice/.local/state/gpuprobe/check-1".into());
        report.notes = vec![HOSTILE.into()];
        report
    }

    fn with_status(mut report: Report, status: ExitStatus) -> Report {
        report.exit_status = status;
        report.exit_code = status.code();
        report
    }

    fn passing() -> Report {
        report(
            vec![
                result("copy.h2d", DeviceRef::Gpu(0), Verdict::Pass),
                result("copy.d2h", DeviceRef::Gpu(0), Verdict::Pass),
            ],
            Vec::new(),
        )
    }

    fn failing() -> Report {
        let mut r = report(
            vec![
                result("copy.h2d", DeviceRef::Gpu(0), Verdict::Pass),
                result("nn.sdpa.matrix.bf16", DeviceRef::Gpu(0), fail(HOSTILE)),
                result(
                    "copy.d2h",
                    DeviceRef::Gpu(1),
                    Verdict::Crash {
                        signal: Some(11),
                        exit_code: None,
                        message: HOSTILE.into(),
                    },
                ),
            ],
            vec![
                finding("RKB-057", Severity::Error),
                finding("LINT-X", Severity::Warning),
            ],
        );
        r.exit_status = ExitStatus::ProblemsFound;
        r
    }

    /// Every byte is printable ASCII of the safe set and the line fits.
    fn assert_clean(health: &Health, format: HealthFormat) {
        assert!(health.line.len() <= format.max_len(), "{}", health.line);
        assert!(health.line.chars().all(safe), "{:?}", health.line);
        for secret in ["alice", "node-secret", "HOME", "/", "id`"] {
            assert!(!health.line.contains(secret), "{secret} in {}", health.line);
        }
    }

    #[test]
    fn each_exit_code_maps_onto_the_contract() {
        assert_eq!(state_of_exit_code(0), HealthState::Ok);
        assert_eq!(state_of_exit_code(1), HealthState::Problem);
        for unknown in [2, 3, 4, 126, 127, 130, 143, 255] {
            assert_eq!(
                state_of_exit_code(unknown),
                HealthState::Unknown,
                "{unknown}"
            );
        }
        assert_eq!(
            [HealthState::Ok, HealthState::Problem, HealthState::Unknown].map(HealthState::code),
            [0, 1, 2]
        );
    }

    #[test]
    fn a_report_of_each_exit_status_gives_its_line_and_code() {
        let format = HealthFormat::Slurm;
        let ok = of_report(&passing(), false, format);
        assert_eq!(ok.code(), 0);
        assert_eq!(
            ok.line,
            "OK: gpuprobe: 2 probe runs passed on cuda:0 (quick tier)"
        );
        let problem = of_report(&failing(), false, format);
        assert_eq!(problem.code(), 1);
        assert_eq!(
            problem.line,
            "FAIL: gpuprobe: 2 probe runs failed on cuda:0,cuda:1 (1 FAIL, 1 CRASH; RKB-057; first nn.sdpa.matrix.bf16)"
        );
        for (status, words) in [
            (ExitStatus::UsageError, "usage or input error"),
            (ExitStatus::InternalFailure, "internal failure"),
            (ExitStatus::NothingTested, "nothing could be tested"),
        ] {
            let health = of_report(&with_status(passing(), status), false, format);
            assert_eq!(health.code(), 2, "{status:?}");
            assert!(
                health
                    .line
                    .starts_with(&format!("UNKNOWN: gpuprobe: {words}")),
                "{}",
                health.line
            );
            assert_clean(&health, format);
        }
        // An error finding with no failing probe is a problem too.
        let mut finding_only = passing();
        finding_only.findings = vec![finding("MEM-ERRORS", Severity::Error)];
        finding_only.exit_status = ExitStatus::ProblemsFound;
        assert_eq!(
            of_report(&finding_only, false, format).line,
            "FAIL: gpuprobe: 1 error finding(s) on cuda:0 (MEM-ERRORS)"
        );
    }

    #[test]
    fn a_spent_budget_and_a_simulation_are_said() {
        let mut report = with_status(passing(), ExitStatus::NothingTested);
        report.results.push(result(
            "copy.big",
            DeviceRef::Gpu(0),
            Verdict::NotTested {
                reason: HOSTILE.into(),
            },
        ));
        report.summary = Summary::of(&report.results);
        let health = of_report(&report, true, HealthFormat::Slurm);
        assert_eq!(
            health.line,
            "UNKNOWN: gpuprobe: budget spent; nothing could be tested (2 of 3 runs judged)"
        );
        let mut simulated = failing();
        simulated.simulation = Some(SimulationSpec {
            source: "h2d-zeros".into(),
            faults: Vec::new(),
        });
        let health = of_report(&simulated, false, HealthFormat::Npd);
        assert!(
            health.line.starts_with("FAIL: SIMULATED gpuprobe: "),
            "{}",
            health.line
        );
        assert_clean(&health, HealthFormat::Npd);
    }

    #[test]
    fn no_report_is_unknown_or_what_its_error_says() {
        let usage = of_no_report(
            NoReport::Error(ExitStatus::UsageError),
            false,
            HealthFormat::Slurm,
        );
        assert_eq!(usage.code(), 2);
        assert_eq!(usage.line, "UNKNOWN: gpuprobe: usage or input error");
        let internal = of_no_report(
            NoReport::Error(ExitStatus::InternalFailure),
            true,
            HealthFormat::Npd,
        );
        assert_eq!(
            (internal.code(), internal.line.as_str()),
            (2, "UNKNOWN: SIMULATED gpuprobe: internal failure")
        );
        let signal = of_no_report(NoReport::Interrupted(15), false, HealthFormat::Slurm);
        assert_eq!(
            (signal.code(), signal.line.as_str()),
            (2, "UNKNOWN: gpuprobe: interrupted by signal 15")
        );
    }

    #[test]
    fn hostile_ids_and_details_never_reach_the_line_and_it_stays_short() {
        let mut report = failing();
        for r in &mut report.results {
            r.probe = ProbeId::new(format!("{}{HOSTILE}", r.probe));
            r.stderr_tail = vec![HOSTILE.into()];
        }
        report.findings[0].id = HOSTILE.into();
        for format in [HealthFormat::Slurm, HealthFormat::Npd] {
            let health = of_report(&report, false, format);
            assert_eq!(health.code(), 1);
            assert_clean(&health, format);
            assert!(
                health
                    .line
                    .starts_with("FAIL: gpuprobe: 2 probe runs failed")
            );
            if format == HealthFormat::Slurm {
                assert!(
                    health.line.ends_with("1 CRASH; ?; first ?)"),
                    "{}",
                    health.line
                );
            }
        }
        // Many devices, findings and a long id: cut, ending in `...`.
        let mut long = failing();
        for i in 0..40 {
            long.results.insert(
                0,
                result(
                    &format!("family{i}.{}", "x".repeat(50)),
                    DeviceRef::Gpu(i),
                    fail("d"),
                ),
            );
            long.findings.push(finding(
                &format!("RKB-{i:03}-{}", "y".repeat(55)),
                Severity::Error,
            ));
        }
        long.summary = Summary::of(&long.results);
        for format in [HealthFormat::Slurm, HealthFormat::Npd] {
            let health = of_report(&long, false, format);
            assert_eq!(health.line.len(), format.max_len(), "{}", health.line);
            assert!(health.line.ends_with("..."));
            assert!(health.line.contains(",+"), "{}", health.line);
            assert_clean(&health, format);
        }
    }
}
