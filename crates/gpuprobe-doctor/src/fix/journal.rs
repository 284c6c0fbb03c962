//! The trial journal of a `fix` run, and the runner that makes an interrupted search
//! resumable.
//!
//! Every finished trial is appended to the journal as one JSON line (the request: number,
//! phase, settings, probes; and the outcome: every probe's result, workers, wall time),
//! flushed and synced before the search moves on, so a trial that finished survives a
//! kill, a reboot or a lost session. The search is a pure function of its inputs and of
//! the trials' outcomes, so replaying the recorded outcomes in order walks the same path:
//! [`Journaled`] answers each request that matches the next recorded trial from the
//! journal and runs (and records) only what comes after. The result is the one an
//! uninterrupted run would have reached with the same outcomes.
//!
//! A trial that a signal cut short has no outcome ([`Interrupted`]): it is never recorded,
//! and the search stops there. A line cut short by a kill (the trial that was being
//! written) is dropped on resume, and
//! so is everything after a line that cannot be read. If the search asks for something the
//! journal does not hold at that point (the candidates changed because the environment
//! did), the rest of the journal is discarded from there and the search runs on.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use gpuprobe_model::ProbeResult;
use gpuprobe_model::{ProbeRef, SettingChange};
use serde::{Deserialize, Serialize};

use super::search::{Phase, TrialOutcome, TrialRequest, TrialRunner};
use crate::session::Interrupted;

/// Version of the [`TrialRecord`] line format.
pub(super) const JOURNAL_VERSION: u32 = 1;

/// One finished trial, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct TrialRecord {
    /// [`JOURNAL_VERSION`].
    pub version: u32,
    /// 1-based trial number.
    pub number: u32,
    /// The step.
    pub phase: Phase,
    /// The settings the trial ran with.
    pub settings: Vec<SettingChange>,
    /// The probes it ran, in the order asked for.
    pub probes: Vec<ProbeRef>,
    /// What came back.
    pub results: Vec<ProbeResult>,
    /// Worker processes started.
    pub workers: u32,
    /// Wall time, seconds.
    pub elapsed_s: f64,
}

impl TrialRecord {
    /// The record of a trial that has just run.
    pub(super) fn new(request: &TrialRequest<'_>, outcome: &TrialOutcome) -> TrialRecord {
        TrialRecord {
            version: JOURNAL_VERSION,
            number: request.number,
            phase: request.phase,
            settings: request.settings.to_vec(),
            probes: request.probes.to_vec(),
            results: outcome.results.clone(),
            workers: outcome.workers,
            elapsed_s: outcome.elapsed_s,
        }
    }

    /// Whether this record is the answer to `request`: the same trial of the same search.
    fn answers(&self, request: &TrialRequest<'_>) -> bool {
        self.number == request.number
            && self.phase == request.phase
            && self.settings == request.settings
            && self.probes == request.probes
    }

    fn into_outcome(self) -> TrialOutcome {
        TrialOutcome {
            results: self.results,
            workers: self.workers,
            elapsed_s: self.elapsed_s,
            replayed: true,
        }
    }
}

/// A journal that cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} trial journal {}: {source}", path.display())]
pub struct JournalError {
    action: &'static str,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// What a resumed journal held.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    /// The trials, in order.
    pub records: Vec<TrialRecord>,
    /// Lines dropped: a line cut short by the interruption, and whatever followed a line
    /// that could not be read.
    pub dropped_lines: usize,
}

/// The append-only journal file.
#[derive(Debug)]
pub(super) struct Journal {
    path: PathBuf,
    file: File,
    /// The lines the file holds, for rewriting it without the ones dropped.
    lines: Vec<String>,
}

