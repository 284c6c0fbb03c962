//! `gpuprobe bundle`: packs a run directory into one redacted `.tar.gz` for an issue. Which
//! run (`--run`, else the newest under the state directory) and where it keeps each file are
//! the runner's (`gpuprobe_runner::runs`, `gpuprobe_runner::Run`); what goes in,
//! the bounds, the redaction and the archive are `gpuprobe_report::bundle`'s (and
//! `gpuprobe_report::redact`'s); this adapter hands the one to the other and prints the
//! account.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use gpuprobe_model::ExitStatus;
use gpuprobe_report::{BundleError, BundleOptions as Options, RunLayout};
use gpuprobe_runner::{Run, RunContents};

use crate::cli::BundleArgs;
use crate::errors::{Internal, Result};
use crate::paths;

/// Runs `bundle`.
pub(super) fn run(args: BundleArgs) -> Result<ExitStatus> {
    let env = super::process_env();
    let run = match args.run {
        Some(dir) => dir,
        None => newest_run(&paths::runs_root(&env))?,
    };
    let layout = Run::open(&run)
        .map(|found| layout(found.contents()))
        .map_err(|why| why.to_string());
    let options = Options {
        run,
        layout,
        out: args.out,
        force: args.force,
        redact: !args.no_redact,
    };
    let written = gpuprobe_report::make_bundle(&options, &env)?;
    let text = if args.json {
        serde_json::to_string_pretty(&written).internal()? + "\n"
    } else {
        gpuprobe_report::render_bundle_text(&written)
    };
    write!(crate::output::stdout(), "{text}").internal()?;
    Ok(ExitStatus::AllPassed)
}

/// The newest run under `root` (the state directory's runs directory).
fn newest_run(root: &Path) -> Result<PathBuf, BundleError> {
    let runs = gpuprobe_runner::scan_runs(root, SystemTime::now()).map_err(|source| {
        BundleError::RunsUnreadable {
            root: root.to_path_buf(),
            source,
        }
    })?;
    runs.into_iter()
        .next()
        .map(|run| run.path)
        .ok_or_else(|| BundleError::NoRuns {
            root: root.to_path_buf(),
        })
}

/// Where the run keeps its files, as the bundle takes it.
fn layout(contents: RunContents) -> RunLayout {
    RunLayout {
        report: contents.report,
        plan: contents.plan,
        results: contents.results,
        profile: contents.profile,
        fix_account: contents.fix_account,
        workers: contents.workers,
    }
}
