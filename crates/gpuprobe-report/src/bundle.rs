//! The support archive of `gpuprobe bundle`: what it collects from a run directory, how it
//! bounds each piece, and the `.tar.gz` it writes (atomically: a temporary file renamed into
//! place, so a failure leaves nothing half-written). Which run, and where it keeps each
//! file ([`RunLayout`]), the caller finds out from the run directory's layout (the
//! runner's); this module reads the files it is pointed at.
//!
//! A bundle is one flat directory `gpuprobe-bundle-<run>/`: the report (or, for a run that
//! did not finish, the results recorded so far), the plan, the fingerprint as text and JSON,
//! the lint, the kernel-log lines the run recorded, the tail of each worker log, a `fix`
//! run's profile and account, and `MANIFEST.txt` saying where each came from, what was cut
//! and what was redacted. Nothing is read whole when it could be huge, and no link inside the
//! run directory is followed. The redaction itself is [`crate::redact`]'s. `docs/bundle.md`
//! is the user's account of all this.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use gpuprobe_model::ProbeResult;
use gpuprobe_model::{ClassifiedError, ExitStatus, Fingerprint, Report};
use gpuprobe_model::{visible, visible_line};
use serde::Serialize;
use serde_json::Value;

use crate::redact::{CategorySummary, Identity, Redactor};
use crate::runs::disk_bytes;
use crate::style::Style;

/// The most of each worker log kept: its last lines ...
pub(crate) const WORKER_TAIL_LINES: usize = 200;
/// ... within its last bytes.
pub(crate) const WORKER_TAIL_BYTES: u64 = 64 * 1024;
/// Worker logs taken from one directory (the first by name).
const MAX_WORKER_LOGS: usize = 64;
/// The largest JSON document read (`report.json`, `plan.json`, `fix.json`).
const MAX_JSON_BYTES: u64 = 64 * 1024 * 1024;
/// The most of `results.jsonl` read, from its start.
const MAX_RESULTS_BYTES: u64 = 16 * 1024 * 1024;
/// The largest profile read.
const MAX_PROFILE_BYTES: u64 = 1024 * 1024;
/// Kernel-log lines kept in `kernel-log.txt`.
const MAX_KERNEL_LINES: usize = 2000;

