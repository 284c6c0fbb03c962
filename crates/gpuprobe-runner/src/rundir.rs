//! The run directory: a run's plan, its results as they arrive, worker logs and the final
//! report.
//!
//! `results.jsonl` gets one line per probe result, written and synced the moment the result
//! is known. A run killed at any point keeps every finished result, and `--resume` finishes
//! it from there. A torn last line (the kill landed mid-write) is ignored on reading and
//! cut off before a resume appends ([`RunDir::repair_results`]).
//!
//! `stack.json` records what the plan cannot know in advance: the torch version the run's
//! first Python worker reported, and what each `--replan` changed. `--resume` compares it
//! with what it would continue under, so one report never silently mixes two stacks.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use gpuprobe_model::verdict::ProbeResult;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::RunnerError;

// The layout: every name a run directory holds is defined here and nowhere else (a test
// of the workspace's sources keeps it so).

/// The plan: what the run was asked and every planned (probe, device).
pub const PLAN_FILE: &str = "plan.json";
/// Results, one JSON object per line.
pub const RESULTS_FILE: &str = "results.jsonl";
/// The final report; a `check` that has it is finished.
pub const REPORT_FILE: &str = "report.json";
/// What the run's probes ran under, as its workers reported it ([`RunStack`]).
pub const STACK_FILE: &str = "stack.json";
/// The directory of worker logs, made first in every run directory.
pub const WORKERS_DIR: &str = "workers";
/// The directory inside a `fix` run that holds its starting check, a run directory of its
/// own.
pub const FIX_CHECK_DIR: &str = "check";
/// A `fix`'s account of its search; a `fix` that has it is finished.
pub const FIX_ACCOUNT_FILE: &str = "fix.json";
/// The options a `fix` was started with, for `--resume`.
pub const FIX_OPTIONS_FILE: &str = "fix-options.json";
/// A `fix`'s trial journal, one trial per line.
pub const FIX_JOURNAL_FILE: &str = "trials.jsonl";
/// The directory of a `fix`'s trial runs.
pub const FIX_TRIALS_DIR: &str = "trials";
/// Where a `fix` writes its profile unless told otherwise (`run --profile` may read it from
/// there).
pub const PROFILE_FILE: &str = "profile.toml";

/// What a run's probes ran under, beyond its plan: kept so that a resume can tell whether it
/// would continue under something else.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStack {
    /// The torch version the run's first Python worker reported in its hello (none until
    /// one has, or when none could import torch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    /// One line per `--replan`, oldest first: what changed and how many results came
    /// before. Every later report of the run repeats them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replans: Vec<String>,
}