impl Journal {
    /// Starts a new journal; refuses to overwrite one.
    pub(super) fn create(path: &Path) -> Result<Journal, JournalError> {
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)
            .map_err(|e| error("create", path, e))?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            lines: Vec::new(),
        })
    }

    /// Reopens a journal to go on with it: reads the trials it holds, drops a torn last
    /// line (and anything after a line that cannot be read), and keeps the file to those.
    pub(super) fn resume(path: &Path) -> Result<(Journal, Loaded), JournalError> {
        let text = std::fs::read_to_string(path).map_err(|e| error("read", path, e))?;
        let mut loaded = Loaded::default();
        let mut lines = Vec::new();
        let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        for (index, line) in all.iter().enumerate() {
            match serde_json::from_str::<TrialRecord>(line) {
                Ok(record)
                    if record.version == JOURNAL_VERSION
                        && record.number as usize == loaded.records.len() + 1 =>
                {
                    loaded.records.push(record);
                    lines.push(line.to_string());
                }
                _ => {
                    loaded.dropped_lines = all.len() - index;
                    break;
                }
            }
        }
        // A last line without its line break was being written when the run stopped; if it
        // parsed, the record in it is whole (a cut JSON object does not parse), and either
        // way the file is rewritten to whole lines before anything is appended.
        let whole = text.is_empty() || text.ends_with('\n');
        let mut journal = Journal {
            path: path.to_path_buf(),
            file: OpenOptions::new()
                .append(true)
                .open(path)
                .map_err(|e| error("open", path, e))?,
            lines,
        };
        if loaded.dropped_lines > 0 || !whole {
            journal.rewrite()?;
        }
        Ok((journal, loaded))
    }

    /// Appends one trial, flushed and synced to disk before it returns.
    pub(super) fn append(&mut self, record: &TrialRecord) -> Result<(), JournalError> {
        let line = serde_json::to_string(record)
            .map_err(|e| error("encode a line of", &self.path, e.into()))?;
        self.file
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| self.file.flush())
            .and_then(|()| self.file.sync_data())
            .map_err(|e| error("append to", &self.path, e))?;
        self.lines.push(line);
        Ok(())
    }

    /// Keeps only the first `keep` trials.
    pub(super) fn truncate(&mut self, keep: usize) -> Result<(), JournalError> {
        if keep < self.lines.len() {
            self.lines.truncate(keep);
            self.rewrite()?;
        }
        Ok(())
    }

    /// Replaces the file with the kept lines (a new file, synced, renamed over the old).
    fn rewrite(&mut self) -> Result<(), JournalError> {
        let temporary = self.path.with_extension("jsonl.tmp");
        let mut body = self.lines.join("\n");
        if !body.is_empty() {
            body.push('\n');
        }
        let written = File::create(&temporary).and_then(|mut file| {
            file.write_all(body.as_bytes())?;
            file.sync_all()
        });
        written.map_err(|e| error("rewrite", &self.path, e))?;
        std::fs::rename(&temporary, &self.path).map_err(|e| error("rewrite", &self.path, e))?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| error("open", &self.path, e))?;
        Ok(())
    }
}

fn error(action: &'static str, path: &Path, source: std::io::Error) -> JournalError {
    JournalError {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// A [`TrialRunner`] that answers from the recorded trials while the search retraces them,
/// and runs and records every trial after that.
pub(super) struct Journaled<'a> {
    inner: &'a mut dyn TrialRunner,
    journal: &'a mut Journal,
    pending: VecDeque<TrialRecord>,
    replayed: u32,
    diverged_at: Option<u32>,
    write_error: Option<JournalError>,
}

impl<'a> Journaled<'a> {
    /// Wraps `inner`; `recorded` are the trials a resumed journal held (none for a new run).
    pub(super) fn new(
        inner: &'a mut dyn TrialRunner,
        journal: &'a mut Journal,
        recorded: Vec<TrialRecord>,
    ) -> Journaled<'a> {
        Journaled {
            inner,
            journal,
            pending: recorded.into(),
            replayed: 0,
            diverged_at: None,
            write_error: None,
        }
    }

    /// Trials answered from the journal.
    pub(super) fn replayed(&self) -> u32 {
        self.replayed
    }

    /// The trial at which the search asked for something other than what the journal
    /// held (the rest of the journal was discarded from there).
    pub(super) fn diverged_at(&self) -> Option<u32> {
        self.diverged_at
    }

    /// The first failure to record a trial (later trials were not recorded either, so a
    /// resume would run them again).
    pub(super) fn write_error(&self) -> Option<&JournalError> {
        self.write_error.as_ref()
    }
}