/// Why no bundle was written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// No `--run` and no run under the state directory.
    #[error(
        "no runs in {}: run `gpuprobe check` first, or name a run directory with --run",
        visible_line(&.root.display().to_string())
    )]
    NoRuns {
        /// The state directory's runs directory.
        root: PathBuf,
    },
    /// The runs directory cannot be listed.
    #[error("cannot read the runs directory {}: {source}", visible_line(&.root.display().to_string()))]
    RunsUnreadable {
        /// The directory.
        root: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--run` names something that is not a run directory.
    #[error("{} is not a gpuprobe run directory: {reason}", visible_line(&.path.display().to_string()))]
    NotARun {
        /// The path given.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// The run's `report.json` does not read as a report.
    #[error(
        "{} is not a valid gpuprobe report: {source}",
        visible_line(&.path.display().to_string())
    )]
    BadReport {
        /// The file.
        path: PathBuf,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// A file of the run that must be read cannot be.
    #[error("cannot read {}: {source}", visible_line(&.path.display().to_string()))]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The output exists and `--force` was not given.
    #[error(
        "{} exists; pass --force to replace it, or choose another file with --out",
        visible_line(&.path.display().to_string())
    )]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The output cannot be written.
    #[error("cannot write {}: {source}", visible_line(&.path.display().to_string()))]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl ClassifiedError for BundleError {
    /// Each names a path the user gave or can fix.
    fn exit_status(&self) -> ExitStatus {
        ExitStatus::UsageError
    }
}

/// What to bundle, and where.
#[derive(Debug, Clone)]
pub(crate) struct Request<'a> {
    /// The run directory.
    pub(crate) run_dir: &'a Path,
    /// Where it keeps its files, or why it is no run.
    pub(crate) layout: &'a Result<RunLayout, String>,
    /// The archive to write.
    pub(crate) out: &'a Path,
    /// Replace an existing archive.
    pub(crate) force: bool,
    /// Who and where to redact; `None`: write the files as they are (`--no-redact`).
    pub(crate) redaction: Option<&'a Identity>,
}

/// A written bundle.
#[derive(Debug, Clone, Serialize)]
pub struct Bundle {
    /// The archive.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// The directory inside the archive (`gpuprobe-bundle-<run>`).
    pub root: String,
    /// Its files, in archive order.
    pub files: Vec<BundleFile>,
    /// Whether the redaction ran.
    pub redacted: bool,
    /// What it replaced, per category (counts only, never the values).
    pub redactions: Vec<CategorySummary>,
    /// What was left out and why.
    pub left_out: Vec<String>,
}

/// One file of a bundle.
#[derive(Debug, Clone, Serialize)]
pub struct BundleFile {
    /// Its name inside the bundle directory.
    pub name: String,
    /// Its size.
    pub bytes: u64,
    /// Where it came from, relative to the run directory.
    pub source: String,
    /// What was cut from it, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

/// Where a run keeps each file a bundle takes, relative to its directory (the run
/// directory's layout says: the caller converts it). Whether each is there is found out on
/// reading: a run that did not finish has no report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLayout {
    /// The report.
    pub report: PathBuf,
    /// The plan.
    pub plan: PathBuf,
    /// The results, one per line (bundled when there is no report).
    pub results: PathBuf,
    /// A `fix`'s profile (none for a check).
    pub profile: Option<PathBuf>,
    /// A `fix`'s account (none for a check).
    pub fix_account: Option<PathBuf>,
    /// The directories of worker logs, in the order they are bundled.
    pub workers: Vec<PathBuf>,
}

/// What `gpuprobe bundle` was asked for, with the run chosen.
#[derive(Debug, Clone)]
pub struct Options {
    /// The run directory (`--run`, else the newest under the state directory).
    pub run: PathBuf,
    /// Where it keeps its files, or why it holds no run (the reason
    /// [`BundleError::NotARun`] gives).
    pub layout: Result<RunLayout, String>,
    /// The archive; `None`: `gpuprobe-bundle-<run name>.tar.gz` in the current directory.
    pub out: Option<PathBuf>,
    /// Replace an existing archive.
    pub force: bool,
    /// Redact (the default; `--no-redact` turns it off).
    pub redact: bool,
}

/// `gpuprobe bundle`: bundles the run [`Options`] names into the file it names (by
/// default `gpuprobe-bundle-<run name>.tar.gz` here), redacting what this machine and `env`
/// reveal (the environment's user, home, host and secret values, the kernel's host name,
/// `/etc/hostname` and the FQDNs `/etc/hosts` gives it).
pub fn make(
    options: &Options,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Bundle, BundleError> {
    let identity = options.redact.then(|| machine_identity(env));
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| default_file_name(&options.run, identity.as_ref()).into());
    create(&Request {
        run_dir: &options.run,
        layout: &options.layout,
        out: &out,
        force: options.force,
        redaction: identity.as_ref(),
    })
}

/// `gpuprobe-bundle-<run name>.tar.gz`, the default archive name.
pub(crate) fn default_file_name(run_dir: &Path, redaction: Option<&Identity>) -> String {
    format!("{}.tar.gz", root_name(run_dir, redaction))
}

/// `gpuprobe-bundle-<run name>`, the directory inside the archive. A run directory the
/// user named after themselves (`--run-dir ~/alice-test`) must not put the name back into
/// the archive's names: they are redacted too.
fn root_name(run_dir: &Path, redaction: Option<&Identity>) -> String {
    let mut name = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    if let Some(identity) = redaction {
        name = Redactor::new(identity).text(&name);
    }
    format!("gpuprobe-bundle-{}", safe_name(&name))
}

/// A file name made of `[A-Za-z0-9._-]` only (anything else becomes `_`), so no name from
/// the disk reaches the archive or a terminal as anything but plain text.
fn safe_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = safe.trim_start_matches('.');
    if trimmed.is_empty() {
        "_".into()
    } else {
        trimmed.chars().take(100).collect()
    }
}

/// The identity to redact on this machine: the environment's, plus the host name the
/// kernel reports, `/etc/hostname`, and the FQDNs `/etc/hosts` gives it.
pub(crate) fn machine_identity(env: &std::collections::BTreeMap<String, String>) -> Identity {
    let root = gpuprobe_detect::Root::live();
    let mut names: Vec<String> = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|path| root.read_opt(path))
        .filter(|name| !name.is_empty())
        .collect();
    if let Some(hosts) = root.read_opt("/etc/hosts") {
        names.extend(fqdns(&hosts, &names.clone()));
    }
    Identity::from_env(env, &names)
}

/// The names in an `/etc/hosts` text that are FQDNs of one of `short` (`box.example.com`
/// for `box`).
fn fqdns(hosts: &str, short: &[String]) -> Vec<String> {
    hosts
        .lines()
        .take(10_000)
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(|line| line.split_whitespace().skip(1))
        .filter(|name| {
            short.iter().any(|s| {
                name.strip_prefix(s.as_str())
                    .is_some_and(|r| r.starts_with('.'))
            })
        })
        .map(str::to_string)
        .collect()
}

/// A file's content before redaction.
#[derive(Debug)]
enum Content {
    Text(String),
    Json(Value),
    JsonLines(Vec<Value>),
}

#[derive(Debug)]
struct Item {
    name: String,
    source: String,
    cut: Option<String>,
    content: Content,
}

/// Collects the run at `request.run_dir` into an archive at `request.out`.
pub(crate) fn create(request: &Request<'_>) -> Result<Bundle, BundleError> {
    let out = request.out;
    if out.is_dir() {
        return Err(BundleError::Unwritable {
            path: out.to_path_buf(),
            source: std::io::Error::other("it is a directory"),
        });
    }
    if fs::symlink_metadata(out).is_ok() && !request.force {
        return Err(BundleError::Exists {
            path: out.to_path_buf(),
        });
    }
    let layout = request
        .layout
        .as_ref()
        .map_err(|reason| BundleError::NotARun {
            path: request.run_dir.to_path_buf(),
            reason: reason.clone(),
        })?;
    let collected = collect(request.run_dir, layout)?;
    let root = root_name(request.run_dir, request.redaction);
    let mut items = collected.items;
    let mut redactor = request.redaction.map(|identity| {
        let mut identity = identity.clone();
        if let Some(host) = collected
            .fingerprint
            .as_ref()
            .and_then(|fp| fp.host.hostname.as_ref())
        {
            identity.add_host(host);
        }
        Redactor::new(&identity)
    });
    if let Some(redactor) = redactor.as_mut() {
        for item in &items {
            match &item.content {
                Content::Text(text) => redactor.learn_text(text),
                Content::Json(value) => redactor.learn_json(value),
                Content::JsonLines(values) => values.iter().for_each(|v| redactor.learn_json(v)),
            }
        }
    }
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut listed = Vec::new();
    for item in &mut items {
        let bytes = render_item(&mut item.content, redactor.as_mut());
        listed.push(BundleFile {
            name: item.name.clone(),
            bytes: bytes.len() as u64,
            source: item.source.clone(),
            cut: item.cut.clone(),
        });
        files.push((item.name.clone(), bytes));
    }
    // The manifest names the run directory, which may sit under a home directory: it is
    // redacted like the rest, and its summary is made after that.
    let mut manifest = manifest_body(request.run_dir, &listed, &collected.left_out);
    if let Some(redactor) = redactor.as_mut() {
        manifest = redactor.text(&manifest);
    }
    let redactions = redactor.as_ref().map(Redactor::summary).unwrap_or_default();
    manifest.push_str(&manifest_redaction(redactor.is_some(), &redactions));
    listed.push(BundleFile {
        name: "MANIFEST.txt".into(),
        bytes: manifest.len() as u64,
        source: "written by gpuprobe bundle".into(),
        cut: None,
    });
    files.push(("MANIFEST.txt".into(), manifest.into_bytes()));
    write_archive(out, &root, &files)?;
    let bytes = fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok(Bundle {
        path: out.to_path_buf(),
        bytes,
        root,
        files: listed,
        redacted: redactor.is_some(),
        redactions,
        left_out: collected.left_out,
    })
}

fn render_item(content: &mut Content, redactor: Option<&mut Redactor>) -> Vec<u8> {
    match (content, redactor) {
        (Content::Text(text), Some(r)) => r.text(text).into_bytes(),
        (Content::Text(text), None) => text.clone().into_bytes(),
        (Content::Json(value), r) => {
            if let Some(r) = r {
                r.json(value);
            }
            let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
            text.push('\n');
            text.into_bytes()
        }
        (Content::JsonLines(values), mut r) => {
            let mut text = String::new();
            for value in values {
                if let Some(r) = r.as_deref_mut() {
                    r.json(value);
                }
                text.push_str(&serde_json::to_string(value).unwrap_or_default());
                text.push('\n');
            }
            text.into_bytes()
        }
    }
}

struct Collected {
    items: Vec<Item>,
    fingerprint: Option<Fingerprint>,
    left_out: Vec<String>,
}

/// What the run at `run_dir` offers, where `layout` says it keeps it.
fn collect(run_dir: &Path, layout: &RunLayout) -> Result<Collected, BundleError> {
    let mut c = Collected {
        items: Vec::new(),
        fingerprint: None,
        left_out: Vec::new(),
    };
    let mut results: Vec<ProbeResult> = Vec::new();
    let (report_rel, report_name) = (source_of(&layout.report), file_name(&layout.report));
    let report_path = run_dir.join(&layout.report);
    match read_head(&report_path, MAX_JSON_BYTES) {
        Piece::Data { bytes, cut: None } => {
            let parse = |bytes: &[u8]| -> Result<(Value, Report), serde_json::Error> {
                let value: Value = serde_json::from_slice(bytes)?;
                let report = serde_json::from_value(value.clone())?;
                Ok((value, report))
            };
            let (value, report) = parse(&bytes).map_err(|source| BundleError::BadReport {
                path: report_path.clone(),
                source,
            })?;
            c.items.push(Item {
                name: report_name.clone(),
                source: report_rel,
                cut: None,
                content: Content::Json(value),
            });
            fingerprint_items(&mut c, &report_name, &report.fingerprint, &report.findings);
            c.fingerprint = Some(report.fingerprint);
            results = report.results;
        }
        Piece::Data { cut: Some(_), .. } => c.left_out.push(format!(
            "{report_rel}: over {}, left out",
            disk_bytes(MAX_JSON_BYTES)
        )),
        Piece::Missing => {
            c.left_out.push(format!(
                "{report_rel}: none (the run did not finish, or it is a memtest, which writes none); the results recorded are in {}, and there is no fingerprint or lint",
                file_name(&layout.results)
            ));
            results = results_so_far(&mut c, run_dir, &layout.results);
        }
        Piece::Skipped(why) => c.left_out.push(format!("{report_rel}: {why}")),
        Piece::Failed(source) => {
            return Err(BundleError::Unreadable {
                path: report_path,
                source,
            });
        }
    }
    json_item(&mut c, run_dir, &layout.plan);
    let (kernel_log, kernel_cut) = kernel_log(c.fingerprint.as_ref(), &results);
    c.items.push(Item {
        name: "kernel-log.txt".into(),
        source: "the kernel-log lines the fingerprint and the results hold".into(),
        cut: kernel_cut,
        content: Content::Text(kernel_log),
    });
    if let Some(profile) = &layout.profile {
        text_item(&mut c, run_dir, profile, MAX_PROFILE_BYTES);
    }
    if let Some(account) = &layout.fix_account {
        json_item(&mut c, run_dir, account);
    }
    for workers in &layout.workers {
        worker_logs(&mut c, run_dir, workers);
    }
    Ok(c)
}

/// The name a file of the run is bundled under: its own (`check/report.json` is bundled
/// as `report.json`).
fn file_name(rel: &Path) -> String {
    rel.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Where a file of the run came from, as the manifest says: its path in the run directory.
fn source_of(rel: &Path) -> String {
    rel.display().to_string()
}

fn fingerprint_items(
    c: &mut Collected,
    report_name: &str,
    fp: &Fingerprint,
    findings: &[gpuprobe_model::Finding],
) {
    c.items.push(Item {
        name: "fingerprint.txt".into(),
        source: format!("{report_name}: fingerprint"),
        cut: None,
        content: Content::Text(gpuprobe_detect::render_text(fp)),
    });
    c.items.push(Item {
        name: "fingerprint.json".into(),
        source: format!("{report_name}: fingerprint"),
        cut: None,
        content: Content::Json(serde_json::to_value(fp).unwrap_or(Value::Null)),
    });
    let (findings, source) = if findings.is_empty() {
        (
            gpuprobe_kb::lint(fp),
            "the config lint run on the report's fingerprint".to_string(),
        )
    } else {
        (findings.to_vec(), format!("{report_name}: findings"))
    };
    let text = if findings.is_empty() {
        "no findings\n".to_string()
    } else {
        crate::terminal::render_findings(&findings, Style::PLAIN)
    };
    c.items.push(Item {
        name: "lint.txt".into(),
        source,
        cut: None,
        content: Content::Text(text),
    });
}

fn results_so_far(c: &mut Collected, run_dir: &Path, path: &Path) -> Vec<ProbeResult> {
    let rel = source_of(path);
    let (bytes, cut) = match read_head(&run_dir.join(path), MAX_RESULTS_BYTES) {
        Piece::Data { bytes, cut } => (bytes, cut),
        Piece::Missing => {
            c.left_out.push(format!("{rel}: none recorded"));
            return Vec::new();
        }
        Piece::Skipped(why) => {
            c.left_out.push(format!("{rel}: {why}"));
            return Vec::new();
        }
        Piece::Failed(e) => {
            c.left_out.push(format!("{rel}: cannot read: {e}"));
            return Vec::new();
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if cut.is_some() {
        // The last line read was cut mid-way.
        lines.pop();
    }
    let values: Vec<Value> = lines
        .iter()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let results = values
        .iter()
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect();
    c.items.push(Item {
        name: file_name(path),
        source: rel,
        cut,
        content: Content::JsonLines(values),
    });
    results
}

fn json_item(c: &mut Collected, run_dir: &Path, path: &Path) {
    let (rel, name) = (source_of(path), file_name(path));
    match read_head(&run_dir.join(path), MAX_JSON_BYTES) {
        Piece::Data { bytes, cut: None } => {
            let content = match serde_json::from_slice(&bytes) {
                Ok(value) => Content::Json(value),
                // Kept as text, redacted as text, so the user still sees what it held.
                Err(_) => Content::Text(String::from_utf8_lossy(&bytes).into_owned()),
            };
            c.items.push(Item {
                name,
                source: rel,
                cut: None,
                content,
            });
        }
        Piece::Data { cut: Some(_), .. } => c.left_out.push(format!(
            "{rel}: over {}, left out",
            disk_bytes(MAX_JSON_BYTES)
        )),
        Piece::Missing => c.left_out.push(format!("{rel}: not in the run directory")),
        Piece::Skipped(why) => c.left_out.push(format!("{rel}: {why}")),
        Piece::Failed(e) => c.left_out.push(format!("{rel}: cannot read: {e}")),
    }
}

fn text_item(c: &mut Collected, run_dir: &Path, path: &Path, max: u64) {
    let rel = source_of(path);
    match read_head(&run_dir.join(path), max) {
        Piece::Data { bytes, cut } => c.items.push(Item {
            name: file_name(path),
            source: rel,
            cut,
            content: Content::Text(String::from_utf8_lossy(&bytes).into_owned()),
        }),
        Piece::Missing => c.left_out.push(format!("{rel}: not in the run directory")),
        Piece::Skipped(why) => c.left_out.push(format!("{rel}: {why}")),
        Piece::Failed(e) => c.left_out.push(format!("{rel}: cannot read: {e}")),
    }
}

/// The kernel-log lines of the run: those the fingerprint saw before it, then those each
/// probe's watch caught, with the probe that caught them.
fn kernel_log(fp: Option<&Fingerprint>, results: &[ProbeResult]) -> (String, Option<String>) {
    let mut lines: Vec<String> = Vec::new();
    if let Some(fp) = fp {
        lines.extend(
            fp.kernel_events
                .iter()
                .map(|e| format!("[before the run] {}", e.line)),
        );
    }
    for result in results {
        lines.extend(
            result
                .kernel_log
                .iter()
                .map(|line| format!("[{} on {}] {line}", result.probe, result.device)),
        );
    }
    if lines.is_empty() {
        return (
            "no kernel-log lines were recorded (nothing of interest was logged, or the kernel log was not readable)\n"
                .into(),
            None,
        );
    }
    let cut = (lines.len() > MAX_KERNEL_LINES).then(|| {
        format!(
            "{} of {} lines kept (the first)",
            MAX_KERNEL_LINES,
            lines.len()
        )
    });
    lines.truncate(MAX_KERNEL_LINES);
    (lines.join("\n") + "\n", cut)
}

/// The tail of each worker log under `path`; a log of a fix's starting check is bundled
/// with the check's directory before its name (`workers/check-...`).
fn worker_logs(c: &mut Collected, run_dir: &Path, path: &Path) {
    let rel = source_of(path);
    let dir = run_dir.join(path);
    match fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            c.left_out
                .push(format!("{rel}: not a directory (a link is not followed)"));
            return;
        }
        Err(_) => return,
    }
    // Logs sit in `workers/` or one level down, in a directory per lane
    // (`workers/python-cpu-0/worker-1.log`); a link is never entered.
    let mut names: Vec<String> = Vec::new();
    let mut listed_dirs = 0;
    for (sub, path) in std::iter::once((String::new(), dir.clone())).chain(subdirs(&dir)) {
        listed_dirs += 1;
        if listed_dirs > MAX_WORKER_LOGS {
            break;
        }
        let Ok(entries) = fs::read_dir(&path) else {
            c.left_out
                .push(format!("{rel}/{}: cannot be listed", safe_name(&sub)));
            continue;
        };
        names.extend(
            entries
                .flatten()
                .take(10_000)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".log"))
                .map(|name| {
                    if sub.is_empty() {
                        name
                    } else {
                        format!("{sub}/{name}")
                    }
                }),
        );
    }
    names.sort();
    if names.len() > MAX_WORKER_LOGS {
        c.left_out.push(format!(
            "{rel}: {} worker logs, the first {MAX_WORKER_LOGS} by name kept",
            names.len()
        ));
        names.truncate(MAX_WORKER_LOGS);
    }
    let prefix = match path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        Some(parent) => safe_name(&source_of(parent)) + "-",
        None => String::new(),
    };
    for name in names {
        let shown = name.split('/').map(safe_name).collect::<Vec<_>>().join("/");
        let source = format!("{rel}/{shown}");
        let stem = name.trim_end_matches(".log").replace('/', "-");
        let archived = format!("workers/{prefix}{}.stderr.txt", safe_name(&stem));
        match read_tail(&dir.join(&name)) {
            Piece::Data { bytes, cut } => c.items.push(Item {
                name: archived,
                source,
                cut,
                content: Content::Text(String::from_utf8_lossy(&bytes).into_owned()),
            }),
            Piece::Missing => {}
            Piece::Skipped(why) => c.left_out.push(format!("{source}: {why}")),
            Piece::Failed(e) => c.left_out.push(format!("{source}: cannot read: {e}")),
        }
    }
}

/// The directories (not links) directly under `dir`, by name.
fn subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .flatten()
        .take(10_000)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    found.sort();
    found
}

/// A file read with a bound.
enum Piece {
    Missing,
    /// Not a regular file (a link, a FIFO, a directory): never opened.
    Skipped(String),
    Failed(std::io::Error),
    Data {
        bytes: Vec<u8>,
        cut: Option<String>,
    },
}

/// Opens `path` only when it is a regular file, never through a link.
fn open_regular(path: &Path) -> Result<(File, u64), Piece> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Piece::Missing),
        Err(e) => Err(Piece::Failed(e)),
        Ok(meta) if meta.file_type().is_symlink() => {
            Err(Piece::Skipped("a symbolic link, not followed".into()))
        }
        Ok(meta) if !meta.is_file() => Err(Piece::Skipped("not a regular file".into())),
        Ok(_) => {
            let file = File::open(path).map_err(Piece::Failed)?;
            let len = file.metadata().map_err(Piece::Failed)?.len();
            Ok((file, len))
        }
    }
}

/// The first `max` bytes of `path`.
fn read_head(path: &Path, max: u64) -> Piece {
    let (file, len) = match open_regular(path) {
        Ok(opened) => opened,
        Err(piece) => return piece,
    };
    let mut bytes = Vec::new();
    if let Err(e) = file.take(max).read_to_end(&mut bytes) {
        return Piece::Failed(e);
    }
    let cut =
        (len > max).then(|| format!("the first {} of {} kept", disk_bytes(max), disk_bytes(len)));
    Piece::Data { bytes, cut }
}

/// The last [`WORKER_TAIL_LINES`] lines of `path`, within its last [`WORKER_TAIL_BYTES`].
fn read_tail(path: &Path) -> Piece {
    let (mut file, len) = match open_regular(path) {
        Ok(opened) => opened,
        Err(piece) => return piece,
    };
    let start = len.saturating_sub(WORKER_TAIL_BYTES);
    if let Err(e) = file.seek(SeekFrom::Start(start)) {
        return Piece::Failed(e);
    }
    let mut bytes = Vec::new();
    // A log still growing is read no further than the bound.
    if let Err(e) = file.take(WORKER_TAIL_BYTES).read_to_end(&mut bytes) {
        return Piece::Failed(e);
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        // The first line read began before the window.
        text = text
            .split_once('\n')
            .map_or(String::new(), |(_, rest)| rest.to_string());
    }
    let lines: Vec<&str> = text.lines().collect();
    let kept = lines.len().min(WORKER_TAIL_LINES);
    let cut = (start > 0 || lines.len() > kept).then(|| {
        format!(
            "the last {kept} lines of {} kept (at most {WORKER_TAIL_LINES} lines, {})",
            disk_bytes(len),
            disk_bytes(WORKER_TAIL_BYTES)
        )
    });
    let mut out = lines[lines.len() - kept..].join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    Piece::Data {
        bytes: out.into_bytes(),
        cut,
    }
}

fn manifest_body(run_dir: &Path, files: &[BundleFile], left_out: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "gpuprobe support bundle");
    let _ = writeln!(
        out,
        "made by gpuprobe {} from the run directory {}",
        gpuprobe_kb::LONG_VERSION,
        run_dir.display()
    );
    let _ = writeln!(out, "\nfiles (name: where it came from; what was cut):");
    for file in files {
        let _ = write!(out, "  {}: {}", file.name, file.source);
        if let Some(cut) = &file.cut {
            let _ = write!(out, "; cut: {cut}");
        }
        out.push('\n');
    }
    let _ = writeln!(out, "  MANIFEST.txt: this file");
    if !left_out.is_empty() {
        let _ = writeln!(out, "\nleft out:");
        for note in left_out {
            let _ = writeln!(out, "  {note}");
        }
    }
    out
}

fn manifest_redaction(redacted: bool, redactions: &[CategorySummary]) -> String {
    let mut out = String::from("\n");
    out.push_str(&redaction_lines(redacted, redactions));
    out
}

/// The redaction summary, counts only: the same lines in `MANIFEST.txt` and on the
/// terminal.
fn redaction_lines(redacted: bool, redactions: &[CategorySummary]) -> String {
    let mut out = String::new();
    if !redacted {
        let _ = writeln!(
            out,
            "NOT REDACTED (--no-redact): user names, host names, paths, serial numbers, addresses and any secrets are as they were recorded"
        );
        return out;
    }
    let _ = writeln!(
        out,
        "redacted (each value replaced by one placeholder, the same in every file):"
    );
    if redactions.is_empty() {
        let _ = writeln!(out, "  nothing was found to redact");
    }
    for r in redactions {
        let _ = writeln!(
            out,
            "  {}: {} distinct, {} place(s)",
            r.label, r.distinct, r.occurrences
        );
    }
    let _ = writeln!(
        out,
        "not redacted: GPU models, PCI addresses, driver and library versions, kernel command line values, probe results; review the files before you attach them (docs/bundle.md)"
    );
    out
}

/// What `gpuprobe bundle` prints.
pub fn render_text(bundle: &Bundle) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "wrote {} ({})",
        visible(&bundle.path.display().to_string()),
        disk_bytes(bundle.bytes)
    );
    let width = bundle
        .files
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "{}/ holds {} file(s):",
        visible(&bundle.root),
        bundle.files.len()
    );
    for file in &bundle.files {
        let _ = write!(
            out,
            "  {:<width$}  {:>8}",
            visible(&file.name),
            disk_bytes(file.bytes)
        );
        if let Some(cut) = &file.cut {
            let _ = write!(out, "  (cut: {})", visible(cut));
        }
        out.push('\n');
    }
    for note in &bundle.left_out {
        let _ = writeln!(out, "  left out: {}", visible(note));
    }
    out.push_str(&redaction_lines(bundle.redacted, &bundle.redactions));
    out
}

/// Writes the archive: a temporary file beside `out`, renamed into place once complete.
fn write_archive(out: &Path, root: &str, files: &[(String, Vec<u8>)]) -> Result<(), BundleError> {
    let unwritable = |source| BundleError::Unwritable {
        path: out.to_path_buf(),
        source,
    };
    gpuprobe_fs::write_atomically(out, |file| write_tar(file, root, files)).map_err(unwritable)
}

fn write_tar(file: &mut File, root: &str, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    let mtime = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    // Headers carry no owner names or ids: those would undo the redaction.
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o755);
    dir.set_uid(0);
    dir.set_gid(0);
    dir.set_size(0);
    dir.set_mtime(mtime);
    tar.append_data(&mut dir, format!("{root}/"), std::io::empty())?;
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_size(bytes.len() as u64);
        header.set_mtime(mtime);
        tar.append_data(&mut header, format!("{root}/{name}"), bytes.as_slice())?;
    }
    let file = tar.into_inner()?.finish()?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuprobe_model::Verdict;
    use gpuprobe_model::{DeviceRef, Layer, ProbeId};

    fn report() -> Report {
        let mut fingerprint: Fingerprint = serde_json::from_value(serde_json::json!({
            "source": "live",
            "host": {"hostname": "labbox3"},
            "kernel_events": [{"kind": "page_fault", "line": "amdgpu 0000:c5:00.0: page fault on labbox3"}]
        }))
        .unwrap();
        fingerprint
            .env
            .insert("HF_TOKEN".into(), "hf_AbCdEfGhIjKlMnOpQrStUvWx".into());
        let mut result = ProbeResult::new(
            ProbeId::new("copy.h2d.pageable.4x4"),
            DeviceRef::Cpu,
            Layer::Framework,
            Verdict::Pass,
        );
        result.kernel_log = vec!["NVRM: GPU Board Serial Number: 1655023034247".into()];
        crate::test_support::report(fingerprint, vec![result], Vec::new())
    }

    fn unpack(archive: &Path) -> BTreeMap<String, String> {
        let file = File::open(archive).unwrap();
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        let mut files = BTreeMap::new();
        for entry in tar.entries().unwrap() {
            let mut entry = entry.unwrap();
            assert_eq!(entry.header().uid().unwrap(), 0);
            assert_eq!(entry.header().username().unwrap(), Some(""));
            if entry.header().entry_type() == tar::EntryType::Regular {
                let mut text = String::new();
                entry.read_to_string(&mut text).unwrap();
                files.insert(entry.path().unwrap().display().to_string(), text);
            }
        }
        files
    }

    use std::collections::BTreeMap;

    /// A fix's layout, as the runner gives it (`gpuprobe_runner::Run::contents`,
    /// whose tests pin it).
    fn fix_layout() -> RunLayout {
        RunLayout {
            report: "check/report.json".into(),
            plan: "check/plan.json".into(),
            results: "check/results.jsonl".into(),
            profile: Some("profile.toml".into()),
            fix_account: Some("fix.json".into()),
            workers: vec!["check/workers".into(), "workers".into()],
        }
    }

    #[test]
    fn a_run_that_is_none_is_refused_before_anything_is_read_and_after_the_output_checks() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("b.tar.gz");
        let not_a_run = Err("no plan.json or report.json".to_string());
        let request = Request {
            run_dir: dir.path(),
            layout: &not_a_run,
            out: &out,
            force: false,
            redaction: None,
        };
        let err = create(&request).unwrap_err();
        assert!(matches!(err, BundleError::NotARun { .. }), "{err}");
        assert!(
            err.to_string().ends_with("no plan.json or report.json"),
            "{err}"
        );
        fs::write(&out, "").unwrap();
        let err = create(&request).unwrap_err();
        assert!(matches!(err, BundleError::Exists { .. }), "{err}");
    }

    #[test]
    fn a_fix_run_bundles_its_check_profile_and_account_and_follows_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("fix-2026-01-01T00-00-00-7");
        let check = run.join("check");
        fs::create_dir_all(check.join("workers/python-cpu-0")).unwrap();
        fs::write(check.join("plan.json"), r#"{"seed": 1}"#).unwrap();
        fs::write(
            check.join("report.json"),
            serde_json::to_string(&report()).unwrap(),
        )
        .unwrap();
        fs::write(
            run.join("profile.toml"),
            "[settings]\nHSA_ENABLE_SDMA = \"0\"\n",
        )
        .unwrap();
        fs::write(run.join("fix.json"), r#"{"trials": 3}"#).unwrap();
        // A log that is a link to a file outside the run, and one that is a directory.
        let secret = dir.path().join("outside.txt");
        fs::write(&secret, "OUTSIDE-THE-RUN\n").unwrap();
        std::os::unix::fs::symlink(&secret, check.join("workers/python-cpu-0/worker-1.log"))
            .unwrap();
        fs::create_dir_all(check.join("workers/python-cpu-0/worker-2.log")).unwrap();
        fs::write(check.join("workers/python-cpu-0/worker-3.log"), "ok\n").unwrap();
        fs::create_dir_all(run.join("workers")).unwrap();
        fs::write(run.join("workers/worker-1.log"), "trial\n").unwrap();

        let out = dir.path().join("b.tar.gz");
        let identity = Identity::default();
        let bundle = create(&Request {
            run_dir: &run,
            layout: &Ok(fix_layout()),
            out: &out,
            force: false,
            redaction: Some(&identity),
        })
        .unwrap();
        let files = unpack(&out);
        let root = "gpuprobe-bundle-fix-2026-01-01T00-00-00-7";
        let names: Vec<&str> = files.keys().map(|k| k.trim_start_matches(root)).collect();
        for name in [
            "/report.json",
            "/plan.json",
            "/fingerprint.txt",
            "/fingerprint.json",
            "/lint.txt",
            "/kernel-log.txt",
            "/profile.toml",
            "/fix.json",
            "/workers/check-python-cpu-0-worker-3.stderr.txt",
            "/workers/worker-1.stderr.txt",
            "/MANIFEST.txt",
        ] {
            assert!(names.contains(&name), "{name}: {names:?}");
        }
        let everything: String = files.values().cloned().collect();
        assert!(!everything.contains("OUTSIDE-THE-RUN"));
        assert!(
            bundle
                .left_out
                .iter()
                .any(|n| n.contains("a symbolic link, not followed"))
        );
        assert!(
            bundle
                .left_out
                .iter()
                .any(|n| n.contains("not a regular file"))
        );
        // The kernel log holds the fingerprint's events and the probe's lines, redacted.
        let kernel = &files[&format!("{root}/kernel-log.txt")];
        assert!(
            kernel.contains("[before the run] amdgpu 0000:c5:00.0: page fault on <host-1>"),
            "{kernel}"
        );
        assert!(
            kernel.contains(
                "[copy.h2d.pageable.4x4 on cpu] NVRM: GPU Board Serial Number: <serial-1>"
            ),
            "{kernel}"
        );
        let fingerprint = &files[&format!("{root}/fingerprint.json")];
        assert!(
            fingerprint.contains("\"HF_TOKEN\": \"<secret-1>\""),
            "{fingerprint}"
        );
        assert!(files[&format!("{root}/profile.toml")].contains("HSA_ENABLE_SDMA"));
        assert!(files[&format!("{root}/MANIFEST.txt")].contains("check/report.json"));
        // The listed sizes are the archived sizes.
        for file in &bundle.files {
            assert_eq!(
                files[&format!("{root}/{}", file.name)].len() as u64,
                file.bytes,
                "{}",
                file.name
            );
        }
    }

    #[test]
    fn a_huge_worker_log_is_cut_to_its_tail_without_being_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("w.log");
        // 8 MiB in lines of 1 KiB: only the last 64 KiB are read.
        let line = "x".repeat(1023) + "\n";
        let mut text = line.repeat(8 * 1024);
        text.push_str("the last line\n");
        fs::write(&log, &text).unwrap();
        let Piece::Data { bytes, cut } = read_tail(&log) else {
            panic!("not read");
        };
        assert!(bytes.len() as u64 <= WORKER_TAIL_BYTES);
        let tail = String::from_utf8(bytes).unwrap();
        assert!(tail.ends_with("the last line\n"));
        assert!(
            tail.lines()
                .all(|l| l == "the last line" || l.len() == 1023),
            "a partial first line"
        );
        assert!(cut.unwrap().starts_with("the last 64 lines"));
        // One endless line: the window has no line start; nothing partial is kept.
        fs::write(&log, "y".repeat(200_000)).unwrap();
        let Piece::Data { bytes, .. } = read_tail(&log) else {
            panic!("not read");
        };
        assert!(bytes.is_empty());
    }

    #[test]
    fn the_printed_account_keeps_hostile_names_inert() {
        let bundle = Bundle {
            path: PathBuf::from("/tmp/b\u{1b}[2J.tar.gz"),
            bytes: 1234,
            root: "gpuprobe-bundle-x".into(),
            files: vec![BundleFile {
                name: "workers/w\u{7}.stderr.txt".into(),
                bytes: 10,
                source: "workers/w.log".into(),
                cut: Some("cut\u{1b}]0;t\u{7}".into()),
            }],
            redacted: false,
            redactions: Vec::new(),
            left_out: vec!["workers/\u{1b}[31mevil: a symbolic link, not followed".into()],
        };
        let text = render_text(&bundle);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(text.contains("NOT REDACTED"), "{text}");
    }

    #[test]
    fn names_from_the_disk_reach_the_archive_plain() {
        assert_eq!(safe_name("worker-1"), "worker-1");
        assert_eq!(safe_name("a\u{1b}[2J/../b"), "a__2J_.._b");
        assert_eq!(safe_name("..hidden"), "hidden");
        assert_eq!(safe_name(""), "_");
        assert_eq!(
            default_file_name(Path::new("/x/check-2026-01-01T00-00-00-1"), None),
            "gpuprobe-bundle-check-2026-01-01T00-00-00-1.tar.gz"
        );
        let identity = Identity {
            users: vec!["alice".into()],
            ..Identity::default()
        };
        assert_eq!(
            default_file_name(Path::new("/x/alice-test"), Some(&identity)),
            "gpuprobe-bundle-_user-1_-test.tar.gz"
        );
    }

    #[test]
    fn the_fqdn_comes_from_etc_hosts() {
        let hosts = "127.0.0.1 localhost\n127.0.1.1 box.lab.example.org box # me\n10.0.0.2 boxer.example.org\n";
        assert_eq!(fqdns(hosts, &["box".into()]), ["box.lab.example.org"]);
    }
}
