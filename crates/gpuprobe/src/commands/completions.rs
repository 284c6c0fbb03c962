//! `gpuprobe completions SHELL` and `gpuprobe man`: a shell completion script and the man
//! pages, both generated from the clap definitions in `cli.rs`, so they name exactly the
//! commands and options this build has, less the hidden internal ones (`__exec-job`,
//! `__native-worker`), which the generators would otherwise offer.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use gpuprobe_model::ExitStatus;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::errors::CliError;
use crate::errors::{Internal, Result};

/// The command line as users see it: every command but the hidden ones.
fn public_command() -> clap::Command {
    let full = Cli::command();
    let mut public = clap::Command::new("gpuprobe")
        .version(env!("CARGO_PKG_VERSION"))
        .propagate_version(true)
        .subcommand_required(true);
    if let Some(about) = full.get_about() {
        public = public.about(about.clone());
    }
    public
        .subcommands(
            full.get_subcommands()
                .filter(|command| !command.is_hide_set())
                .cloned(),
        )
        .mut_subcommands(without_help_commands)
        .disable_help_subcommand(true)
}

/// `command` and everything below it without clap's `help` subcommand: `-h` does the same,
/// and a man page would name a `gpuprobe-help(1)` that has nothing of its own to say.
fn without_help_commands(command: clap::Command) -> clap::Command {
    command
        .disable_help_subcommand(true)
        .mut_subcommands(without_help_commands)
}

/// Prints the completion script for `args.shell`.
pub(super) fn completions(args: CompletionsArgs) -> Result<ExitStatus> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut public_command(), "gpuprobe", &mut script);
    let mut out = std::io::stdout().lock();
    // Generated from our own definitions, not echoed input: it goes out as is.
    out.write_all(&script).internal()?;
    out.flush().internal()?;
    Ok(ExitStatus::AllPassed)
}

/// Prints gpuprobe(1) in roff, or with `--out DIR` writes it and one page per command
/// (`gpuprobe-check.1`, the pages gpuprobe(1) refers to) into DIR.
pub(super) fn man(args: ManArgs) -> Result<ExitStatus> {
    let command = public_command();
    let Some(dir) = args.out else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .render(&mut page)
            .internal()?;
        let mut out = std::io::stdout().lock();
        out.write_all(&page).internal()?;
        out.flush().internal()?;
        return Ok(ExitStatus::AllPassed);
    };
    std::fs::create_dir_all(&dir).map_err(|source| CliError::Unwritable {
        path: dir.clone(),
        source,
    })?;
    write_pages(&dir, "gpuprobe", "gpuprobe", command)?;
    Ok(ExitStatus::AllPassed)
}

/// Writes `name.1` for `command` and, below it, `name-SUB.1` for each of its commands (the
/// pages its SUBCOMMANDS section names), `invocation` being how a user types it.
fn write_pages(dir: &Path, name: &str, invocation: &str, command: clap::Command) -> Result<()> {
    for sub in command.get_subcommands() {
        let sub_name = format!("{name}-{}", sub.get_name());
        let sub_invocation = format!("{invocation} {}", sub.get_name());
        let page = sub
            .clone()
            .display_name(sub_name.clone())
            .bin_name(sub_invocation.clone());
        write_pages(dir, &sub_name, &sub_invocation, page)?;
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .internal()?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page).map_err(|source| CliError::Unwritable { path, source })?;
    Ok(())
}
