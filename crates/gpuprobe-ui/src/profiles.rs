//! Profiles and cures: the profiles `fix` wrote into its run directories (`profile.toml`,
//! read through `RunFiles`), each with the stack it was proven on, the failures it cures,
//! its cost and settings, and the runs it came from. Parsing, validating and exporting are
//! `gpuprobe_doctor::profile`'s, as `gpuprobe profile` does them.

use std::path::Path;

use gpuprobe_doctor::profile::{self, ExportFormat};
use gpuprobe_model::{FixAccount, Profile};
use gpuprobe_runner::{PROFILE_FILE, RunFiles};
use serde::Serialize;

/// One profile as the pages show it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProfileView {
    /// The fix run that holds it (its id in URLs).
    pub run: String,
    /// When it was written.
    pub created_at: String,
    /// Whether it was proven under fault simulation.
    pub simulated: bool,
    /// The stack it was proven on, in words.
    pub proven_on: String,
    /// Probes it cures.
    pub cures: Vec<String>,
    /// Probes still failing with it.
    pub still_failing: Vec<String>,
    /// What it costs, as measured.
    pub cost: String,
    /// What it applies: `NAME=VALUE`, `unset NAME`, and framework switches.
    pub applied: Vec<String>,
    /// Each setting with what it cures and costs.
    pub settings: Vec<SettingView>,
    /// Changes it reports but never applies (system, code, other).
    pub reported: Vec<String>,
    /// The check the fix started from, when it names one in the runs directory.
    pub source_run: Option<String>,
    /// Why it cannot be read, when it cannot (then the rest is empty).
    pub problem: Option<String>,
    /// Which runs used it (only on its own page: [`used_by`]).
    pub used_by: Option<UsedBy>,
}

/// Which runs used a profile: the fix that proved it, the checks whose workers ran with its
/// settings, and the jobs `gpuprobe run --profile` ran with it.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct UsedBy {
    /// The fix's verification of its chosen settings, in words (none when it recorded none).
    pub verification: Option<String>,
    /// Runs of the runs directory whose plan applied every setting of the profile, newest
    /// first.
    pub checks: Vec<String>,
    /// How many `run --profile` uses the journal records of this profile file.
    pub uses: usize,
    /// The newest of them, newest first.
    pub recent: Vec<UseView>,
}

/// One `run --profile` use, as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct UseView {
    /// When it ended.
    pub at: String,
    /// The job's program (its name only: the journal keeps no arguments).
    pub program: String,
    /// Its exit code.
    pub exit_code: i32,
    /// Whether the profile then was the one there now (same digest).
    pub same_version: bool,
}

/// The newest `run --profile` uses a profile page lists.
const RECENT_USES: usize = 5;

/// The settings a run's workers ran with, the only part of its plan read here.
#[derive(serde::Deserialize)]
struct PlanSettings {
    #[serde(default)]
    settings: AppliedSettings,
}

#[derive(Default, serde::Deserialize)]
struct AppliedSettings {
    #[serde(default)]
    set: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    unset: Vec<String>,
}

/// Which runs used the profile held by the fix run `run` (named `name`) under `root`.
pub(crate) fn used_by(root: &Path, name: &str, run: &Path) -> UsedBy {
    let mut out = UsedBy::default();
    let files = RunFiles::at(run);
    if let Ok(account) = files.read_fix_account::<FixAccount>()
        && let Some(v) = account.verification
    {
        out.verification = Some(format!(
            "its final run with the chosen settings {}: {} cured, {} still failing, {} broken",
            if v.passed { "passed" } else { "did not pass" },
            v.cured.len(),
            v.still_failing.len(),
            v.broke.len()
        ));
    }
    let Some(Ok(profile)) = load(run) else {
        return out;
    };
    if !profile.env.is_empty() || !profile.unset.is_empty() {
        out.checks = crate::run_index::run_names(root)
            .into_iter()
            .filter(|other| other != name)
            .filter(|other| {
                let Some(Ok(plan)) = crate::run_index::run_path(root, other)
                    .map(|path| RunFiles::at(&path).read_plan::<PlanSettings>())
                else {
                    return false;
                };
                let applied = plan.settings;
                profile
                    .env
                    .iter()
                    .all(|(k, v)| applied.set.get(k) == Some(v))
                    && profile.unset.iter().all(|k| applied.unset.contains(k))
            })
            .collect();
    }
    let path = files.file(PROFILE_FILE);
    let here = std::fs::canonicalize(&path).unwrap_or(path);
    let digest = std::fs::read(&here)
        .map(|text| gpuprobe_runner::profile_digest(&text))
        .unwrap_or_default();
    let mine: Vec<_> = gpuprobe_runner::read_profile_uses(root)
        .into_iter()
        .filter(|u| Path::new(&u.profile) == here)
        .collect();
    out.uses = mine.len();
    out.recent = mine
        .iter()
        .rev()
        .take(RECENT_USES)
        .map(|u| UseView {
            at: u.at.clone(),
            program: u.program.clone(),
            exit_code: u.exit_code,
            same_version: u.digest == digest,
        })
        .collect();
    out
}

