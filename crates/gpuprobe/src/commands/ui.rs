//! `gpuprobe ui`: starts the local web application (`gpuprobe_ui`) over the runs directory
//! and prints the URL to open, which carries the per-start token. It serves until the
//! process is ended (Ctrl-C).

use std::io::Write;

use anyhow::Result;
use gpuprobe_model::ExitStatus;
use gpuprobe_ui::{Ui, UiOptions};

use crate::cli::UiArgs;
use crate::paths;

use super::process_env;

/// Runs `ui`.
pub(super) fn run(args: UiArgs) -> Result<ExitStatus> {
    let runs_root = args
        .runs_dir
        .unwrap_or_else(|| paths::runs_root(&process_env()));
    // The checks started from the page run this very binary.
    let exe = std::env::current_exe()?;
    let ui = Ui::start(UiOptions {
        bind: args.bind,
        port: args.port,
        runs_root: runs_root.clone(),
        exe,
        python: args.python,
    })?;
    let mut out = crate::output::stdout();
    writeln!(out, "{}", ui.url())?;
    out.flush()?;
    crate::output::eprint_line(&format!(
        "gpuprobe ui: serving the runs in {}; open the URL above (it carries this start's token). Ctrl-C ends it.",
        runs_root.display()
    ));
    ui.serve();
    Ok(ExitStatus::AllPassed)
}
