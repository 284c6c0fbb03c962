//! The command line: clap definitions only.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// gpuprobe: does this GPU stack compute the right numbers? If not, where is it broken,
/// which known issue is it, and what cures it?
#[derive(Debug, Parser)]
#[command(name = "gpuprobe", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
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

/// Options of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// How much to run.
    #[arg(long, value_enum, default_value = "quick")]
    pub tier: TierArg,
    /// Devices to test: `all` (every GPU the framework sees), indices like `0,2`, or `cpu`
    /// (a self-test of the probes on the CPU).
    #[arg(long, default_value = "all")]
    pub device: String,
    /// Run only probes whose id matches (glob over ids, e.g. `copy.*` or `*bf16*`;
    /// a plain prefix like `copy` selects the family). Repeatable.
    #[arg(long = "only", value_name = "PATTERN")]
    pub only: Vec<String>,
    /// The Python interpreter to probe (default: $VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH).
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Print the report as JSON on stdout (schema: docs/report.schema.json).
    #[arg(long)]
    pub json: bool,
    /// List passing probes too.
    #[arg(long)]
    pub all: bool,
    /// Also print the measured dtype conversion matrix.
    #[arg(long)]
    pub matrix: bool,
    /// Where to keep this run's results (default: ~/.local/state/gpuprobe/runs/<time>).
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Finish an interrupted run from its directory.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["run_dir", "simulate", "tier", "only", "device"])]
    pub resume: Option<PathBuf>,
    /// Fault simulation (test and demo mode): preset names or TOML files, comma-separated;
    /// `list` shows the presets. Every output made under it says SIMULATED.
    #[arg(long, value_name = "SPEC")]
    pub simulate: Option<String>,
    /// Skip the native (CUDA/HIP runtime) probes.
    #[arg(long)]
    pub no_native: bool,
    /// Multiply every probe's timeout (slow machines).
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR")]
    pub timeout_scale: f64,
    /// Seconds a worker may take to start (interpreter and framework import).
    #[arg(long, default_value_t = 180.0, value_name = "SECONDS")]
    pub startup_timeout: f64,
    /// Seed for every random input (a run is reproducible from it).
    #[arg(long, default_value_t = 20261122)]
    pub seed: u64,
    /// Show worker messages (library warnings, restarts).
    #[arg(short, long)]
    pub verbose: bool,
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
}

/// Options of `memtest`.
#[derive(Debug, Args)]
pub struct MemtestArgs {
    /// GPU index.
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// Fraction of free memory to test.
    #[arg(long, default_value_t = 0.95)]
    pub fraction: f64,
    /// Passes over all patterns.
    #[arg(long, default_value_t = 1)]
    pub passes: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Test-only: flip one bit at BYTE_OFFSET:BIT between write and verify, to prove the
    /// detection path on a healthy GPU.
    #[arg(long, value_name = "BYTE_OFFSET:BIT", hide = true)]
    pub inject_error: Option<String>,
    /// Where to keep the run (default: ~/.local/state/gpuprobe/runs/<time>).
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
