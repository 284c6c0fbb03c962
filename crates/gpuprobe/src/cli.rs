//! The command line: clap definitions only.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// gpuprobe: does this GPU stack compute the right numbers? If not, where is it broken,
/// which known issue is it, and what cures it?
#[derive(Debug, Parser)]
#[command(name = "gpuprobe", version = gpuprobe_kb::LONG_VERSION, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
    /// Colour: `auto` (on a terminal, unless NO_COLOR is set non-empty), `always`, `never`.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto", value_parser = gpuprobe_report::ColorWhen::NAMES)]
    pub color: String,
    /// Print only the verdict or summary, and errors: no progress.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Fingerprint, config lint and correctness probes on every GPU, then a diagnosis.
    Check(CheckArgs),
    /// The stack fingerprint alone (GPUs, drivers, firmware, runtimes, framework, settings).
    Env(EnvArgs),
    /// Parses pasted tool output and logs (rocminfo, amd-smi, rocm-smi, nvidia-smi,
    /// collect_env, dmesg) and runs the knowledge base and the lint on what they reveal.
    Triage(TriageArgs),
    /// Native VRAM pattern test at close to memory bandwidth, without PyTorch.
    Memtest(MemtestArgs),
    /// The knowledge base of known issues.
    Kb(KbArgs),
    /// Searches for settings that cure the failing probes, proves them by re-running the
    /// probes in fresh workers, and writes a profile.
    Fix(FixArgs),
    /// Runs a command with a profile applied, watching it for crashes and hangs.
    Run(RunArgs),
    /// Profiles written by `fix`: show, check against this machine, export.
    Profile(ProfileArgs),
    /// The run directories kept under the state directory: list them, prune old ones.
    Runs(RunsArgs),
    /// Renders a finished run's report again: the terminal text, the JSON (--json), one
    /// self-contained offline HTML file (--html FILE), Prometheus metrics (--prometheus FILE)
    /// or JUnit XML (--junit FILE).
    Report(ReportArgs),
    /// Merges many nodes' reports: groups the nodes by stack, shows which probes fail where,
    /// and flags a node whose output digests differ from the majority of its identical-stack
    /// peers (the cross-node differential; docs/fleet.md).
    Fleet(FleetArgs),
    /// Serves a local web page over the runs: every run, a run's report, two runs
    /// compared, and checks started, watched and stopped from the browser (docs/ui.md).
    Ui(UiArgs),
    /// Packs a run into one redacted .tar.gz to attach to an issue: report, fingerprint,
    /// lint, kernel-log lines, worker log tails, profile.
    Bundle(BundleArgs),
    /// Writes a standalone script (repro.py) and an issue body (ISSUE.md) for one failing
    /// probe result, and runs the script.
    Repro(ReproArgs),
    /// Prints a shell completion script (`gpuprobe completions bash >
    /// ~/.local/share/bash-completion/completions/gpuprobe`).
    Completions(CompletionsArgs),
    /// Prints the man page gpuprobe(1) in roff (`gpuprobe man > gpuprobe.1`); `--out DIR`
    /// writes it and one page per command.
    Man(ManArgs),
    /// Starts a job for `run` with a clean signal mask (internal).
    #[command(name = "__exec-job", hide = true)]
    ExecJob(ExecJobArgs),
    /// Runs probes in a worker process (internal; used by `check`).
    #[command(name = "__native-worker", hide = true)]
    NativeWorker(NativeWorkerArgs),
}

/// Tiers of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TierArg {
    /// Seconds: the probes that catch common silent failures.
    Quick,
    /// Every family at typical and threshold sizes.
    Standard,
    /// Adds the large cases.
    Full,
    /// Repeats probes cold and after sustained load.
    Soak,
}

