//! The progress bar: shown on a terminal, hidden otherwise (pipes, CI, `--json` to a file).
//!
//! The bar on screen is also known to [`clear_active`], so that a Ctrl-C that ends gpuprobe
//! from its signal thread leaves a clean line behind, not a half-drawn bar.

use std::io::IsTerminal;
use std::sync::Mutex;

use gpuprobe_doctor::engine::Progress;
use gpuprobe_doctor::session::SessionProgress;
use gpuprobe_report::progress;
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

/// Draws progress on stderr when it is a terminal.
pub(crate) struct ProgressView {
    bar: ProgressBar,
    verbose: bool,
}

impl ProgressView {
    /// A view for `tier`; hidden unless stderr is a terminal.
    pub(crate) fn new(label: &str, verbose: bool) -> ProgressView {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        if std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
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
        ProgressView { bar, verbose }
    }

    /// Updates the view.
    pub(crate) fn update(&self, event: &Progress<'_>) {
        match event {
            Progress::Planned(n) => self.bar.inc_length(*n as u64),
            Progress::Started(probe, device) => {
                self.bar.set_message(format!("{probe} on {device}"))
            }
            Progress::Finished(result) => {
                self.bar.inc(1);
                if let Some(line) = progress::finished_line(result, self.verbose) {
                    self.bar.println(line);
                }
            }
            Progress::Log(message) => {
                if let Some(line) = progress::log_line(message, self.verbose) {
                    self.bar.println(line);
                }
            }
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
        if let Ok(mut active) = ACTIVE.lock() {
            *active = None;
        }
    }
}

/// A session's progress as a bar on stderr (hidden unless it is a terminal), made when the
/// probes start.
pub(crate) struct TerminalProgress {
    verbose: bool,
    view: Option<ProgressView>,
}

impl TerminalProgress {
    /// Progress that shows worker messages and non-passing verdicts when `verbose`.
    pub(crate) fn new(verbose: bool) -> TerminalProgress {
        TerminalProgress {
            verbose,
            view: None,
        }
    }
}

impl SessionProgress for TerminalProgress {
    fn started(&mut self, label: &str) {
        self.view = Some(ProgressView::new(label, self.verbose));
    }

    fn update(&mut self, event: &Progress<'_>) {
        if let Some(view) = &self.view {
            view.update(event);
        }
    }

    fn finished(&mut self) {
        if let Some(view) = &self.view {
            view.finish();
        }
    }
}
