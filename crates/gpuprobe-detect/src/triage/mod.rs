//! `gpuprobe triage FILE...`: reads pasted logs (one tool or several after each other,
//! with shell prompts, markdown fences, CRLF, TABs, ANSI colours, truncation), recognises
//! each tool's block, parses it, and builds as much of a [`Fingerprint`] as the logs allow
//! (`source = "triage"`). The outcome lists what was recognised and what was skipped, with
//! line numbers and reasons, so nothing is silently dropped.
//!
//! [`Triager`] takes inputs one at a time and owns each text only while it reads it, so a
//! caller can read, triage and drop one input before the next; kernel logs are scanned line
//! by line into a bounded summary ([`events`]), never into one event per line. [`input`]
//! reads files and streams under a byte cap; [`read`] reads a run's inputs into a triage.

pub(crate) mod events;
pub(crate) mod input;
pub(crate) mod read;
mod segment;

use std::borrow::Cow;
use std::fmt;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::Vendor;
use serde::{Deserialize, Serialize};

use crate::merge::{derive_gpu_facts, pci_device_id};
use crate::parse::{
    amd_smi, collect_env, firmware_info, kernel_log, nvidia_smi, rocm_smi, rocminfo, system,
};
use crate::text::{Line, clean_lines, is_provenance};

pub use events::KernelLogSummary;

/// At most this many recognised blocks, and as many skipped ranges, are listed; the rest
/// are counted. A paste that alternates one-line outputs with junk for megabytes would
/// otherwise list millions of entries (the facts of every block are still taken).
const MAX_LISTED: usize = 1000;

/// One pasted input: a file name (or `-`) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriageInput {
    /// Name shown in the outcome (file path, `stdin`).
    pub name: String,
    /// The whole text.
    pub text: String,
}

/// A tool whose output triage recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// `rocminfo`.
    Rocminfo,
    /// `rocm-smi` (any view).
    RocmSmi,
    /// `amd-smi` (dashboard, static/list text, JSON).
    AmdSmi,
    /// `nvidia-smi` (dashboard, `-q`, csv).
    NvidiaSmi,
    /// `python -m torch.utils.collect_env`.
    CollectEnv,
    /// `dmesg` / `journalctl` / kmsg lines.
    KernelLog,
    /// debugfs `amdgpu_firmware_info`.
    FirmwareInfo,
    /// `dkms status`.
    DkmsStatus,
    /// `mokutil --sb-state`.
    Mokutil,
    /// `/etc/os-release`.
    OsRelease,
    /// `uname -a` or `/proc/version`.
    Uname,
    /// `/proc/cmdline`.
    Cmdline,
    /// `grep . /sys/module/*/parameters/*`.
    ModuleParams,
}

impl ToolKind {
    /// The tool's name as users know it.
    pub fn name(self) -> &'static str {
        match self {
            ToolKind::Rocminfo => "rocminfo",
            ToolKind::RocmSmi => "rocm-smi",
            ToolKind::AmdSmi => "amd-smi",
            ToolKind::NvidiaSmi => "nvidia-smi",
            ToolKind::CollectEnv => "collect_env",
            ToolKind::KernelLog => "kernel log",
            ToolKind::FirmwareInfo => "amdgpu_firmware_info",
            ToolKind::DkmsStatus => "dkms status",
            ToolKind::Mokutil => "mokutil --sb-state",
            ToolKind::OsRelease => "os-release",
            ToolKind::Uname => "uname",
            ToolKind::Cmdline => "/proc/cmdline",
            ToolKind::ModuleParams => "module parameters",
        }
    }
}

impl fmt::Display for ToolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A 1-based inclusive line range in an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRange {
    /// First line.
    pub first: usize,
    /// Last line.
    pub last: usize,
}

impl fmt::Display for LineRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "line {}", self.first)
        } else {
            write!(f, "lines {}-{}", self.first, self.last)
        }
    }
}