/// The options `check` and `fix` share: what their session runs. Worded for `check`;
/// `fix` words its own help (the starting check) and keeps its order ([`FixArgs`]). Every
/// option has its place in the help set here, so that the flattened group keeps the order
/// each command had before it was shared.
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// How much to run.
    #[arg(long, value_enum, default_value = "quick", display_order = 0)]
    pub tier: TierArg,
    /// Devices to test: `all` (every GPU the framework sees), indices like `0,2`, or `cpu`
    /// (a self-test of the probes on the CPU).
    #[arg(long, default_value = "all", display_order = 1)]
    pub device: String,
    /// Run only probes whose id matches (glob over ids, e.g. `copy.*` or `*bf16*`;
    /// a plain prefix like `copy` selects the family; a full probe id selects that probe
    /// alone). Repeatable.
    #[arg(long = "only", value_name = "PATTERN", display_order = 2)]
    pub only: Vec<String>,
    /// The Python interpreter to probe (default: $VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH).
    #[arg(long, value_name = "PATH", display_order = 3)]
    pub python: Option<PathBuf>,
    /// Print the report as JSON on stdout (schema: docs/report.schema.json).
    #[arg(long, display_order = 4)]
    pub json: bool,
    /// Where to keep this run's results (default: `~/.local/state/gpuprobe/runs/<time>`).
    #[arg(long, value_name = "DIR", display_order = 7)]
    pub run_dir: Option<PathBuf>,
    /// Fault simulation (test and demo mode): preset names or TOML files, comma-separated;
    /// `list` shows the presets. Every output made under it says SIMULATED.
    #[arg(long, value_name = "SPEC", display_order = 10)]
    pub simulate: Option<String>,
    /// Skip the native (CUDA/HIP runtime) probes.
    #[arg(long, display_order = 11)]
    pub no_native: bool,
    /// Multiply every probe's timeout (slow machines); 0.05 to 1000.
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR", value_parser = timeout_scale, allow_negative_numbers = true, display_order = 12)]
    pub timeout_scale: f64,
    /// Seconds a worker may take to start (interpreter and framework import); 1 to 3600.
    #[arg(long, default_value_t = 180.0, value_name = "SECONDS", value_parser = startup_timeout, allow_negative_numbers = true, display_order = 13)]
    pub startup_timeout: f64,
    /// Seed for every random input (a run is reproducible from it).
    #[arg(long, default_value_t = 20261122, display_order = 14)]
    pub seed: u64,
    /// Show worker messages (library warnings, restarts).
    #[arg(short, long, display_order = 16)]
    pub verbose: bool,
}

/// Options of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// What the session runs.
    #[command(flatten)]
    pub session: SessionArgs,
    /// List passing probes too.
    #[arg(long, display_order = 5)]
    pub all: bool,
    /// Also print the measured dtype conversion matrix.
    #[arg(long, display_order = 6)]
    pub matrix: bool,
    /// Finish an interrupted run from its directory, under what it ran under: refused when
    /// the interpreter, its torch or gpuprobe differ from the run's (see --replan).
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["run_dir", "simulate", "tier", "only", "device", "no_native", "seed", "soak_seconds"], display_order = 8)]
    pub resume: Option<PathBuf>,
    /// With --resume: continue even though the interpreter, its torch or gpuprobe differ
    /// from the run's. What is left is planned again under them, the results already
    /// recorded are kept, and the report says what changed.
    #[arg(long, requires = "resume", display_order = 9)]
    pub replan: bool,
    /// Seconds of sustained load in the soak tier, between the cold and the loaded runs of
    /// its sentinel probes; 0.5 to 720.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS", value_parser = soak_seconds, allow_negative_numbers = true, display_order = 15)]
    pub soak_seconds: f64,
    /// Print where the time went: the phases, and each lane's start, hello, first probe,
    /// last result and end (always in the JSON report as `timings`).
    #[arg(long, display_order = 17)]
    pub timings: bool,
    /// Also write the report as one self-contained HTML file (offline: no script, no
    /// external resource).
    #[arg(long, value_name = "FILE", display_order = 18)]
    pub html: Option<PathBuf>,
    /// Also write the run as Prometheus metrics, for node_exporter's textfile collector
    /// (written atomically; docs/fleet.md).
    #[arg(long, value_name = "FILE", display_order = 19)]
    pub prometheus: Option<PathBuf>,
    /// Also write the run as JUnit XML, one test case per probe run, for CI systems.
    #[arg(long, value_name = "FILE", display_order = 20)]
    pub junit: Option<PathBuf>,
    /// Health-check mode, for a scheduler's node health check or node-problem-detector:
    /// nothing but one line on stdout (`OK: ...`, `FAIL: REASON`, `UNKNOWN: REASON`) and
    /// exit 0 healthy, 1 a problem (drain the node), 2 unknown (docs/fleet.md).
    #[arg(long, conflicts_with_all = ["json", "all", "matrix", "timings", "verbose", "html"], display_order = 21)]
    pub health: bool,
    /// With --health: stop the run once SECONDS have passed since it started; what did
    /// not run is NOT-TESTED. 1 to 604800.
    #[arg(long, value_name = "SECONDS", requires = "health", value_parser = budget_seconds, allow_negative_numbers = true, display_order = 22)]
    pub budget: Option<f64>,
    /// With --health: who reads the line: `slurm` (a drain reason, at most 200 bytes) or
    /// `npd` (node-problem-detector's custom plugin, at most 80 bytes).
    #[arg(
        long,
        value_enum,
        default_value = "slurm",
        value_name = "FORMAT",
        display_order = 23
    )]
    pub health_format: HealthFormatArg,
    /// With `--device all` on identical GPUs: run every sweep and width probe on every GPU
    /// instead of each on one of them (docs/fleet.md, "All GPUs of a node").
    #[arg(long, conflicts_with = "resume", display_order = 24)]
    pub no_spread: bool,
}

