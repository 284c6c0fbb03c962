//! Splitting a paste into blocks of tool output.
//!
//! A paste is first cut into chunks at shell prompts (`$ rocminfo`,
//! `user@host:~$ amd-smi`, `[user@box ~]$ rocm-smi --showhw`, `# cat ...` as root) and
//! markdown fences; a prompt's command hints at what follows. Inside a chunk, blocks are
//! found by each tool's signature line and extended by that tool's own rule (rocminfo to
//! `*** Done ***`, a box-drawn dashboard while lines start with `|` or `+`, a kernel log
//! while lines carry a timestamp, ...). Every other non-blank line is reported as skipped.

use regex::Regex;

use super::ToolKind;
use crate::parse::kernel_log::{is_bare_event_line, split_log_line};
use crate::parse::system::looks_like_cmdline;
use crate::text::Line;
use crate::text::static_regex;

/// A block of lines (indices into the cleaned lines, inclusive) holding one tool's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub tool: ToolKind,
    pub first: usize,
    pub last: usize,
    pub command: Option<String>,
}

/// A run of lines nothing recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unrecognized {
    pub first: usize,
    pub last: usize,
    pub reason: String,
}

/// The result of segmenting one input.
#[derive(Debug, Default)]
pub(crate) struct Segments {
    pub blocks: Vec<Block>,
    pub unrecognized: Vec<Unrecognized>,
}

fn prompt_re() -> &'static Regex {
    static_regex!(
        r"^\s*(?:\([\w.-]+\)\s*)?(?:[\w.-]+@[\w.-]+(?::[^\s$#%]*)?\s*([$#%])|\[[^\]]*\]\s*([$#%])|([$%#])|>>>|PS [^>]*>|❯|➜)\s+(\S.*)$"
    )
}

/// Commands a `#` (root) prompt may run; other `# ...` lines are comments or headings.
const ROOT_COMMANDS: &[&str] = &[
    "rocminfo",
    "rocm-smi",
    "amd-smi",
    "nvidia-smi",
    "dmesg",
    "journalctl",
    "cat",
    "grep",
    "sudo",
    "python",
    "python3",
    "dkms",
    "mokutil",
    "uname",
    "lspci",
    "modinfo",
    "ls",
    "head",
    "tail",
];

/// Tools whose bare name on a line of its own is a command echo.
const ECHO_COMMANDS: &[&str] = &[
    "rocminfo",
    "rocm-smi",
    "amd-smi",
    "nvidia-smi",
    "dmesg",
    "journalctl",
    "dkms",
    "mokutil",
];

fn first_word_base(command: &str) -> &str {
    let mut words = command.split_whitespace();
    let mut first = words.next().unwrap_or_default();
    if first == "sudo" {
        first = words.next().unwrap_or_default();
    }
    first.rsplit('/').next().unwrap_or(first)
}

/// The command of a prompt line, if the line is one.
pub(crate) fn prompt_command(line: &str) -> Option<String> {
    let caps = prompt_re().captures(line)?;
    let command = caps.get(4)?.as_str().trim().to_owned();
    let root_prompt = caps
        .get(1)
        .or(caps.get(2))
        .or(caps.get(3))
        .is_some_and(|m| m.as_str() == "#");
    if root_prompt && !ROOT_COMMANDS.contains(&first_word_base(&command)) {
        return None;
    }
    Some(command)
}

/// A line that is only a tool invocation (`amd-smi`, `rocm-smi --showhw`).
fn command_echo(line: &str) -> Option<String> {
    let t = line.trim();
    let words: Vec<&str> = t.split_whitespace().collect();
    let first = words.first()?;
    let base = first.rsplit('/').next().unwrap_or(first);
    let options_only = words[1..].iter().all(|w| {
        w.starts_with('-')
            || w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == ',')
    });
    (ECHO_COMMANDS.contains(&base) && words.len() <= 6 && options_only).then(|| t.to_owned())
}

fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// What a command's output should be.
pub(crate) fn hint_for(command: &str) -> Option<ToolKind> {
    let base = first_word_base(command);
    let c = command;
    Some(match base {
        "rocminfo" => ToolKind::Rocminfo,
        "rocm-smi" => ToolKind::RocmSmi,
        "amd-smi" => ToolKind::AmdSmi,
        "nvidia-smi" => ToolKind::NvidiaSmi,
        "dmesg" | "journalctl" => ToolKind::KernelLog,
        "dkms" => ToolKind::DkmsStatus,
        "mokutil" => ToolKind::Mokutil,
        "uname" => ToolKind::Uname,
        _ if c.contains("collect_env") => ToolKind::CollectEnv,
        _ if c.contains("amdgpu_firmware_info") => ToolKind::FirmwareInfo,
        _ if c.contains("/parameters") => ToolKind::ModuleParams,
        _ if c.contains("/proc/cmdline") => ToolKind::Cmdline,
        _ if c.contains("os-release") => ToolKind::OsRelease,
        _ if c.contains("/proc/version") => ToolKind::Uname,
        _ if c.contains("dmesg") || c.contains("journalctl") => ToolKind::KernelLog,
        _ => return None,
    })
}

fn trimmed(lines: &[Line], i: usize) -> &str {
    lines.get(i).map(|l| l.text.trim()).unwrap_or_default()
}

fn next_non_blank(lines: &[Line], from: usize, end: usize) -> Option<usize> {
    (from..=end).find(|&j| j < lines.len() && !trimmed(lines, j).is_empty())
}

fn timestamp_re() -> &'static Regex {
    static_regex!(r"^[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d \d{4}$")
}

fn is_box_line(t: &str) -> bool {
    t.starts_with('|') || t.starts_with('+')
}

fn is_csv_header(t: &str) -> bool {
    const FIELDS: &[&str] = &[
        "index",
        "name",
        "pci.bus_id",
        "driver_version",
        "memory.total",
        "compute_cap",
        "uuid",
        "vbios_version",
    ];
    let fields: Vec<&str> = t
        .split(',')
        .map(|f| f.split(" [").next().unwrap_or(f).trim())
        .collect();
    fields.len() >= 2 && fields.iter().filter(|f| FIELDS.contains(f)).count() >= 2
}

fn is_firmware_line(t: &str) -> bool {
    t.contains(" feature version: ") && t.contains("firmware version: ")
}

fn is_module_param_line(t: &str) -> bool {
    static_regex!(r"^/sys/module/[\w-]+/parameters/[\w-]+:").is_match(t)
}

fn is_dkms_line(t: &str) -> bool {
    static_regex!(r"^[\w-]+(?:/[\w.+~-]+|, [\w.+~-]+), [\w.+~-]+, [\w-]+: \w+").is_match(t)
}

