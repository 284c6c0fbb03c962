//! What `gpuprobe repro` records about a standalone reproduction: the generator's manifest
//! (`repro.json`, docs/repro.md) and the captured run of the script. Data only; the
//! generator runs in `gpuprobe_doctor::repro`, ISSUE.md is rendered by
//! `gpuprobe_report::issue`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::Report;
use crate::profile::FixAccount;
use crate::verdict::ProbeResult;

/// The directory of a run directory where `repro` writes, one subdirectory per probe id.
pub const REPRO_DIR: &str = "repro";
/// The script, in a repro's directory.
pub const SCRIPT_FILE: &str = "repro.py";
/// The manifest.
pub const MANIFEST_FILE: &str = "repro.json";
/// The issue body.
pub const ISSUE_FILE: &str = "ISSUE.md";
/// The result given to the generator.
pub const RESULT_INPUT: &str = "RESULT.json";
/// The plan given to the generator.
pub const PLAN_INPUT: &str = "PLAN.json";
/// The captured run of the script.
pub const RUN_FILE: &str = "run.json";

/// The manifest a generator writes beside `repro.py` (`repro.json`). Every field but
/// `probe` has a default, so a manifest from an older or newer generator still reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReproManifest {
    /// The probe id.
    pub probe: String,
    /// Its family (the id's first part).
    #[serde(default)]
    pub family: String,
    /// `python` (a torch script) or `ctypes` (a native probe's script against the CUDA
    /// driver API or HIP through ctypes).
    #[serde(default)]
    pub kind: String,
    /// What the script imports beyond the standard library (`torch`, `numpy`).
    #[serde(default)]
    pub needs: Vec<String>,
    /// The settings the run had applied, set by the script itself.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// One line: what the script checks.
    #[serde(default)]
    pub summary: String,
    /// What it compares with.
    #[serde(default)]
    pub reference: String,
    /// The tolerance, in words.
    #[serde(default)]
    pub tolerance: String,
    /// Whether the case runs in a child process (crash and hang verdicts).
    #[serde(default)]
    pub crash_child: bool,
    /// Whether it was made from a SIMULATED result.
    #[serde(default)]
    pub simulated: bool,
}

/// How a script's last line judged the case (interface: the script's contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptOutcome {
    /// `REPRODUCED: ...` (exit 1).
    Reproduced,
    /// `NOT REPRODUCED: ...` (exit 0).
    NotReproduced,
    /// `CANNOT RUN: ...` (exit 2).
    CannotRun,
    /// It did not finish within the limit and was killed.
    TimedOut,
    /// Anything else: no verdict line, or a line that disagrees with the exit code.
    Unclear,
}

impl ScriptOutcome {
    /// The words for it, as the script's line starts.
    pub fn label(self) -> &'static str {
        match self {
            ScriptOutcome::Reproduced => "REPRODUCED",
            ScriptOutcome::NotReproduced => "NOT REPRODUCED",
            ScriptOutcome::CannotRun => "CANNOT RUN",
            ScriptOutcome::TimedOut => "TIMED OUT",
            ScriptOutcome::Unclear => "NO VERDICT",
        }
    }

    /// What the last line and the exit code say together: the line decides when the code
    /// agrees with it; a line the code contradicts is unclear.
    pub fn judge(last_line: Option<&str>, exit_code: Option<i32>) -> ScriptOutcome {
        let line = last_line.unwrap_or("").trim_start();
        let (outcome, code) = if line.starts_with("REPRODUCED:") {
            (ScriptOutcome::Reproduced, 1)
        } else if line.starts_with("NOT REPRODUCED:") {
            (ScriptOutcome::NotReproduced, 0)
        } else if line.starts_with("CANNOT RUN:") {
            (ScriptOutcome::CannotRun, 2)
        } else {
            return ScriptOutcome::Unclear;
        };
        if exit_code == Some(code) {
            outcome
        } else {
            ScriptOutcome::Unclear
        }
    }
}

/// One captured run of `repro.py`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptRun {
    /// The command line, as a user would type it.
    pub command: String,
    /// Exit code (none when killed by a signal or the timeout).
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Seconds it ran.
    pub elapsed_s: f64,
    /// Its standard output (cut to its last lines when long).
    pub stdout: String,
    /// Its standard error (cut to its last lines when long).
    pub stderr: String,
    /// The last non-empty line of stdout.
    pub last_line: Option<String>,
    /// What that line and the exit code say.
    pub outcome: ScriptOutcome,
    /// Whether it ran with the simulated faults installed (SIMULATED).
    pub simulated: bool,
}

/// Everything a repro produced: the inputs ISSUE.md is rendered from.
#[derive(Debug, Clone, PartialEq)]
pub struct Repro {
    /// The run directory (for a `fix` run, its starting check).
    pub run_dir: PathBuf,
    /// Where the files are.
    pub out: PathBuf,
    /// The run's report.
    pub report: Report,
    /// The result reproduced.
    pub result: ProbeResult,
    /// `repro.json`.
    pub manifest: ReproManifest,
    /// `repro.py`.
    pub script: String,
    /// The interpreter.
    pub python: PathBuf,
    /// The run of the script, unless `--no-run`.
    pub run: Option<ScriptRun>,
    /// The newest `fix` that searched from this run, with its directory.
    pub fix: Option<(PathBuf, FixAccount)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_decides_only_with_its_exit_code() {
        use ScriptOutcome::*;
        assert_eq!(
            ScriptOutcome::judge(Some("REPRODUCED: x"), Some(1)),
            Reproduced
        );
        assert_eq!(
            ScriptOutcome::judge(Some("NOT REPRODUCED: x"), Some(0)),
            NotReproduced
        );
        assert_eq!(
            ScriptOutcome::judge(Some("CANNOT RUN: x"), Some(2)),
            CannotRun
        );
        assert_eq!(
            ScriptOutcome::judge(Some("REPRODUCED: x"), Some(0)),
            Unclear
        );
        assert_eq!(ScriptOutcome::judge(Some("Traceback"), Some(1)), Unclear);
        assert_eq!(ScriptOutcome::judge(None, None), Unclear);
    }

    #[test]
    fn a_manifest_with_only_its_probe_reads() {
        let m: ReproManifest = serde_json::from_str(r#"{"probe": "copy.x", "extra": 1}"#).unwrap();
        assert_eq!(m.probe, "copy.x");
        assert!(!m.simulated);
    }
}
