//! The search itself, over an abstract [`TrialRunner`] (fresh workers in the binary, a
//! model of the faults in tests).
//!
//! 1. **Baseline**: the failures and the sentinels, no settings. A failure that passes now
//!    did not reproduce (flaky): no cure can be proven for it. A sentinel that does not
//!    pass is dropped.
//! 2. **Singles**: each candidate alone on the failures and sentinels. A candidate that
//!    breaks a sentinel is rejected, whatever it cures.
//! 3. **Groups**, only for failures no accepted single cures: all compatible accepted
//!    candidates on at once (one value per variable; alternatives are rotated), and when
//!    that cures some of them without breaking a sentinel, delta debugging (ddmin) shrinks
//!    the set to a 1-minimal one that still does. Never all 2^K subsets.
//! 4. **Cover**: the smallest compatible set of proven options (singles and groups) that
//!    covers every curable failure, cheaper settings preferred in ties.
//! 5. **Verify** the chosen set in one final run, with the throughput probes; its timing
//!    against the baseline's is the measured cost.
//!
//! Every trial counts against `max_runs`; one trial is kept for the verification. When the
//! budget runs out the search says so and works with what it has. A trial that a signal
//! cut short ends the search at once: its results are no outcome of the trial, and the
//! search returns the interruption instead of a result.

use std::collections::{BTreeMap, BTreeSet};

use gpuprobe_model::Measurement;
use gpuprobe_model::{
    CandidateTrial, CostMeasurement, FixTarget, GroupTrial, MetricCost, PartialCure,
    ProbeOutcomeRef, ProbeRef, RunBudget, SettingChange, TargetStatus, Verification,
};
use gpuprobe_model::{ProbeResult, Verdict};

use super::candidates::Candidate;
use super::conflicts;
use crate::session::Interrupted;

/// Which step of the search a trial belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// Do the failures reproduce without settings?
    Baseline,
    /// One candidate alone.
    Single,
    /// A combination.
    Group,
    /// The chosen settings, once more.
    Verify,
}

impl Phase {
    /// Lowercase name for logs and directory names.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Baseline => "baseline",
            Phase::Single => "single",
            Phase::Group => "group",
            Phase::Verify => "verify",
        }
    }
}

/// One trial to run: these probes, in fresh workers, with these settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrialRequest<'a> {
    /// 1-based trial number.
    pub number: u32,
    /// The step.
    pub phase: Phase,
    /// The settings.
    pub settings: &'a [SettingChange],
    /// The probes.
    pub probes: &'a [ProbeRef],
}

/// What a trial produced.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrialOutcome {
    /// One result per probe (a missing one counts as not passing).
    pub results: Vec<ProbeResult>,
    /// Worker processes the trial started.
    pub workers: u32,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Whether the outcome was read back from the journal of an interrupted run instead
    /// of being run now (see [`super::journal`]).
    pub replayed: bool,
}

/// Runs trials. Each call must start fresh workers: settings are read at process start.
pub(crate) trait TrialRunner {
    /// Runs one trial; a trial a signal cut short has no outcome.
    fn run(&mut self, request: &TrialRequest<'_>) -> Result<TrialOutcome, Interrupted>;
}

/// What the search reports as it goes (one line per trial, for the terminal).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrialSummary {
    /// 1-based trial number.
    pub number: u32,
    /// The step.
    pub phase: Phase,
    /// The settings.
    pub settings: Vec<SettingChange>,
    /// Failures that passed.
    pub cured: usize,
    /// Failures run.
    pub targets: usize,
    /// Sentinels that did not pass.
    pub broke: usize,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Whether the trial was read back from the journal rather than run now.
    pub replayed: bool,
}

/// The search's inputs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SearchInput<'a> {
    /// The failing results of the starting run.
    pub failures: &'a [ProbeResult],
    /// Sentinel slots: each a probe and its alternatives, in order of preference; the
    /// baseline keeps the first of each slot that passes.
    pub sentinels: &'a [Vec<ProbeRef>],
    /// Throughput probes run in the baseline and the verification only.
    pub measure: &'a [ProbeRef],
    /// Candidates, in the order to try them.
    pub candidates: &'a [Candidate],
    /// The most trials to run (at least 2: baseline and verification).
    pub max_runs: u32,
}

/// One proven way to cure some failures: a single setting or a group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CoverOption {
    /// The settings, together.
    pub changes: Vec<SettingChange>,
    /// What they cure (in their own trial).
    pub cures: BTreeSet<ProbeRef>,
    /// Sources of the settings (KB and catalogue ids).
    pub sources: Vec<String>,
    /// How many of the settings make things slower.
    pub slower: usize,
    /// Summed preference ranks (lower is better).
    pub rank: u32,
}