/// Readers of `check --health`'s line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HealthFormatArg {
    /// Slurm's HealthCheckProgram or prolog (`scontrol update ... reason=`).
    Slurm,
    /// node-problem-detector's custom plugin monitor.
    Npd,
}

/// Options of `report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run directory (`gpuprobe runs list` names them; a `check` prints its own).
    pub run_dir: PathBuf,
    /// Write the report as one self-contained HTML file (offline: no script, no external
    /// resource); with a `fix` run, its search table too.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the run as Prometheus metrics, for node_exporter's textfile collector (written
    /// atomically; docs/fleet.md).
    #[arg(long, value_name = "FILE")]
    pub prometheus: Option<PathBuf>,
    /// Write the run as JUnit XML, one test case per probe run, for CI systems.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print the JSON report.
    #[arg(long)]
    pub json: bool,
}

/// Options of `fleet`.
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Run directories, report files (`report.json`, a saved `check --json`), or directories
    /// searched recursively for them.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Also write the view as one self-contained HTML file (offline: no script, no external
    /// resource).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write the view as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Options of `env`.
#[derive(Debug, Args)]
pub struct EnvArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// The Python interpreter to inspect.
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Do not run external tools (rocminfo, amd-smi, nvidia-smi, ...).
    #[arg(long)]
    pub no_tools: bool,
}

/// Options of `triage`.
#[derive(Debug, Args)]
pub struct TriageArgs {
    /// Files with pasted output; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Read at most SIZE bytes, all inputs together (default 64M; K, M, G, T are powers
    /// of 1024; at least 64K). A larger file is triaged by its start and its latest lines,
    /// a larger stream by its start; either is reported as truncated.
    #[arg(long, value_name = "SIZE", value_parser = gpuprobe_detect::parse_byte_size)]
    pub max_bytes: Option<u64>,
}

/// Options of `memtest`.
#[derive(Debug, Args)]
pub struct MemtestArgs {
    /// GPU index.
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// Fraction of free memory to test: more than 0, at most 1.
    #[arg(long, default_value_t = 0.95, value_parser = fraction, allow_negative_numbers = true)]
    pub fraction: f64,
    /// Passes over all patterns; 1 to 1000.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(i64::from(ranges::MEMTEST_PASSES.0)..=i64::from(ranges::MEMTEST_PASSES.1)))]
    pub passes: u32,
    /// Print one JSON document on stdout, whatever the outcome: the report when the test
    /// ran, and always `status`, `reason`, `exit_code` and `exit_status` (also when the test
    /// could not run, crashed or hung, or gpuprobe refused an option).
    #[arg(long)]
    pub json: bool,
    /// Test-only: flip one bit at BYTE_OFFSET:BIT between write and verify, to prove the
    /// detection path on a healthy GPU.
    #[arg(long, value_name = "BYTE_OFFSET:BIT", hide = true)]
    pub inject_error: Option<String>,
    /// Where to keep the run (default: `~/.local/state/gpuprobe/runs/<time>`).
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
}