/// A block that was recognised and parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recognized {
    /// Input name.
    pub input: String,
    /// Tool.
    pub tool: ToolKind,
    /// Where it is.
    pub lines: LineRange,
    /// The command from the shell prompt before it, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// What it told (one line).
    pub summary: String,
    /// Caveats: truncated, ambiguous, partly unparsed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Lines that were not used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Input name.
    pub input: String,
    /// Where they are.
    pub lines: LineRange,
    /// Why they were skipped.
    pub reason: String,
}

/// Everything triage learned.
#[derive(Debug, Clone, PartialEq)]
pub struct TriageOutcome {
    /// The fingerprint the logs support (`source = "triage"`).
    pub fingerprint: Fingerprint,
    /// Recognised blocks in input order.
    pub recognized: Vec<Recognized>,
    /// Skipped line ranges in input order.
    pub skipped: Vec<Skipped>,
    /// Recognised blocks beyond the first 1000, not listed in `recognized`.
    pub recognized_left_out: usize,
    /// Skipped ranges beyond the first 1000, not listed in `skipped`.
    pub skipped_left_out: usize,
    /// The kernel-log events: per class, counts and first and last occurrences.
    pub kernel_log: KernelLogSummary,
}

impl TriageOutcome {
    /// Whether anything at all was recognised.
    pub fn recognized_anything(&self) -> bool {
        !self.recognized.is_empty()
    }
}

/// Strips a markdown quote prefix (`> `) when every non-blank line carries it.
fn unquote(lines: &mut [Line]) {
    let quoted = lines
        .iter()
        .filter(|l| !l.text.trim().is_empty())
        .all(|l| l.text.starts_with('>') && !l.text.starts_with(">>>"));
    if quoted && lines.iter().any(|l| !l.text.trim().is_empty()) {
        for line in lines.iter_mut() {
            let stripped = line
                .text
                .strip_prefix("> ")
                .or_else(|| line.text.strip_prefix('>'))
                .unwrap_or(&line.text)
                .to_owned();
            line.text = stripped;
        }
    }
}

/// Recognises, parses and merges every tool output found in the inputs.
pub fn triage(inputs: &[TriageInput]) -> TriageOutcome {
    let mut triager = Triager::new();
    for input in inputs {
        triager.add(&input.name, input.text.clone(), 1);
    }
    triager.finish()
}

/// Triage taken one input at a time: [`Triager::add`] each input (or each part of one),
/// then [`Triager::finish`].
#[derive(Debug)]
pub struct Triager {
    fp: Fingerprint,
    recognized: Vec<Recognized>,
    skipped: Vec<Skipped>,
    recognized_left_out: usize,
    skipped_left_out: usize,
    /// The first recognised output of a Linux-only tool, listed or not.
    linux_tool: Option<ToolKind>,
    events: events::Aggregator,
    /// Texts added so far: orders events across inputs and parts.
    parts: usize,
}

impl Default for Triager {
    fn default() -> Self {
        Triager::new()
    }
}

impl Triager {
    /// An empty triage.
    pub fn new() -> Triager {
        Triager {
            fp: Fingerprint {
                source: "triage".to_owned(),
                ..Fingerprint::default()
            },
            recognized: Vec::new(),
            skipped: Vec::new(),
            recognized_left_out: 0,
            skipped_left_out: 0,
            linux_tool: None,
            events: events::Aggregator::default(),
            parts: 0,
        }
    }

