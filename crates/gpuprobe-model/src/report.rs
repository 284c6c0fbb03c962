//! The report of one run: what `check --json` prints and `report.json` holds.

use serde::{Deserialize, Serialize};

use crate::build_info::BuildInfo;
use crate::exit::ExitStatus;
use crate::finding::Finding;
use crate::fingerprint::Fingerprint;
use crate::probe::{Backend, DeviceRef, Placement, Tier};
use crate::protocol::SimulationSpec;
use crate::verdict::{ProbeResult, Verdict};

/// A whole run's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    /// [`crate::REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// gpuprobe version that made it.
    pub tool_version: String,
    /// The commit and knowledge-base revision of that gpuprobe (absent in reports made
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildInfo>,
    /// The command (`check`, `fix`, ...).
    pub command: String,
    /// Run directory holding the raw results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<String>,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// Wall time of the run in seconds.
    pub wall_s: f64,
    /// Tier that ran.
    pub tier: Tier,
    /// Present when the run was made under fault simulation: every result is then SIMULATED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulation: Option<SimulationSpec>,
    /// The stack fingerprint.
    pub fingerprint: Fingerprint,
    /// One entry per probe and device.
    pub results: Vec<ProbeResult>,
    /// Conclusions.
    pub findings: Vec<Finding>,
    /// Counts by verdict.
    pub summary: Summary,
    /// What the process exit code says.
    pub exit_status: ExitStatus,
    /// The numeric exit code.
    pub exit_code: u8,
    /// Remarks about the run itself (a worker restarted, a device skipped, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Where the run's time went (`check --timings` prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

/// Where a run's wall time went: the session's phases, and each lane's milestones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timings {
    /// Seconds from the start to the first lane's launch: the plan, the interpreter and the
    /// probe catalog.
    pub prepare_s: f64,
    /// Seconds from the first lane's launch to the last lane's end.
    pub probes_s: f64,
    /// Seconds waited for the fingerprint once the probes were done (it is gathered while
    /// they run).
    pub fingerprint_wait_s: f64,
    /// Seconds for the knowledge base, the lint, the diagnosis and the report.
    pub report_s: f64,
    /// One entry per lane, in launch order.
    pub lanes: Vec<LaneTiming>,
}

/// One lane's milestones, in seconds since the run started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LaneTiming {
    /// Which worker kind.
    pub backend: Backend,
    /// Which device.
    pub device: DeviceRef,
    /// How it shares the device.
    pub placement: Placement,
    /// Its first probe (names the lane).
    pub first_probe: String,
    /// How many probes it ran.
    pub probes: usize,
    /// Workers it started (more than one after a crash or hang, or for isolated probes).
    pub workers: usize,
    /// Launched.
    pub launched_s: f64,
    /// Its first worker said hello (interpreter, framework and runtime started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_hello_s: Option<f64>,
    /// Its first probe began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_begin_s: Option<f64>,
    /// Its last result arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result_s: Option<f64>,
    /// Its last worker was done (exited or was ended).
    pub done_s: f64,
}

impl LaneTiming {
    /// The same milestones measured from a start `by` seconds earlier.
    pub fn shifted(mut self, by: f64) -> LaneTiming {
        self.launched_s += by;
        self.done_s += by;
        for at in [
            &mut self.first_hello_s,
            &mut self.first_begin_s,
            &mut self.last_result_s,
        ]
        .into_iter()
        .flatten()
        {
            *at += by;
        }
        self
    }
}

/// Counts of results by verdict.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Summary {
    /// Results in total.
    pub total: u32,
    /// PASS.
    pub passed: u32,
    /// FAIL.
    pub failed: u32,
    /// CRASH.
    pub crashed: u32,
    /// HANG.
    pub hung: u32,
    /// ERROR.
    pub errors: u32,
    /// SKIP.
    pub skipped: u32,
    /// NOT-TESTED.
    pub not_tested: u32,
    /// Results with a verdict on the stack: PASS, FAIL, CRASH, HANG or ERROR (neither SKIP
    /// nor NOT-TESTED).
    #[serde(default)]
    pub judged: u32,
    /// Fewer than half of the probe runs that apply (every one but SKIP) got a verdict: most
    /// are NOT-TESTED, so the run says little about the stack. The terminal summary says
    /// "only N of M probe runs were judged", and such a run does not exit 0
    /// (docs/exit-codes.md).
    #[serde(default)]
    pub mostly_not_tested: bool,
}

impl Summary {
    /// Counts the verdicts of `results`.
    pub fn of(results: &[ProbeResult]) -> Summary {
        let mut s = Summary::default();
        for r in results {
            s.total += 1;
            match r.verdict {
                Verdict::Pass => s.passed += 1,
                Verdict::Fail { .. } => s.failed += 1,
                Verdict::Crash { .. } => s.crashed += 1,
                Verdict::Hang { .. } => s.hung += 1,
                Verdict::Error { .. } => s.errors += 1,
                Verdict::Skip { .. } => s.skipped += 1,
                Verdict::NotTested { .. } => s.not_tested += 1,
            }
        }
        s.judged = s.passed + s.problems();
        s.mostly_not_tested = s.not_tested > 0 && s.judged < s.not_tested;
        s
    }

    /// FAIL + CRASH + HANG + ERROR.
    pub fn problems(&self) -> u32 {
        self.failed + self.crashed + self.hung + self.errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{DeviceRef, Layer, ProbeId};

    fn results(verdicts: Vec<Verdict>) -> Vec<ProbeResult> {
        verdicts
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                ProbeResult::new(
                    ProbeId::new(format!("a.p{i}")),
                    DeviceRef::Cpu,
                    Layer::Framework,
                    v,
                )
            })
            .collect()
    }

    #[test]
    fn a_run_mostly_not_tested_says_so_and_skips_do_not_count() {
        let not_tested = || Verdict::NotTested { reason: "x".into() };
        let skip = || Verdict::Skip { reason: "x".into() };
        let s = Summary::of(&results(vec![Verdict::Pass, not_tested(), not_tested()]));
        assert_eq!((s.judged, s.not_tested, s.mostly_not_tested), (1, 2, true));
        let s = Summary::of(&results(vec![Verdict::Pass, not_tested()]));
        assert!(!s.mostly_not_tested, "half got a verdict");
        let s = Summary::of(&results(vec![Verdict::Pass, skip(), skip(), skip()]));
        assert!(!s.mostly_not_tested);
        let s = Summary::of(&results(vec![
            Verdict::Hang { timeout_s: 1.0 },
            Verdict::Pass,
            not_tested(),
        ]));
        assert_eq!(s.judged, 2);
        assert!(!s.mostly_not_tested);
        assert!(!Summary::of(&[]).mostly_not_tested);
    }
}
