//! `gpuprobe repro`: a standalone reproduction of one failing probe result. Finds the run
//! (the newest finished `check` by default) and the result (an id or a glob that names one
//! failing probe), has the generator write `repro.py` and `repro.json` (the Python
//! generator `python -m gpuprobe.repro`, or `native` for the native probes), runs the
//! script with the run's interpreter and settings under a timeout, and finds the `fix`
//! account that searched from the run. ISSUE.md is rendered from what this returns
//! (`gpuprobe_report::issue`). The formats and the contract: docs/repro.md.

mod native;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use gpuprobe_kb::wildcard_matches;
use gpuprobe_model::DeviceRef;
use gpuprobe_model::FixAccount;
use gpuprobe_model::ProbeResult;
use gpuprobe_model::visible_line;
use gpuprobe_model::{ClassifiedError, ExitStatus, Report, env_vars};
use gpuprobe_model::{Repro, ReproManifest, ScriptOutcome, ScriptRun};
use gpuprobe_runner::{
    FIX_CHECK_DIR, REPORT_FILE, RunFileError, RunFiles, RunState, run_to_files, scan_runs,
};

use gpuprobe_model::RunPlan;

/// The generator's exit code for "no repro can be made" (docs/repro.md).
const NO_REPRO_EXIT: i32 = 3;
/// How long the generator may take.
const GENERATOR_TIMEOUT: Duration = Duration::from_secs(120);
/// The least time the script is given (its own child reports a hang within the probe's
/// timeout; torch's import alone can take seconds).
const MIN_SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);
/// The most of the script's output kept for ISSUE.md (its tail).
const KEEP_OUTPUT_BYTES: usize = 64 * 1024;
use gpuprobe_model::{
    ISSUE_FILE, MANIFEST_FILE, PLAN_INPUT, REPRO_DIR, RESULT_INPUT, RUN_FILE, SCRIPT_FILE,
};
/// Where the probe package is extracted while the generator and script need it.
const PACKAGE_DIR: &str = ".gpuprobe-package";

/// What `gpuprobe repro` was asked.
#[derive(Debug, Clone, Default)]
pub struct ReproOptions {
    /// A probe id or a glob naming one failing probe.
    pub probe: String,
    /// `--run`: the run directory (default: the newest finished check).
    pub run_dir: Option<PathBuf>,
    /// `--out` (default: `RUN_DIR/repro/<probe>`).
    pub out: Option<PathBuf>,
    /// `--device`: which device's result (default: the first failing one).
    pub device: Option<String>,
    /// `--python` (default: the run's interpreter).
    pub python: Option<PathBuf>,
    /// `--no-run`: write the files without running the script.
    pub no_run: bool,
    /// `--timeout` for the script (default: three times the probe's, at least 120 s).
    pub timeout: Option<Duration>,
}