/// Options of `kb`.
#[derive(Debug, Args)]
pub struct KbArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: KbAction,
    /// Also load the entries (`*.toml`) of this directory, next to the built-in ones.
    #[arg(long, value_name = "DIR", global = true)]
    pub kb: Option<PathBuf>,
}

/// `kb` actions.
#[derive(Debug, Subcommand)]
pub enum KbAction {
    /// Lists every known issue.
    List,
    /// Shows one issue in full.
    Show {
        /// The issue id (e.g. RKB-001).
        id: String,
    },
    /// Validates the knowledge base (the built-in entries and `--kb DIR`); errors name file,
    /// line and column.
    Validate,
    /// Matches the knowledge base against this machine (or a saved report) and explains it.
    Match {
        /// A report.json from a previous run; default: fingerprint this machine.
        #[arg(long, value_name = "REPORT")]
        report: Option<PathBuf>,
    },
}

/// Options of the hidden native worker.
#[derive(Debug, Args)]
pub struct NativeWorkerArgs {
    /// The worker plan (JSON).
    #[arg(long)]
    pub plan: PathBuf,
}

/// Options of `fix`. The shared options are worded for the starting check and put back in
/// the order `fix --help` always had.
#[derive(Debug, Args)]
#[command(
    mut_arg("tier", |a| a.help("How much the starting check runs").display_order(1)),
    mut_arg("device", |a| a.help("Devices the starting check tests: `all`, indices like `0,2`, or `cpu`").display_order(2)),
    mut_arg("only", |a| a.help("Run only probes whose id matches (as in `check`). Repeatable. Sentinels are still drawn from every probe of the tier in the families that ran").display_order(3)),
    mut_arg("python", |a| a.help("The Python interpreter to probe").display_order(4)),
    mut_arg("simulate", |a| a.help("Fault simulation (test and demo mode), as in `check`. Every output says SIMULATED").display_order(5)),
    mut_arg("no_native", |a| a.display_order(6)),
    mut_arg("run_dir", |a| a.help("Where to keep the search (default: `~/.local/state/gpuprobe/runs/fix-<time>`)").display_order(7)),
    mut_arg("json", |a| a.help("Print the account as JSON on stdout").display_order(13)),
    mut_arg("timeout_scale", |a| a.help("Multiply every probe's timeout; 0.05 to 1000").display_order(14)),
    mut_arg("startup_timeout", |a| a.help("Seconds a worker may take to start; 1 to 3600").display_order(15)),
    mut_arg("seed", |a| a.help("Seed for every random input").display_order(16)),
    mut_arg("verbose", |a| a.help("Show worker messages of the starting check").display_order(17)),
)]
pub struct FixArgs {
    /// What the starting check runs (and the limits of every trial).
    #[command(flatten)]
    pub session: SessionArgs,
    /// Start from this finished run (its report.json and plan.json) instead of running a
    /// check first.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["tier", "only", "device", "simulate", "no_native"], display_order = 0)]
    pub from: Option<PathBuf>,
    /// Finish an interrupted fix from its run directory: the trials it finished (recorded in
    /// its `trials.jsonl`) are not run again, and the search goes on with the options the
    /// fix was started with, to the same account and profile.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = [
        "from", "run_dir", "tier", "only", "device", "simulate", "no_native", "max_runs",
        "candidate", "sentinels", "profile_out", "timeout_scale", "startup_timeout", "seed",
    ], display_order = 8)]
    pub resume: Option<PathBuf>,
    /// The most trials (fresh-worker runs, one set of settings each) the search may use,
    /// baseline and verification included.
    #[arg(long, default_value_t = 40, value_name = "N", display_order = 9)]
    pub max_runs: u32,
    /// Try only these settings (`NAME=VALUE`, or `NAME` to run without it); repeatable.
    /// Each must be a catalogue setting.
    #[arg(long = "candidate", value_name = "SETTING", display_order = 10)]
    pub candidate: Vec<String>,
    /// Sentinel probes per family without failures (families with failures get two more).
    #[arg(long, default_value_t = 3, value_name = "N", display_order = 11)]
    pub sentinels: usize,
    /// Where to write the profile (default: profile.toml in the run directory). Checked
    /// for being writable before anything runs.
    #[arg(long, value_name = "FILE", display_order = 12)]
    pub profile_out: Option<PathBuf>,
}

