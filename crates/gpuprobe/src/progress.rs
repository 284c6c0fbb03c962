//! The progress of a session on stderr, shown as `gpuprobe_report::Console` decides: a bar
//! on a terminal, plain lines in a log (`gpuprobe_report::ProgressLog`: a line
//! per finished family, per probe with `--verbose`), nothing with `--quiet`.
//!
//! The bar on screen is also known to [`clear_active`], so that gpuprobe leaving on a
//! Ctrl-C ([`crate::interrupt`], from the main thread or, on a second signal, from the
//! signal thread) leaves a clean line behind, not a half-drawn bar.

use std::sync::Mutex;
use std::time::Instant;

use gpuprobe_doctor::Progress;
use gpuprobe_doctor::session::SessionProgress;
use gpuprobe_report::ProgressLog;
use gpuprobe_report::{ProgressMode, current_console};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bar of the view in use, if any.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Removes the bar in use from the screen (any thread may call it; a no-op when none).
pub(crate) fn clear_active() {
    let bar = ACTIVE.lock().ok().and_then(|mut active| active.take());
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

/// A session's progress on stderr: a bar made when the probes start (with `verbose`, worker
/// messages and non-passing verdicts print above it), or a log's lines.
pub(crate) struct TerminalProgress {
    verbose: bool,
    bar: Option<ProgressBar>,
    log: Option<(ProgressLog, Instant)>,
}

impl TerminalProgress {
    /// Progress that shows worker messages and non-passing verdicts when `verbose`.
    pub(crate) fn new(verbose: bool) -> TerminalProgress {
        TerminalProgress {
            verbose,
            bar: None,
            log: None,
        }
    }
}

impl SessionProgress for TerminalProgress {
    fn started(&mut self, label: &str) {
        match current_console().progress {
            ProgressMode::Bar => {}
            ProgressMode::Lines => {
                self.log = Some((ProgressLog::new(self.verbose), Instant::now()));
                return;
            }
            ProgressMode::Off => return,
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} {bar:24} {pos}/{len} probes  {elapsed_precise}  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(label.to_string());
        if let Ok(mut active) = ACTIVE.lock() {
            *active = Some(bar.clone());
        }
        self.bar = Some(bar);
    }

    fn update(&mut self, event: &Progress<'_>) {
        if let Some((log, started)) = &mut self.log {
            let at = started.elapsed().as_secs_f64();
            let lines = match event {
                Progress::Planned(probes) => {
                    log.planned(probes.iter());
                    Vec::new()
                }
                Progress::Finished(result) => log.finished(result, at),
                Progress::Log(message) => log.log(message, at).into_iter().collect(),
                Progress::Started(..) => Vec::new(),
            };
            for line in lines {
                crate::output::eprint_line(&line);
            }
            return;
        }
        let Some(bar) = &self.bar else { return };
        let line = match event {
            Progress::Planned(probes) => {
                bar.inc_length(probes.len() as u64);
                None
            }
            Progress::Started(probe, device) => {
                bar.set_message(format!("{probe} on {device}"));
                None
            }
            Progress::Finished(result) => {
                bar.inc(1);
                gpuprobe_report::progress_finished_line(result, self.verbose)
            }
            Progress::Log(message) => gpuprobe_report::progress_log_line(message, self.verbose),
        };
        if let Some(line) = line {
            bar.println(line);
        }
    }

    fn finished(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if let Ok(mut active) = ACTIVE.lock() {
            *active = None;
        }
    }
}