/// One setting of a profile.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SettingView {
    /// `NAME=VALUE`, `unset NAME`, or a framework switch.
    pub setting: String,
    /// Probes it cures.
    pub cures: Vec<String>,
    /// KB and catalogue ids behind it.
    pub sources: Vec<String>,
    /// Its cost in words.
    pub cost: String,
}

/// The export formats a page offers, by the name in its URL.
pub(crate) fn export_format(name: &str) -> Option<ExportFormat> {
    match name {
        "env" => Some(ExportFormat::Env),
        "shell" => Some(ExportFormat::Shell),
        "json" => Some(ExportFormat::Json),
        "python" => Some(ExportFormat::Python),
        _ => None,
    }
}

/// The profile a run holds, validated as `gpuprobe profile` validates it.
pub(crate) fn load(run: &Path) -> Option<Result<Profile, String>> {
    let files = RunFiles::at(run);
    if !files.holds_profile() {
        return None;
    }
    Some(
        files
            .read_profile()
            .map_err(|e| e.to_string())
            .and_then(|text| {
                profile::parse(&text, PROFILE_FILE).map_err(|e| {
                    let mut text = e.to_string();
                    let mut source = std::error::Error::source(&e);
                    while let Some(cause) = source {
                        text.push_str(&format!(": {cause}"));
                        source = cause.source();
                    }
                    text
                })
            }),
    )
}

/// Every profile under `root`, newest first.
pub(crate) fn list(root: &Path) -> Vec<ProfileView> {
    let runs = gpuprobe_runner::scan_run_names(root).unwrap_or_default();
    runs.iter()
        .filter(|(_, path)| RunFiles::at(path).holds_profile())
        .filter_map(|(name, path)| view(root, name, path))
        .collect()
}

/// One run's profile as a page shows it.
pub(crate) fn view(root: &Path, name: &str, run: &Path) -> Option<ProfileView> {
    let loaded = load(run)?;
    let source_run = RunFiles::at(run)
        .read_fix_account::<FixAccount>()
        .ok()
        .and_then(|account| account.source_run)
        .and_then(|source| {
            let name = Path::new(&source).file_name()?.to_str()?.to_string();
            crate::run_index::run_path(root, &name).map(|_| name)
        });
    let mut out = ProfileView {
        run: name.to_string(),
        created_at: String::new(),
        simulated: false,
        proven_on: String::new(),
        cures: Vec::new(),
        still_failing: Vec::new(),
        cost: String::new(),
        applied: Vec::new(),
        settings: Vec::new(),
        reported: Vec::new(),
        source_run,
        problem: None,
        used_by: None,
    };
    match loaded {
        Err(why) => out.problem = Some(why),
        Ok(profile) => {
            out.created_at = profile.created_at.clone();
            out.simulated = profile.simulated;
            out.proven_on = profile.proven_on.describe();
            out.cures = profile.cures.clone();
            out.still_failing = profile.still_failing.clone();
            out.cost = profile.measured_cost.clone().unwrap_or_default();
            out.applied = profile
                .env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .chain(profile.unset.iter().map(|k| format!("unset {k}")))
                .chain(
                    profile
                        .switches
                        .iter()
                        .map(|(k, v)| profile::switch_line(k, v)),
                )
                .collect();
            out.settings = profile
                .settings
                .iter()
                .map(|s| SettingView {
                    setting: s.setting.clone(),
                    cures: s.cures.clone(),
                    sources: s.sources.clone(),
                    cost: s.cost.clone(),
                })
                .collect();
            out.reported = profile
                .system_changes
                .iter()
                .chain(&profile.code_changes)
                .chain(&profile.other_changes)
                .cloned()
                .collect();
        }
    }
    Some(out)
}

/// The profile exported in `format`, as `gpuprobe profile export` prints it.
pub(crate) fn export(run: &Path, format: ExportFormat) -> Option<Result<String, String>> {
    load(run).map(|loaded| loaded.map(|profile| profile::export(&profile, format)))
}

/// Removes the profile from its run (the run stays, and `runs prune` may remove it once it
/// holds no profile).
pub(crate) fn delete(run: &Path) -> Result<(), String> {
    let files = RunFiles::at(run);
    if !files.holds_profile() {
        return Err("this run holds no profile".into());
    }
    std::fs::remove_file(files.file(PROFILE_FILE)).map_err(|e| format!("cannot remove it: {e}"))
}