/// Where `run --fallback` may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FallbackArg {
    /// Rerun on the CPU with every GPU hidden.
    Cpu,
}

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The profile to apply (validated; refused when proven on another stack).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Run the command N times and report the crash and hang rates; 1 to 100000.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(i64::from(ranges::REPEAT.0)..=i64::from(ranges::REPEAT.1)))]
    pub repeat: u32,
    /// Treat the job as hung after this many seconds without output and without GPU
    /// activity, and kill its process group; 1 to 604800 (a week).
    #[arg(long, value_name = "SECONDS", value_parser = hang_timeout, allow_negative_numbers = true)]
    pub hang_timeout: Option<f64>,
    /// When the GPU stack is judged unsafe (the job crashed or hung on the GPU, or the
    /// profile records failures it could not cure), run the job on the CPU with every GPU
    /// hidden. Never silent: gpuprobe says so on stderr.
    #[arg(long, value_enum, value_name = "WHERE")]
    pub fallback: Option<FallbackArg>,
    /// Stay on the GPU whatever happens (overrides --fallback).
    #[arg(long)]
    pub force_gpu: bool,
    /// Apply a profile proven on a different stack.
    #[arg(long)]
    pub force: bool,
    /// Let the processes the job starts inherit the profile's framework switches (by
    /// default the start-up hook applies them in the job's Python and leaves its children's
    /// environment as it was).
    #[arg(long)]
    pub switches_to_children: bool,
    /// The interpreter whose torch the profile's stack is compared with (default: as
    /// `check` picks it).
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Also write the runs, rates and exit codes as JSON to FILE. Checked for being
    /// writable before the job starts.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// The command and its arguments (after `--`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// Options of `profile`.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ProfileAction,
}

/// Export formats of `profile export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormatArg {
    /// `NAME=VALUE` lines (a `.env` file).
    Env,
    /// `export NAME='VALUE'` lines for a shell.
    Shell,
    /// JSON: `{"set": {...}, "unset": [...], "switches": {...}, ...}`.
    Json,
    /// The Python lines that apply the profile's framework switches after `import torch`.
    Python,
}

/// `profile` actions.
#[derive(Debug, Subcommand)]
pub enum ProfileAction {
    /// Shows a profile: settings, why, what it cures, what is still failing.
    Show {
        /// The profile.
        profile: PathBuf,
    },
    /// Validates a profile and compares the stack it was proven on with this machine.
    Check {
        /// The profile.
        profile: PathBuf,
        /// The interpreter whose torch to compare.
        #[arg(long, value_name = "PATH")]
        python: Option<PathBuf>,
    },
    /// Prints this machine's stack key: the facts a profile's proof is tied to (GPU ISAs,
    /// kernel, driver, runtime, torch), as TOML like a profile's `[proven_on]`.
    Stack {
        /// The interpreter whose torch to read.
        #[arg(long, value_name = "PATH")]
        python: Option<PathBuf>,
    },
    /// Prints the profile's settings for a `.env` file, a shell, or a program (JSON).
    Export {
        /// The profile.
        profile: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "shell")]
        format: ExportFormatArg,
        /// Refuse (exit 2) when the profile was proven on a different stack.
        #[arg(long)]
        check_stack: bool,
        /// The interpreter whose torch to compare (with --check-stack).
        #[arg(long, value_name = "PATH")]
        python: Option<PathBuf>,
    },
}

/// Options of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Options of `man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write gpuprobe.1 and gpuprobe-COMMAND.1 for every command into DIR instead of
    /// printing gpuprobe.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Options of `bundle`.