impl CoverOption {
    /// `A=1 + B=2`.
    pub(crate) fn label(&self) -> String {
        self.changes
            .iter()
            .map(SettingChange::describe)
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// Everything the search found.
#[derive(Debug, Clone, Default)]
pub(crate) struct SearchResult {
    /// The failures and what became of each.
    pub targets: Vec<FixTarget>,
    /// Sentinels that passed the baseline and were used.
    pub sentinels: Vec<ProbeRef>,
    /// Sentinels dropped because they did not pass the baseline.
    pub dropped_sentinels: Vec<ProbeOutcomeRef>,
    /// Every candidate, tried or not.
    pub candidates: Vec<CandidateTrial>,
    /// Group-search steps.
    pub groups: Vec<GroupTrial>,
    /// The proven options the cover was chosen from.
    pub options: Vec<CoverOption>,
    /// The options chosen.
    pub chosen_options: Vec<CoverOption>,
    /// The chosen settings.
    pub chosen: Vec<SettingChange>,
    /// The final run.
    pub verification: Option<Verification>,
    /// The measured cost (with the method left for the caller to state).
    pub cost: Option<CostMeasurement>,
    /// Trials used.
    pub budget: RunBudget,
    /// Whether any failure reproduced in the baseline.
    pub reproduced: bool,
    /// Remarks.
    pub notes: Vec<String>,
}

fn key(result: &ProbeResult) -> ProbeRef {
    ProbeRef {
        probe: result.probe.clone(),
        device: result.device,
    }
}

fn outcome_ref(result: &ProbeResult) -> ProbeOutcomeRef {
    ProbeOutcomeRef {
        at: key(result),
        verdict: result.verdict.label().to_string(),
        detail: result.verdict.detail(),
    }
}

fn missing(at: &ProbeRef) -> ProbeOutcomeRef {
    ProbeOutcomeRef {
        at: at.clone(),
        verdict: "NOT-TESTED".into(),
        detail: "no result came back from the trial".into(),
    }
}

/// How bad a verdict is, for "made worse": a wrong result is better than an error, which
/// is better than a crash or a hang.
fn badness(verdict: &Verdict) -> u8 {
    match verdict {
        Verdict::Pass | Verdict::Skip { .. } | Verdict::NotTested { .. } => 0,
        Verdict::Fail { .. } => 1,
        Verdict::Error { .. } => 2,
        Verdict::Crash { .. } | Verdict::Hang { .. } => 3,
    }
}

/// The failing cases of an operator-sweep result (`variant direction sample N output`), and
/// whether the list is complete (the sweep records the first few of many).
fn failing_cases(result: &ProbeResult) -> Option<(Vec<String>, bool)> {
    let observation = result.observation.as_ref()?;
    let Measurement::Sweep(sweep) = &observation.measurement else {
        return None;
    };
    let cases: Vec<String> = sweep
        .failures
        .iter()
        .map(|f| {
            format!(
                "{} {} sample {} {}",
                f.variant, f.direction, f.sample, f.output
            )
        })
        .collect();
    let total: u64 = sweep.failed.values().sum();
    let complete = total as usize == cases.len();
    Some((cases, complete))
}

/// The cases of a still-failing sweep probe that a trial cured: those of the starting run
/// that are gone, when the trial's own (complete) list holds no case the start did not.
fn partial_cure(before: &ProbeResult, now: &ProbeResult) -> Option<PartialCure> {
    if !matches!(now.verdict, Verdict::Fail { .. }) {
        return None;
    }
    let (then, _) = failing_cases(before)?;
    let (still, complete) = failing_cases(now)?;
    if !complete || still.is_empty() || still.iter().any(|case| !then.contains(case)) {
        return None;
    }
    let cured_cases: Vec<String> = then.into_iter().filter(|c| !still.contains(c)).collect();
    (!cured_cases.is_empty()).then(|| PartialCure {
        at: key(now),
        cured_cases,
        still_failing: still,
    })
}

/// A trial's results by probe.
struct Observed {
    by_key: BTreeMap<ProbeRef, ProbeResult>,
    elapsed_s: f64,
    replayed: bool,
}

impl Observed {
    fn new(outcome: TrialOutcome) -> Observed {
        Observed {
            by_key: outcome.results.into_iter().map(|r| (key(&r), r)).collect(),
            elapsed_s: outcome.elapsed_s,
            replayed: outcome.replayed,
        }
    }

    fn passed(&self, at: &ProbeRef) -> bool {
        self.by_key
            .get(at)
            .is_some_and(|r| matches!(r.verdict, Verdict::Pass))
    }

    fn not_passing(&self, keys: &[ProbeRef]) -> Vec<ProbeOutcomeRef> {
        keys.iter()
            .filter(|k| !self.passed(k))
            .map(|k| self.by_key.get(k).map_or_else(|| missing(k), outcome_ref))
            .collect()
    }
}

/// The search state: the runner and the budget.
struct Searcher<'r> {
    runner: &'r mut dyn TrialRunner,
    on_trial: &'r mut dyn FnMut(&TrialSummary),
    budget: RunBudget,
}

impl Searcher<'_> {
    /// Trials left for the search proper (one is kept for the verification).
    fn can_search(&self) -> bool {
        self.budget.trials + 1 < self.budget.max_runs
    }

    fn run(
        &mut self,
        phase: Phase,
        settings: &[SettingChange],
        targets: &[ProbeRef],
        others: &[ProbeRef],
    ) -> Result<Observed, Interrupted> {
        self.budget.trials += 1;
        let mut probes: Vec<ProbeRef> = targets.to_vec();
        for other in others {
            if !probes.contains(other) {
                probes.push(other.clone());
            }
        }
        let request = TrialRequest {
            number: self.budget.trials,
            phase,
            settings,
            probes: &probes,
        };
        let outcome = self.runner.run(&request)?;
        self.budget.workers += outcome.workers;
        let observed = Observed::new(outcome);
        let summary = TrialSummary {
            number: self.budget.trials,
            phase,
            settings: settings.to_vec(),
            cured: targets.iter().filter(|t| observed.passed(t)).count(),
            targets: targets.len(),
            broke: others.iter().filter(|s| !observed.passed(s)).count(),
            elapsed_s: observed.elapsed_s,
            replayed: observed.replayed,
        };
        (self.on_trial)(&summary);
        Ok(observed)
    }
}

/// What a candidate tried alone did: the failures it cured and whether it broke a
/// sentinel; `None` when it was not tried.
type SingleOutcome = Option<(BTreeSet<ProbeRef>, bool)>;

/// What the baseline established, for the later phases.
struct Baseline {
    /// The baseline trial itself (its timings are the cost's "without").
    observed: Observed,
    /// Failures that failed again: the ones worth curing.
    reproduced: Vec<ProbeRef>,
    /// Failures that passed when re-run.
    flaky: BTreeSet<ProbeRef>,
    /// The sentinels kept (also in `out.sentinels`).
    sentinels: Vec<ProbeRef>,
}

/// What the verification left standing.
struct Verified {
    /// The failures cured in the final reckoning.
    cured: BTreeSet<ProbeRef>,
    /// The options kept.
    chosen_options: Vec<CoverOption>,
    /// Their settings.
    chosen: Vec<SettingChange>,
}

/// Runs the search. `on_trial` hears about every trial as it ends.
pub(crate) fn search(
    input: &SearchInput<'_>,
    runner: &mut dyn TrialRunner,
    on_trial: &mut dyn FnMut(&TrialSummary),
) -> Result<SearchResult, Interrupted> {
    let mut out = SearchResult::default();
    let mut searcher = Searcher {
        runner,
        on_trial,
        budget: RunBudget {
            max_runs: input.max_runs.max(2),
            ..RunBudget::default()
        },
    };
    let baseline = run_baseline(input, &mut searcher, &mut out)?;
    let single_outcomes = try_singles(input, &mut searcher, &mut out, &baseline)?;
    record_single_options(input, &single_outcomes, &mut out);
    search_groups(input, &mut searcher, &mut out, &baseline, &single_outcomes)?;
    let chosen_options = choose_cover(&out.options);
    let verified = verify_chosen(input, &mut searcher, &mut out, &baseline, chosen_options)?;
    record_targets(input, &mut out, &baseline.flaky, &verified.cured);
    out.chosen_options = verified.chosen_options;
    out.chosen = verified.chosen;
    out.budget = searcher.budget;
    Ok(out)
}