fn is_os_release_line(t: &str) -> bool {
    static_regex!(r#"^(?:NAME|PRETTY_NAME|ID|ID_LIKE|VERSION|VERSION_ID|VERSION_CODENAME|UBUNTU_CODENAME|HOME_URL|SUPPORT_URL|BUG_REPORT_URL|PRIVACY_POLICY_URL|LOGO|BUILD_ID|VARIANT|VARIANT_ID|ANSI_COLOR|CPE_NAME|DOCUMENTATION_URL|PLATFORM_ID|SUPPORT_END)="#).is_match(t)
}

fn is_uname_line(t: &str) -> bool {
    static_regex!(r"^Linux (?:\S+ \d+\.\d+\S* #|version \d+\.\d+)").is_match(t)
}

fn is_amd_smi_text_header(lines: &[Line], i: usize, end: usize) -> bool {
    let header = static_regex!(r"^(?:GPU|CPU): \d+$");
    if !header.is_match(trimmed(lines, i)) {
        return false;
    }
    next_non_blank(lines, i + 1, end).is_some_and(|j| {
        let line = &lines[j].text;
        line.starts_with([' ', '\t'])
            && line.trim().split(':').next().is_some_and(|k| {
                k.chars()
                    .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
            })
    })
}

fn is_kernel_line(t: &str) -> bool {
    split_log_line(t).is_some() || is_bare_event_line(t)
}

/// Which tool's output starts at line `i`, if any.
pub(crate) fn starts_here(lines: &[Line], i: usize, end: usize) -> Option<ToolKind> {
    let t = trimmed(lines, i);
    if t.is_empty() {
        return None;
    }
    let next = next_non_blank(lines, i + 1, end)
        .map(|j| trimmed(lines, j))
        .unwrap_or_default();
    if timestamp_re().is_match(t) && next.starts_with('+') {
        let after = next_non_blank(lines, i + 2, end)
            .map(|j| trimmed(lines, j))
            .unwrap_or_default();
        if after.contains("NVIDIA-SMI") {
            return Some(ToolKind::NvidiaSmi);
        }
    }
    if t.starts_with('+') && next.starts_with('|') {
        if next.contains("NVIDIA-SMI") {
            return Some(ToolKind::NvidiaSmi);
        }
        if next.contains("AMD-SMI") {
            return Some(ToolKind::AmdSmi);
        }
    }
    if t.starts_with('|') && t.contains("NVIDIA-SMI ") {
        return Some(ToolKind::NvidiaSmi);
    }
    if t.starts_with('|') && t.contains("AMD-SMI ") {
        return Some(ToolKind::AmdSmi);
    }
    if t.contains("ROCm System Management Interface") {
        return Some(ToolKind::RocmSmi);
    }
    if t.starts_with("ROCk module") || t == "HSA System Attributes" || t == "HSA Agents" {
        return Some(ToolKind::Rocminfo);
    }
    if t.chars().all(|c| c == '=') && t.len() > 10 && next == "HSA System Attributes" {
        return Some(ToolKind::Rocminfo);
    }
    if t.contains("NVSMI LOG") {
        return Some(ToolKind::NvidiaSmi);
    }
    if t.starts_with("Collecting environment information") || t.starts_with("PyTorch version:") {
        return Some(ToolKind::CollectEnv);
    }
    if looks_like_json_start(t)
        && (t.len() > 1 || pretty_json_follows(lines, i, end))
        && json_extent(lines, i, end).is_some()
    {
        return Some(ToolKind::AmdSmi);
    }
    if is_amd_smi_text_header(lines, i, end) {
        return Some(ToolKind::AmdSmi);
    }
    if is_csv_header(t) {
        return Some(ToolKind::NvidiaSmi);
    }
    if is_firmware_line(t) {
        return Some(ToolKind::FirmwareInfo);
    }
    if is_module_param_line(t) {
        return Some(ToolKind::ModuleParams);
    }
    if is_kernel_line(t) {
        return Some(ToolKind::KernelLog);
    }
    if is_dkms_line(t) {
        return Some(ToolKind::DkmsStatus);
    }
    if t.starts_with("SecureBoot enabled") || t.starts_with("SecureBoot disabled") {
        return Some(ToolKind::Mokutil);
    }
    if is_os_release_line(t) {
        return Some(ToolKind::OsRelease);
    }
    if is_uname_line(t) {
        return Some(ToolKind::Uname);
    }
    if looks_like_cmdline(t) {
        return Some(ToolKind::Cmdline);
    }
    None
}

/// How JSON output begins: a lone bracket (pretty-printed) or an object/list of objects on
/// one line. Kernel-log lines (`[  12.3] ...`) and pip lines (`[pip3] ...`) do not.
fn looks_like_json_start(t: &str) -> bool {
    let compact = (t.starts_with("{\"") || t.starts_with("[{") || t.starts_with("[ {"))
        && (t.ends_with('}') || t.ends_with(']'));
    t == "{" || t == "[" || compact
}

/// Pretty-printed JSON indents what follows a lone opening bracket.
fn pretty_json_follows(lines: &[Line], i: usize, end: usize) -> bool {
    next_non_blank(lines, i + 1, end).is_some_and(|j| {
        let line = &lines[j].text;
        let t = line.trim();
        (line.starts_with([' ', '\t']) && (t.starts_with('{') || t.starts_with('"')))
            || t == "]"
            || t == "}"
    })
}

/// Longest JSON block looked at; larger ones are not amd-smi output.
const MAX_JSON_LINES: usize = 20_000;

/// The last line of a balanced JSON value starting at `i`, when it parses as amd-smi JSON.
fn json_extent(lines: &[Line], i: usize, end: usize) -> Option<usize> {
    let mut depth: i64 = 0;
    let mut in_string = false;
    let mut escaped = false;
    let mut text = String::new();
    let stop = end
        .min(lines.len().saturating_sub(1))
        .min(i + MAX_JSON_LINES);
    for (j, line) in lines.iter().enumerate().take(stop + 1).skip(i) {
        let line = line.text.as_str();
        text.push_str(line);
        text.push('\n');
        for c in line.chars() {
            if in_string {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                '{' | '[' => depth += 1,
                '}' | ']' => depth -= 1,
                _ => {}
            }
        }
        if depth <= 0 {
            let value: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
            let looks_amd = {
                let s = value.to_string();
                s.contains("\"gpu\"")
                    || s.contains("\"gpu_data\"")
                    || s.contains("\"asic\"")
                    || s.contains("\"rocm_version\"")
            };
            return looks_amd.then_some(j);
        }
    }
    None
}

/// The last line of the block of `tool` that starts at `i` (inclusive), within `end`.
fn extent(tool: ToolKind, lines: &[Line], i: usize, end: usize) -> usize {
    let t = trimmed(lines, i);
    match tool {
        ToolKind::NvidiaSmi if t.contains("NVSMI LOG") => {
            let mut last = i;
            for j in i + 1..=end {
                let line = &lines[j].text;
                let tj = line.trim();
                if tj.is_empty() {
                    continue;
                }
                let continues = line.starts_with([' ', '\t'])
                    || tj.contains(" : ")
                    || tj.starts_with("GPU ")
                    || tj.starts_with('=');
                if !continues
                    || starts_here(lines, j, end).is_some_and(|k| k != ToolKind::NvidiaSmi)
                {
                    break;
                }
                last = j;
            }
            last
        }
        ToolKind::NvidiaSmi if is_csv_header(t) => {
            let commas = t.matches(',').count();
            let mut last = i;
            for j in i + 1..=end {
                let tj = trimmed(lines, j);
                if tj.matches(',').count() != commas || tj.is_empty() {
                    break;
                }
                last = j;
            }
            last
        }
        ToolKind::NvidiaSmi | ToolKind::AmdSmi if timestamp_re().is_match(t) || is_box_line(t) => {
            let mut last = i;
            let mut j = i + 1;
            while j <= end {
                let tj = trimmed(lines, j);
                if is_box_line(tj) {
                    last = j;
                } else if tj.is_empty() {
                    // Boxes may be separated by a blank line (nvidia-smi's Processes box).
                    match next_non_blank(lines, j + 1, end) {
                        Some(k) if is_box_line(trimmed(lines, k)) => {}
                        _ => break,
                    }
                } else {
                    break;
                }
                j += 1;
            }
            last
        }
        ToolKind::NvidiaSmi => i,
        ToolKind::AmdSmi if looks_like_json_start(t) => json_extent(lines, i, end).unwrap_or(i),
        ToolKind::AmdSmi => {
            let mut last = i;
            for (j, line) in lines.iter().enumerate().take(end + 1).skip(i + 1) {
                let line = &line.text;
                if line.trim().is_empty() {
                    continue;
                }
                let header = line.starts_with("GPU: ") || line.starts_with("CPU: ");
                if !(line.starts_with([' ', '\t']) || header) {
                    break;
                }
                last = j;
            }
            last
        }
        ToolKind::Rocminfo | ToolKind::RocmSmi => {
            let terminator = if tool == ToolKind::Rocminfo {
                "*** Done ***"
            } else {
                "End of ROCm SMI Log"
            };
            let mut last = i;
            for j in i + 1..=end {
                // Another tool, or a second rocminfo run, ends the block.
                let next_block = starts_here(lines, j, end)
                    .is_some_and(|k| k != tool || trimmed(lines, j).starts_with("ROCk module"));
                if next_block {
                    break;
                }
                if !trimmed(lines, j).is_empty() {
                    last = j;
                }
                if trimmed(lines, j).contains(terminator) {
                    break;
                }
            }
            last
        }
        ToolKind::CollectEnv => {
            let mut last = i;
            for j in i + 1..=end {
                let line = &lines[j].text;
                let tj = line.trim();
                if tj.is_empty() {
                    continue;
                }
                if starts_here(lines, j, end).is_some_and(|k| k != ToolKind::CollectEnv) {
                    break;
                }
                let continues = tj.contains(':')
                    || tj.starts_with('[')
                    || tj.starts_with('/')
                    || line.starts_with([' ', '\t'])
                    || tj == "CPU:";
                if !continues {
                    break;
                }
                last = j;
            }
            last
        }
        ToolKind::KernelLog => {
            let mut last = i;
            let mut j = i + 1;
            while j <= end {
                let tj = trimmed(lines, j);
                if is_kernel_line(tj) {
                    last = j;
                } else {
                    // A blank line, or one line a terminal wrapped, continues the block
                    // when a log line follows it.
                    let continues = next_non_blank(lines, j + 1, end).is_some_and(|k| {
                        is_kernel_line(trimmed(lines, k))
                            && (tj.is_empty()
                                || (k == j + 1 && starts_here(lines, j, end).is_none()))
                    });
                    if !continues {
                        break;
                    }
                }
                j += 1;
            }
            last
        }
        ToolKind::FirmwareInfo
        | ToolKind::ModuleParams
        | ToolKind::DkmsStatus
        | ToolKind::OsRelease => {
            let same = |tj: &str| match tool {
                ToolKind::FirmwareInfo => is_firmware_line(tj) || tj.starts_with("VBIOS version:"),
                ToolKind::ModuleParams => is_module_param_line(tj),
                ToolKind::DkmsStatus => is_dkms_line(tj),
                _ => {
                    is_os_release_line(tj)
                        || tj.split_once('=').is_some_and(|(k, _)| {
                            !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                        })
                }
            };
            let mut last = i;
            for j in i + 1..=end {
                if !same(trimmed(lines, j)) {
                    break;
                }
                last = j;
            }
            last
        }
        ToolKind::Mokutil | ToolKind::Uname | ToolKind::Cmdline => i,
    }
}

/// Segments cleaned lines into blocks and unrecognised runs.
pub(crate) fn segment(lines: &[Line]) -> Segments {
    let mut out = Segments::default();
    // Chunks between prompts and fences: (first line, end exclusive, command that produced it).
    let mut chunks: Vec<(usize, usize, Option<String>)> = Vec::new();
    let mut start = 0;
    let mut command: Option<String> = None;
    for (i, line) in lines.iter().enumerate() {
        let prompt = prompt_command(&line.text).or_else(|| command_echo(&line.text));
        if prompt.is_some() || is_fence(&line.text) {
            if i > start || command.is_some() {
                chunks.push((start, i, command.take()));
            }
            command = prompt;
            start = i + 1;
        }
    }
    if start < lines.len() || command.is_some() {
        chunks.push((start, lines.len(), command));
    }

    for (first, end, command) in chunks {
        let hint = command.as_deref().and_then(hint_for);
        let mut found_any = false;
        let mut skipped_any = false;
        let mut pending: Option<(usize, usize)> = None;
        let mut flush =
            |pending: &mut Option<(usize, usize)>, found_any: bool, out: &mut Segments| {
                if let Some((a, b)) = pending.take() {
                    let reason = match (&command, found_any) {
                        (Some(c), false) => format!("not recognised as the output of `{c}`"),
                        _ => "not recognised as output of a supported tool".to_owned(),
                    };
                    out.unrecognized.push(Unrecognized {
                        first: a,
                        last: b,
                        reason,
                    });
                    skipped_any = true;
                }
            };
        let mut i = first;
        while i < end {
            let t = trimmed(lines, i);
            if t.is_empty() {
                i += 1;
                continue;
            }
            let last = end - 1;
            let signature = starts_here(lines, i, last);
            // Outputs without a strong signature are taken on the prompt's word
            // (`dmesg -t` without timestamps, `uname -r`, `cat /proc/cmdline`).
            let hinted = hint.filter(|kind| match kind {
                ToolKind::KernelLog => true,
                ToolKind::Uname => crate::parse::system::parse_uname(t).is_ok(),
                ToolKind::Cmdline => !t.contains(": "),
                _ => false,
            });
            let Some(tool) = signature.or(hinted) else {
                pending = Some((pending.map_or(i, |(a, _)| a), i));
                i += 1;
                continue;
            };
            flush(&mut pending, found_any, &mut out);
            let block_end = match signature {
                Some(_) => extent(tool, lines, i, last),
                // A hinted kernel log has no timestamps to follow: the rest of the chunk.
                None if tool == ToolKind::KernelLog => (i..end)
                    .rev()
                    .find(|&j| !trimmed(lines, j).is_empty())
                    .unwrap_or(i),
                None => i,
            };
            out.blocks.push(Block {
                tool,
                first: i,
                last: block_end,
                command: if found_any { None } else { command.clone() },
            });
            found_any = true;
            i = block_end + 1;
        }
        flush(&mut pending, found_any, &mut out);
        if let Some(c) = &command
            && !found_any
            && !skipped_any
        {
            // The prompt line itself, just before the chunk.
            let prompt = first.saturating_sub(1);
            out.unrecognized.push(Unrecognized {
                first: prompt,
                last: prompt,
                reason: format!("`{c}` printed nothing recognisable"),
            });
        }
    }
    out
}