#[derive(Debug, Args)]
pub struct BundleArgs {
    /// The run directory to bundle (default: the newest run under the state directory).
    #[arg(long = "run", value_name = "RUN_DIR")]
    pub run: Option<PathBuf>,
    /// The archive to write (default: `gpuprobe-bundle-<run>.tar.gz` in the current
    /// directory).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace FILE when it exists.
    #[arg(long)]
    pub force: bool,
    /// Leave user names, host names, paths, secrets, serials and addresses in (the archive
    /// then says it is NOT redacted).
    #[arg(long)]
    pub no_redact: bool,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options of `repro`.
#[derive(Debug, Args)]
pub struct ReproArgs {
    /// The failing probe: its id, or a glob (`copy.h2d.*`) that matches one failing probe.
    pub probe: String,
    /// The run directory (default: the newest finished `check` under the state directory;
    /// a `fix` directory means its starting check).
    #[arg(long, value_name = "RUN_DIR")]
    pub run: Option<PathBuf>,
    /// Where to write repro.py, repro.json and ISSUE.md (default: RUN_DIR/repro/PROBE).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Which device's result, when the probe failed on several (default: the first).
    #[arg(long, value_name = "DEV")]
    pub device: Option<String>,
    /// The interpreter that generates and runs the script (default: the run's).
    #[arg(long, value_name = "PY")]
    pub python: Option<PathBuf>,
    /// Write the files without running the script.
    #[arg(long)]
    pub no_run: bool,
    /// Seconds the script may run before it is killed (default: three times the probe's
    /// timeout, at least 120).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: Option<u64>,
}

/// Options of `runs`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: RunsAction,
}

/// `runs` actions.
#[derive(Debug, Subcommand)]
pub enum RunsAction {
    /// Lists the run directories, newest first: start, tier, state (finished, in progress,
    /// interrupted), verdict counts, exit status and size on disk.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Removes old run directories; never one in progress, one holding a `fix` profile, or
    /// anything that is not a gpuprobe run directory. Without --keep or --older-than, keeps
    /// the newest $GPUPROBE_KEEP_RUNS (default 20), as after every check.
    Prune {
        /// Keep the newest N runs.
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Remove only runs started longer ago than D (`7d`, `12h`, `30m`, `90s`, `2w`).
        /// With --keep, a run goes only when both allow it.
        #[arg(long, value_name = "D")]
        older_than: Option<String>,
        /// Say what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Options of the hidden job launcher.
#[derive(Debug, Args)]
pub struct ExecJobArgs {
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<OsString>,
}

/// The ranges of the time and size options. Out of range is a usage error (exit 2) that
/// names the range: a value far outside them is a typo or a misunderstanding (a timeout
/// scale of 1e-9 turns every probe into a false HANG), never something to clamp quietly.
pub mod ranges {
    /// `--timeout-scale`: the shortest probe timeout (60 s) times 0.05 is 3 s, the least
    /// in which a healthy probe still finishes on the CPU; 1000 stretches the longest
    /// (600 s) to about a week.
    pub const TIMEOUT_SCALE: (f64, f64) = (0.05, 1000.0);
    /// `--startup-timeout`, seconds: a worker must get at least a second to start; an hour
    /// covers importing a framework from a slow network file system.
    pub const STARTUP_TIMEOUT: (f64, f64) = (1.0, 3600.0);
    /// `--soak-seconds`: the soak probe's own bounds (`MAX_SOAK_SECONDS` in
    /// `python/gpuprobe/worker/probes/soak/specs.py`, which its timeout is sized for).
    pub const SOAK_SECONDS: (f64, f64) = (0.5, 720.0);
    /// `run --hang-timeout`, seconds: output and GPU activity are sampled about once a
    /// second, so less cannot be told from a pause; a week at most.
    pub const HANG_TIMEOUT: (f64, f64) = (1.0, 604_800.0);
    /// `check --budget`, seconds: a worker takes about a second to start; a week at most.
    pub const BUDGET: (f64, f64) = (1.0, 604_800.0);
    /// `memtest --passes`.
    pub const MEMTEST_PASSES: (u32, u32) = (1, 1000);
    /// `run --repeat`.
    pub const REPEAT: (u32, u32) = (1, 100_000);
}

/// Parses a finite number in `[min, max]`; the error states the range.
fn number_in(text: &str, min: f64, max: f64) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("not a number; allowed: {min} to {max}"))?;
    if value.is_finite() && (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("out of range; allowed: {min} to {max}"))
    }
}

fn timeout_scale(text: &str) -> Result<f64, String> {
    number_in(text, ranges::TIMEOUT_SCALE.0, ranges::TIMEOUT_SCALE.1)
}