/// Phase 1, the baseline: every failure, every sentinel alternative and the throughput probes,
/// without settings. Sorts the failures into reproduced and flaky, keeps the first
/// passing sentinel of each slot, and notes what looked wrong.
fn run_baseline(
    input: &SearchInput<'_>,
    searcher: &mut Searcher<'_>,
    out: &mut SearchResult,
) -> Result<Baseline, Interrupted> {
    let all_targets: Vec<ProbeRef> = input.failures.iter().map(key).collect();
    let sentinel_candidates: Vec<ProbeRef> = input.sentinels.iter().flatten().cloned().collect();
    let baseline = searcher.run(
        Phase::Baseline,
        &[],
        &all_targets,
        &[sentinel_candidates.as_slice(), input.measure].concat(),
    )?;
    let reproduced: Vec<ProbeRef> = all_targets
        .iter()
        .filter(|t| !baseline.passed(t))
        .cloned()
        .collect();
    let flaky: BTreeSet<ProbeRef> = all_targets
        .iter()
        .filter(|t| baseline.passed(t))
        .cloned()
        .collect();
    for slot in input.sentinels {
        match slot.iter().find(|s| baseline.passed(s)) {
            Some(sentinel) => out.sentinels.push(sentinel.clone()),
            None => out.dropped_sentinels.extend(slot.iter().map(|s| {
                baseline
                    .by_key
                    .get(s)
                    .map_or_else(|| missing(s), outcome_ref)
            })),
        }
    }
    let unexpected: Vec<String> = sentinel_candidates
        .iter()
        .filter_map(|s| baseline.by_key.get(s))
        .filter(|r| r.verdict.is_problem())
        .map(|r| format!("{} ({})", key(r), r.verdict.detail()))
        .collect();
    if !flaky.is_empty() {
        out.notes.push(format!(
            "{} failure(s) did not reproduce in the baseline re-run (intermittent): {}",
            flaky.len(),
            flaky
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !unexpected.is_empty() {
        out.notes.push(format!(
            "{} probe(s) outside the starting run's failures also failed in the baseline and \
             were not used as sentinels (run `check` without --only to see every failure): {}",
            unexpected.len(),
            unexpected.join("; ")
        ));
    }
    if !out.dropped_sentinels.is_empty() {
        out.notes.push(format!(
            "{} sentinel slot(s) had no passing probe and were left empty",
            input.sentinels.len() - out.sentinels.len()
        ));
    }
    out.reproduced = !reproduced.is_empty();
    Ok(Baseline {
        observed: baseline,
        reproduced,
        flaky,
        sentinels: out.sentinels.clone(),
    })
}

/// Phase 2, the singles: each candidate alone on the reproduced failures and the sentinels, while
/// the budget lasts. Records every candidate in `out.candidates`, tried or not.
fn try_singles(
    input: &SearchInput<'_>,
    searcher: &mut Searcher<'_>,
    out: &mut SearchResult,
    baseline: &Baseline,
) -> Result<Vec<SingleOutcome>, Interrupted> {
    let reproduced = &baseline.reproduced;
    let sentinels = &baseline.sentinels;
    let first_seen: BTreeMap<ProbeRef, &ProbeResult> =
        input.failures.iter().map(|r| (key(r), r)).collect();
    let mut single_outcomes: Vec<SingleOutcome> = Vec::new();
    for candidate in input.candidates {
        let mut trial = CandidateTrial {
            setting: candidate.change.clone(),
            title: candidate.title.clone(),
            sources: candidate.sources.clone(),
            cost: candidate.cost.clone(),
            tried: false,
            not_tried_because: None,
            cured: vec![],
            broke: vec![],
            worsened: vec![],
            partly_cured: vec![],
            elapsed_s: None,
        };
        if reproduced.is_empty() {
            trial.not_tried_because = Some("no failure reproduced".into());
        } else if !searcher.can_search() {
            trial.not_tried_because = Some(format!(
                "the run budget (--max-runs {}) ran out",
                searcher.budget.max_runs
            ));
            searcher.budget.exhausted = true;
        }
        if trial.not_tried_because.is_some() {
            single_outcomes.push(None);
            out.candidates.push(trial);
            continue;
        }
        let observed = searcher.run(
            Phase::Single,
            std::slice::from_ref(&candidate.change),
            reproduced,
            sentinels,
        )?;
        trial.tried = true;
        trial.elapsed_s = Some(observed.elapsed_s);
        trial.cured = reproduced
            .iter()
            .filter(|t| observed.passed(t))
            .cloned()
            .collect();
        trial.broke = observed.not_passing(sentinels);
        trial.worsened = reproduced
            .iter()
            .filter_map(|t| {
                let now = observed.by_key.get(t)?;
                let before = first_seen.get(t)?;
                (badness(&now.verdict) > badness(&before.verdict)).then(|| outcome_ref(now))
            })
            .collect();
        trial.partly_cured = reproduced
            .iter()
            .filter_map(|t| partial_cure(first_seen.get(t)?, observed.by_key.get(t)?))
            .collect();
        single_outcomes.push(Some((
            trial.cured.iter().cloned().collect(),
            !trial.broke.is_empty(),
        )));
        out.candidates.push(trial);
    }
    Ok(single_outcomes)
}

/// The proven single options: candidates that cured something and broke nothing.
fn record_single_options(
    input: &SearchInput<'_>,
    single_outcomes: &[SingleOutcome],
    out: &mut SearchResult,
) {
    for (candidate, outcome) in input.candidates.iter().zip(single_outcomes) {
        if let Some((cured, false)) = outcome
            && !cured.is_empty()
        {
            out.options.push(CoverOption {
                changes: vec![candidate.change.clone()],
                cures: cured.clone(),
                sources: candidate.sources.clone(),
                slower: usize::from(candidate.cost.slower),
                rank: u32::from(candidate.rank),
            });
        }
    }
}

/// Phase 3, the groups, for the failures no accepted single cures, over the candidates that broke
/// nothing alone (at least two are needed; otherwise a note says why none ran).
fn search_groups(
    input: &SearchInput<'_>,
    searcher: &mut Searcher<'_>,
    out: &mut SearchResult,
    baseline: &Baseline,
    single_outcomes: &[SingleOutcome],
) -> Result<(), Interrupted> {
    let reproduced = &baseline.reproduced;
    let cured_by_singles: BTreeSet<ProbeRef> = out
        .options
        .iter()
        .flat_map(|o| o.cures.iter().cloned())
        .collect();
    let mut remaining: Vec<ProbeRef> = reproduced
        .iter()
        .filter(|t| !cured_by_singles.contains(t))
        .cloned()
        .collect();
    // The pool: candidates tried alone that broke nothing.
    let pool: Vec<usize> = single_outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| matches!(o, Some((_, false))))
        .map(|(i, _)| i)
        .collect();
    if !remaining.is_empty() && pool.len() >= 2 {
        group_search(
            input,
            searcher,
            out,
            &pool,
            single_outcomes,
            &mut remaining,
            &baseline.sentinels,
        )?;
    } else if !remaining.is_empty() && !reproduced.is_empty() && !input.candidates.is_empty() {
        out.notes.push(format!(
            "no group search: {} candidate(s) were tried alone without breaking a sentinel (two are needed)",
            pool.len()
        ));
    }
    Ok(())
}

/// Phase 4, the cover: the best compatible set of the proven options over every curable failure.
fn choose_cover(options: &[CoverOption]) -> Vec<CoverOption> {
    let coverable: BTreeSet<ProbeRef> = options
        .iter()
        .flat_map(|o| o.cures.iter().cloned())
        .collect();
    best_cover(options, &coverable)
        .iter()
        .map(|&i| options[i].clone())
        .collect()
}

/// Phase 5: verify the chosen options in one final run with the throughput probes, and
/// measure their cost against the baseline. When the options together break a sentinel,
/// falls back to the best one alone (several) or chooses nothing (one).
fn verify_chosen(
    input: &SearchInput<'_>,
    searcher: &mut Searcher<'_>,
    out: &mut SearchResult,
    baseline: &Baseline,
    mut chosen_options: Vec<CoverOption>,
) -> Result<Verified, Interrupted> {
    let reproduced = &baseline.reproduced;
    let sentinels = &baseline.sentinels;
    let mut chosen = union_changes(&chosen_options);
    let mut cured_final: BTreeSet<ProbeRef> = BTreeSet::new();
    if !chosen.is_empty() {
        let expected: BTreeSet<ProbeRef> = chosen_options
            .iter()
            .flat_map(|o| o.cures.iter().cloned())
            .collect();
        let verify = searcher.run(
            Phase::Verify,
            &chosen,
            reproduced,
            &[sentinels.as_slice(), input.measure].concat(),
        )?;
        let passed_now: BTreeSet<ProbeRef> = reproduced
            .iter()
            .filter(|t| verify.passed(t))
            .cloned()
            .collect();
        let broke = verify.not_passing(sentinels);
        let verification = Verification {
            settings: chosen.clone(),
            passed: broke.is_empty() && expected.iter().all(|t| passed_now.contains(t)),
            cured: passed_now.iter().cloned().collect(),
            still_failing: verify.not_passing(reproduced),
            broke: broke.clone(),
        };
        if broke.is_empty() {
            cured_final = passed_now.clone();
            let lost: Vec<String> = expected
                .iter()
                .filter(|t| !passed_now.contains(t))
                .map(ToString::to_string)
                .collect();
            if !lost.is_empty() {
                out.notes.push(format!(
                    "cured in the search but failing again in the verification run (intermittent), counted as not cured: {}",
                    lost.join(", ")
                ));
            }
            out.cost = Some(measure(
                &baseline.observed,
                &verify,
                &[sentinels.as_slice(), input.measure].concat(),
            ));
        } else if chosen_options.len() > 1 {
            // The options interact: fall back to the best one alone, proven in its own trial.
            let best = chosen_options
                .iter()
                .max_by(|a, b| {
                    a.cures
                        .len()
                        .cmp(&b.cures.len())
                        .then(b.changes.len().cmp(&a.changes.len()))
                })
                .cloned();
            if let Some(best) = best {
                out.notes.push(format!(
                    "the chosen settings together broke {} sentinel(s) in the verification run; \
                     falling back to {} alone, proven in its own trial (not re-verified)",
                    broke.len(),
                    best.label()
                ));
                cured_final = best.cures.clone();
                chosen_options = vec![best];
                chosen = union_changes(&chosen_options);
            }
        } else {
            out.notes.push(format!(
                "{} broke {} sentinel(s) in the verification run although it broke none in its own trial (intermittent): no settings are chosen",
                chosen_options
                    .first()
                    .map(CoverOption::label)
                    .unwrap_or_default(),
                broke.len()
            ));
            chosen_options.clear();
            chosen.clear();
        }
        out.verification = Some(verification);
        if cured_final.is_empty() {
            chosen_options.clear();
            chosen.clear();
        }
    }
    Ok(Verified {
        cured: cured_final,
        chosen_options,
        chosen,
    })
}

/// The failures and what became of each: flaky, cured or not, which options cure it
/// and which cures were rejected for breaking a sentinel.
fn record_targets(
    input: &SearchInput<'_>,
    out: &mut SearchResult,
    flaky: &BTreeSet<ProbeRef>,
    cured_final: &BTreeSet<ProbeRef>,
) {
    for failure in input.failures {
        let at = key(failure);
        let status = if flaky.contains(&at) {
            TargetStatus::Flaky
        } else if cured_final.contains(&at) {
            TargetStatus::Cured
        } else {
            TargetStatus::NotCured
        };
        let cured_by = out
            .options
            .iter()
            .filter(|o| o.cures.contains(&at))
            .map(CoverOption::label)
            .collect();
        let breaks = |broke: &[ProbeOutcomeRef]| {
            let mut text = format!("breaks {}", broke[0].at);
            if broke.len() > 1 {
                text.push_str(&format!(" and {} more", broke.len() - 1));
            }
            text
        };
        let mut rejected: Vec<String> = out
            .candidates
            .iter()
            .filter(|c| c.cured.contains(&at) && !c.broke.is_empty())
            .map(|c| format!("{}: {}", c.setting, breaks(&c.broke)))
            .collect();
        rejected.extend(
            out.groups
                .iter()
                .filter(|g| g.cured.contains(&at) && !g.broke.is_empty())
                .map(|g| {
                    let settings: Vec<String> = g.settings.iter().map(|s| s.describe()).collect();
                    format!("{}: {}", settings.join(" + "), breaks(&g.broke))
                }),
        );
        out.targets.push(FixTarget {
            failure: outcome_ref(failure),
            status,
            cured_by,
            rejected,
        });
    }
}

/// The result when there is nothing to try: every failure stands and no trial is run.
pub(super) fn nothing_to_try(failures: &[ProbeResult]) -> SearchResult {
    SearchResult {
        targets: failures
            .iter()
            .map(|failure| FixTarget {
                failure: outcome_ref(failure),
                status: TargetStatus::NotCured,
                cured_by: vec![],
                rejected: vec![],
            })
            .collect(),
        reproduced: true,
        ..SearchResult::default()
    }
}

/// The group search: all compatible candidates on (rotating alternatives of the same
/// variable), then ddmin on each combination that cures something.
fn group_search(
    input: &SearchInput<'_>,
    searcher: &mut Searcher<'_>,
    out: &mut SearchResult,
    pool: &[usize],
    single_outcomes: &[SingleOutcome],
    remaining: &mut Vec<ProbeRef>,
    sentinels: &[ProbeRef],
) -> Result<(), Interrupted> {
    // Alternatives: pool candidates grouped by variable, in pool order.
    let mut by_variable: Vec<(String, Vec<usize>)> = Vec::new();
    for &i in pool {
        let variable = &input.candidates[i].change.variable;
        match by_variable.iter_mut().find(|(v, _)| v == variable) {
            Some((_, list)) => list.push(i),
            None => by_variable.push((variable.clone(), vec![i])),
        }
    }
    let rotations = by_variable.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    let mut seen_configs: BTreeSet<Vec<usize>> = BTreeSet::new();
    for rotation in 0..rotations {
        if remaining.is_empty() {
            break;
        }
        let config: Vec<usize> = by_variable
            .iter()
            .map(|(_, list)| list[rotation % list.len()])
            .collect();
        if config.len() < 2 || !seen_configs.insert(config.clone()) {
            continue;
        }
        if !searcher.can_search() {
            searcher.budget.exhausted = true;
            out.notes.push(
                "the run budget ran out before the group search could try every combination".into(),
            );
            return Ok(());
        }
        let changes: Vec<SettingChange> = config
            .iter()
            .map(|&i| input.candidates[i].change.clone())
            .collect();
        let trials_before = searcher.budget.trials;
        let all_on = searcher.run(Phase::Group, &changes, remaining, sentinels)?;
        let cured: Vec<ProbeRef> = remaining
            .iter()
            .filter(|t| all_on.passed(t))
            .cloned()
            .collect();
        let broke = all_on.not_passing(sentinels);
        if cured.is_empty() || !broke.is_empty() {
            out.groups.push(GroupTrial {
                settings: changes,
                cured: cured.clone(),
                broke: broke.clone(),
                minimal: false,
                runs: 1,
                note: if cured.is_empty() {
                    format!(
                        "all {} compatible candidates together cure none of the {} remaining failure(s)",
                        config.len(),
                        remaining.len()
                    )
                } else {
                    "together they cure some failures but break a sentinel: rejected".into()
                },
            });
            continue;
        }
        out.groups.push(GroupTrial {
            settings: changes,
            cured: cured.clone(),
            broke: vec![],
            minimal: false,
            runs: 1,
            note: format!(
                "all {} compatible candidates together cure {} failure(s) no single one cures; narrowing down",
                config.len(),
                cured.len()
            ),
        });
        // ddmin over the configuration, with results cached (singles are known already).
        let goal: BTreeSet<ProbeRef> = cured.iter().cloned().collect();
        let mut cache: BTreeMap<Vec<usize>, (BTreeSet<ProbeRef>, bool)> = BTreeMap::new();
        for &i in &config {
            if let Some(Some((cured, broke))) = single_outcomes.get(i) {
                cache.insert(vec![i], (cured.clone(), *broke));
            }
        }
        cache.insert(
            sorted(&config),
            (goal.clone(), false), // just observed
        );
        let goal_list: Vec<ProbeRef> = goal.iter().cloned().collect();
        let mut exhausted = false;
        // A trial a signal cut short stops ddmin like a spent budget, and the search.
        let mut interrupted: Option<Interrupted> = None;
        let mut test = |subset: &[usize]| -> Option<bool> {
            let key = sorted(subset);
            if let Some((cured, broke)) = cache.get(&key) {
                return Some(!broke && goal.iter().all(|t| cured.contains(t)));
            }
            if !searcher.can_search() {
                exhausted = true;
                return None;
            }
            let changes: Vec<SettingChange> = subset
                .iter()
                .map(|&i| input.candidates[i].change.clone())
                .collect();
            let observed = match searcher.run(Phase::Group, &changes, &goal_list, sentinels) {
                Ok(observed) => observed,
                Err(stop) => {
                    interrupted = Some(stop);
                    return None;
                }
            };
            let cured: BTreeSet<ProbeRef> = goal_list
                .iter()
                .filter(|t| observed.passed(t))
                .cloned()
                .collect();
            let broke = sentinels.iter().any(|s| !observed.passed(s));
            let ok = !broke && goal.iter().all(|t| cured.contains(t));
            cache.insert(key, (cured, broke));
            Some(ok)
        };
        let (minimal, complete) = ddmin(config.clone(), &mut test);
        if let Some(stop) = interrupted {
            return Err(stop);
        }
        if exhausted || !complete {
            searcher.budget.exhausted = true;
        }
        let changes: Vec<SettingChange> = minimal
            .iter()
            .map(|&i| input.candidates[i].change.clone())
            .collect();
        let mut sources = Vec::new();
        for &i in &minimal {
            for source in &input.candidates[i].sources {
                if !sources.contains(source) {
                    sources.push(source.clone());
                }
            }
        }
        out.groups.push(GroupTrial {
            settings: changes.clone(),
            cured: goal_list.clone(),
            broke: vec![],
            minimal: complete,
            runs: searcher.budget.trials - trials_before,
            note: if complete {
                format!(
                    "the smallest set found that cures them together ({} setting(s))",
                    minimal.len()
                )
            } else {
                "the run budget ran out while narrowing down: this set cures them but may not be minimal".into()
            },
        });
        out.options.push(CoverOption {
            changes,
            cures: goal.clone(),
            sources,
            slower: minimal
                .iter()
                .filter(|&&i| input.candidates[i].cost.slower)
                .count(),
            rank: minimal
                .iter()
                .map(|&i| u32::from(input.candidates[i].rank))
                .sum(),
        });
        remaining.retain(|t| !goal.contains(t));
    }
    Ok(())
}

fn sorted(items: &[usize]) -> Vec<usize> {
    let mut v = items.to_vec();
    v.sort_unstable();
    v
}

/// Delta debugging (Zeller's ddmin): shrinks `items`, for which `test` holds, to a
/// 1-minimal subset for which it still holds. `test` returns `None` when the budget is
/// spent; the current (passing, perhaps not minimal) set is returned with `false`.
pub(super) fn ddmin(
    items: Vec<usize>,
    test: &mut dyn FnMut(&[usize]) -> Option<bool>,
) -> (Vec<usize>, bool) {
    let mut current = items;
    let mut n = 2usize;
    while current.len() >= 2 {
        let chunks = split(&current, n);
        let mut reduced = false;
        for chunk in &chunks {
            match test(chunk) {
                None => return (current, false),
                Some(true) => {
                    current = chunk.clone();
                    n = 2;
                    reduced = true;
                    break;
                }
                Some(false) => {}
            }
        }
        if !reduced && chunks.len() > 2 {
            for i in 0..chunks.len() {
                let complement: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                match test(&complement) {
                    None => return (current, false),
                    Some(true) => {
                        current = complement;
                        n = (n - 1).max(2);
                        reduced = true;
                        break;
                    }
                    Some(false) => {}
                }
            }
        }
        if !reduced {
            if n >= current.len() {
                break;
            }
            n = (n * 2).min(current.len());
        }
    }
    (current, true)
}

fn split(items: &[usize], n: usize) -> Vec<Vec<usize>> {
    let n = n.min(items.len()).max(1);
    let mut chunks = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let end = start + (items.len() - start) / (n - i);
        chunks.push(items[start..end].to_vec());
        start = end;
    }
    chunks
}

fn union_changes(options: &[CoverOption]) -> Vec<SettingChange> {
    let mut changes: Vec<SettingChange> = Vec::new();
    for option in options {
        for change in &option.changes {
            if !changes.contains(change) {
                changes.push(change.clone());
            }
        }
    }
    changes.sort();
    changes
}

/// The best compatible cover of `targets` by `options`: fewest failures left uncovered,
/// then fewest settings, then fewest slow settings, then the best-ranked. Exact branch and
/// bound (the option lists are small), with a node cap after which the best so far stands.
pub(super) fn best_cover(options: &[CoverOption], targets: &BTreeSet<ProbeRef>) -> Vec<usize> {
    type Score = (usize, usize, usize, u32);
    struct State<'a> {
        options: &'a [CoverOption],
        targets: Vec<&'a ProbeRef>,
        best: Option<(Score, Vec<usize>)>,
        nodes: u32,
    }
    fn score(options: &[CoverOption], chosen: &[usize], uncovered: usize) -> Score {
        let changes = union_changes(
            &chosen
                .iter()
                .map(|&i| options[i].clone())
                .collect::<Vec<_>>(),
        );
        let slower = chosen.iter().map(|&i| options[i].slower).sum();
        let rank = chosen.iter().map(|&i| options[i].rank).sum();
        (uncovered, changes.len(), slower, rank)
    }
    fn compatible(options: &[CoverOption], chosen: &[usize], candidate: usize) -> bool {
        chosen.iter().all(|&c| {
            options[c]
                .changes
                .iter()
                .all(|a| options[candidate].changes.iter().all(|b| !conflicts(a, b)))
        })
    }
    fn walk(state: &mut State<'_>, at: usize, chosen: &mut Vec<usize>, uncovered: usize) {
        state.nodes += 1;
        if state.nodes > 200_000 {
            return;
        }
        // Bound: the failures left uncovered so far and the settings chosen so far only grow.
        let partial = score(state.options, chosen, uncovered);
        if let Some((best, _)) = &state.best
            && (partial.0, partial.1) > (best.0, best.1)
        {
            return;
        }
        if at == state.targets.len() {
            let full = partial;
            if state.best.as_ref().is_none_or(|(best, _)| full < *best) {
                state.best = Some((full, chosen.clone()));
            }
            return;
        }
        let target = state.targets[at];
        if chosen
            .iter()
            .any(|&i| state.options[i].cures.contains(target))
        {
            walk(state, at + 1, chosen, uncovered);
            return;
        }
        let covering: Vec<usize> = (0..state.options.len())
            .filter(|&i| state.options[i].cures.contains(target))
            .filter(|&i| compatible(state.options, chosen, i))
            .collect();
        for i in covering {
            chosen.push(i);
            walk(state, at + 1, chosen, uncovered);
            chosen.pop();
        }
        walk(state, at + 1, chosen, uncovered + 1);
    }
    let mut state = State {
        options,
        targets: targets.iter().collect(),
        best: None,
        nodes: 0,
    };
    walk(&mut state, 0, &mut Vec::new(), 0);
    let mut chosen = state.best.map(|(_, c)| c).unwrap_or_default();
    chosen.sort_unstable();
    chosen
}

