//! What a fix runs with: its options, recorded in its run directory (`fix-options.json`) so
//! that `--resume` goes on with the same search, and checked before any work.

use std::path::{Path, PathBuf};

use gpuprobe_model::Tier;
use gpuprobe_runner::{FIX_OPTIONS_FILE, RunFiles};
use serde::{Deserialize, Serialize};

use super::candidates::{self, Candidate};
use super::run::{FixError, FixHost};
use super::start::read_report_of;
use crate::session::SessionOptions;

/// What a fix was started with: every option that decides what it searches, so that
/// `--resume` goes on with the same search.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Recorded {
    pub(crate) version: u32,
    pub(crate) started_at: String,
    from: Option<PathBuf>,
    tier: String,
    device: String,
    only: Vec<String>,
    python: Option<PathBuf>,
    simulate: Option<String>,
    no_native: bool,
    max_runs: u32,
    candidate: Vec<String>,
    sentinels: usize,
    profile_out: Option<PathBuf>,
    timeout_scale: f64,
    startup_timeout: f64,
    seed: u64,
}

pub(crate) const RECORDED_VERSION: u32 = 1;

/// A path the way a resumed run finds it again from another working directory. A bare
/// interpreter name (`python3`, looked up on PATH) stays as it is.
fn absolute(path: &Path) -> PathBuf {
    if path.components().count() <= 1 && !path.is_absolute() && !path.exists() {
        return path.to_path_buf();
    }
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Recorded {
    pub(crate) fn of(options: &FixOptions, started_at: &str) -> Recorded {
        let session = &options.session;
        Recorded {
            version: RECORDED_VERSION,
            started_at: started_at.to_string(),
            from: options.from.as_deref().map(absolute),
            tier: session.tier.name().to_string(),
            device: session.device.clone(),
            only: session.only.clone(),
            python: session.python.as_deref().map(absolute),
            simulate: session.simulate.clone().map(|spec| {
                // A simulation file named by a relative path must still be found.
                spec.split(',')
                    .map(|part| {
                        let path = Path::new(part);
                        if path.is_file() {
                            absolute(path).display().to_string()
                        } else {
                            part.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            no_native: session.no_native,
            max_runs: options.max_runs,
            candidate: options.candidate.clone(),
            sentinels: options.sentinels,
            profile_out: options.profile_out.as_deref().map(absolute),
            timeout_scale: session.timeout_scale,
            startup_timeout: session.startup_timeout,
            seed: session.seed,
        }
    }

    /// The options to go on with: the recorded ones, with what `--resume` allows besides
    /// (verbosity, another interpreter).
    pub(crate) fn into_options(
        self,
        resume: &ResumeOptions,
        dir: &Path,
    ) -> Result<FixOptions, FixError> {
        let tier = [Tier::Quick, Tier::Standard, Tier::Full, Tier::Soak]
            .into_iter()
            .find(|tier| tier.name().eq_ignore_ascii_case(&self.tier))
            .ok_or_else(|| FixError::UnknownTier {
                path: dir.join(FIX_OPTIONS_FILE),
                tier: self.tier.clone(),
            })?;
        Ok(FixOptions {
            session: SessionOptions {
                command: "fix",
                tier,
                device: self.device,
                only: self.only,
                python: resume.python.clone().or(self.python),
                simulate: self.simulate,
                run_dir: dir.to_path_buf(),
                no_native: self.no_native,
                spread: true,
                timeout_scale: self.timeout_scale,
                startup_timeout: self.startup_timeout,
                seed: self.seed,
                probe_options: Default::default(),
            },
            from: self.from,
            max_runs: self.max_runs,
            candidate: self.candidate,
            sentinels: self.sentinels,
            profile_out: self.profile_out,
            verbose: resume.verbose,
        })
    }
}

/// What a new fix runs with.
#[derive(Debug, Clone)]
pub struct FixOptions {
    /// The starting check's options (and every trial's limits); `run_dir` is the fix's
    /// directory, the check going into its `check/`.
    pub session: SessionOptions,
    /// `--from`: start from this finished run instead of a check.
    pub from: Option<PathBuf>,
    /// `--max-runs`.
    pub max_runs: u32,
    /// `--candidate`.
    pub candidate: Vec<String>,
    /// `--sentinels`.
    pub sentinels: usize,
    /// `--profile-out`.
    pub profile_out: Option<PathBuf>,
    /// Show worker messages of the starting check.
    pub verbose: bool,
}

/// What `fix --resume` may change of the recorded options.
#[derive(Debug, Clone, Default)]
pub struct ResumeOptions {
    /// `--python`: another interpreter.
    pub python: Option<PathBuf>,
    /// `--verbose`.
    pub verbose: bool,
}

/// Rejects options no search can run with, before anything is created or run: the run
/// budget, the candidates, and an unwritable profile path. Returns the explicit candidates.
pub(crate) fn validate(
    options: &FixOptions,
    host: &FixHost<'_>,
) -> Result<Option<Vec<Candidate>>, FixError> {
    if options.max_runs < 2 {
        return Err(FixError::MaxRuns);
    }
    let catalogue = gpuprobe_kb::embedded_catalogue();
    let explicit = if options.candidate.is_empty() {
        None
    } else {
        Some(candidates::explicit(&options.candidate, &catalogue)?)
    };
    // The starting run is only read, but a missing one must not cost a run directory.
    if let Some(from) = &options.from {
        let run = RunFiles::at(from);
        if !run.has_plan() {
            return Err(FixError::FromNotARun { from: from.clone() });
        }
        if !run.has_report() {
            return Err(FixError::FromUnfinished { from: from.clone() });
        }
        // A report that is no report (cut short, edited) is refused here too, not once
        // the fix's directory exists.
        read_report_of(from)?;
    }
    if let Some(path) = &options.profile_out {
        (host.check_writable_file)(path).map_err(|reason| FixError::ProfileOut { reason })?;
    }
    Ok(explicit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(dir: &Path) -> FixOptions {
        FixOptions {
            session: SessionOptions {
                command: "fix",
                tier: Tier::Standard,
                device: "0".into(),
                only: vec!["copy".into()],
                python: None,
                simulate: Some("no-such-preset-file".into()),
                run_dir: dir.to_path_buf(),
                no_native: true,
                spread: true,
                timeout_scale: 2.0,
                startup_timeout: 30.0,
                seed: 7,
                probe_options: Default::default(),
            },
            from: None,
            max_runs: 9,
            candidate: vec!["HSA_ENABLE_SDMA=0".into()],
            sentinels: 1,
            profile_out: None,
            verbose: false,
        }
    }

    #[test]
    fn recorded_options_give_back_the_search_they_started() {
        let dir = Path::new("/runs/fix-1");
        let recorded = Recorded::of(&options(dir), "2026-11-22T10:00:00Z");
        assert_eq!(recorded.tier, "standard");
        let text = serde_json::to_string(&recorded).unwrap();
        let back: Recorded = serde_json::from_str(&text).unwrap();
        let resumed = back
            .into_options(
                &ResumeOptions {
                    python: Some("python3".into()),
                    verbose: true,
                },
                dir,
            )
            .unwrap();
        assert_eq!(resumed.session.tier, Tier::Standard);
        assert_eq!(
            resumed.session.simulate.as_deref(),
            Some("no-such-preset-file")
        );
        assert_eq!(resumed.session.python, Some(PathBuf::from("python3")));
        assert_eq!(resumed.session.run_dir, dir);
        assert_eq!(resumed.max_runs, 9);
        assert_eq!(resumed.candidate, vec!["HSA_ENABLE_SDMA=0".to_string()]);
        assert!(resumed.verbose);

        let mut unknown = Recorded::of(&options(dir), "2026-11-22T10:00:00Z");
        unknown.tier = "huge".into();
        let err = unknown
            .into_options(&ResumeOptions::default(), dir)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "/runs/fix-1/fix-options.json: unknown tier \"huge\""
        );
    }
}