    /// Triages the text of input `name`. `first_line` is the number its first line has in
    /// the input: 1 for a whole input or its head, more for the tail of an input too large
    /// to read whole (the lines between were not read). Blocks never span two texts.
    pub fn add(&mut self, name: &str, text: String, first_line: usize) {
        let part = self.parts;
        self.parts += 1;
        let mut lines = clean_lines(&text);
        // The cleaned lines are a copy; the text is not needed beside them.
        drop(text);
        let offset = first_line.saturating_sub(1);
        if offset > 0 {
            for line in &mut lines {
                line.no += offset;
            }
        }
        // Provenance headers at the top are comments, not output.
        let header = if offset == 0 {
            lines.iter().take_while(|l| is_provenance(&l.text)).count()
        } else {
            0
        };
        if header > 0 {
            self.push_skipped(Skipped {
                input: name.to_owned(),
                lines: LineRange {
                    first: 1,
                    last: header,
                },
                reason: "provenance comment".to_owned(),
            });
            for line in lines.iter_mut().take(header) {
                line.text.clear();
            }
        }
        unquote(&mut lines);
        let segments = segment::segment(&lines);
        let mut items: Vec<(usize, Result<Recognized, Skipped>)> = Vec::new();
        for block in segments.blocks {
            let range = LineRange {
                first: lines[block.first].no,
                last: lines[block.last].no,
            };
            let block_lines = &lines[block.first..=block.last];
            let applied = if block.tool == ToolKind::KernelLog {
                self.kernel_block(block_lines, part, name)
            } else {
                let text = block_text(block_lines);
                apply_block(block.tool, &text, &mut self.fp)
            };
            let result = applied.map(|(summary, notes)| Recognized {
                input: name.to_owned(),
                tool: block.tool,
                lines: range,
                command: block.command.clone(),
                summary,
                notes,
            });
            let item = result.map_err(|reason| Skipped {
                input: name.to_owned(),
                lines: range,
                reason: format!("looked like {} output but {reason}", block.tool),
            });
            items.push((block.first, item));
        }
        for run in segments.unrecognized {
            let first = lines.get(run.first).map_or(run.first + 1, |l| l.no);
            let last = lines.get(run.last).map_or(run.last + 1, |l| l.no);
            items.push((
                run.first,
                Err(Skipped {
                    input: name.to_owned(),
                    lines: LineRange { first, last },
                    reason: run.reason,
                }),
            ));
        }
        items.sort_by_key(|(first, _)| *first);
        for (_, item) in items {
            match item {
                Ok(r) => self.push_recognized(r),
                Err(s) => self.push_skipped(s),
            }
        }
    }

    fn push_recognized(&mut self, block: Recognized) {
        if self.linux_tool.is_none() && LINUX_ONLY.contains(&block.tool) {
            self.linux_tool = Some(block.tool);
        }
        if self.recognized.len() < MAX_LISTED {
            self.recognized.push(block);
        } else {
            self.recognized_left_out += 1;
        }
    }

    fn push_skipped(&mut self, skipped: Skipped) {
        if self.skipped.len() < MAX_LISTED {
            self.skipped.push(skipped);
        } else {
            self.skipped_left_out += 1;
        }
    }

