//! `gpuprobe check`: fingerprint, lint, probes on every GPU, diagnosis, report.

use std::io::{IsTerminal, Write};
use std::time::{Instant, SystemTime};

use anyhow::Result;
use gpuprobe_model::ExitStatus;
use gpuprobe_report::style::Style;
use gpuprobe_report::terminal::TerminalOptions;
use gpuprobe_runner::simulation;

use crate::cli::CheckArgs;
use crate::session::{self, SessionOptions};
use crate::time;

use super::process_env;

/// Prints the simulation presets (`--simulate list`).
pub fn print_presets() {
    let mut out =
        String::from("simulation presets (use --simulate NAME[,NAME...] or a TOML file):\n");
    for preset in simulation::presets() {
        out.push_str(&format!("  {:<20} {}\n", preset.name, preset.description));
    }
    print!("{out}");
}

/// The session options `check` runs with.
fn options(args: &CheckArgs) -> SessionOptions {
    SessionOptions {
        command: "check",
        tier: session::tier_of(args.tier),
        device: args.device.clone(),
        only: args.only.clone(),
        python: args.python.clone(),
        simulate: args.simulate.clone(),
        run_dir: args.run_dir.clone(),
        no_native: args.no_native,
        timeout_scale: args.timeout_scale,
        startup_timeout: args.startup_timeout,
        seed: args.seed,
        probe_options: [(
            "soak_seconds".to_string(),
            serde_json::json!(args.soak_seconds),
        )]
        .into(),
    }
}

/// Runs `check`.
pub fn run(args: CheckArgs) -> Result<ExitStatus> {
    if args.simulate.as_deref() == Some("list") {
        print_presets();
        return Ok(ExitStatus::AllPassed);
    }
    let options = options(&args);
    options.validate()?;
    let started = Instant::now();
    let started_at = time::rfc3339(SystemTime::now());
    let env = process_env();
    // The machine's fingerprint is gathered while the probes run.
    let collector = session::spawn_collector(&env);
    let prepared = match &args.resume {
        Some(dir) => {
            let supervisor = session::supervisor_config(
                args.timeout_scale,
                args.startup_timeout,
                dir.join("workers"),
            );
            session::prepare_existing(dir, None, args.python.as_deref(), supervisor, &env)?
        }
        None => session::prepare_new(&options, &env, &started_at)?,
    };
    let completed = session::execute(prepared, args.verbose, collector, started, &started_at)?;
    let report = &completed.report;

    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", gpuprobe_report::json::render(report))?;
    } else {
        let style = Style::for_output(
            std::io::stdout().is_terminal(),
            env.get("NO_COLOR").map(String::as_str),
        );
        let options = TerminalOptions {
            all: args.all,
            style,
            width: None,
        };
        write!(
            stdout,
            "{}",
            gpuprobe_report::terminal::render(report, options)
        )?;
        if args.matrix {
            write!(
                stdout,
                "{}",
                gpuprobe_report::matrix::render(&report.results, style)
            )?;
        }
        if args.timings
            && let Some(timings) = &report.timings
        {
            write!(
                stdout,
                "{}",
                gpuprobe_report::timings::render(timings, report.wall_s)
            )?;
        }
    }
    Ok(report.exit_status)
}
