//! Kernel log lines (`dmesg`, `dmesg -T`, `journalctl -k`, `/dev/kmsg` records) reduced to
//! the events gpuprobe cares about: amdgpu page faults (with their client, process and
//! status registers), ring timeouts, GPU resets, MES failures, queue evictions,
//! userspace segfaults inside GPU-stack libraries (`libhsa-runtime64`, `libamdhip64`,
//! `libcuda`, ...), NVIDIA `NVRM: Xid` errors, and the HSA runtime's
//! `Memory access fault by GPU` message that users paste next to them.
//!
//! A page fault spans several lines; the header (`[gfxhub] page fault (src_id:0 ring:24
//! vmid:8 pasid:32771)`) opens an event and the following lines of the same device fill
//! it: `Process <comm> pid <n>` (new wording) or `in process <comm> pid <n>` (old
//! wording), `from client 10` / `from client 0x1b (UTCL2)`,
//! `GCVM_L2_PROTECTION_FAULT_STATUS:0x...`, and `Faulty UTCL2 client ID: CPF (0x4)` (with
//! or without the kernel's TAB), then `MORE_FAULTS`, `WALKER_ERROR`, `PERMISSION_FAULTS`,
//! `MAPPING_ERROR`, `RW`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::KernelEvent;
use regex::Regex;

use super::ParseError;
use crate::text::{body_lines, normalize_bdf};

/// Event kinds, as stored in `KernelEvent::kind`.
pub mod kind {
    /// amdgpu GPU page fault.
    pub const PAGE_FAULT: &str = "page_fault";
    /// A ring (command queue) timed out.
    pub const RING_TIMEOUT: &str = "ring_timeout";
    /// GPU reset / recovery.
    pub const GPU_RESET: &str = "gpu_reset";
    /// The MES firmware scheduler failed or timed out.
    pub const MES_FAILURE: &str = "mes_failure";
    /// A queue was evicted after a fault.
    pub const QUEUE_EVICTED: &str = "queue_evicted";
    /// A userspace segfault inside a GPU-stack library.
    pub const SEGFAULT: &str = "segfault";
    /// NVIDIA Xid error.
    pub const XID: &str = "xid";
    /// The HSA runtime's `Memory access fault by GPU node-N` message (userspace stderr).
    pub const HSA_MEMORY_FAULT: &str = "hsa_memory_fault";
}

/// Parsed kernel log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelLog {
    /// Events in log order.
    pub events: Vec<KernelEvent>,
    /// Lines that looked like kernel log lines (with or without an event).
    pub log_lines: usize,
}

struct Patterns {
    dmesg: Regex,
    dmesg_human: Regex,
    journal: Regex,
    journal_iso: Regex,
    kmsg: Regex,
    amdgpu_dev: Regex,
    fault_header: Regex,
    process_new: Regex,
    process_old: Regex,
    process_inline: Regex,
    from_client: Regex,
    status: Regex,
    faulty_client: Regex,
    fault_field: Regex,
    ring_timeout: Regex,
    gpu_reset: Regex,
    mes_msg: Regex,
    mes_other: Regex,
    queue_evicted: Regex,
    segfault: Regex,
    xid: Regex,
    hsa_fault: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("static regex");
        Patterns {
            dmesg: re(r"^\[\s*(\d+\.\d+)\]\s?(.*)$"),
            dmesg_human: re(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d+ \d\d:\d\d:\d\d \d{4})\]\s?(.*)$"),
            journal: re(r"^([A-Z][a-z]{2}\s+\d{1,2} \d\d:\d\d:\d\d) \S+ ([^\s:\[]+)(?:\[\d+\])?: ?(.*)$"),
            journal_iso: re(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) \S+ ([^\s:\[]+)(?:\[\d+\])?: ?(.*)$"),
            kmsg: re(r"^\d+,\d+,(\d+),[^;]*;(.*)$"),
            amdgpu_dev: re(r"amdgpu (?:[0-9a-fA-F]{4}:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):"),
            fault_header: re(r"\[(gfxhub|mmhub|vmhub)\d*\] (?:(no-retry|retry) )?page fault \(([^)]*)\)"),
            process_new: re(r"(?:^|:)\s+Process (.+?) pid (\d+) thread"),
            process_old: re(r"\bin process (.+?) pid (\d+) thread"),
            process_inline: re(r"for process (.+?) pid (\d+) thread"),
            from_client: re(r"in page starting at address (0x[0-9a-fA-F]+)(?: from client (\S+(?: \([A-Z0-9]+\))?))?"),
            status: re(r"\b((?:GC|MM)?VM_L2_PROTECTION_FAULT_STATUS):(0x[0-9a-fA-F]+)"),
            faulty_client: re(r"Faulty UTCL2 client ID: ([A-Za-z0-9_]+)(?: \((0x[0-9a-fA-F]+)\))?"),
            fault_field: re(r"\b(MORE_FAULTS|WALKER_ERROR|PERMISSION_FAULTS|MAPPING_ERROR|RW): (0x[0-9a-fA-F]+)"),
            ring_timeout: re(r"\bring (\S+) timeout(?:, signaled seq=(\d+), emitted seq=(\d+))?"),
            // `VRAM is lost due to GPU reset!` is tried first: it names what the reset cost.
            // `MODE1 reset` (soc15/nv/soc21) and `GPU mode1 reset` differ in case.
            gpu_reset: re(r"\b(VRAM is lost due to GPU reset|GPU reset(?:\(\d+\))?(?: begin| succeeded| failed)?|GPU recovery disabled|ASIC reset failed|GPU reset end|(?i:mode\d) reset|BACO reset)"),
            mes_msg: re(r"MES failed to respond to msg=(\S+)"),
            mes_other: re(r"(?i)\bMES\b.*\b(fail\w*|timeout|timed out|unrecoverable|hang)\b"),
            queue_evicted: re(r"queue evicted|Freeing queue vital buffer"),
            segfault: re(r"(\S+?)\[(\d+)\]: segfault at \S+ ip \S+ sp \S+ error \d+ in ([^\[\s]+)"),
            xid: re(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*(.*)$"),
            hsa_fault: re(r"Memory access fault by GPU node-(\d+) \(Agent handle: (\S+)\) on address (\S+?)\.? Reason: (.*)$"),
        }
    })
}

