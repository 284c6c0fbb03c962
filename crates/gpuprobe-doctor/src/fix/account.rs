//! The search result as a [`FixAccount`] (what the user reads, `--json`) and a
//! [`Profile`] (what `gpuprobe run` and `apply_profile` apply).

use gpuprobe_model::Cost;
use gpuprobe_model::ExitStatus;
use gpuprobe_model::{
    CandidateTrial, FixAccount, FixOutcome, PROFILE_VERSION, Profile, ProfileSetting, RunBudget,
    StackKey, TargetStatus, is_probe_side_switch,
};

use super::candidates::CandidateSet;
use super::search::SearchResult;

/// Facts about the run that the search itself does not know.
#[derive(Debug, Clone, Default)]
pub(super) struct AccountHeader {
    /// gpuprobe version.
    pub tool_version: String,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// The simulation source, when simulated.
    pub simulation: Option<String>,
    /// The fix's run directory.
    pub run_dir: Option<String>,
    /// The run whose failures were the starting point.
    pub source_run: Option<String>,
    /// The stack.
    pub stack: StackKey,
    /// `--max-runs`.
    pub max_runs: u32,
    /// How the cost was measured, in words (the search leaves this to the caller).
    pub cost_method: String,
    /// Remarks from the caller.
    pub notes: Vec<String>,
}

/// The outcome a search earns.
pub(super) fn outcome_of(result: &SearchResult, testable: usize) -> FixOutcome {
    let reproduced = result
        .targets
        .iter()
        .filter(|t| t.status != TargetStatus::Flaky)
        .count();
    let cured = result
        .targets
        .iter()
        .filter(|t| t.status == TargetStatus::Cured)
        .count();
    if result.targets.is_empty() {
        FixOutcome::NothingToFix
    } else if reproduced == 0 {
        FixOutcome::NotReproduced
    } else if testable == 0 {
        FixOutcome::NothingTestable
    } else if cured == result.targets.len() {
        FixOutcome::AllCured
    } else if cured > 0 {
        FixOutcome::PartlyCured
    } else {
        FixOutcome::NoneCured
    }
}

/// The exit status an outcome earns (docs/exit-codes.md): 0 nothing to fix or everything
/// cured, 1 failures remain, 4 nothing testable.
pub(super) fn exit_status_of(outcome: FixOutcome) -> ExitStatus {
    match outcome {
        FixOutcome::NothingToFix | FixOutcome::AllCured => ExitStatus::AllPassed,
        FixOutcome::NothingTestable => ExitStatus::NothingTested,
        FixOutcome::PartlyCured | FixOutcome::NoneCured | FixOutcome::NotReproduced => {
            ExitStatus::ProblemsFound
        }
    }
}

/// The account of a search.
pub(super) fn build(
    header: AccountHeader,
    candidates: &CandidateSet,
    result: SearchResult,
) -> FixAccount {
    let outcome = outcome_of(&result, candidates.testable.len());
    let exit_status = exit_status_of(outcome);
    let mut trials = result.candidates;
    for skipped in &candidates.not_tried {
        trials.push(CandidateTrial {
            setting: skipped.candidate.change.clone(),
            title: skipped.candidate.title.clone(),
            sources: skipped.candidate.sources.clone(),
            cost: skipped.candidate.cost.clone(),
            tried: false,
            not_tried_because: Some(skipped.reason.clone()),
            cured: vec![],
            broke: vec![],
            worsened: vec![],
            partly_cured: vec![],
            elapsed_s: None,
        });
    }
    let mut cost = result.cost;
    if let Some(cost) = cost.as_mut() {
        cost.method = header.cost_method.clone();
    }
    let mut notes = candidates.notes.clone();
    notes.extend(result.notes);
    notes.extend(header.notes);
    FixAccount {
        tool_version: header.tool_version,
        build: Some(gpuprobe_kb::build_info()),
        started_at: header.started_at,
        wall_s: header.wall_s,
        simulated: header.simulation.is_some(),
        simulation: header.simulation,
        run_dir: header.run_dir,
        source_run: header.source_run,
        stack: header.stack,
        targets: result.targets,
        sentinels: result.sentinels,
        candidates: trials,
        groups: result.groups,
        chosen: result.chosen,
        verification: result.verification,
        cost,
        reported: candidates.reported.clone(),
        budget: RunBudget {
            max_runs: header.max_runs,
            ..result.budget
        },
        outcome,
        exit_status,
        exit_code: exit_status.code(),
        profile: None,
        notes,
    }
}

