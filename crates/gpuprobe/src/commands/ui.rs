//! `gpuprobe ui`: starts the local web application (`gpuprobe_ui`) over the runs directory
//! and prints the URL to open, which carries the per-start token. It serves until the
//! process is ended (Ctrl-C, SIGTERM); the checks and fixes started from the page are then
//! stopped as Ctrl-C stops them, so none goes on writing to a server that is gone.

use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gpuprobe_model::ExitStatus;
use gpuprobe_runner::Signals;
use gpuprobe_ui::{Stopper, Ui, UiOptions};
use nix::sys::signal::Signal;

use crate::cli::UiArgs;
use crate::errors::{Internal, Result};
use crate::paths;

use super::process_env;

/// Runs `ui`.
pub(super) fn run(args: UiArgs) -> Result<ExitStatus> {
    let runs_root = args
        .runs_dir
        .unwrap_or_else(|| paths::runs_root(&process_env()));
    // The checks started from the page run this very binary.
    let exe = std::env::current_exe().internal()?;
    // Installed while the process has one thread (the server starts threads).
    let stopper: Arc<OnceLock<Stopper>> = Arc::new(OnceLock::new());
    let on_signal = Arc::clone(&stopper);
    Signals::install(&[Signal::SIGINT, Signal::SIGTERM], &[], move |event| {
        // A second signal does not wait for the runs to stop.
        let wait = Duration::from_secs(if event.repeated { 0 } else { 15 });
        let stopped = on_signal.get().map_or(0, |s| s.stop_all(wait));
        if stopped > 0 {
            crate::output::eprint_line(&format!(
                "gpuprobe ui: stopped {stopped} run(s) started from the page (`--resume` finishes each)"
            ));
        }
        std::process::exit(128 + event.signal);
    });
    let ui = Ui::start(UiOptions {
        bind: args.bind,
        port: args.port,
        runs_root: runs_root.clone(),
        exe,
        python: args.python,
    })?;
    let _ = stopper.set(ui.stopper());
    let mut out = crate::output::stdout();
    writeln!(out, "{}", ui.url()).internal()?;
    out.flush().internal()?;
    crate::output::eprint_line(&format!(
        "gpuprobe ui: serving the runs in {}; open the URL above (it carries this start's token). Ctrl-C ends it.",
        runs_root.display()
    ));
    ui.serve();
    Ok(ExitStatus::AllPassed)
}