/// GPU-stack libraries whose segfaults are worth reporting.
const GPU_LIBRARIES: &[&str] = &[
    "libhsa-runtime64",
    "libhsakmt",
    "libamdhip64",
    "libhiprtc",
    "librocblas",
    "libhipblas",
    "libMIOpen",
    "librccl",
    "libamd_comgr",
    "libdrm_amdgpu",
    "libcuda",
    "libcudart",
    "libnvrtc",
    "libcublas",
    "libcudnn",
    "libnccl",
    "libtorch_hip",
    "libtorch_cuda",
    "libc10_hip",
    "libc10_cuda",
    "amdhip64",
];

/// A line split into its timestamp and message, when it is a kernel log line.
pub(crate) struct LogLine {
    /// Timestamp as printed.
    pub time: Option<String>,
    /// The message after the timestamp and origin.
    pub message: String,
}

/// Recognises one kernel-log line in any of the supported formats.
pub(crate) fn split_log_line(line: &str) -> Option<LogLine> {
    let p = patterns();
    let t = line.trim();
    if let Some(c) = p.dmesg.captures(t) {
        return Some(LogLine {
            time: Some(c[1].to_owned()),
            message: c[2].to_owned(),
        });
    }
    if let Some(c) = p.dmesg_human.captures(t) {
        return Some(LogLine {
            time: Some(c[1].to_owned()),
            message: c[2].to_owned(),
        });
    }
    if let Some(c) = p.journal.captures(t).or_else(|| p.journal_iso.captures(t)) {
        return Some(LogLine {
            time: Some(c[1].to_owned()),
            message: c[3].to_owned(),
        });
    }
    if let Some(c) = p.kmsg.captures(t) {
        let micros: u64 = c[1].parse().unwrap_or(0);
        return Some(LogLine {
            time: Some(format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)),
            message: c[2].to_owned(),
        });
    }
    None
}

/// Whether a bare message (no timestamp) is one a kernel-log block may contain.
pub(crate) fn is_bare_event_line(line: &str) -> bool {
    let p = patterns();
    let t = line.trim();
    t.starts_with("amdgpu ")
        || t.starts_with("amdgpu:")
        || t.starts_with("NVRM:")
        || t.starts_with("[drm")
        || p.segfault.is_match(t)
        || p.hsa_fault.is_match(t)
}

