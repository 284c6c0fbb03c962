//! `gpuprobe bundle`: packs a run directory into one redacted `.tar.gz` for an issue. Which
//! run, what goes in, the bounds, the redaction and the archive are
//! `gpuprobe_report::bundle`'s (and `gpuprobe_report::redact`'s); this adapter prints the
//! account.

use std::io::Write;

use anyhow::Result;
use gpuprobe_model::ExitStatus;
use gpuprobe_report::bundle::{self, Options};

use crate::cli::BundleArgs;

/// Runs `bundle`.
pub(super) fn run(args: BundleArgs) -> Result<ExitStatus> {
    let options = Options {
        run: args.run,
        out: args.out,
        force: args.force,
        redact: !args.no_redact,
    };
    let written = bundle::make(&options, &super::process_env())?;
    let text = if args.json {
        serde_json::to_string_pretty(&written)? + "\n"
    } else {
        bundle::render_text(&written)
    };
    write!(crate::output::stdout(), "{text}")?;
    Ok(ExitStatus::AllPassed)
}