/// Why no repro was made.
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// No finished check under the state directory.
    #[error(
        "no finished check run under {}; run `gpuprobe check` first, or name one with --run",
        visible_line(&.root.display().to_string())
    )]
    NoRun {
        /// The state directory's runs.
        root: PathBuf,
    },
    /// The runs directory cannot be read.
    #[error("cannot read the runs directory {}: {source}", visible_line(&.root.display().to_string()))]
    UnreadableRuns {
        /// The directory.
        root: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--run` names no finished run.
    #[error("{} is not a finished gpuprobe run: {reason}", visible_line(&.path.display().to_string()))]
    NotARun {
        /// The directory.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// A file of the run cannot be read.
    #[error("cannot read {}: {source}", visible_line(&.path.display().to_string()))]
    UnreadableRunFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file of the run is not what gpuprobe writes.
    #[error("{} is broken: {source}", visible_line(&.path.display().to_string()))]
    BrokenRunFile {
        /// The file.
        path: PathBuf,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// The pattern names no failing probe.
    #[error("{}", no_such_probe(.pattern, .failing))]
    NoSuchFailure {
        /// The id or glob given.
        pattern: String,
        /// The failing probes of the run.
        failing: Vec<String>,
    },
    /// The pattern names a probe that did not fail.
    #[error(
        "{} {}: only a failing result (FAIL, CRASH, HANG, ERROR) can be reproduced",
        visible_line(.probe), .verdicts
    )]
    NotAFailure {
        /// The probe.
        probe: String,
        /// Its verdicts, in words (`passed on cuda:0`).
        verdicts: String,
    },
    /// The glob names several failing probes.
    #[error(
        "{} names {} failing probes; name one: {}",
        visible_line(.pattern), .matches.len(),
        .matches.iter().map(|m| visible_line(m).into_owned()).collect::<Vec<_>>().join(", ")
    )]
    Ambiguous {
        /// The glob.
        pattern: String,
        /// The failing probes it matches.
        matches: Vec<String>,
    },
    /// `--device` that does not parse or names no failing result of the probe.
    #[error("--device {}: {reason}", visible_line(.device))]
    BadDevice {
        /// The value.
        device: String,
        /// What is wrong.
        reason: String,
    },
    /// The interpreter is missing or not executable.
    #[error("{}", visible_line(&.source.to_string()))]
    Interpreter {
        /// The runner's check.
        #[source]
        source: gpuprobe_runner::BadInterpreter,
    },
    /// The run's interpreter is gone (a deleted environment).
    #[error(
        "the run's interpreter {}: {}; name another with --python",
        visible_line(&.path.display().to_string()), visible_line(.reason)
    )]
    RunInterpreter {
        /// The interpreter `plan.json` names.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The run records no interpreter and none was given.
    #[error("the run records no Python interpreter; name one with --python")]
    NoInterpreter,
    /// A file of the output cannot be written.
    #[error("cannot write {}: {source}", visible_line(&.path.display().to_string()))]
    Unwritable {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The generator said it can make no repro for this result.
    #[error("no repro: {}", visible_line(.why))]
    NoRepro {
        /// Its reason.
        why: String,
    },
    /// The generator failed otherwise.
    #[error("the repro generator failed ({how}){}", stderr_words(.stderr))]
    Generator {
        /// Exit code or signal, in words.
        how: String,
        /// The tail of its stderr.
        stderr: String,
    },
    /// The generator exited 0 but its files are missing or broken.
    #[error("the repro generator wrote no usable {}: {reason}", visible_line(&.path.display().to_string()))]
    GeneratorOutput {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A process could not be started.
    #[error("cannot start {}: {source}", visible_line(&.program.display().to_string()))]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The probe package could not be extracted.
    #[error("cannot extract the probe package")]
    Package {
        /// The runner's error.
        #[source]
        source: gpuprobe_runner::RunnerError,
    },
}

impl ClassifiedError for ReproError {
    /// Wrong arguments and broken or missing inputs are the user's to fix (2); a result
    /// for which no script can be made is "nothing could be tested" (4); a generator that
    /// fails otherwise is gpuprobe's fault (3).
    fn exit_status(&self) -> ExitStatus {
        match self {
            ReproError::NoRepro { .. } => ExitStatus::NothingTested,
            ReproError::Generator { .. }
            | ReproError::GeneratorOutput { .. }
            | ReproError::Package { .. } => ExitStatus::InternalFailure,
            _ => ExitStatus::UsageError,
        }
    }
}

fn no_such_probe(pattern: &str, failing: &[String]) -> String {
    let pattern = visible_line(pattern);
    if failing.is_empty() {
        format!("no failing probe matches {pattern}: the run has no failing result")
    } else {
        format!(
            "no failing probe matches {pattern}; the failing probes are: {}",
            failing
                .iter()
                .map(|f| visible_line(f).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn stderr_words(stderr: &str) -> String {
    let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    match tail.last() {
        Some(last) => format!(": {}", visible_line(last)),
        None => String::new(),
    }
}

/// A run file that cannot be used, in `repro`'s words (docs/repro.md).
fn run_file_error(error: RunFileError) -> ReproError {
    match error {
        RunFileError::Unreadable { path, source } => ReproError::UnreadableRunFile { path, source },
        RunFileError::Invalid { path, source, .. } => ReproError::BrokenRunFile { path, source },
    }
}

/// The run to reproduce from: `--run` (a `fix` directory means its starting check), else
/// the newest finished check under `root` (or a finished fix's starting check).
pub fn locate_run(given: Option<&Path>, root: &Path) -> Result<PathBuf, ReproError> {
    if let Some(dir) = given {
        if !dir.is_dir() {
            return Err(ReproError::NotARun {
                path: dir.to_path_buf(),
                reason: "no such directory".into(),
            });
        }
        let run = RunFiles::at(dir);
        if run.has_report() {
            return Ok(dir.to_path_buf());
        }
        let check = run.check_subrun();
        if check.has_report() {
            return Ok(check.path().to_path_buf());
        }
        return Err(ReproError::NotARun {
            path: dir.to_path_buf(),
            reason: format!(
                "it holds no {REPORT_FILE} (an unfinished check: finish it with `gpuprobe check --resume`)"
            ),
        });
    }
    let runs = scan_runs(root, SystemTime::now()).map_err(|source| ReproError::UnreadableRuns {
        root: root.to_path_buf(),
        source,
    })?;
    runs.iter()
        .filter(|r| r.state == RunState::Finished)
        .find_map(|r| match r.command.as_str() {
            "check" => Some(r.path.clone()),
            "fix" => {
                let check = RunFiles::at(&r.path).check_subrun();
                check.has_report().then(|| check.path().to_path_buf())
            }
            _ => None,
        })
        .ok_or_else(|| ReproError::NoRun {
            root: root.to_path_buf(),
        })
}

/// The one failing result `pattern` names (an exact id or a glob), on `device` when given.
pub fn select<'a>(
    report: &'a Report,
    pattern: &str,
    device: Option<&str>,
) -> Result<&'a ProbeResult, ReproError> {
    let device = device
        .map(|d| {
            DeviceRef::parse(d).ok_or_else(|| ReproError::BadDevice {
                device: d.to_string(),
                reason: "not a device (cpu, cuda:N or an index)".into(),
            })
        })
        .transpose()?;
    let failing: Vec<&ProbeResult> = report
        .results
        .iter()
        .filter(|r| r.verdict.is_problem())
        .collect();
    let mut failing_ids: Vec<String> = Vec::new();
    for r in &failing {
        if !failing_ids.iter().any(|id| id == r.probe.as_str()) {
            failing_ids.push(r.probe.as_str().to_string());
        }
    }
    let exact = report.results.iter().any(|r| r.probe.as_str() == pattern);
    let probe = if exact {
        pattern.to_string()
    } else {
        let mut matches: Vec<String> = failing_ids
            .iter()
            .filter(|id| wildcard_matches(pattern, id))
            .cloned()
            .collect();
        match matches.len() {
            0 => {
                return Err(ReproError::NoSuchFailure {
                    pattern: pattern.to_string(),
                    failing: failing_ids,
                });
            }
            1 => matches.remove(0),
            _ => {
                return Err(ReproError::Ambiguous {
                    pattern: pattern.to_string(),
                    matches,
                });
            }
        }
    };
    let of_probe: Vec<&ProbeResult> = report
        .results
        .iter()
        .filter(|r| r.probe.as_str() == probe)
        .collect();
    let problems: Vec<&&ProbeResult> = of_probe.iter().filter(|r| r.verdict.is_problem()).collect();
    if problems.is_empty() {
        let verdicts = of_probe
            .iter()
            .map(|r| format!("is {} on {}", r.verdict.label(), r.device.torch_name()))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(ReproError::NotAFailure { probe, verdicts });
    }
    match device {
        None => Ok(problems[0]),
        Some(d) => problems
            .iter()
            .find(|r| r.device == d)
            .map(|r| **r)
            .ok_or_else(|| ReproError::BadDevice {
                device: d.torch_name(),
                reason: format!(
                    "{} did not fail there; it failed on {}",
                    visible_line(&probe),
                    problems
                        .iter()
                        .map(|r| r.device.torch_name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
    }
}

/// The result's settings (`KEY=VALUE` set, `-KEY` unset, as the engine records them): what
/// is set, and what is removed.
fn settings_env(result: &ProbeResult) -> (BTreeMap<String, String>, Vec<String>) {
    let mut set = BTreeMap::new();
    let mut unset = Vec::new();
    for setting in &result.settings {
        if let Some((k, v)) = setting.split_once('=') {
            set.insert(k.to_string(), v.to_string());
        } else if let Some(k) = setting.strip_prefix('-') {
            unset.push(k.to_string());
        }
    }
    (set, unset)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), ReproError> {
    std::fs::write(path, bytes).map_err(|source| ReproError::Unwritable {
        path: path.to_path_buf(),
        source,
    })
}

/// The tail of a captured file, as text.
fn read_tail(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(KEEP_OUTPUT_BYTES);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// `path` from the root, against the working directory when it is relative.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `PYTHONPATH` with `first` in front of what the user had.
fn pythonpath(first: &Path, env: &BTreeMap<String, String>) -> std::ffi::OsString {
    let mut paths = vec![first.to_path_buf()];
    if let Some(existing) = env.get("PYTHONPATH") {
        paths.extend(std::env::split_paths(existing));
    }
    std::env::join_paths(paths).unwrap_or_else(|_| first.as_os_str().to_owned())
}

/// Makes the repro: finds the run and the result, writes the generator's inputs, has the
/// script written and (unless `--no-run`) runs it. `env` is the process environment;
/// `runs_root` the state directory's runs.
pub fn make(
    options: &ReproOptions,
    env: &BTreeMap<String, String>,
    runs_root: &Path,
) -> Result<Repro, ReproError> {
    // The script runs from `out` with the simulation's site on PYTHONPATH: a relative
    // `--run` or `--out` would name another place there, and the script would run without
    // the simulation it says was installed.
    let run_dir = absolute(&locate_run(options.run_dir.as_deref(), runs_root)?);
    let run = RunFiles::at(&run_dir);
    let report = run.read_report().map_err(run_file_error)?;
    let (plan, plan_bytes): (RunPlan, Vec<u8>) =
        run.read_plan_and_bytes().map_err(run_file_error)?;
    let result = select(&report, &options.probe, options.device.as_deref())?.clone();
    let out = options.out.as_deref().map_or_else(
        || run_dir.join(REPRO_DIR).join(result.probe.as_str()),
        absolute,
    );
    std::fs::create_dir_all(&out).map_err(|source| ReproError::Unwritable {
        path: out.clone(),
        source,
    })?;
    let python = match (&options.python, &plan.python) {
        (Some(p), _) => gpuprobe_runner::resolve_explicit(p, env)
            .map_err(|source| ReproError::Interpreter { source })?,
        (None, Some(p)) => gpuprobe_runner::resolve_explicit(Path::new(p), env).map_err(|e| {
            ReproError::RunInterpreter {
                path: PathBuf::from(p),
                reason: e.reason,
            }
        })?,
        (None, None) => return Err(ReproError::NoInterpreter),
    };
    // What an earlier repro left here must not pass for this one's.
    for stale in [SCRIPT_FILE, MANIFEST_FILE, RUN_FILE, ISSUE_FILE] {
        let _ = std::fs::remove_file(out.join(stale));
    }
    let result_json = serde_json::to_vec_pretty(&result).unwrap_or_default();
    write(&out.join(RESULT_INPUT), &result_json)?;
    write(&out.join(PLAN_INPUT), &plan_bytes)?;
    let outcome = generate_and_run(options, env, &plan, &report, &result, &python, &out);
    // The package is only needed while the generator and the script run.
    let _ = std::fs::remove_dir_all(out.join(PACKAGE_DIR));
    let (manifest, script, run) = outcome?;
    let fix = fix_from(&run_dir, runs_root);
    Ok(Repro {
        run_dir,
        out,
        report,
        result,
        manifest,
        script,
        python,
        run,
        fix,
    })
}

type Generated = (ReproManifest, String, Option<ScriptRun>);

/// Writes the script into `out` (with the probe package beside it, in [`PACKAGE_DIR`], where
/// the generator or the simulation needs it) and runs it unless `--no-run`.
fn generate_and_run(
    options: &ReproOptions,
    env: &BTreeMap<String, String>,
    plan: &RunPlan,
    report: &Report,
    result: &ProbeResult,
    python: &Path,
    out: &Path,
) -> Result<Generated, ReproError> {
    let package = &out.join(PACKAGE_DIR);
    let (settings, unset) = settings_env(result);
    let needs_package = !result.probe.as_str().starts_with("native.");
    if needs_package || result.simulated {
        gpuprobe_runner::extract_package(package)
            .map_err(|source| ReproError::Package { source })?;
    }
    let (manifest, script) = if result.probe.as_str().starts_with("native.") {
        let vendor = report.fingerprint.gpus.first().map(|g| g.vendor);
        let made = native::generate(result, plan.seed, vendor, &settings)
            .map_err(|why| ReproError::NoRepro { why })?;
        write(&out.join(SCRIPT_FILE), made.script.as_bytes())?;
        let manifest_json = serde_json::to_vec_pretty(&made.manifest).unwrap_or_default();
        write(&out.join(MANIFEST_FILE), &manifest_json)?;
        (made.manifest, made.script)
    } else {
        run_generator(env, python, out, package)?
    };
    if options.no_run {
        return Ok((manifest, script, None));
    }
    let timeout = options.timeout.unwrap_or_else(|| {
        let probe_timeout = plan
            .tasks
            .iter()
            .find(|t| t.spec.id == result.probe)
            .map_or(0.0, |t| t.spec.timeout_s);
        MIN_SCRIPT_TIMEOUT.max(Duration::from_secs_f64(
            (probe_timeout * 3.0).clamp(0.0, 86_400.0),
        ))
    });
    let mut command = std::process::Command::new(python);
    command.arg(SCRIPT_FILE).current_dir(out).envs(&settings);
    for name in &unset {
        command.env_remove(name);
    }
    let simulated = result.simulated && plan.simulate.is_some();
    if simulated {
        let site = package.join("gpuprobe").join("repro").join("simulate_site");
        let spec = serde_json::to_string(&plan.simulate).unwrap_or_default();
        command
            .env("PYTHONPATH", pythonpath(&site, env))
            .env(env_vars::GPUPROBE_REPRO_SIMULATE, spec);
    }
    let (stdout_path, stderr_path) = (out.join("run.stdout"), out.join("run.stderr"));
    let ended = run_to_files(command, &stdout_path, &stderr_path, timeout).map_err(|source| {
        ReproError::Spawn {
            program: python.to_path_buf(),
            source,
        }
    })?;
    let stdout = read_tail(&stdout_path);
    let stderr = read_tail(&stderr_path);
    let _ = std::fs::remove_file(&stdout_path);
    let _ = std::fs::remove_file(&stderr_path);
    let last_line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_string);
    let outcome = if ended.timed_out {
        ScriptOutcome::TimedOut
    } else {
        ScriptOutcome::judge(last_line.as_deref(), ended.code)
    };
    let mut words: Vec<String> = unset.iter().map(|k| format!("env -u {k}")).collect();
    words.extend(settings.iter().map(|(k, v)| format!("{k}={v}")));
    words.push(format!("python {SCRIPT_FILE}"));
    let run = ScriptRun {
        command: words.join(" "),
        exit_code: ended.code,
        signal: ended.signal,
        elapsed_s: ended.elapsed_s,
        stdout,
        stderr,
        last_line,
        outcome,
        simulated,
    };
    let run_json = serde_json::to_vec_pretty(&run).unwrap_or_default();
    write(&out.join(RUN_FILE), &run_json)?;
    Ok((manifest, script, Some(run)))
}

/// Runs `python -m gpuprobe.repro` and reads what it wrote.
fn run_generator(
    env: &BTreeMap<String, String>,
    python: &Path,
    out: &Path,
    package: &Path,
) -> Result<(ReproManifest, String), ReproError> {
    let mut command = std::process::Command::new(python);
    command
        .args(["-m", "gpuprobe.repro", "--result"])
        .arg(out.join(RESULT_INPUT))
        .arg("--plan")
        .arg(out.join(PLAN_INPUT))
        .arg("--out")
        .arg(out)
        .env("PYTHONPATH", pythonpath(package, env));
    let (stdout_path, stderr_path) = (out.join("generator.stdout"), out.join("generator.stderr"));
    let ended =
        run_to_files(command, &stdout_path, &stderr_path, GENERATOR_TIMEOUT).map_err(|source| {
            ReproError::Spawn {
                program: python.to_path_buf(),
                source,
            }
        })?;
    let stderr = read_tail(&stderr_path);
    let _ = std::fs::remove_file(&stdout_path);
    let _ = std::fs::remove_file(&stderr_path);
    match ended.code {
        Some(0) => {}
        Some(NO_REPRO_EXIT) => {
            if let Some(why) = stderr
                .lines()
                .rev()
                .find_map(|l| l.trim().strip_prefix("no repro:"))
            {
                return Err(ReproError::NoRepro {
                    why: why.trim().to_string(),
                });
            }
            return Err(ReproError::Generator {
                how: "exit 3 without a `no repro:` line".into(),
                stderr,
            });
        }
        _ => {
            let how = if ended.timed_out {
                format!("no answer in {} s", GENERATOR_TIMEOUT.as_secs())
            } else if let Some(code) = ended.code {
                format!("exit {code}")
            } else {
                format!("signal {}", ended.signal.unwrap_or(0))
            };
            return Err(ReproError::Generator { how, stderr });
        }
    }
    let script_path = out.join(SCRIPT_FILE);
    let script =
        std::fs::read_to_string(&script_path).map_err(|e| ReproError::GeneratorOutput {
            path: script_path.clone(),
            reason: e.to_string(),
        })?;
    let manifest_path = out.join(MANIFEST_FILE);
    let manifest: ReproManifest = std::fs::read(&manifest_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        .map_err(|reason| ReproError::GeneratorOutput {
            path: manifest_path,
            reason,
        })?;
    Ok((manifest, script))
}

/// The newest finished `fix` that started from `run_dir` (`fix --from RUN_DIR`, recorded
/// as the account's `source_run`), or whose own starting check `run_dir` is.
fn fix_from(run_dir: &Path, runs_root: &Path) -> Option<(PathBuf, FixAccount)> {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let target = canonical(run_dir)?;
    let mut candidates: Vec<PathBuf> = Vec::new();
    // A fix's own starting check: its account is one level up.
    if run_dir.file_name().is_some_and(|n| n == FIX_CHECK_DIR)
        && let Some(parent) = run_dir.parent()
    {
        candidates.push(parent.to_path_buf());
    }
    if let Ok(runs) = scan_runs(runs_root, SystemTime::now()) {
        candidates.extend(
            runs.into_iter()
                .filter(|r| r.command == "fix" && r.state == RunState::Finished)
                .map(|r| r.path),
        );
    }
    candidates.into_iter().find_map(|dir| {
        let run = RunFiles::at(&dir);
        let account: FixAccount = run.read_fix_account().ok()?;
        let from_here = account
            .source_run
            .as_deref()
            .and_then(|s| canonical(Path::new(s)))
            .is_some_and(|s| s == target)
            || canonical(run.check_subrun().path()).is_some_and(|c| c == target);
        from_here.then_some((dir, account))
    })
}

/// The exit status of `gpuprobe repro` once the files are written (docs/exit-codes.md):
/// 0 when the script reproduced the failure or was not run, 1 when it ran and did not
/// (NOT REPRODUCED, CANNOT RUN, no verdict, timed out).
pub fn exit_status(run: Option<&ScriptRun>) -> ExitStatus {
    match run.map(|r| r.outcome) {
        None | Some(ScriptOutcome::Reproduced) => ExitStatus::AllPassed,
        Some(_) => ExitStatus::ProblemsFound,
    }
}

/// Writes ISSUE.md.
pub fn write_issue(out: &Path, markdown: &str) -> Result<PathBuf, ReproError> {
    let path = out.join(ISSUE_FILE);
    write(&path, markdown.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests;
