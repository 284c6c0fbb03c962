//! The progress bar: shown on a terminal, hidden otherwise (pipes, CI, `--json` to a file).

use std::io::IsTerminal;

use gpuprobe_doctor::engine::Progress;
use gpuprobe_model::verdict::Verdict;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Draws progress on stderr when it is a terminal.
pub struct ProgressView {
    bar: ProgressBar,
    verbose: bool,
    label: String,
}

impl ProgressView {
    /// A view for `tier`; hidden unless stderr is a terminal.
    pub fn new(label: &str, verbose: bool) -> ProgressView {
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
        ProgressView {
            bar,
            verbose,
            label: label.to_string(),
        }
    }

    /// Updates the view.
    pub fn update(&self, event: &Progress<'_>) {
        match event {
            Progress::Planned(n) => self.bar.inc_length(*n as u64),
            Progress::Started(probe, device) => {
                self.bar.set_message(format!("{probe} on {device}"))
            }
            Progress::Finished(result) => {
                self.bar.inc(1);
                if result.verdict.is_problem() {
                    let line = format!(
                        "{:<10} {} on {}: {}",
                        result.verdict.label(),
                        result.probe,
                        result.device,
                        result.verdict.detail()
                    );
                    self.bar.println(line);
                } else if self.verbose && !matches!(result.verdict, Verdict::Pass) {
                    self.bar.println(format!(
                        "{:<10} {}: {}",
                        result.verdict.label(),
                        result.probe,
                        result.verdict.detail()
                    ));
                }
            }
            Progress::Log(message) => {
                if self.verbose {
                    self.bar.println(message);
                }
            }
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        let _ = &self.label;
    }
}