impl TrialRunner for Journaled<'_> {
    fn run(&mut self, request: &TrialRequest<'_>) -> Result<TrialOutcome, Interrupted> {
        if let Some(next) = self.pending.front()
            && next.answers(request)
            && let Some(record) = self.pending.pop_front()
        {
            self.replayed += 1;
            return Ok(record.into_outcome());
        }
        if !self.pending.is_empty() {
            self.pending.clear();
            self.diverged_at = Some(request.number);
            if self.write_error.is_none()
                && let Err(e) = self
                    .journal
                    .truncate(request.number.saturating_sub(1) as usize)
            {
                self.write_error = Some(e);
            }
        }
        // Cut short by a signal: nothing to record, and a resume runs it again.
        let outcome = self.inner.run(request)?;
        if self.write_error.is_none()
            && let Err(e) = self.journal.append(&TrialRecord::new(request, &outcome))
        {
            self.write_error = Some(e);
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fix::candidates::Candidate;
    use crate::fix::search::{SearchInput, SearchResult, search};
    use crate::session::Stopped;
    use gpuprobe_model::Cost;
    use gpuprobe_model::{DeviceRef, Layer, ProbeId};
    use gpuprobe_model::{FailClass, Verdict};

    /// Probe `a` fails unless `FIX_A=1`, probe `b` unless `FIX_B=1`; `BREAKS=1` breaks the
    /// sentinel `s`. Counts the trials it really runs; a signal cuts short trial
    /// `signal_in`, when set.
    #[derive(Default)]
    struct Stack {
        ran: Vec<u32>,
        signal_in: Option<u32>,
    }

    impl TrialRunner for Stack {
        fn run(&mut self, request: &TrialRequest<'_>) -> Result<TrialOutcome, Interrupted> {
            if self.signal_in == Some(request.number) {
                return Err(Interrupted {
                    signal: 2,
                    stopped: Stopped::Fix {
                        fix_dir: PathBuf::from("/fix"),
                        trial: Some(request.number),
                    },
                });
            }
            self.ran.push(request.number);
            let on = |s: &str| request.settings.iter().any(|c| c.describe() == s);
            let results = request
                .probes
                .iter()
                .map(|p| {
                    let pass = match p.probe.as_str() {
                        "a" => on("FIX_A=1"),
                        "b" => on("FIX_B=1"),
                        _ => !on("BREAKS=1"),
                    };
                    outcome(p.probe.as_str(), pass)
                })
                .collect();
            Ok(TrialOutcome {
                results,
                workers: 1,
                elapsed_s: f64::from(request.number) * 0.25,
                replayed: false,
            })
        }
    }

    fn outcome(probe: &str, pass: bool) -> ProbeResult {
        ProbeResult::new(
            ProbeId::new(probe),
            DeviceRef::Cpu,
            Layer::Framework,
            if pass {
                Verdict::Pass
            } else {
                Verdict::Fail {
                    class: FailClass::AllZeros,
                    detail: "zeros".into(),
                }
            },
        )
    }

    fn candidate(setting: &str) -> Candidate {
        Candidate {
            change: SettingChange::parse(setting),
            title: setting.into(),
            sources: vec!["CAT-TEST".into()],
            cost: Cost::default(),
            rank: 3,
        }
    }

    fn run(runner: &mut dyn TrialRunner) -> SearchResult {
        try_run(runner).expect("no signal")
    }

    fn try_run(runner: &mut dyn TrialRunner) -> Result<SearchResult, Interrupted> {
        let failures = vec![outcome("a", false), outcome("b", false)];
        let sentinels = vec![vec![ProbeRef {
            probe: ProbeId::new("s"),
            device: DeviceRef::Cpu,
        }]];
        let candidates: Vec<Candidate> = ["BREAKS=1", "FIX_A=1", "NOOP=1", "FIX_B=1"]
            .iter()
            .map(|s| candidate(s))
            .collect();
        search(
            &SearchInput {
                failures: &failures,
                sentinels: &sentinels,
                measure: &[],
                candidates: &candidates,
                max_runs: 40,
            },
            runner,
            &mut |_| {},
        )
    }

    fn same(a: &SearchResult, b: &SearchResult) {
        assert_eq!(a.chosen, b.chosen);
        assert_eq!(a.targets, b.targets);
        assert_eq!(a.candidates, b.candidates);
        assert_eq!(a.verification, b.verification);
        assert_eq!(a.budget, b.budget);
        assert_eq!(a.notes, b.notes);
    }

    /// The uninterrupted search, journaled: its result and its journal's lines.
    fn uninterrupted(dir: &Path) -> (SearchResult, Vec<String>) {
        let path = dir.join("full.jsonl");
        let mut journal = Journal::create(&path).unwrap();
        let mut stack = Stack::default();
        let result = run(&mut Journaled::new(&mut stack, &mut journal, Vec::new()));
        let lines: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(lines.len() as u32, result.budget.trials);
        assert_eq!(stack.ran.len() as u32, result.budget.trials);
        (result, lines)
    }

    #[test]
    fn a_resumed_search_runs_only_the_missing_trials_and_ends_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let (full, lines) = uninterrupted(dir.path());
        assert_eq!(full.chosen.len(), 2, "{:?}", full.chosen);
        let total = lines.len();
        for k in 0..=total {
            // Interrupted after k trials, in the middle of writing the next line.
            let path = dir.path().join(format!("cut-{k}.jsonl"));
            let mut text: String = lines[..k].iter().map(|l| format!("{l}\n")).collect();
            if k < total {
                text.push_str(&lines[k][..lines[k].len() / 2]);
            }
            std::fs::write(&path, text).unwrap();
            let (mut journal, loaded) = Journal::resume(&path).unwrap();
            assert_eq!(loaded.records.len(), k);
            assert_eq!(loaded.dropped_lines, usize::from(k < total));
            let mut stack = Stack::default();
            let mut runner = Journaled::new(&mut stack, &mut journal, loaded.records);
            let resumed = run(&mut runner);
            assert_eq!(runner.replayed() as usize, k);
            assert_eq!(runner.diverged_at(), None);
            assert!(runner.write_error().is_none());
            same(&resumed, &full);
            // Only the trials after k ran again, and the journal is whole again.
            assert_eq!(
                stack.ran,
                ((k as u32 + 1)..=total as u32).collect::<Vec<_>>()
            );
            let again: Vec<String> = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
            assert_eq!(again.len(), total, "k = {k}");
            assert_eq!(again[..k], lines[..k]);
        }
    }

    #[test]
    fn a_trial_cut_short_by_a_signal_ends_the_search_unrecorded_and_a_resume_runs_it() {
        let dir = tempfile::tempdir().unwrap();
        let (full, lines) = uninterrupted(dir.path());
        let path = dir.path().join("signal.jsonl");
        let mut journal = Journal::create(&path).unwrap();
        let mut stack = Stack {
            signal_in: Some(3),
            ..Stack::default()
        };
        let stopped = try_run(&mut Journaled::new(&mut stack, &mut journal, Vec::new()));
        let interrupted = stopped.expect_err("the signal ends the search");
        assert_eq!(interrupted.signal, 2);
        // Nothing after the cut-short trial ran, and only the two finished are recorded.
        assert_eq!(stack.ran, [1, 2]);
        let recorded = std::fs::read_to_string(&path).unwrap();
        assert_eq!(recorded, format!("{}\n{}\n", lines[0], lines[1]));
        let (mut journal, loaded) = Journal::resume(&path).unwrap();
        let mut stack = Stack::default();
        let resumed = run(&mut Journaled::new(
            &mut stack,
            &mut journal,
            loaded.records,
        ));
        same(&resumed, &full);
        assert_eq!(stack.ran.first(), Some(&3));
    }

    #[test]
    fn a_journal_of_another_search_is_discarded_where_it_departs() {
        let dir = tempfile::tempdir().unwrap();
        let (full, lines) = uninterrupted(dir.path());
        // The second trial recorded with other settings (the candidates changed since).
        let mut other: TrialRecord = serde_json::from_str(&lines[1]).unwrap();
        other.settings = vec![SettingChange::parse("ELSEWHERE=1")];
        let path = dir.path().join("other.jsonl");
        let text = format!(
            "{}\n{}\n{}\n",
            lines[0],
            serde_json::to_string(&other).unwrap(),
            lines[2]
        );
        std::fs::write(&path, text).unwrap();
        let (mut journal, loaded) = Journal::resume(&path).unwrap();
        assert_eq!(loaded.records.len(), 3);
        let mut stack = Stack::default();
        let mut runner = Journaled::new(&mut stack, &mut journal, loaded.records);
        let resumed = run(&mut runner);
        assert_eq!(runner.replayed(), 1);
        assert_eq!(runner.diverged_at(), Some(2));
        same(&resumed, &full);
        assert_eq!(stack.ran.first(), Some(&2));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().lines().count(),
            lines.len()
        );
    }

    #[test]
    fn unreadable_lines_end_the_journal_and_a_new_one_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let (_, lines) = uninterrupted(dir.path());
        let path = dir.path().join("garbled.jsonl");
        std::fs::write(&path, format!("{}\nnot json\n{}\n", lines[0], lines[2])).unwrap();
        let (_, loaded) = Journal::resume(&path).unwrap();
        assert_eq!(loaded.records.len(), 1);
        assert_eq!(loaded.dropped_lines, 2);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", lines[0])
        );
        assert!(
            Journal::create(&path).is_err(),
            "an existing journal is kept"
        );
        let missing = Journal::resume(&dir.path().join("none.jsonl")).unwrap_err();
        assert!(
            missing.to_string().contains("cannot read trial journal"),
            "{missing}"
        );
    }
}