/// Parses kernel log text into events.
pub fn parse(text: &str) -> Result<KernelLog, ParseError> {
    let mut scanner = Scanner::default();
    // Events come out when they are complete (a page fault when a later line closes it),
    // so they are put back in the order of their first lines.
    let mut events: Vec<(usize, KernelEvent)> = Vec::new();
    let mut push = |at: usize, ev: KernelEvent| events.push((at, ev));
    for (at, line) in body_lines(text).iter().enumerate() {
        scanner.feed(at, &line.text, &mut push);
    }
    let log_lines = scanner.finish(&mut push)?;
    events.sort_by_key(|(at, _)| *at);
    Ok(KernelLog {
        events: events.into_iter().map(|(_, ev)| ev).collect(),
        log_lines,
    })
}

/// Reads a kernel log one line at a time and hands each event on as soon as it is
/// complete, so that a caller that only counts events (triage of a log of millions of
/// lines) never holds them all. A page fault stays open while its continuation lines
/// follow; it is handed on when a line closes it, when the next fault begins, or at
/// [`Scanner::finish`]. Each event carries the position given with its first line.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    open_fault: Option<(usize, KernelEvent)>,
    log_lines: usize,
    any_event_line: bool,
}

impl Scanner {
    /// Reads one line; `at` is the caller's position of it (an index, a line number).
    pub(crate) fn feed(
        &mut self,
        at: usize,
        line: &str,
        emit: &mut impl FnMut(usize, KernelEvent),
    ) {
        let (time, message) = match split_log_line(line) {
            Some(l) => {
                self.log_lines += 1;
                (l.time, l.message)
            }
            None if is_bare_event_line(line) => {
                self.any_event_line = true;
                (None, line.trim().to_owned())
            }
            None => return,
        };
        scan_message(&mut self.open_fault, at, time, &message, line.trim(), emit);
    }

    /// Hands on the fault still open and returns the number of kernel log lines read; an
    /// error when nothing read was a kernel log line.
    pub(crate) fn finish(
        mut self,
        emit: &mut impl FnMut(usize, KernelEvent),
    ) -> Result<usize, ParseError> {
        if let Some((at, ev)) = self.open_fault.take() {
            emit(at, ev);
        }
        if self.log_lines == 0 && !self.any_event_line {
            return Err(ParseError::NotRecognized {
                tool: "kernel log",
                reason: "no dmesg, journal or kmsg lines",
            });
        }
        Ok(self.log_lines)
    }
}

fn event(kind: &str, time: Option<String>, pci_bus: Option<String>, line: &str) -> KernelEvent {
    KernelEvent {
        kind: kind.to_owned(),
        time,
        pci_bus,
        client: None,
        process: None,
        pid: None,
        library: None,
        details: BTreeMap::new(),
        line: line.to_owned(),
    }
}