/// Throughput metrics: numeric observation metrics named like a rate.
fn is_throughput_metric(name: &str) -> bool {
    name.ends_with("gbps") || name.ends_with("gb_per_s") || name.ends_with("_per_s")
}

/// The cost of the chosen settings: the probes that passed in both the baseline and the
/// verification, timed in each, and their throughput metrics.
fn measure(baseline: &Observed, verify: &Observed, probes: &[ProbeRef]) -> CostMeasurement {
    let mut timed = Vec::new();
    let (mut without_s, mut with_s) = (0.0, 0.0);
    let mut metrics = Vec::new();
    for at in probes {
        let (Some(before), Some(after)) = (baseline.by_key.get(at), verify.by_key.get(at)) else {
            continue;
        };
        if !(matches!(before.verdict, Verdict::Pass) && matches!(after.verdict, Verdict::Pass)) {
            continue;
        }
        let (Some(b), Some(a)) = (before.elapsed_s, after.elapsed_s) else {
            continue;
        };
        timed.push(at.clone());
        without_s += b;
        with_s += a;
        if let (Some(ob), Some(oa)) = (&before.observation, &after.observation) {
            for (name, value) in &ob.metrics {
                if !is_throughput_metric(name) {
                    continue;
                }
                let (Some(without), Some(with)) = (
                    value.as_f64(),
                    oa.metrics.get(name).and_then(|v| v.as_f64()),
                ) else {
                    continue;
                };
                metrics.push(MetricCost {
                    probe: at.probe.clone(),
                    metric: name.clone(),
                    without,
                    with,
                });
            }
        }
    }
    CostMeasurement {
        method: String::new(),
        probes: timed,
        without_s,
        with_s,
        metrics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::Cost;
    use gpuprobe_model::FailClass;
    use gpuprobe_model::{DeviceRef, Layer, ProbeId};

    /// A fault model: probe → (fails unless cured, cured by any of these single settings,
    /// cured only by all of these together, breaks when this setting is on).
    #[derive(Default, Clone)]
    struct Fault {
        cured_by: Vec<&'static str>,
        cured_by_all: Vec<&'static str>,
        only_when_set: Vec<&'static str>,
        flaky: bool,
    }

    struct Model {
        faults: BTreeMap<&'static str, Fault>,
        trials: Vec<Vec<String>>,
        calls: BTreeMap<&'static str, u32>,
    }

    impl Model {
        fn new(faults: &[(&'static str, Fault)]) -> Model {
            Model {
                faults: faults.iter().cloned().collect(),
                trials: vec![],
                calls: BTreeMap::new(),
            }
        }
    }

    fn result(probe: &str, pass: bool) -> ProbeResult {
        ProbeResult {
            elapsed_s: Some(1.0),
            simulated: true,
            ..ProbeResult::new(
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
    }

    impl TrialRunner for Model {
        fn run(&mut self, request: &TrialRequest<'_>) -> Result<TrialOutcome, Interrupted> {
            let on: Vec<String> = request.settings.iter().map(|s| s.describe()).collect();
            self.trials.push(on.clone());
            let has = |s: &str| on.iter().any(|o| o == s);
            let results = request
                .probes
                .iter()
                .map(|p| {
                    let name = p.probe.as_str();
                    let Some((&id, fault)) = self.faults.get_key_value(name) else {
                        return result(name, true);
                    };
                    let calls = self.calls.entry(id).or_default();
                    *calls += 1;
                    let active = fault.only_when_set.iter().all(|s| has(s));
                    let cured = fault.cured_by.iter().any(|s| has(s))
                        || (!fault.cured_by_all.is_empty()
                            && fault.cured_by_all.iter().all(|s| has(s)));
                    // The starting run saw the failure; a flaky one passes when re-run.
                    let flaky_pass = fault.flaky;
                    result(name, !active || cured || flaky_pass)
                })
                .collect();
            Ok(TrialOutcome {
                results,
                workers: 1,
                elapsed_s: 1.0,
                replayed: false,
            })
        }
    }

    fn candidate(setting: &str, slower: bool) -> Candidate {
        Candidate {
            change: SettingChange::parse(setting),
            title: setting.into(),
            sources: vec!["CAT-TEST".into()],
            cost: Cost {
                slower,
                ..Cost::default()
            },
            rank: 3,
        }
    }

    fn at(probe: &str) -> ProbeRef {
        ProbeRef {
            probe: ProbeId::new(probe),
            device: DeviceRef::Cpu,
        }
    }

    fn run_search(
        model: &mut Model,
        failures: &[&str],
        sentinels: &[&str],
        candidates: &[Candidate],
        max_runs: u32,
    ) -> SearchResult {
        let failures: Vec<ProbeResult> = failures.iter().map(|p| result(p, false)).collect();
        let sentinels: Vec<Vec<ProbeRef>> = sentinels.iter().map(|p| vec![at(p)]).collect();
        search(
            &SearchInput {
                failures: &failures,
                sentinels: &sentinels,
                measure: &[],
                candidates,
                max_runs,
            },
            model,
            &mut |_| {},
        )
        .expect("no signal in a model")
    }

    fn chosen(result: &SearchResult) -> Vec<String> {
        result.chosen.iter().map(|c| c.describe()).collect()
    }

    #[test]
    fn single_cure_is_found_and_verified() {
        let mut model = Model::new(&[(
            "copy.h2d.tiny",
            Fault {
                cured_by: vec!["HSA_ENABLE_SDMA=0"],
                ..Fault::default()
            },
        )]);
        let candidates = [
            candidate("AMD_SERIALIZE_KERNEL=3", true),
            candidate("HSA_ENABLE_SDMA=0", true),
            candidate("AMD_SERIALIZE_COPY=3", true),
        ];
        let result = run_search(
            &mut model,
            &["copy.h2d.tiny"],
            &["copy.d2d.medium"],
            &candidates,
            20,
        );
        assert_eq!(chosen(&result), vec!["HSA_ENABLE_SDMA=0"]);
        assert!(result.verification.as_ref().unwrap().passed);
        assert_eq!(result.targets[0].status, TargetStatus::Cured);
        // baseline + 3 singles + verify; no group search was needed.
        assert_eq!(result.budget.trials, 5);
        assert!(result.groups.is_empty());
    }

    #[test]
    fn a_cure_that_breaks_a_sentinel_is_rejected_for_another() {
        let mut model = Model::new(&[
            (
                "copy.h2d.tiny",
                Fault {
                    cured_by: vec!["HSA_ENABLE_SDMA=0", "AMD_SERIALIZE_COPY=3"],
                    ..Fault::default()
                },
            ),
            (
                "copy.d2d.medium",
                Fault {
                    only_when_set: vec!["HSA_ENABLE_SDMA=0"],
                    ..Fault::default()
                },
            ),
        ]);
        let candidates = [
            candidate("HSA_ENABLE_SDMA=0", true),
            candidate("AMD_SERIALIZE_COPY=3", true),
        ];
        let result = run_search(
            &mut model,
            &["copy.h2d.tiny"],
            &["copy.d2d.medium"],
            &candidates,
            20,
        );
        assert_eq!(chosen(&result), vec!["AMD_SERIALIZE_COPY=3"]);
        let sdma = &result.candidates[0];
        assert_eq!(sdma.cured.len(), 1);
        assert_eq!(sdma.broke[0].at.probe.as_str(), "copy.d2d.medium");
        // The breaking cure is not listed as a way to cure the failure, but as rejected.
        assert_eq!(result.targets[0].cured_by, vec!["AMD_SERIALIZE_COPY=3"]);
        assert_eq!(
            result.targets[0].rejected,
            vec!["HSA_ENABLE_SDMA=0: breaks copy.d2d.medium on cpu"]
        );
    }

    #[test]
    fn a_breaking_cure_alone_leaves_the_failure_uncured() {
        let mut model = Model::new(&[
            (
                "copy.h2d.tiny",
                Fault {
                    cured_by: vec!["HSA_ENABLE_SDMA=0"],
                    ..Fault::default()
                },
            ),
            (
                "copy.d2d.medium",
                Fault {
                    only_when_set: vec!["HSA_ENABLE_SDMA=0"],
                    ..Fault::default()
                },
            ),
        ]);
        let candidates = [
            candidate("HSA_ENABLE_SDMA=0", true),
            candidate("AMD_SERIALIZE_COPY=3", true),
        ];
        let result = run_search(
            &mut model,
            &["copy.h2d.tiny"],
            &["copy.d2d.medium"],
            &candidates,
            20,
        );
        assert!(result.chosen.is_empty());
        assert_eq!(result.targets[0].status, TargetStatus::NotCured);
        assert!(result.verification.is_none());
    }

    #[test]
    fn a_pair_is_found_by_delta_debugging_within_budget() {
        let mut model = Model::new(&[(
            "dtype.fp32.fp16",
            Fault {
                cured_by_all: vec!["C5=1", "C11=1"],
                ..Fault::default()
            },
        )]);
        let candidates: Vec<Candidate> = (0..14)
            .map(|i| candidate(&format!("C{i}=1"), false))
            .collect();
        let result = run_search(
            &mut model,
            &["dtype.fp32.fp16"],
            &["dtype.fp16.fp32"],
            &candidates,
            60,
        );
        assert_eq!(chosen(&result), vec!["C11=1", "C5=1"]);
        assert!(result.groups.iter().any(|g| g.minimal));
        // Baseline, 14 singles, all-on, the ddmin steps, verify: far fewer than 2^14.
        let runs = result.budget.trials;
        assert!(runs <= 14 + 3 + 20, "{runs} trials");
        assert_eq!(runs as usize, model.trials.len());
        assert_eq!(result.targets[0].status, TargetStatus::Cured);
    }

    #[test]
    fn alternatives_of_one_variable_are_never_combined() {
        let mut model = Model::new(&[(
            "copy.roundtrip",
            Fault {
                cured_by_all: vec!["AMD_SERIALIZE_COPY=2", "HIP_HOST_COHERENT=1"],
                ..Fault::default()
            },
        )]);
        let candidates = [
            candidate("AMD_SERIALIZE_COPY=3", true),
            candidate("AMD_SERIALIZE_COPY=2", true),
            candidate("HIP_HOST_COHERENT=1", true),
        ];
        let result = run_search(
            &mut model,
            &["copy.roundtrip"],
            &["copy.d2h"],
            &candidates,
            30,
        );
        for trial in &model.trials {
            let serialize = trial
                .iter()
                .filter(|s| s.starts_with("AMD_SERIALIZE_COPY"))
                .count();
            assert!(serialize <= 1, "alternatives combined: {trial:?}");
        }
        assert_eq!(
            chosen(&result),
            vec!["AMD_SERIALIZE_COPY=2", "HIP_HOST_COHERENT=1"]
        );
    }

    #[test]
    fn the_budget_is_enforced_and_reported() {
        let mut model = Model::new(&[(
            "rng.randn",
            Fault {
                cured_by: vec!["C9=1"],
                ..Fault::default()
            },
        )]);
        let candidates: Vec<Candidate> = (0..12)
            .map(|i| candidate(&format!("C{i}=1"), false))
            .collect();
        let result = run_search(&mut model, &["rng.randn"], &["rng.rand"], &candidates, 6);
        assert!(result.budget.exhausted);
        assert_eq!(result.budget.trials, model.trials.len() as u32);
        assert!(result.budget.trials <= 6);
        assert!(result.candidates.iter().filter(|c| !c.tried).all(|c| {
            c.not_tried_because
                .as_deref()
                .unwrap()
                .contains("--max-runs 6")
        }));
        assert!(result.chosen.is_empty(), "C9 was never reached");
    }

    #[test]
    fn a_failure_that_does_not_reproduce_is_flaky() {
        let mut model = Model::new(&[(
            "copy.h2d.tiny",
            Fault {
                flaky: true,
                ..Fault::default()
            },
        )]);
        let candidates = [candidate("HSA_ENABLE_SDMA=0", true)];
        let result = run_search(&mut model, &["copy.h2d.tiny"], &[], &candidates, 10);
        assert!(!result.reproduced);
        assert_eq!(result.targets[0].status, TargetStatus::Flaky);
        assert!(!result.candidates[0].tried);
        assert_eq!(result.budget.trials, 1);
    }

    #[test]
    fn the_smallest_cover_prefers_one_setting_for_two_failures() {
        let mut model = Model::new(&[
            (
                "a.x",
                Fault {
                    cured_by: vec!["A=1", "B=1"],
                    ..Fault::default()
                },
            ),
            (
                "b.y",
                Fault {
                    cured_by: vec!["B=1", "C=1"],
                    ..Fault::default()
                },
            ),
        ]);
        let candidates = [
            candidate("A=1", false),
            candidate("C=1", false),
            candidate("B=1", true),
        ];
        let result = run_search(&mut model, &["a.x", "b.y"], &[], &candidates, 20);
        assert_eq!(chosen(&result), vec!["B=1"]);
        assert!(
            result
                .targets
                .iter()
                .all(|t| t.status == TargetStatus::Cured)
        );
    }

    #[test]
    fn a_sentinel_slot_keeps_its_first_passing_alternative() {
        let mut model = Model::new(&[
            (
                "copy.h2d.tiny",
                Fault {
                    cured_by: vec!["HSA_ENABLE_SDMA=0"],
                    ..Fault::default()
                },
            ),
            ("copy.batch.dict", Fault::default()),
        ]);
        let failures = [result("copy.h2d.tiny", false)];
        let slots = vec![vec![at("copy.batch.dict"), at("copy.batch.list")]];
        let candidates = [candidate("HSA_ENABLE_SDMA=0", true)];
        let result = search(
            &SearchInput {
                failures: &failures,
                sentinels: &slots,
                measure: &[],
                candidates: &candidates,
                max_runs: 10,
            },
            &mut model,
            &mut |_| {},
        )
        .expect("no signal in a model");
        assert_eq!(result.sentinels, vec![at("copy.batch.list")]);
        assert!(
            result
                .notes
                .iter()
                .any(|n| n.contains("copy.batch.dict on cpu")),
            "{:?}",
            result.notes
        );
        // Later trials run only the kept sentinel.
        assert_eq!(model.trials.len(), 3);
    }

    fn sweep_result(cases: &[(&str, &str)], counted: u64) -> ProbeResult {
        use gpuprobe_model::{Observation, SweepFailure, SweepStats};
        let failures: Vec<SweepFailure> = cases
            .iter()
            .map(|(variant, direction)| SweepFailure {
                class: "wrong_value".into(),
                variant: (*variant).into(),
                direction: (*direction).into(),
                sample: 1,
                output: "out[0]".into(),
                ..Default::default()
            })
            .collect();
        let mut result = result("sweep.nn.functional.avg_pool2d.fp32", counted == 0);
        result.observation = Some(Observation {
            probe: result.probe.clone(),
            device: result.device,
            measurement: Measurement::Sweep(Box::new(SweepStats {
                failed: [("wrong_value".to_string(), counted)].into(),
                failures,
                ..Default::default()
            })),
            metrics: Default::default(),
            notes: vec![],
            output_digest: None,
        });
        result
    }

    #[test]
    fn a_setting_that_cures_some_cases_of_a_sweep_probe_is_a_partial_cure() {
        let before = sweep_result(
            &[("channels_last", "backward"), ("out_noncontig", "forward")],
            2,
        );
        let now = sweep_result(&[("out_noncontig", "forward")], 1);
        let partial = partial_cure(&before, &now).expect("a partial cure");
        assert_eq!(
            partial.cured_cases,
            vec!["channels_last backward sample 1 out[0]"]
        );
        assert_eq!(
            partial.still_failing,
            vec!["out_noncontig forward sample 1 out[0]"]
        );
        // A new failing case, an incomplete list, a pass, the same cases: no partial cure.
        let other = sweep_result(&[("transposed", "backward")], 1);
        assert!(partial_cure(&before, &other).is_none());
        let capped = sweep_result(&[("out_noncontig", "forward")], 7);
        assert!(partial_cure(&before, &capped).is_none());
        let passed = sweep_result(&[], 0);
        assert!(partial_cure(&before, &passed).is_none());
        assert!(partial_cure(&before, &before).is_none());
    }

    #[test]
    fn ddmin_finds_a_minimal_subset() {
        let mut calls = 0;
        let (found, complete) = ddmin((0..16).collect(), &mut |s: &[usize]| {
            calls += 1;
            Some(s.contains(&3) && s.contains(&12) && s.contains(&7))
        });
        assert!(complete);
        assert_eq!(sorted(&found), vec![3, 7, 12]);
        // 2^16 subsets exist; ddmin needs a few dozen tests for a 3-element cause.
        assert!(calls <= 80, "{calls} tests");
    }

    #[test]
    fn ddmin_stops_when_the_budget_does() {
        let mut calls = 0;
        let (found, complete) = ddmin((0..8).collect(), &mut |s: &[usize]| {
            calls += 1;
            if calls > 2 {
                None
            } else {
                Some(s.contains(&1) && s.contains(&6))
            }
        });
        assert!(!complete);
        assert!(found.contains(&1) && found.contains(&6));
    }
}
