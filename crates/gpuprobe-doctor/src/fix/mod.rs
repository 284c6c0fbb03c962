//! The workaround search behind `gpuprobe fix`: which settings cure the failures of a run,
//! proven by re-running the failing probes, without breaking anything else.
//!
//! The search's pieces are pure and testable without processes; `trials` supplies the
//! `search::TrialRunner` that runs probes in fresh supervised workers with the settings
//! of a trial applied (settings read once per process, such as ROCr flags or
//! `TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL`, need a fresh process every time).
//!
//! - `candidates`: what to try. The testable workarounds of matched knowledge-base
//!   entries, plus the generic catalogue settings that apply to this vendor, OS and the
//!   failing probes' families; kernel parameters, firmware and code changes are collected
//!   to be reported, never applied.
//! - `sentinels`: a few passing probes from every family that ran, re-run in every trial
//!   so that a cure which breaks something else is rejected.
//! - `search`: baseline (do the failures reproduce?), each candidate alone, a bounded
//!   group search (delta debugging from "all compatible candidates on") for failures no
//!   single setting cures, the smallest covering set, one verification run, and the cost
//!   of the chosen settings measured with and without them.
//! - `account`: the search result as a [`FixAccount`](gpuprobe_model::FixAccount)
//!   and a [`Profile`](gpuprobe_model::Profile).
//! - `journal`: every finished trial recorded as it ends, so an interrupted search can be
//!   resumed without running its finished trials again.
//! - `options`: what a fix runs with, recorded for `--resume` and checked before any work;
//!   [`start`]: its starting point (a check run here, or `--from` a finished run);
//!   `run`: the whole command, new or resumed, to the account and the profile.

mod account;
mod candidates;
mod journal;
mod options;
mod run;
mod search;
mod sentinels;
mod start;
mod trials;

use gpuprobe_model::SettingChange;

use gpuprobe_model::Settings;

pub use options::{FixOptions, ResumeOptions};
pub use run::{Finished, FixError, FixHost, resume, start};
pub(crate) use search::{
    SearchInput, SearchResult, TrialOutcome, TrialRequest, TrialRunner, search,
};

/// The engine settings that apply a list of changes (later changes of the same variable
/// win; a variable both set and removed is removed).
pub fn settings_of(changes: &[SettingChange]) -> Settings {
    let mut settings = Settings::default();
    for change in changes {
        match &change.value {
            Some(value) => {
                settings.unset.retain(|name| name != &change.variable);
                settings.set.insert(change.variable.clone(), value.clone());
            }
            None => {
                settings.set.remove(&change.variable);
                if !settings.unset.contains(&change.variable) {
                    settings.unset.push(change.variable.clone());
                }
            }
        }
    }
    settings
}

/// Whether two changes conflict: the same variable with different values (or set versus
/// removed). Conflicting candidates are alternatives and never share a set.
pub fn conflicts(a: &SettingChange, b: &SettingChange) -> bool {
    a.variable == b.variable && a.value != b.value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_reach_the_worker_in_one_variable() {
        let settings = settings_of(&[
            SettingChange::set("HSA_ENABLE_SDMA", "0"),
            SettingChange::set("torch.backends.cuda.enable_cudnn_sdp", "False"),
            SettingChange::set("gpuprobe.inputs.contiguous", "True"),
            SettingChange::unset("HSA_OVERRIDE_GFX_VERSION"),
        ]);
        let (env, unset) = settings.worker_env();
        assert_eq!(env["HSA_ENABLE_SDMA"], "0");
        assert_eq!(
            env["GPUPROBE_SWITCHES"],
            "gpuprobe.inputs.contiguous=True;torch.backends.cuda.enable_cudnn_sdp=False"
        );
        assert!(!env.keys().any(|k| k.contains('.')), "{env:?}");
        assert_eq!(unset, vec!["HSA_OVERRIDE_GFX_VERSION".to_string()]);
        // No switch: the variable is not touched.
        let (env, _) = settings_of(&[SettingChange::set("HSA_ENABLE_SDMA", "0")]).worker_env();
        assert!(!env.contains_key("GPUPROBE_SWITCHES"));
    }

    #[test]
    fn settings_from_changes() {
        let settings = settings_of(&[
            SettingChange::set("HSA_ENABLE_SDMA", "0"),
            SettingChange::unset("HSA_OVERRIDE_GFX_VERSION"),
        ]);
        assert_eq!(settings.set["HSA_ENABLE_SDMA"], "0");
        assert_eq!(settings.unset, vec!["HSA_OVERRIDE_GFX_VERSION".to_string()]);
        assert!(conflicts(
            &SettingChange::set("AMD_SERIALIZE_COPY", "2"),
            &SettingChange::set("AMD_SERIALIZE_COPY", "3")
        ));
        assert!(!conflicts(
            &SettingChange::set("AMD_SERIALIZE_COPY", "3"),
            &SettingChange::set("AMD_SERIALIZE_COPY", "3")
        ));
        assert!(!conflicts(
            &SettingChange::set("AMD_SERIALIZE_COPY", "3"),
            &SettingChange::set("HSA_ENABLE_SDMA", "0")
        ));
    }
}