/// The account when the starting run had no failure.
pub(super) fn nothing_to_fix(header: AccountHeader) -> FixAccount {
    FixAccount {
        tool_version: header.tool_version,
        build: Some(gpuprobe_kb::build_info()),
        started_at: header.started_at,
        wall_s: header.wall_s,
        simulated: header.simulation.is_some(),
        simulation: header.simulation,
        run_dir: header.run_dir,
        source_run: header.source_run,
        stack: header.stack,
        targets: vec![],
        sentinels: vec![],
        candidates: vec![],
        groups: vec![],
        chosen: vec![],
        verification: None,
        cost: None,
        reported: vec![],
        budget: RunBudget {
            max_runs: header.max_runs,
            ..RunBudget::default()
        },
        outcome: FixOutcome::NothingToFix,
        exit_status: ExitStatus::AllPassed,
        exit_code: 0,
        profile: None,
        notes: header.notes,
    }
}

/// Cost tags and note in words (`slower; copies use shader time`).
pub(super) fn cost_words(cost: &Cost) -> String {
    let mut parts: Vec<String> = cost.tags().iter().map(|t| t.to_string()).collect();
    if let Some(note) = &cost.note {
        parts.push(note.clone());
    }
    parts.join("; ")
}

fn probe_ids<'a>(ids: impl Iterator<Item = &'a gpuprobe_model::ProbeRef>) -> Vec<String> {
    let refs: Vec<&gpuprobe_model::ProbeRef> = ids.collect();
    let single_device = refs.windows(2).all(|w| w[0].device == w[1].device);
    let mut out: Vec<String> = refs
        .iter()
        .map(|r| {
            if single_device {
                r.probe.to_string()
            } else {
                r.to_string()
            }
        })
        .collect();
    out.dedup();
    out
}

