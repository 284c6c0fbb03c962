//! `gpuprobe run [--profile P] -- CMD ...`: runs a job with a profile applied and watches
//! it. The watching is `gpuprobe_runner::job`'s; this adapter checks the arguments, loads
//! the profile (validated, and refused when it was proven on another stack unless
//! `--force`), and prints the runner's lines on stderr, prefixed `gpuprobe:`. The exit code
//! is the job's (128 + signal when a signal killed it, as shells report).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;

use gpuprobe_model::Profile;
use gpuprobe_model::visible_line;
use gpuprobe_runner::{EnvChanges, FORWARDED, JobOptions, Signals, StartupHook};
use nix::sys::signal::Signal;

use crate::cli::{FallbackArg, RunArgs};
use crate::errors::CliError;
use crate::errors::Result;
use crate::paths;
use gpuprobe_doctor::profile as profiles;

use super::process_env;

/// One line of gpuprobe's own on stderr. Its messages quote the job's output (a fatal
/// line), the command's name and paths and values from the profile: the whole line is made
/// visible, so none of that can drive the terminal. (The job's own output is passed through
/// as the job wrote it; this is only what gpuprobe says.)
fn say(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "gpuprobe: {}", visible_line(line));
}

/// The `__exec-job` entry: becomes the job, or says why it cannot and returns the code to
/// leave with (see [`gpuprobe_runner::exec_job`]).
pub(super) fn exec_job(command: &[OsString]) -> u8 {
    let err = gpuprobe_runner::exec_job(command);
    say(&err.to_string());
    err.exec_exit_code()
}

/// Validates the profile and checks it against this machine's stack.
fn load_profile(args: &RunArgs, env: &BTreeMap<String, String>) -> Result<Option<Profile>> {
    let Some(path) = &args.profile else {
        return Ok(None);
    };
    let profile = profiles::load(path).map_err(|source| CliError::Profile { source })?;
    let here = gpuprobe_doctor::live_key(args.python.as_deref(), env);
    let differences = profile.proven_on.differences(&here);
    if !differences.is_empty() {
        let list = differences.join("; ");
        if !args.force {
            return Err(CliError::ProfileNotProvenHere {
                path: path.clone(),
                differences: list,
            }
            .into());
        }
        say(&format!(
            "warning: --force: applying profile {} proven on a different stack ({list})",
            path.display()
        ));
    }
    if profile.simulated {
        say(&format!(
            "warning: profile {} was made under fault SIMULATION: its settings are not proven on real hardware",
            path.display()
        ));
    }
    Ok(Some(profile))
}

/// Runs `run`; returns the exit code to leave with.
pub(super) fn run(args: RunArgs) -> Result<u8> {
    // First, while gpuprobe has a single thread: every later thread inherits the mask.
    // Every signal goes to the job, whose exit code is what gpuprobe leaves with; SIGTTOU
    // is blocked so that the terminal can be taken back from the background.
    let signals = Signals::install(FORWARDED, &[Signal::SIGTTOU], |_| {});
    if args.command.is_empty() {
        return Err(CliError::NoCommand.into());
    }
    // --repeat and --hang-timeout are range-checked by the command line parser.
    // Every output is checked before the job starts: a typo in --summary must not cost a
    // run of the job, nor replace the job's exit code afterwards.
    if let Some(path) = &args.summary {
        paths::check_writable_file(path)
            .map_err(|reason| CliError::SummaryNotWritable { reason })?;
    }
    let env = process_env();
    let profile = load_profile(&args, &env)?;
    let mut changes = profile
        .as_ref()
        .map(|p| EnvChanges {
            set: p.env.clone(),
            remove: p.unset.clone(),
        })
        .unwrap_or_default();
    // Kept until the job is over: the hook's directory goes when it is dropped.
    let hook = match &profile {
        Some(p) => StartupHook::place(
            &std::env::temp_dir(),
            &p.switches,
            env.get("PYTHONPATH").map(String::as_str),
            args.switches_to_children,
        )
        .map_err(|source| CliError::StartupHook { source })?,
        None => None,
    };
    if let Some(hook) = &hook {
        let names: Vec<String> = profile
            .iter()
            .flat_map(|p| p.switches.iter())
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        say(&format!(
            "framework switches applied in the job's Python after `import torch`: {}{}",
            names.join(", "),
            if args.switches_to_children {
                " (also in the processes it starts)"
            } else {
                ""
            }
        ));
        changes.set.extend(hook.env.clone());
    }
    // The text applied, digested before the job starts (the file may be rewritten meanwhile).
    let digest = args
        .profile
        .as_ref()
        .and_then(|path| std::fs::read(path).ok())
        .map(|text| gpuprobe_runner::profile_digest(&text))
        .unwrap_or_default();
    let options = JobOptions {
        env: changes,
        uncured: profile
            .as_ref()
            .map(|p| p.still_failing.clone())
            .unwrap_or_default(),
        repeat: args.repeat,
        hang_timeout: args.hang_timeout,
        fallback_cpu: args.fallback == Some(FallbackArg::Cpu),
        force_gpu: args.force_gpu,
        search_path: env.get("PATH").cloned(),
        summary: args.summary,
        profile: args.profile,
        command: args.command,
    };
    let report = gpuprobe_runner::run_job(&options, &signals, &mut |line| say(line));
    drop(hook);
    if let Some(path) = &options.profile {
        record_use(&env, path, digest, &options.command, report.exit_code);
    }
    Ok(u8::try_from(report.exit_code.clamp(0, 255)).unwrap_or(1))
}

/// Adds this use of the profile at `path` to the runs directory's journal, which the page's
/// profile view reads ("used by"). Only the program's name is recorded, never its arguments
/// (a command line may carry secrets). A journal that cannot be written costs a warning,
/// never the job's exit code.
fn record_use(
    env: &BTreeMap<String, String>,
    path: &std::path::Path,
    digest: String,
    command: &[OsString],
    exit_code: i32,
) {
    let profile = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let program = command
        .first()
        .map(std::path::Path::new)
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let entry = gpuprobe_runner::ProfileUse {
        at: gpuprobe_runner::rfc3339(std::time::SystemTime::now()),
        profile: profile.display().to_string(),
        digest,
        program,
        exit_code,
    };
    let root = gpuprobe_runner::runs_root(env);
    if let Err(e) = gpuprobe_runner::append_profile_use(&root, &entry) {
        say(&format!(
            "warning: cannot record this use of the profile in {}: {e}",
            root.join(gpuprobe_runner::PROFILE_USES_FILE).display()
        ));
    }
}
