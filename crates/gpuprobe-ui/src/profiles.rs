//! Profiles and cures: the profiles `fix` wrote into its run directories (`profile.toml`,
//! read through `RunFiles`), each with the stack it was proven on, the failures it cures,
//! its cost and settings, and the runs it came from. Parsing, validating and exporting are
//! `gpuprobe_doctor::profile_file`'s, as `gpuprobe profile` does them.

use std::path::Path;

use gpuprobe_doctor::profile_file::{self, ExportFormat};
use gpuprobe_model::profile::{FixAccount, Profile};
use gpuprobe_runner::{PROFILE_FILE, RunFiles};
use serde::Serialize;

/// One profile as the pages show it.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileView {
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
}

/// One setting of a profile.
#[derive(Debug, Clone, Serialize)]
pub struct SettingView {
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
pub fn export_format(name: &str) -> Option<ExportFormat> {
    match name {
        "env" => Some(ExportFormat::Env),
        "shell" => Some(ExportFormat::Shell),
        "json" => Some(ExportFormat::Json),
        "python" => Some(ExportFormat::Python),
        _ => None,
    }
}

/// The profile a run holds, validated as `gpuprobe profile` validates it.
pub fn load(run: &Path) -> Option<Result<Profile, String>> {
    let files = RunFiles::at(run);
    if !files.holds_profile() {
        return None;
    }
    Some(
        files
            .read_profile()
            .map_err(|e| e.to_string())
            .and_then(|text| {
                profile_file::parse(&text, PROFILE_FILE).map_err(|e| {
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
pub fn list(root: &Path) -> Vec<ProfileView> {
    let runs = gpuprobe_runner::scan_runs(root, std::time::SystemTime::now()).unwrap_or_default();
    runs.iter()
        .filter(|r| r.holds_profile)
        .filter_map(|r| view(root, &r.name, &r.path))
        .collect()
}

/// One run's profile as a page shows it.
pub fn view(root: &Path, name: &str, run: &Path) -> Option<ProfileView> {
    let loaded = load(run)?;
    let source_run = RunFiles::at(run)
        .read_fix_account::<FixAccount>()
        .ok()
        .and_then(|account| account.source_run)
        .and_then(|source| {
            let name = Path::new(&source).file_name()?.to_str()?.to_string();
            crate::catalogue::run_path(root, &name).map(|_| name)
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
                        .map(|(k, v)| profile_file::switch_line(k, v)),
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
pub fn export(run: &Path, format: ExportFormat) -> Option<Result<String, String>> {
    load(run).map(|loaded| loaded.map(|profile| profile_file::export(&profile, format)))
}

/// Removes the profile from its run (the run stays, and `runs prune` may remove it once it
/// holds no profile).
pub fn delete(run: &Path) -> Result<(), String> {
    let files = RunFiles::at(run);
    if !files.holds_profile() {
        return Err("this run holds no profile".into());
    }
    std::fs::remove_file(files.file(PROFILE_FILE)).map_err(|e| format!("cannot remove it: {e}"))
}
