//! The kernel log: `/dev/kmsg` read without blocking (each read returns one record,
//! `prio,seq,usec,flags;message`, until the buffer is drained), else `dmesg` when tools
//! may run. Reading it needs `CAP_SYSLOG` where `kernel.dmesg_restrict=1`; a denial is
//! reported as unreadable. Only events of interest are kept (see `parse::kernel_log`).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::time::Duration;

use gpuprobe_model::Fingerprint;

use super::tools;
use crate::merge::unreadable;
use crate::parse::kernel_log;
use crate::root::{ReadError, Root};

/// Stop reading after this much log text; the kernel ring buffer is far smaller.
const MAX_BYTES: usize = 32 << 20;
/// Keep at most this many events (a fault storm repeats the same lines thousands of times).
const MAX_EVENTS: usize = 500;

/// Reads `/dev/kmsg` until it would block.
fn read_kmsg(root: &Root) -> Result<String, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    root.check("/dev/kmsg")?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(root.path("/dev/kmsg"))?;
    let mut out: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                // Records from the character device come one per read without a newline
                // guarantee; make each its own line.
                if out.last() != Some(&b'\n') {
                    out.push(b'\n');
                }
                if out.len() > MAX_BYTES {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            // EPIPE: records were overwritten while reading; the next read continues.
            Err(e) if e.raw_os_error() == Some(32) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(unescape_kmsg(&String::from_utf8_lossy(&out)))
}

/// `/dev/kmsg` escapes non-printable bytes as `\xNN` (a TAB becomes `\x09`).
fn unescape_kmsg(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("\\x") {
        out.push_str(&rest[..pos]);
        let hex = rest
            .get(pos + 2..pos + 4)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) if byte.is_ascii() => {
                out.push(char::from(byte));
                rest = &rest[pos + 4..];
            }
            _ => {
                out.push_str("\\x");
                rest = &rest[pos + 2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Adds the events in kernel log lines recorded while probes ran (the lines a run's watcher
/// kept with each result, `[seconds] message`) to the fingerprint, so that the knowledge
/// base's log signatures (kind, faulting client) meet them as they meet the log read at
/// the start. Lines seen by several lanes, and events the start-up read already holds, are
/// added once.
pub fn merge_watched_kernel_lines<'a>(
    fp: &mut Fingerprint,
    lines: impl IntoIterator<Item = &'a str>,
) {
    let mut seen = std::collections::BTreeSet::new();
    let mut text = String::new();
    for line in lines {
        if seen.insert(line) {
            text.push_str(line);
            text.push('\n');
        }
    }
    if text.is_empty() {
        return;
    }
    let Ok(log) = kernel_log::parse(&unescape_kmsg(&text)) else {
        return;
    };
    let key = |e: &gpuprobe_model::fingerprint::KernelEvent| {
        (
            e.kind.clone(),
            e.time.clone(),
            e.client.clone(),
            e.pci_bus.clone(),
        )
    };
    let known: std::collections::BTreeSet<_> = fp.kernel_events.iter().map(key).collect();
    let room = MAX_EVENTS.saturating_sub(fp.kernel_events.len());
    let new: Vec<_> = log
        .events
        .into_iter()
        .filter(|e| !known.contains(&key(e)))
        .collect();
    if new.len() > room {
        fp.extra.insert(
            "kernel_log.run_events_dropped".to_owned(),
            format!(
                "{} events printed during the run not kept",
                new.len() - room
            ),
        );
    }
    fp.kernel_events.extend(new.into_iter().take(room));
}

pub(super) fn collect(
    root: &Root,
    may_run_tools: bool,
    timeout: Duration,
    env: &BTreeMap<String, String>,
    fp: &mut Fingerprint,
) {
    let text = match read_kmsg(root) {
        Ok(text) => text,
        Err(kmsg_err) => {
            if !may_run_tools {
                unreadable(fp, "kernel log (/dev/kmsg)", kmsg_err.to_string());
                return;
            }
            match tools::run(env, "dmesg", &[], timeout) {
                Ok(out) if !out.trim().is_empty() => out,
                Ok(_) => {
                    unreadable(
                        fp,
                        "kernel log",
                        format!("/dev/kmsg: {kmsg_err}; dmesg printed nothing"),
                    );
                    return;
                }
                Err(err) => {
                    unreadable(
                        fp,
                        "kernel log",
                        format!("/dev/kmsg: {kmsg_err}; dmesg: {err}"),
                    );
                    return;
                }
            }
        }
    };
    if let Ok(mut log) = kernel_log::parse(&text) {
        if log.events.len() > MAX_EVENTS {
            let dropped = log.events.len() - MAX_EVENTS;
            log.events.drain(..dropped);
            fp.extra.insert(
                "kernel_log.events_dropped".to_owned(),
                format!("{dropped} older events not kept"),
            );
        }
        log.apply(fp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAULT: [&str; 3] = [
        "[ 5071.443221] amdgpu 0000:c2:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8 pasid:32770)",
        "[ 5071.443300] amdgpu 0000:c2:00.0: amdgpu:  in process python3 pid 4242 thread python3 pid 4242)",
        "[ 5071.443400] amdgpu 0000:c2:00.0: amdgpu:\\x09 Faulty UTCL2 client ID: CPF (0x4)",
    ];

    #[test]
    fn watched_lines_become_events_once() {
        let mut fp = Fingerprint::default();
        // Two lanes saw the same fault; the parser must meet the client line unescaped.
        merge_watched_kernel_lines(&mut fp, FAULT.iter().chain(FAULT.iter()).copied());
        assert_eq!(fp.kernel_events.len(), 1, "{:?}", fp.kernel_events);
        let event = &fp.kernel_events[0];
        assert_eq!(event.kind, "page_fault");
        assert_eq!(event.client.as_deref(), Some("CPF"));
        // Already known (read at the start, or merged before): not added again.
        merge_watched_kernel_lines(&mut fp, FAULT);
        assert_eq!(fp.kernel_events.len(), 1);
    }

    #[test]
    fn watched_lines_without_events_add_nothing() {
        let mut fp = Fingerprint::default();
        merge_watched_kernel_lines(&mut fp, ["[ 1.0] amdgpu: SMU is initialized successfully"]);
        merge_watched_kernel_lines(&mut fp, []);
        assert!(fp.kernel_events.is_empty());
        assert!(fp.extra.is_empty());
    }

    #[test]
    fn kmsg_escapes_are_undone() {
        assert_eq!(
            unescape_kmsg("amdgpu:\\x09 Faulty UTCL2"),
            "amdgpu:\t Faulty UTCL2"
        );
        assert_eq!(unescape_kmsg("bad \\xZZ end \\x"), "bad \\xZZ end \\x");
    }
}