fn scan_message(
    open_fault: &mut Option<(usize, KernelEvent)>,
    at: usize,
    time: Option<String>,
    message: &str,
    raw: &str,
    emit: &mut impl FnMut(usize, KernelEvent),
) {
    let p = patterns();
    let device = p
        .amdgpu_dev
        .captures(message)
        .and_then(|c| normalize_bdf(&c[1]));

    if let Some(c) = p.fault_header.captures(message) {
        let mut ev = event(kind::PAGE_FAULT, time, device, raw);
        ev.details.insert("hub".to_owned(), c[1].to_owned());
        if let Some(retry) = c.get(2) {
            ev.details
                .insert("retry".to_owned(), retry.as_str().to_owned());
        }
        for field in c[3].split([' ', ',']) {
            if let Some((k, v)) = field.split_once(':')
                && matches!(k, "src_id" | "ring" | "vmid" | "pasid")
            {
                ev.details.insert(k.to_owned(), v.to_owned());
            }
        }
        if let Some(inline) = p.process_inline.captures(message) {
            ev.process = Some(inline[1].to_owned());
            ev.pid = inline[2].parse().ok();
        }
        // A new fault header ends the one before it.
        if let Some((previous_at, previous)) = open_fault.replace((at, ev)) {
            emit(previous_at, previous);
        }
        return;
    }

    // Continuation lines of an open page fault (same device, or no device printed).
    if let Some((_, ev)) = open_fault.as_mut() {
        let same_device = device.is_none() || ev.pci_bus == device;
        let mut continued = false;
        if same_device {
            if let Some(c) = p
                .process_new
                .captures(message)
                .or_else(|| p.process_old.captures(message))
            {
                ev.process.get_or_insert_with(|| c[1].trim().to_owned());
                if ev.pid.is_none() {
                    ev.pid = c[2].parse().ok();
                }
                continued = true;
            }
            if let Some(c) = p.from_client.captures(message) {
                ev.details
                    .entry("address".to_owned())
                    .or_insert_with(|| c[1].to_owned());
                if let Some(client) = c.get(2) {
                    ev.details
                        .entry("client_id".to_owned())
                        .or_insert_with(|| client.as_str().to_owned());
                }
                continued = true;
            }
            if let Some(c) = p.status.captures(message) {
                ev.details
                    .entry("status".to_owned())
                    .or_insert_with(|| c[2].to_owned());
                continued = true;
            }
            if let Some(c) = p.faulty_client.captures(message) {
                ev.client.get_or_insert_with(|| c[1].to_owned());
                if let Some(code) = c.get(2) {
                    ev.details
                        .entry("client_code".to_owned())
                        .or_insert_with(|| code.as_str().to_owned());
                }
                continued = true;
            }
            if let Some(c) = p.fault_field.captures(message) {
                ev.details
                    .entry(c[1].to_ascii_lowercase())
                    .or_insert_with(|| c[2].to_owned());
                continued = true;
            }
        }
        if continued {
            return;
        }
        // Lines from other origins (systemd-coredump in a journal) may interleave; only
        // another amdgpu line that does not continue the fault closes it.
        if (device.is_some() || message.contains("amdgpu"))
            && let Some((fault_at, fault)) = open_fault.take()
        {
            emit(fault_at, fault);
        }
    }

    if let Some(c) = p.ring_timeout.captures(message) {
        let mut ev = event(kind::RING_TIMEOUT, time, device, raw);
        ev.details
            .insert("ring".to_owned(), c[1].trim_end_matches(',').to_owned());
        if let (Some(signaled), Some(emitted)) = (c.get(2), c.get(3)) {
            ev.details
                .insert("signaled_seq".to_owned(), signaled.as_str().to_owned());
            ev.details
                .insert("emitted_seq".to_owned(), emitted.as_str().to_owned());
        }
        emit(at, ev);
    } else if let Some(c) = p.mes_msg.captures(message) {
        let mut ev = event(kind::MES_FAILURE, time, device, raw);
        ev.details
            .insert("msg".to_owned(), c[1].trim_end_matches(',').to_owned());
        emit(at, ev);
    } else if p.mes_other.is_match(message) {
        emit(at, event(kind::MES_FAILURE, time, device, raw));
    } else if let Some(c) = p.gpu_reset.captures(message) {
        let mut ev = event(kind::GPU_RESET, time, device, raw);
        ev.details.insert("what".to_owned(), c[1].to_owned());
        emit(at, ev);
    } else if p.queue_evicted.is_match(message) {
        emit(at, event(kind::QUEUE_EVICTED, time, device, raw));
    } else if let Some(c) = p.segfault.captures(message) {
        let library = c[3].to_owned();
        if GPU_LIBRARIES.iter().any(|l| library.contains(l)) {
            let mut ev = event(kind::SEGFAULT, time, None, raw);
            ev.process = Some(c[1].to_owned());
            ev.pid = c[2].parse().ok();
            ev.library = Some(library);
            emit(at, ev);
        }
    } else if let Some(c) = p.xid.captures(message) {
        let mut ev = event(kind::XID, time, normalize_bdf(&c[1]), raw);
        ev.details.insert("xid".to_owned(), c[2].to_owned());
        let rest = c[3].to_owned();
        for part in rest.split(", ") {
            if let Some(pid) = part.strip_prefix("pid=") {
                ev.pid = pid.trim_matches('\'').parse().ok();
            } else if let Some(name) = part.strip_prefix("name=") {
                let name = name.trim_matches('\'');
                if name != "<unknown>" {
                    ev.process = Some(name.to_owned());
                }
            }
        }
        ev.details.insert("message".to_owned(), rest);
        emit(at, ev);
    } else if let Some(c) = p.hsa_fault.captures(message) {
        let mut ev = event(kind::HSA_MEMORY_FAULT, time, None, raw);
        ev.details.insert("node".to_owned(), c[1].to_owned());
        ev.details.insert("address".to_owned(), c[3].to_owned());
        ev.details
            .insert("reason".to_owned(), c[4].trim().to_owned());
        emit(at, ev);
    }
}

impl KernelLog {
    /// Appends the events to the fingerprint.
    pub fn apply(&self, fp: &mut Fingerprint) {
        fp.kernel_events.extend(self.events.iter().cloned());
    }

    /// Events of one kind.
    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a KernelEvent> + 'a {
        self.events.iter().filter(move |e| e.kind == kind)
    }
}