fn startup_timeout(text: &str) -> Result<f64, String> {
    number_in(text, ranges::STARTUP_TIMEOUT.0, ranges::STARTUP_TIMEOUT.1)
}

fn soak_seconds(text: &str) -> Result<f64, String> {
    number_in(text, ranges::SOAK_SECONDS.0, ranges::SOAK_SECONDS.1)
}

fn budget_seconds(text: &str) -> Result<f64, String> {
    number_in(text, ranges::BUDGET.0, ranges::BUDGET.1)
}

fn hang_timeout(text: &str) -> Result<f64, String> {
    number_in(text, ranges::HANG_TIMEOUT.0, ranges::HANG_TIMEOUT.1)
}

/// `memtest --fraction`: more than 0 (a test of nothing is no test), at most 1.
fn fraction(text: &str) -> Result<f64, String> {
    let value =
        number_in(text, 0.0, 1.0).map_err(|_| "allowed: more than 0, at most 1".to_string())?;
    if value > 0.0 {
        Ok(value)
    } else {
        Err("allowed: more than 0, at most 1".into())
    }
}

/// Options of `ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// The address to listen on. Anything but the loopback lets other machines reach the
    /// page (each still needs the token the URL carries).
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDRESS")]
    pub bind: std::net::IpAddr,
    /// The port; 0 takes any free one.
    #[arg(long, default_value_t = 8765, value_name = "PORT")]
    pub port: u16,
    /// The runs directory to show, and where checks started from the page go (default:
    /// the one `gpuprobe runs list` shows).
    #[arg(long, value_name = "DIR")]
    pub runs_dir: Option<PathBuf>,
    /// The Python interpreter the checks started from the page use (`check --python`).
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("gpuprobe").chain(args.iter().copied()))
    }

    #[test]
    fn time_options_outside_their_range_are_usage_errors_naming_the_range() {
        for (args, range) in [
            (vec!["check", "--timeout-scale", "1e-9"], "0.05 to 1000"),
            (vec!["check", "--timeout-scale", "-1"], "0.05 to 1000"),
            (vec!["check", "--timeout-scale", "nan"], "0.05 to 1000"),
            (vec!["fix", "--timeout-scale", "inf"], "0.05 to 1000"),
            (vec!["check", "--startup-timeout", "0"], "1 to 3600"),
            (vec!["fix", "--startup-timeout", "0.5"], "1 to 3600"),
            (vec!["check", "--soak-seconds", "0"], "0.5 to 720"),
            (vec!["check", "--soak-seconds", "1e6"], "0.5 to 720"),
            (
                vec!["run", "--hang-timeout", "0", "--", "true"],
                "1 to 604800",
            ),
            (vec!["memtest", "--fraction", "0"], "more than 0, at most 1"),
            (
                vec!["memtest", "--fraction", "1.5"],
                "more than 0, at most 1",
            ),
            (vec!["memtest", "--passes", "0"], "1..=1000"),
            (vec!["run", "--repeat", "0", "--", "true"], "1..=100000"),
        ] {
            let err = parse(&args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{args:?}"
            );
            assert!(err.use_stderr(), "{args:?}");
            let text = err.to_string();
            assert!(text.contains(range), "{args:?}: {text}");
        }
    }

    #[test]
    fn time_options_inside_their_range_and_the_defaults_parse() {
        for args in [
            vec!["check"],
            vec!["fix"],
            vec!["memtest"],
            vec!["check", "--timeout-scale", "0.05", "--startup-timeout", "1"],
            vec![
                "fix",
                "--timeout-scale",
                "1000",
                "--startup-timeout",
                "3600",
            ],
            vec!["check", "--soak-seconds", "0.5"],
            vec!["memtest", "--fraction", "1", "--passes", "1000"],
            vec!["run", "--hang-timeout", "1", "--repeat", "1", "--", "true"],
        ] {
            parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
        let Command::Check(check) = parse(&["check"]).unwrap().command else {
            panic!("not check");
        };
        assert_eq!(check.session.timeout_scale, 1.0);
        assert_eq!(check.session.startup_timeout, 180.0);
        assert_eq!(check.soak_seconds, 60.0);
    }
}
