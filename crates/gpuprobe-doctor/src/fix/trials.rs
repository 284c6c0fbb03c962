//! The trial runner of a fix: each trial's probes in fresh workers through the engine, with
//! the trial's settings applied, in a directory of its own (`trials/NN-<phase>/`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use gpuprobe_model::{ProbeId, ProbeSpec};
use gpuprobe_runner::{RunDir, Task};

use super::{TrialOutcome, TrialRequest, TrialRunner};
use crate::exec::{self, EngineConfig};
use crate::plan;
use crate::session::supervisor_config;
use crate::session::{Interrupted, Stopped};

/// The number a trial directory (`NN-<phase>`) carries.
fn trial_number(name: &str) -> Option<u32> {
    name.split_once('-')?.0.parse().ok()
}

/// Removes the trial directories numbered above `last`: what an interrupted trial left,
/// or trials of a journal that no longer applies.
pub(crate) fn remove_trial_dirs_after(trials: &Path, last: u32) {
    let Ok(entries) = std::fs::read_dir(trials) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if trial_number(&name).is_some_and(|n| n > last) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Runs trials in fresh workers through the engine, each in its own directory.
pub(crate) struct EngineTrials<'a> {
    pub(crate) base: EngineConfig,
    pub(crate) specs: HashMap<ProbeId, ProbeSpec>,
    pub(crate) trials_dir: PathBuf,
    pub(crate) timeout_scale: f64,
    pub(crate) startup_timeout: f64,
    /// Says a line of progress (a trial that could not start).
    pub(crate) say: &'a dyn Fn(&str),
}

impl TrialRunner for EngineTrials<'_> {
    fn run(&mut self, request: &TrialRequest<'_>) -> Result<TrialOutcome, Interrupted> {
        let started = Instant::now();
        let dir = self
            .trials_dir
            .join(format!("{:02}-{}", request.number, request.phase.name()));
        // Left by a trial that was running when the fix was interrupted: it runs again
        // from scratch (its partial results must not mix with the new ones).
        if dir.exists() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let run_dir = match RunDir::create(&dir) {
            Ok(run_dir) => run_dir,
            Err(err) => {
                // Every probe of the trial counts as not passing (no result came back).
                (self.say)(&format!("trial {}: {err}", request.number));
                return Ok(TrialOutcome::default());
            }
        };
        let _ = run_dir.write_json(
            "settings.json",
            &request
                .settings
                .iter()
                .map(|s| s.describe())
                .collect::<Vec<_>>(),
        );
        let mut config = self.base.clone();
        let trial = super::settings_of(request.settings);
        config.settings.set.extend(trial.set);
        for name in trial.unset {
            config.settings.set.remove(&name);
            if !config.settings.unset.contains(&name) {
                config.settings.unset.push(name);
            }
        }
        // The starting point's flag: the process's signal handling cancels it.
        let cancel = self.base.supervisor.cancel.clone();
        config.supervisor = supervisor_config(
            self.timeout_scale,
            self.startup_timeout,
            run_dir.workers_dir(),
            &cancel,
        );
        let tasks: Vec<Task> = request
            .probes
            .iter()
            .filter_map(|p| {
                self.specs.get(&p.probe).map(|spec| Task {
                    spec: spec.clone(),
                    device: p.device,
                })
            })
            .collect();
        let execution = exec::execute(
            plan::lanes_for(tasks),
            &config,
            &run_dir,
            &mut |_, _, _| Vec::new(),
            &mut |_| {},
        );
        if let Some(interrupted) = Interrupted::of(&cancel, || Stopped::Fix {
            fix_dir: self
                .trials_dir
                .parent()
                .unwrap_or(&self.trials_dir)
                .to_path_buf(),
            trial: Some(request.number),
        }) {
            // Cut short by Ctrl-C or SIGTERM: these results are no outcome of the trial and
            // must not reach the journal, where a resume would replay them. The search stops
            // before it sees them; the trials already recorded stay.
            return Err(interrupted);
        }
        Ok(TrialOutcome {
            workers: execution.hellos.len() as u32,
            results: execution.results,
            elapsed_s: started.elapsed().as_secs_f64(),
            replayed: false,
        })
    }
}
