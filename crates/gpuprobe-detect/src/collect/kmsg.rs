//! The kernel log: `/dev/kmsg` read without blocking (each read returns one record,
//! `prio,seq,usec,flags;message`, until the buffer is drained), else `dmesg` when tools
//! may run. Reading it needs `CAP_SYSLOG` where `kernel.dmesg_restrict=1`; a denial is
//! reported as unreadable. Only events of interest are kept (see `parse::kernel_log`).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::path::Path;
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

/// Reads kernel log records without blocking: the one low-level reader of `/dev/kmsg` (the
/// fingerprint reads the whole log once through it; `gpuprobe-runner`'s watcher reads what
/// was appended while probes ran).
///
/// The character device returns one record (`prio,seq,usec,flags;message`) per read, with
/// no newline guarantee, and fails a read with EPIPE when records were overwritten while it
/// was read (the next read continues); a regular file standing in for it (tests, replays)
/// returns whatever its reads hold.
#[derive(Debug)]
pub struct KmsgReader {
    file: std::fs::File,
    /// Whether it is the character device, which returns one record per read.
    one_record_per_read: bool,
}

impl KmsgReader {
    /// Opens the log at `path` without blocking, at its start, or at its end when
    /// `from_end` (only what is appended later is read then).
    pub fn open(path: &Path, from_end: bool) -> std::io::Result<KmsgReader> {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(path)?;
        if from_end {
            file.seek(SeekFrom::End(0))?;
        }
        let one_record_per_read = file
            .metadata()
            .is_ok_and(|m| m.file_type().is_char_device());
        Ok(KmsgReader {
            file,
            one_record_per_read,
        })
    }

    /// Appends to `out` what can be read now, one record per line, until the log would
    /// block or ends, `max_reads` reads were made, or `out` holds more than `max_bytes`.
    /// An error other than those is returned, with what was read before it left in `out`.
    pub fn read_available(
        &mut self,
        out: &mut Vec<u8>,
        max_reads: usize,
        max_bytes: usize,
    ) -> std::io::Result<()> {
        let mut buf = vec![0u8; 16 * 1024];
        for _ in 0..max_reads {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    // Each record of the character device is one read; keep it one line
                    // (a regular file's reads end anywhere).
                    if self.one_record_per_read && out.last() != Some(&b'\n') {
                        out.push(b'\n');
                    }
                    if out.len() > max_bytes {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // EPIPE: records were overwritten while reading; the next read continues.
                Err(e) if e.kind() == ErrorKind::BrokenPipe => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Reads `/dev/kmsg` until it would block.
fn read_kmsg(root: &Root) -> Result<String, ReadError> {
    root.check("/dev/kmsg")?;
    let mut reader = KmsgReader::open(&root.path("/dev/kmsg"), false)?;
    let mut out: Vec<u8> = Vec::new();
    reader.read_available(&mut out, usize::MAX, MAX_BYTES)?;
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
    let key = |e: &gpuprobe_model::KernelEvent| {
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
    fn the_reader_reads_from_the_start_or_only_what_is_appended() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg");
        std::fs::write(&path, "6,1,100,-;first\n").unwrap();
        let mut whole = KmsgReader::open(&path, false).unwrap();
        let mut later = KmsgReader::open(&path, true).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        // A regular file's reads are not records: no line break is added to a torn one.
        write!(file, "6,2,200,-;second").unwrap();
        let mut out = Vec::new();
        whole
            .read_available(&mut out, usize::MAX, MAX_BYTES)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "6,1,100,-;first\n6,2,200,-;second"
        );
        let mut out = Vec::new();
        later
            .read_available(&mut out, usize::MAX, MAX_BYTES)
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "6,2,200,-;second");
        assert!(KmsgReader::open(&dir.path().join("missing"), false).is_err());
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