/// The profile the account amounts to (written when there were failures to cure).
pub(super) fn profile(account: &FixAccount, search: &SearchResult, created_at: &str) -> Profile {
    let status_ids = |status: TargetStatus| {
        probe_ids(
            account
                .targets
                .iter()
                .filter(move |t| t.status == status)
                .map(|t| &t.failure.at),
        )
    };
    let mut env = std::collections::BTreeMap::new();
    let mut switches = std::collections::BTreeMap::new();
    let mut unset = Vec::new();
    for change in &account.chosen {
        match &change.value {
            // A probe-side switch is a code change: it never enters what a profile applies.
            Some(_) if change.is_probe_side() => {}
            Some(value) if change.is_switch() => {
                switches.insert(change.variable.clone(), value.clone());
            }
            Some(value) => {
                env.insert(change.variable.clone(), value.clone());
            }
            None => unset.push(change.variable.clone()),
        }
    }
    let settings: Vec<ProfileSetting> = account
        .chosen
        .iter()
        .map(|change| {
            let options: Vec<_> = search
                .chosen_options
                .iter()
                .filter(|o| o.changes.contains(change))
                .collect();
            let cures = probe_ids(options.iter().flat_map(|o| o.cures.iter()).filter(|at| {
                account
                    .targets
                    .iter()
                    .any(|t| &t.failure.at == *at && t.status == TargetStatus::Cured)
            }));
            let together_with: Vec<String> = options
                .iter()
                .flat_map(|o| o.changes.iter())
                .filter(|c| *c != change)
                .map(|c| c.describe())
                .collect();
            let trial = account.candidates.iter().find(|c| &c.setting == change);
            ProfileSetting {
                setting: change.describe(),
                cures,
                together_with,
                sources: trial.map(|t| t.sources.clone()).unwrap_or_default(),
                cost: trial.map(|t| cost_words(&t.cost)).unwrap_or_default(),
            }
        })
        .collect();
    let describe_reported = |r: &gpuprobe_model::ReportedChange| {
        let mut line = r.description.clone();
        if let Some(setting) = &r.setting {
            line.push_str(&format!(" [{setting}]"));
        }
        let cost = cost_words(&r.cost);
        if !cost.is_empty() {
            line.push_str(&format!(" ({cost})"));
        }
        if !r.sources.is_empty() {
            line.push_str(&format!(" — {}", r.sources.join(", ")));
        }
        line
    };
    let is_system =
        |kind: &str| matches!(kind, "kernel_param" | "firmware" | "upgrade" | "downgrade");
    // A probe-side switch's cures are code changes the user makes, not settings the profile
    // applies: split once, by the switch itself.
    let (code_settings, settings): (Vec<ProfileSetting>, Vec<ProfileSetting>) =
        settings.into_iter().partition(|s| {
            let name = s
                .setting
                .split_once('=')
                .map_or(s.setting.as_str(), |(n, _)| n);
            is_probe_side_switch(name)
        });
    // Probes a job with the profile applied still gets wrong unless the code changes too.
    let by_code: Vec<&String> = code_settings.iter().flat_map(|s| &s.cures).collect();
    let by_profile: Vec<&String> = settings.iter().flat_map(|s| &s.cures).collect();
    let mut code_changes: Vec<String> = code_settings
        .iter()
        .map(|s| {
            let (name, value) = s.setting.split_once('=').unwrap_or((&s.setting, ""));
            let line = crate::profile::switch_line(name, value);
            format!(
                "{line} — proven: {} pass(es) with it ({})",
                s.cures.join(", "),
                s.setting
            )
        })
        .collect();
    // A probe-side switch that cured some cases of a probe still failing on others: the
    // code change is proven for those cases.
    for trial in account
        .candidates
        .iter()
        .filter(|t| t.setting.is_probe_side())
    {
        let value = trial.setting.value.as_deref().unwrap_or("");
        let line = crate::profile::switch_line(&trial.setting.variable, value);
        for partial in &trial.partly_cured {
            code_changes.push(format!(
                "{line} — proven for the {} case(s) of {} ({}); it still fails on {}",
                partial.cured_cases.join(", "),
                partial.at.probe,
                trial.setting.describe(),
                partial.still_failing.join(", ")
            ));
        }
    }
    let cures: Vec<String> = status_ids(TargetStatus::Cured)
        .into_iter()
        .filter(|id| by_profile.contains(&id) || !by_code.contains(&id))
        .collect();
    Profile {
        profile_version: PROFILE_VERSION,
        created_by: format!("gpuprobe {}", account.tool_version),
        created_at: created_at.to_string(),
        simulated: account.simulated,
        env,
        unset,
        switches,
        cures,
        still_failing: status_ids(TargetStatus::NotCured),
        flaky: status_ids(TargetStatus::Flaky),
        system_changes: account
            .reported
            .iter()
            .filter(|r| is_system(&r.kind))
            .map(describe_reported)
            .collect(),
        other_changes: account
            .reported
            .iter()
            .filter(|r| !is_system(&r.kind))
            .map(describe_reported)
            .collect(),
        code_changes,
        measured_cost: account
            .cost
            .as_ref()
            .map(|c| format!("{} ({})", c.summary(), c.method)),
        // Absolute: the profile is read from anywhere (`run --profile`, another shell),
        // and a path relative to where the fix ran would name nothing there.
        evidence: account.run_dir.as_deref().map(|dir| {
            std::path::absolute(dir)
                .map(|path| path.display().to_string())
                .unwrap_or_else(|_| dir.to_string())
        }),
        proven_on: account.stack.clone(),
        settings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fix::search::nothing_to_try;
    use gpuprobe_model::{DeviceRef, Layer, ProbeId};
    use gpuprobe_model::{FailClass, ProbeResult, Verdict};

    fn failure(probe: &str) -> ProbeResult {
        ProbeResult {
            simulated: true,
            ..ProbeResult::new(
                ProbeId::new(probe),
                DeviceRef::Cpu,
                Layer::Framework,
                Verdict::Fail {
                    class: FailClass::AllZeros,
                    detail: "zeros".into(),
                },
            )
        }
    }

    #[test]
    fn outcomes_and_exit_codes() {
        let mut result = nothing_to_try(&[failure("a.b"), failure("c.d")]);
        assert_eq!(outcome_of(&result, 0), FixOutcome::NothingTestable);
        assert_eq!(exit_status_of(FixOutcome::NothingTestable).code(), 4);
        assert_eq!(outcome_of(&result, 3), FixOutcome::NoneCured);
        result.targets[0].status = TargetStatus::Cured;
        assert_eq!(outcome_of(&result, 3), FixOutcome::PartlyCured);
        assert_eq!(exit_status_of(FixOutcome::PartlyCured).code(), 1);
        result.targets[1].status = TargetStatus::Flaky;
        assert_eq!(
            outcome_of(&result, 3),
            FixOutcome::PartlyCured,
            "a failure that did not reproduce is not cured"
        );
        result.targets[0].status = TargetStatus::Flaky;
        assert_eq!(outcome_of(&result, 3), FixOutcome::NotReproduced);
        result.targets[0].status = TargetStatus::Cured;
        result.targets[1].status = TargetStatus::Cured;
        assert_eq!(outcome_of(&result, 3), FixOutcome::AllCured);
        assert_eq!(exit_status_of(FixOutcome::AllCured).code(), 0);
        assert_eq!(exit_status_of(FixOutcome::NothingToFix).code(), 0);
    }

    #[test]
    fn switches_and_proven_code_changes_stay_apart_from_the_environment() {
        use gpuprobe_model::{ProbeRef, SettingChange};
        let failures = [
            failure("nn.sdpa.matrix.bf16.default"),
            failure("sweep.nn.functional.embedding_bag.bf16"),
            failure("copy.h2d.pageable.tiny.blocking"),
        ];
        let mut result = nothing_to_try(&failures);
        for target in &mut result.targets {
            target.status = TargetStatus::Cured;
        }
        let option = |setting: SettingChange, probe: &str| crate::fix::search::CoverOption {
            changes: vec![setting],
            cures: [ProbeRef {
                probe: ProbeId::new(probe),
                device: DeviceRef::Cpu,
            }]
            .into(),
            sources: vec![],
            slower: 0,
            rank: 3,
        };
        let switch = SettingChange::set("torch.backends.cuda.enable_cudnn_sdp", "False");
        let layout = SettingChange::set("gpuprobe.inputs.contiguous", "True");
        let env = SettingChange::set("HSA_ENABLE_SDMA", "0");
        result.chosen_options = vec![
            option(switch.clone(), "nn.sdpa.matrix.bf16.default"),
            option(layout.clone(), "sweep.nn.functional.embedding_bag.bf16"),
            option(env.clone(), "copy.h2d.pageable.tiny.blocking"),
        ];
        result.chosen = vec![switch, layout, env];
        let header = AccountHeader {
            tool_version: "0.1.0".into(),
            ..AccountHeader::default()
        };
        let account = build(header, &CandidateSet::default(), result.clone());
        let profile = profile(&account, &result, "2026-11-28T10:00:00Z");
        assert_eq!(profile.env.len(), 1, "{:?}", profile.env);
        assert_eq!(profile.env["HSA_ENABLE_SDMA"], "0");
        assert_eq!(
            profile.switches["torch.backends.cuda.enable_cudnn_sdp"],
            "False"
        );
        assert!(!profile.switches.contains_key("gpuprobe.inputs.contiguous"));
        // The layout cure is a proven code change, not a cure the profile brings a job.
        assert_eq!(profile.code_changes.len(), 1);
        assert!(
            profile.code_changes[0].starts_with("x = x.contiguous()")
                && profile.code_changes[0].contains("sweep.nn.functional.embedding_bag.bf16"),
            "{:?}",
            profile.code_changes
        );
        assert!(
            !profile
                .cures
                .contains(&"sweep.nn.functional.embedding_bag.bf16".to_string())
        );
        assert!(
            profile
                .cures
                .contains(&"nn.sdpa.matrix.bf16.default".to_string())
        );
        assert!(
            !profile
                .settings
                .iter()
                .any(|s| s.setting.starts_with("gpuprobe."))
        );
    }

    #[test]
    fn an_uncured_search_still_makes_a_profile_that_records_it() {
        let result = nothing_to_try(&[failure("dtype.bf16.fp32.to.device")]);
        let header = AccountHeader {
            tool_version: "0.1.0".into(),
            simulation: Some("bf16-fp32-zeros".into()),
            max_runs: 40,
            ..AccountHeader::default()
        };
        let candidates = CandidateSet::default();
        let account = build(header, &candidates, result.clone());
        assert_eq!(account.exit_code, 4);
        let profile = profile(&account, &result, "2026-11-22T10:00:00Z");
        assert!(profile.env.is_empty() && profile.simulated);
        assert_eq!(profile.still_failing, vec!["dtype.bf16.fp32.to.device"]);
    }

    #[test]
    fn the_profile_names_its_evidence_by_an_absolute_path() {
        let result = nothing_to_try(&[failure("dtype.bf16.fp32.to.device")]);
        let header = AccountHeader {
            tool_version: "0.1.0".into(),
            run_dir: Some("runs/fix-1".into()),
            ..AccountHeader::default()
        };
        let account = build(header, &CandidateSet::default(), result.clone());
        let profile = profile(&account, &result, "2026-11-22T10:00:00Z");
        let expected = std::env::current_dir().unwrap().join("runs/fix-1");
        assert_eq!(profile.evidence, Some(expected.display().to_string()));
    }
}