    /// Scans a kernel-log block line by line into the event summary. Continuation lines (a
    /// terminal wrapped a long line) are joined to the line they continue.
    fn kernel_block(&mut self, lines: &[Line], part: usize, name: &str) -> Applied {
        let mut scanner = kernel_log::Scanner::default();
        let mut kinds: Vec<(String, usize)> = Vec::new();
        let aggregator = &mut self.events;
        let mut emit = |no: usize, event: gpuprobe_model::KernelEvent| {
            match kinds.iter_mut().find(|(k, _)| *k == event.kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((event.kind.clone(), 1)),
            }
            aggregator.add(part, name, no, event);
        };
        let mut pending: Option<(usize, Cow<'_, str>)> = None;
        for line in lines {
            let t = line.text.trim();
            let is_log =
                kernel_log::split_log_line(t).is_some() || kernel_log::is_bare_event_line(t);
            match &mut pending {
                Some((_, previous)) if !is_log && !t.is_empty() => {
                    let joined = previous.to_mut();
                    joined.push(' ');
                    joined.push_str(t);
                }
                _ => {
                    let next = (line.no, Cow::Borrowed(line.text.as_str()));
                    if let Some((no, text)) = pending.replace(next) {
                        scanner.feed(no, &text, &mut emit);
                    }
                }
            }
        }
        if let Some((no, text)) = pending {
            scanner.feed(no, &text, &mut emit);
        }
        let log_lines = scanner.finish(&mut emit).map_err(|e| e.to_string())?;
        let counted: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        Ok((
            format!("{log_lines} log lines, events: {}", list_or_none(&counted)),
            Vec::new(),
        ))
    }

    /// The outcome of everything added.
    pub fn finish(self) -> TriageOutcome {
        let mut fp = self.fp;
        let (events, kernel_log) = self.events.finish();
        fp.kernel_events.extend(events);
        // The ISA first: the facts derived next (APU or not) follow from it.
        infer_native_isa(&mut fp);
        for gpu in &mut fp.gpus {
            derive_gpu_facts(gpu);
        }
        infer_os(&mut fp, self.linux_tool);
        TriageOutcome {
            fingerprint: fp,
            recognized: self.recognized,
            skipped: self.skipped,
            recognized_left_out: self.recognized_left_out,
            skipped_left_out: self.skipped_left_out,
            kernel_log,
        }
    }
}

/// An AMD GPU whose pasted logs give no native ISA (an amd-smi or rocm-smi dashboard, a
/// Windows `collect_env`, a rocminfo, whose agent name is the runtime's ISA) gets the one
/// its PCI device id or marketing name belongs to, so that the knowledge base can rule out
/// other architectures' issues instead of suspecting them all. A rocminfo agent that
/// reports another ISA than its chip id's was overridden (`HSA_OVERRIDE_GFX_VERSION`): the
/// two then differ, as they do on a live machine. Where the ISA came from is kept in
/// `extra` (`gpu.<bus or index>.native_isa_from`).
fn infer_native_isa(fp: &mut Fingerprint) {
    let mut provenance = Vec::new();
    for (position, gpu) in fp.gpus.iter_mut().enumerate() {
        if gpu.vendor != Vendor::Amd || gpu.native_isa.is_some() {
            continue;
        }
        let by_id = pci_device_id(gpu)
            .and_then(crate::isa::amd_device)
            .map(|device| {
                (
                    device.isa,
                    format!("PCI device id {:#06x}", device.device_id),
                )
            });
        let by_name = || {
            let name = gpu.name.as_deref()?;
            crate::isa::amd_isa_from_name(name).map(|isa| (isa, format!("marketing name {name:?}")))
        };
        if let Some((isa, basis)) = by_id.or_else(by_name) {
            gpu.native_isa = Some(isa.to_owned());
            let key = gpu
                .pci_bus
                .clone()
                .or_else(|| gpu.index.map(|i| i.to_string()))
                .unwrap_or_else(|| position.to_string());
            provenance.push((format!("gpu.{key}.native_isa_from"), basis));
        }
    }
    fp.extra.extend(provenance);
}

/// Tools whose output proves the logs come from Linux: a kernel log, rocminfo (ROCr is
/// Linux-only), rocm-smi and amd-smi (both read the amdgpu driver's sysfs; AMD documents
/// them for Linux only), debugfs, dkms, mokutil, procfs. A Windows paste cannot hold them,
/// so Windows-only entries are ruled out rather than suspected.
const LINUX_ONLY: [ToolKind; 10] = [
    ToolKind::KernelLog,
    ToolKind::Rocminfo,
    ToolKind::RocmSmi,
    ToolKind::AmdSmi,
    ToolKind::FirmwareInfo,
    ToolKind::DkmsStatus,
    ToolKind::Mokutil,
    ToolKind::OsRelease,
    ToolKind::Cmdline,
    ToolKind::ModuleParams,
];

/// Output of a Linux-only tool proves the logs come from Linux, even when no paste names
/// the OS.
fn infer_os(fp: &mut Fingerprint, linux_tool: Option<ToolKind>) {
    if fp.host.os.is_some() {
        return;
    }
    if let Some(tool) = linux_tool {
        fp.host.os = Some("linux".to_owned());
        fp.extra
            .insert("triage.os_inferred_from".to_owned(), tool.name().to_owned());
    }
}

/// The text handed to a parser (kernel logs are scanned line by line instead).
fn block_text(lines: &[Line]) -> String {
    lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

type Applied = Result<(String, Vec<String>), String>;

fn apply_block(tool: ToolKind, text: &str, fp: &mut Fingerprint) -> Applied {
    let err = |e: crate::ParseError| e.to_string();
    match tool {
        ToolKind::Rocminfo => {
            let info = rocminfo::parse(text).map_err(err)?;
            info.apply(fp);
            let gpus: Vec<String> = info.gpu_agents().map(|a| a.name.clone()).collect();
            let module = match &info.rock_module {
                Some(rocminfo::RockModule::LoadedWithVersion(v)) => {
                    format!(", ROCk module {v} (DKMS build)")
                }
                Some(rocminfo::RockModule::Loaded) => ", in-box ROCk module".to_owned(),
                Some(rocminfo::RockModule::NotLoaded) => ", ROCk module NOT loaded".to_owned(),
                None => String::new(),
            };
            let mut notes = Vec::new();
            if !info.complete {
                notes.push(
                    "truncated: no `*** Done ***` line; later agents may be missing".to_owned(),
                );
            }
            notes.extend(info.errors.iter().map(|e| format!("error printed: {e}")));
            Ok((
                format!(
                    "{} agents, GPUs: {}{module}",
                    info.agents.len(),
                    list_or_none(&gpus)
                ),
                notes,
            ))
        }
        ToolKind::RocmSmi => {
            let info = rocm_smi::parse(text).map_err(err)?;
            info.apply(fp);
            let mut notes: Vec<String> = info
                .messages
                .iter()
                .map(|m| format!("message: {m}"))
                .collect();
            if !info.complete {
                notes.push("truncated: no `End of ROCm SMI Log` line".to_owned());
            }
            let view = match info.view {
                rocm_smi::View::Concise => "concise table",
                rocm_smi::View::Hardware => "hardware table",
                rocm_smi::View::Lines => "per-GPU lines",
            };
            // Rows that show no device id, ISA, PCI address or name (the 5.x concise
            // table) are not taken as GPUs (rocm-smi's numbering is not the HIP index), so
            // the summary does not count them as GPUs either.
            let identified = info.gpus.iter().filter(|g| g.identified()).count();
            let unidentified = info.gpus.len() - identified;
            let mut summary = format!("{view}, {identified} GPU(s)");
            if unidentified > 0 {
                summary = if identified == 0 {
                    format!("{view}, {unidentified} GPU row(s), none identified")
                } else {
                    format!("{summary} and {unidentified} row(s) not identified")
                };
                notes.push(format!(
                    "{unidentified} GPU row(s) show no device id, ISA, PCI address or name, \
                     so they are not listed as GPUs; `rocm-smi --showhw` shows them"
                ));
            }
            Ok((summary, notes))
        }
        ToolKind::AmdSmi => {
            let info = amd_smi::parse(text).map_err(err)?;
            info.apply(fp);
            let format = match info.format {
                amd_smi::Format::Dashboard => "dashboard",
                amd_smi::Format::Text => "static/list text",
                amd_smi::Format::Json => "JSON",
            };
            let mut summary = format!("{format}, {} GPU(s)", info.gpus.len());
            if let Some(rocm) = &info.rocm_version {
                summary.push_str(&format!(", ROCm {rocm}"));
            }
            Ok((summary, Vec::new()))
        }
        ToolKind::NvidiaSmi => {
            let info = nvidia_smi::parse(text).map_err(err)?;
            info.apply(fp);
            let format = match info.format {
                nvidia_smi::Format::Dashboard => "dashboard",
                nvidia_smi::Format::Query => "-q",
                nvidia_smi::Format::Csv => "csv query",
            };
            let mut summary = format!("{format}, {} GPU(s)", info.gpus.len());
            if let Some(driver) = &info.driver_version {
                summary.push_str(&format!(", driver {driver}"));
            }
            Ok((summary, Vec::new()))
        }
        ToolKind::CollectEnv => {
            let info = collect_env::parse(text).map_err(err)?;
            info.apply(fp);
            let mut summary = format!(
                "torch {}{}",
                info.torch_version
                    .as_deref()
                    .unwrap_or("(version not shown)"),
                if info.is_rocm() {
                    " (ROCm build)"
                } else if info.cuda_build.is_some() {
                    " (CUDA build)"
                } else {
                    ""
                }
            );
            if info.is_windows() {
                summary.push_str(" on Windows");
            }
            if info.gpu_available == Some(false) {
                summary.push_str(", no GPU available to torch");
            }
            Ok((summary, Vec::new()))
        }
        // `Triager::add` hands kernel-log blocks to `Triager::kernel_block`, which scans
        // them line by line into the event summary; joined into one text they would cost
        // a copy of the log and an event per line.
        ToolKind::KernelLog => {
            Err("kernel logs are scanned line by line, not as one text".to_owned())
        }
        ToolKind::FirmwareInfo => {
            let info = firmware_info::parse(text).map_err(err)?;
            info.apply(fp);
            let names: Vec<String> = info
                .components
                .iter()
                .map(|c| format!("{} {}", c.name, c.version))
                .collect();
            Ok((names.join(", "), Vec::new()))
        }
        ToolKind::DkmsStatus => {
            let entries = system::parse_dkms_status(text).map_err(err)?;
            system::apply_dkms(&entries, fp);
            let lines: Vec<String> = entries
                .iter()
                .map(|e| format!("{} {} ({})", e.module, e.version, e.status))
                .collect();
            Ok((lines.join("; "), Vec::new()))
        }
        ToolKind::Mokutil => {
            let state = system::parse_mokutil(text).map_err(err)?;
            if fp.host.secure_boot.is_none() {
                fp.host.secure_boot = state;
            }
            Ok((
                format!(
                    "Secure Boot {}",
                    match state {
                        Some(true) => "enabled",
                        Some(false) => "disabled",
                        None => "not supported",
                    }
                ),
                Vec::new(),
            ))
        }
        ToolKind::OsRelease => {
            let map = system::parse_os_release(text).map_err(err)?;
            system::apply_os_release(&map, fp);
            Ok((
                map.get("PRETTY_NAME")
                    .or_else(|| map.get("NAME"))
                    .cloned()
                    .unwrap_or_default(),
                Vec::new(),
            ))
        }
        ToolKind::Uname => {
            let release = system::parse_uname(text).map_err(err)?;
            if fp.host.kernel_release.is_none() {
                fp.host.kernel_release = Some(release.clone());
            }
            fp.host.os.get_or_insert_with(|| "linux".to_owned());
            Ok((format!("kernel {release}"), Vec::new()))
        }
        ToolKind::Cmdline => {
            let line = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or_default()
                .to_owned();
            if line.is_empty() {
                return Err("it is empty".to_owned());
            }
            if fp.host.kernel_cmdline.is_none() {
                fp.host.kernel_cmdline = Some(line.clone());
            }
            Ok((
                format!("{} parameters", line.split_whitespace().count()),
                Vec::new(),
            ))
        }
        ToolKind::ModuleParams => {
            let params = system::parse_module_params(text).map_err(err)?;
            system::apply_module_params(&params, fp);
            Ok((format!("{} parameters", params.len()), Vec::new()))
        }
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}