/// A run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates a new run directory (and its parents). Fails clearly when it exists already
    /// or cannot be written.
    pub fn create(path: &Path) -> Result<RunDir, RunnerError> {
        if path.join(PLAN_FILE).exists() {
            return Err(RunnerError::BadRunDir {
                path: path.to_path_buf(),
                reason:
                    "it already holds a run; use --resume to finish it or choose another directory"
                        .into(),
            });
        }
        fs::create_dir_all(path.join(WORKERS_DIR))
            .map_err(|e| RunnerError::io("cannot create run directory", path, e))?;
        // Prove it is writable now rather than after the first probe.
        let probe = path.join(".write-test");
        fs::write(&probe, b"")
            .map_err(|e| RunnerError::io("cannot write in run directory", path, e))?;
        let _ = fs::remove_file(probe);
        Ok(RunDir {
            path: path.to_path_buf(),
        })
    }

    /// Opens an existing run directory (for `--resume`).
    pub fn open(path: &Path) -> Result<RunDir, RunnerError> {
        if !path.join(PLAN_FILE).is_file() {
            return Err(RunnerError::BadRunDir {
                path: path.to_path_buf(),
                reason: format!("no {PLAN_FILE}: not a gpuprobe run directory"),
            });
        }
        fs::create_dir_all(path.join(WORKERS_DIR))
            .map_err(|e| RunnerError::io("cannot write in", path, e))?;
        Ok(RunDir {
            path: path.to_path_buf(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where worker logs go.
    pub fn workers_dir(&self) -> PathBuf {
        self.path.join(WORKERS_DIR)
    }

    /// Writes `name` as pretty JSON, atomically (temporary file, then rename).
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<PathBuf, RunnerError> {
        let path = self.path.join(name);
        let tmp = self.path.join(format!(".{name}.tmp"));
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| RunnerError::Protocol(format!("cannot serialize {name}: {e}")))?;
        fs::write(&tmp, text + "\n").map_err(|e| RunnerError::io("cannot write", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| RunnerError::io("cannot write", &path, e))?;
        Ok(path)
    }

    /// Reads `name` as JSON.
    pub fn read_json<T: DeserializeOwned>(&self, name: &str) -> Result<T, RunnerError> {
        let path = self.path.join(name);
        let text =
            fs::read_to_string(&path).map_err(|e| RunnerError::io("cannot read", &path, e))?;
        serde_json::from_str(&text).map_err(|e| RunnerError::BadRunDir {
            path: path.clone(),
            reason: format!("{name} is not valid: {e}"),
        })
    }

    /// The run's [`RunStack`]; empty for a run that recorded none (made before it existed,
    /// or stopped before any worker said hello).
    pub fn read_stack(&self) -> Result<RunStack, RunnerError> {
        if !self.path.join(STACK_FILE).exists() {
            return Ok(RunStack::default());
        }
        self.read_json(STACK_FILE)
    }

    /// Records the run's [`RunStack`].
    pub fn write_stack(&self, stack: &RunStack) -> Result<(), RunnerError> {
        self.write_json(STACK_FILE, stack).map(|_| ())
    }

    /// Appends one result and syncs it to disk before returning.
    pub fn append_result(&self, result: &ProbeResult) -> Result<(), RunnerError> {
        let path = self.path.join(RESULTS_FILE);
        let mut line = serde_json::to_string(result)
            .map_err(|e| RunnerError::Protocol(format!("cannot serialize a result: {e}")))?;
        line.push('\n');
        let mut file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| RunnerError::io("cannot open", &path, e))?;
        file.write_all(line.as_bytes())
            .map_err(|e| RunnerError::io("cannot append to", &path, e))?;
        file.sync_data()
            .map_err(|e| RunnerError::io("cannot sync", &path, e))?;
        Ok(())
    }

    /// Cuts a torn last line of `results.jsonl` (a kill that landed mid-write) before more
    /// results are appended: appended to, the fragment would swallow the next result's
    /// line, both would be unreadable, and every later resume would run that probe again.
    /// Every complete line is kept, and a last result whole but for its newline gets one.
    /// Returns whether a fragment was cut.
    pub fn repair_results(&self) -> Result<bool, RunnerError> {
        let path = self.path.join(RESULTS_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(RunnerError::io("cannot read", &path, e)),
        };
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let tail = &bytes[complete..];
        if tail.iter().all(u8::is_ascii_whitespace) {
            return Ok(false);
        }
        let file = File::options()
            .append(true)
            .open(&path)
            .map_err(|e| RunnerError::io("cannot open", &path, e))?;
        let whole = serde_json::from_slice::<ProbeResult>(tail).is_ok();
        if whole {
            (&file)
                .write_all(b"\n")
                .map_err(|e| RunnerError::io("cannot append to", &path, e))?;
        } else {
            file.set_len(complete as u64)
                .map_err(|e| RunnerError::io("cannot truncate", &path, e))?;
        }
        file.sync_data()
            .map_err(|e| RunnerError::io("cannot sync", &path, e))?;
        Ok(!whole)
    }

    /// Every result recorded so far; a torn or foreign line is skipped and counted.
    pub fn load_results(&self) -> Result<(Vec<ProbeResult>, usize), RunnerError> {
        let path = self.path.join(RESULTS_FILE);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => return Err(RunnerError::io("cannot read", &path, e)),
        };
        let mut results = Vec::new();
        let mut skipped = 0;
        for line in BufReader::new(file).lines() {
            let Ok(line) = line else {
                skipped += 1;
                continue;
            };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(&line) {
                Ok(result) => results.push(result),
                Err(_) => skipped += 1,
            }
        }
        Ok((results, skipped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::probe::{DeviceRef, Layer, ProbeId};
    use gpuprobe_model::verdict::Verdict;

    fn result(id: &str) -> ProbeResult {
        ProbeResult {
            elapsed_s: Some(0.1),
            ..ProbeResult::new(
                ProbeId::new(id),
                DeviceRef::Cpu,
                Layer::Framework,
                Verdict::Pass,
            )
        }
    }

    #[test]
    fn results_survive_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(&dir.path().join("run")).unwrap();
        run.write_json(PLAN_FILE, &serde_json::json!({"x": 1}))
            .unwrap();
        run.append_result(&result("a.b")).unwrap();
        run.append_result(&result("a.c")).unwrap();
        let mut f = File::options()
            .append(true)
            .open(run.path().join(RESULTS_FILE))
            .unwrap();
        f.write_all(br#"{"probe":"a.d","dev"#).unwrap();
        let (results, skipped) = RunDir::open(run.path()).unwrap().load_results().unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(skipped, 1);
    }

    #[test]
    fn a_torn_last_line_is_cut_before_appending_and_complete_lines_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(&dir.path().join("run")).unwrap();
        assert!(!run.repair_results().unwrap(), "no results file yet");
        run.append_result(&result("a.b")).unwrap();
        let path = run.path().join(RESULTS_FILE);
        let mut f = File::options().append(true).open(&path).unwrap();
        f.write_all(br#"{"probe":"a.d","dev"#).unwrap();
        assert!(run.repair_results().unwrap());
        run.append_result(&result("a.d")).unwrap();
        let (results, skipped) = run.load_results().unwrap();
        let ids: Vec<&str> = results.iter().map(|r| r.probe.as_str()).collect();
        assert_eq!((ids, skipped), (vec!["a.b", "a.d"], 0));
        // A last result whole but for its newline is kept, and ends its line.
        let whole = serde_json::to_string(&result("a.e")).unwrap();
        f.write_all(whole.as_bytes()).unwrap();
        assert!(!run.repair_results().unwrap());
        run.append_result(&result("a.f")).unwrap();
        let (results, skipped) = run.load_results().unwrap();
        assert_eq!((results.len(), skipped), (4, 0));
        // Nothing to repair: nothing changes.
        let before = fs::read(&path).unwrap();
        assert!(!run.repair_results().unwrap());
        assert_eq!(fs::read(&path).unwrap(), before);
    }

    #[test]
    fn refuses_to_reuse_a_run_and_to_open_a_non_run() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        run.write_json(PLAN_FILE, &1).unwrap();
        assert!(RunDir::create(dir.path()).is_err());
        let other = tempfile::tempdir().unwrap();
        assert!(
            RunDir::open(other.path())
                .unwrap_err()
                .to_string()
                .contains("not a gpuprobe run")
        );
    }

    #[test]
    fn the_stack_reads_back_and_is_empty_until_written() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(dir.path()).unwrap();
        assert_eq!(run.read_stack().unwrap(), RunStack::default());
        let stack = RunStack {
            torch: Some("2.5.1+cpu".into()),
            replans: vec!["re-planned".into()],
        };
        run.write_stack(&stack).unwrap();
        assert_eq!(run.read_stack().unwrap(), stack);
    }

    #[test]
    fn unwritable_directory_is_a_clear_error() {
        let err = RunDir::create(Path::new("/proc/gpuprobe-cannot-write-here")).unwrap_err();
        assert!(err.to_string().contains("cannot"), "{err}");
    }
}
